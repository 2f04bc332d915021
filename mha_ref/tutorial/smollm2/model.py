r"""SmolLM2-135M: a LLaMA-style decoder assembled around :class:`mha_ref.GroupedQueryAttention`.

Each of the 30 blocks is pre-norm: ``x = x + attention(rms_norm(x))`` then
``x = x + mlp(rms_norm(x))``. The attention is the reference's
:class:`~mha_ref.GroupedQueryAttention` (9 query heads sharing 3 key/value heads, ``head_dim``
64, no biases) with :class:`~mha_ref.RotaryEmbedding` (base 100000, all 64 features, the
``"adjacent"`` pairing that GGUF weights need); the rest of the block is written here and in
:mod:`mha_ref.tutorial.real_models.layers`: RMS normalisation
(:class:`~mha_ref.tutorial.real_models.layers.RMSNorm`) and the SwiGLU feed-forward layer
(:class:`SwiGLU`). The token embedding is also the output projection (tied weights), after a
final RMS norm.

The pieces are separate methods, so an analysis can start or stop anywhere:
:meth:`SmolLM2.embed` (tokens -> residual stream), :meth:`SmolLM2.run_layers` (a range of
blocks, optionally returning every head's attention weights), :meth:`SmolLM2.unembed`
(residual -> logits); :meth:`SmolLM2.forward` chains them and :meth:`SmolLM2.token_losses`
gives the loss of every next-token prediction.

Sources: Touvron et al. 2023, "LLaMA", arXiv:2302.13971, Sec. 2.2 (pre-normalisation with
RMSNorm, SwiGLU, rotary embeddings); Zhang and Sennrich 2019, "Root Mean Square Layer
Normalization", arXiv:1910.07467, eq. 4; Shazeer 2020, "GLU Variants Improve Transformer",
arXiv:2002.05202, eq. 6; Ainslie et al. 2023 (GQA), arXiv:2305.13245; Su et al. 2021
(RoFormer), arXiv:2104.09864; Allal et al. 2025, "SmolLM2", arXiv:2502.02737 (the model).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from mha_ref import _validation as check
from mha_ref.grouped import GroupedQueryAttention
from mha_ref.kv_cache import KVCache
from mha_ref.rope import RotaryEmbedding
from mha_ref.tutorial.real_models.layers import (  # noqa: F401  (SmolLM2's names since 0.1)
    DecoderStack,
    GatedMLP,
    RMSNorm,
    check_token_ids,
    next_token_losses,
    token_embedding,
)

__all__ = ["SmolLM2", "SmolLM2Block", "SmolLM2Config", "SwiGLU"]


@dataclass(frozen=True)
class SmolLM2Config:
    """The sizes of a LLaMA-architecture model, as a GGUF file's metadata states them.

    Attributes:
        vocab_size: token ids (49,152).
        embed_dim: width of the residual stream, ``d_model`` (576).
        num_layers: decoder blocks (30).
        num_heads: query heads per block (9).
        num_kv_heads: key/value heads per block (3); query heads ``3g, 3g+1, 3g+2`` share
            key/value head ``g``.
        head_dim: features per head (64).
        ffn_dim: hidden width of the SwiGLU layer (1536).
        rope_base: the rotary embedding's frequency base (100000.0).
        rms_eps: the epsilon inside RMS normalisation (1e-5).
        context_length: the longest sequence the model was trained on (8192 tokens).
    """

    vocab_size: int
    embed_dim: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn_dim: int
    rope_base: float
    rms_eps: float
    context_length: int

    @classmethod
    def from_metadata(cls, metadata: dict) -> SmolLM2Config:
        """Read the sizes from GGUF metadata (``llama.*`` keys).

        Args:
            metadata: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.metadata`.

        Returns:
            SmolLM2Config: the sizes.

        Raises:
            ValueError: if the architecture is not ``llama`` or the rotary embedding does not
                cover the whole head (this code rotates all ``head_dim`` features).
        """
        architecture = metadata.get("general.architecture")
        if architecture != "llama":
            raise ValueError(
                f"the file's architecture is {architecture!r}; SmolLM2 and this code are "
                f"'llama'. Use the SmolLM2 file (model_file())."
            )
        embed_dim = int(metadata["llama.embedding_length"])
        num_heads = int(metadata["llama.attention.head_count"])
        head_dim = embed_dim // num_heads
        rope_dim = int(metadata.get("llama.rope.dimension_count", head_dim))
        if rope_dim != head_dim:
            raise ValueError(
                f"the file rotates {rope_dim} of {head_dim} features per head; this code "
                f"rotates all of them."
            )
        return cls(
            vocab_size=int(metadata["llama.vocab_size"]),
            embed_dim=embed_dim,
            num_layers=int(metadata["llama.block_count"]),
            num_heads=num_heads,
            num_kv_heads=int(metadata["llama.attention.head_count_kv"]),
            head_dim=head_dim,
            ffn_dim=int(metadata["llama.feed_forward_length"]),
            rope_base=float(metadata["llama.rope.freq_base"]),
            rms_eps=float(metadata["llama.attention.layer_norm_rms_epsilon"]),
            context_length=int(metadata["llama.context_length"]),
        )


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

    Build it with :func:`mha_ref.tutorial.smollm2.load.load_model` (weights from the GGUF file);
    the constructor makes the modules on ``device`` without real weights. :meth:`run_layers`,
    :meth:`unembed`, :meth:`check_tokens` and :meth:`check_head` are the ones every real model
    here shares (:class:`~mha_ref.tutorial.real_models.layers.DecoderStack`).

    Args:
        config: the sizes.
        device: where the modules are created (default ``"meta"``: no memory, no random
            initialisation, ready for ``load_state_dict(..., assign=True)``).

    Attributes:
        config (SmolLM2Config): the sizes.
        tokenizer (SmolLM2Tokenizer | None): set by ``load_model``.

    Shape:
        - tokens: ``(batch, seq_len)``, ``torch.long``, ``seq_len <= context_length``.
        - logits: ``(batch, seq_len, vocab_size)``, float32.

    Source:
        Touvron et al. 2023, "LLaMA", arXiv:2302.13971; Allal et al. 2025, "SmolLM2",
        arXiv:2502.02737.
    """

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

    def stream_token_losses(self, residual: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The next-token losses, in nats, from the residual stream after the last block.

        One sequence at a time: the logits of one sequence, ``(seq_len, vocab_size)``, are made,
        used and freed before the next, instead of the whole batch's at once (``4 x 512 x 49,152``
        floats are 0.4 GB, slower to write and read back than the same work in pieces: 2.0 s
        instead of 3.0 to 4.0 s for 4 sequences of 512 tokens on one thread). Each row of the
        logits is the same product either way, so the losses are those of
        ``next_token_losses(self.unembed(residual), tokens)``.

        Args:
            residual: ``(batch, seq_len, embed_dim)``, the stream leaving the last block.
            tokens: ``(batch, seq_len)`` torch.long, the ids the stream was computed from.

        Returns:
            torch.Tensor: ``(batch, seq_len - 1)``, float32; entry ``t`` is the loss of
            predicting token ``t + 1``.

        Raises:
            ValueError: if ``residual`` and ``tokens`` differ in batch or length.
        """
        if residual.shape[:2] != tokens.shape:
            raise ValueError(
                f"residual must be (batch, seq_len, embed_dim) for tokens of shape "
                f"{tuple(tokens.shape)}; got {tuple(residual.shape)}. Pass the stream the "
                "model computed from these tokens."
            )
        rows = []
        for i in range(tokens.shape[0]):
            logits = self.unembed(residual[i : i + 1])  # (1, seq_len, vocab_size)
            rows.append(next_token_losses(logits, tokens[i : i + 1]))  # (1, seq_len - 1)
        return torch.cat(rows)  # (batch, seq_len - 1)

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
            ValueError: if ``max_len`` is above ``context_length``.
        """
        max_len = self.config.context_length if max_len is None else max_len
        if max_len > self.config.context_length:
            raise ValueError(
                f"max_len={max_len} is above the model's context_length="
                f"{self.config.context_length}: the rotary table has no larger positions."
            )
        return [block.attention.new_cache(batch, max_len) for block in self.layers]

    def decode(self, tokens: torch.Tensor, caches: list[KVCache]) -> torch.Tensor:
        """Logits for new tokens, the earlier ones' keys and values being in ``caches``.

        Feeding a sequence in pieces (a prompt, then one token at a time) gives the same
        logits as :meth:`forward` on the whole sequence (up to rounding).

        Args:
            tokens: ``(batch, new_len)`` ids (or ``(new_len,)``).
            caches: from :meth:`new_caches`; updated in place.

        Returns:
            torch.Tensor: ``(batch, new_len, vocab_size)``.

        Raises:
            ValueError: as :meth:`embed`, or if the caches do not fit (see
                :meth:`mha_ref.GroupedQueryAttention.decode`).
        """
        residual = self.embed(tokens)  # (batch, new_len, embed_dim)
        if len(caches) != len(self.layers):
            raise ValueError(
                f"caches must hold one KVCache per block ({len(self.layers)}), got "
                f"{len(caches)}. Build them with model.new_caches()."
            )
        for block, cache in zip(self.layers, caches, strict=True):
            residual = block.decode(residual, cache)  # (batch, new_len, embed_dim)
        return self.unembed(residual)  # (batch, new_len, vocab_size)

    @torch.no_grad()
    def generate_greedy(self, tokens: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """Continue ``tokens`` by always taking the most likely next token (KV-cached).

        Args:
            tokens: ``(seq_len,)`` prompt ids.
            max_new_tokens: tokens to add (generation also stops after ``<|im_end|>`` or
                ``<|endoftext|>``, ids 2 and 0).

        Returns:
            torch.Tensor: ``(new_len,)`` the generated ids, ``new_len <= max_new_tokens``.

        Raises:
            TypeError: as :meth:`embed`, or if ``max_new_tokens`` is not an int.
            ValueError: as :meth:`embed`, if ``max_new_tokens`` is negative, or if the prompt
                and the new tokens do not fit in ``context_length``.
        """
        prompt = self.check_tokens(tokens)  # (1, seq_len)
        if prompt.shape[0] != 1:
            raise ValueError(f"tokens must be one prompt (seq_len,), got {tuple(tokens.shape)}.")
        _require_max_new_tokens(max_new_tokens, prompt.shape[1], self.config.context_length)
        total = prompt.shape[1] + max_new_tokens
        caches = self.new_caches(1, total)
        logits = self.decode(prompt, caches)  # (1, seq_len, vocab_size)
        generated = []
        for _ in range(max_new_tokens):
            next_id = int(logits[0, -1].argmax())
            generated.append(next_id)
            if next_id in _STOP_IDS:
                break
            logits = self.decode(torch.tensor([[next_id]]), caches)  # (1, 1, vocab_size)
        return torch.tensor(generated, dtype=torch.long)  # (new_len,)


#: ``<|endoftext|>`` and ``<|im_end|>``: greedy generation stops after either
_STOP_IDS = (0, 2)


def _require_max_new_tokens(max_new_tokens: object, prompt_len: int, context_length: int) -> None:
    """Raise unless ``max_new_tokens`` is an int in ``0 .. context_length - prompt_len``."""
    check.require_int("max_new_tokens", max_new_tokens)
    room = context_length - prompt_len
    if max_new_tokens < 0:
        raise ValueError(
            f"max_new_tokens (the number of tokens to generate) must be 0 or more, got "
            f"max_new_tokens={max_new_tokens}. Pass the most tokens to add, for example "
            f"max_new_tokens=20 (generation also stops at <|im_end|>)."
        )
    if max_new_tokens > room:
        raise ValueError(
            f"max_new_tokens={max_new_tokens} does not fit: the prompt has {prompt_len} tokens "
            f"and the model's context_length is {context_length}, which leaves room for "
            f"{room} new tokens. Pass max_new_tokens={room} or less, or a shorter prompt."
        )
