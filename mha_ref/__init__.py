"""mha_ref: an exact, readable PyTorch reference for multi-head attention.

Functions
    ``scaled_dot_product_attention``, ``split_heads``, ``merge_heads``, ``repeat_kv_heads``.
Masks (``True`` = may attend, the ``scaled_dot_product_attention`` convention)
    ``causal_mask``, ``padding_mask``, ``allowed_to_blocked``, ``blocked_to_allowed``,
    ``allowed_to_additive``.
Modules
    ``CausalAttention``, ``MultiHeadAttentionWrapper``, ``CausalMultiHeadAttention``,
    ``wrapper_to_batched``, ``MultiHeadAttention`` (drop-in for
    ``torch.nn.MultiheadAttention``), ``GroupedQueryAttention``, ``mha_to_gqa``.
Positions inside attention
    ``RotaryEmbedding``, ``apply_rotary``, ``rotary_frequencies``, ``rope_pairing_permutation``
    (rotary position embedding, both pairings), ``alibi_slopes``, ``alibi_bias`` (ALiBi).
Running fast
    ``tiled_attention`` (the online softmax), ``KVCache``, ``kv_cache_bytes_per_token``.
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
from mha_ref.masks import (
    allowed_to_additive,
    allowed_to_blocked,
    blocked_to_allowed,
    causal_mask,
    padding_mask,
)
from mha_ref.multihead import MultiHeadAttention
from mha_ref.rope import RotaryEmbedding, apply_rotary, rope_pairing_permutation, rotary_frequencies
from mha_ref.tiled import tiled_attention

__all__ = [
    "__version__",
    "scaled_dot_product_attention",
    "split_heads",
    "merge_heads",
    "repeat_kv_heads",
    "causal_mask",
    "padding_mask",
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
    "tiled_attention",
    "KVCache",
    "kv_cache_bytes_per_token",
    "pick_device",
]
