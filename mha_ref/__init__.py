"""mha_ref: an exact, readable PyTorch reference for multi-head attention.

Functions
    ``scaled_dot_product_attention``, ``split_heads``, ``merge_heads``, ``repeat_kv_heads``.
Masks (``True`` = may attend, the ``scaled_dot_product_attention`` convention)
    ``causal_mask``, ``padding_mask``, ``allowed_to_blocked``, ``blocked_to_allowed``,
    ``allowed_to_additive``, ``sliding_window_mask``, ``document_mask``.
Modules
    ``CausalAttention``, ``MultiHeadAttentionWrapper``, ``CausalMultiHeadAttention``,
    ``wrapper_to_batched``, ``MultiHeadAttention`` (drop-in for
    ``torch.nn.MultiheadAttention``), ``GroupedQueryAttention``, ``mha_to_gqa``.
Positions inside attention
    ``RotaryEmbedding``, ``apply_rotary``, ``rotary_frequencies``, ``rope_pairing_permutation``
    (rotary position embedding, both pairings), ``alibi_slopes``, ``alibi_bias`` (ALiBi).
Attention as recent models use it
    ``MultiHeadLatentAttention``, ``LatentKVCache``, ``latent_cache_bytes_per_token``
    (DeepSeek-V2's latent KV), ``RollingKVCache`` (sliding windows, StreamingLLM sinks),
    ``attention_with_sink``, ``softmax_plus_one`` (a head may attend to nothing), ``QKNorm``.
Running fast
    ``tiled_attention`` (the online softmax), ``attention_weights_from_lse``, ``KVCache``,
    ``kv_cache_bytes_per_token``.
Device
    ``pick_device``.

This package is the attention reference: it imports torch and nothing else. The tutorial's
helpers (tiny tasks and their training, head analysis, plots, benchmarks) live in the
sub-package :mod:`mha_ref.tutorial`, installed with ``pip install "mha-ref[tutorial]"``.
"""

__version__ = "0.1.0"

from mha_ref.alibi import alibi_bias, alibi_slopes
from mha_ref.causal import (
    CausalAttention,
    CausalMultiHeadAttention,
    MultiHeadAttentionWrapper,
    wrapper_to_batched,
)
from mha_ref.device import pick_device
from mha_ref.functional import (
    merge_heads,
    repeat_kv_heads,
    scaled_dot_product_attention,
    split_heads,
)
from mha_ref.grouped import GroupedQueryAttention, mha_to_gqa
from mha_ref.kv_cache import KVCache, kv_cache_bytes_per_token
from mha_ref.latent import LatentKVCache, MultiHeadLatentAttention, latent_cache_bytes_per_token
from mha_ref.masks import (
    allowed_to_additive,
    allowed_to_blocked,
    blocked_to_allowed,
    causal_mask,
    document_mask,
    padding_mask,
    sliding_window_mask,
)
from mha_ref.multihead import MultiHeadAttention
from mha_ref.qk_norm import QKNorm
from mha_ref.rolling_cache import RollingKVCache
from mha_ref.rope import RotaryEmbedding, apply_rotary, rope_pairing_permutation, rotary_frequencies
from mha_ref.sinks import attention_with_sink, softmax_plus_one
from mha_ref.tiled import attention_weights_from_lse, tiled_attention

__all__ = [
    "__version__",
    "scaled_dot_product_attention",
    "split_heads",
    "merge_heads",
    "repeat_kv_heads",
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "document_mask",
    "allowed_to_blocked",
    "blocked_to_allowed",
    "allowed_to_additive",
    "CausalAttention",
    "MultiHeadAttentionWrapper",
    "CausalMultiHeadAttention",
    "wrapper_to_batched",
    "MultiHeadAttention",
    "GroupedQueryAttention",
    "mha_to_gqa",
    "RotaryEmbedding",
    "apply_rotary",
    "rotary_frequencies",
    "rope_pairing_permutation",
    "alibi_slopes",
    "alibi_bias",
    "MultiHeadLatentAttention",
    "LatentKVCache",
    "latent_cache_bytes_per_token",
    "RollingKVCache",
    "attention_with_sink",
    "softmax_plus_one",
    "QKNorm",
    "tiled_attention",
    "attention_weights_from_lse",
    "KVCache",
    "kv_cache_bytes_per_token",
    "pick_device",
]
