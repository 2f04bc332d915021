"""The parts of a decoder that every real model here shares, and the checks of its input.

:class:`RMSNorm` (SmolLM2 and Gemma 3 both normalise with it; Gemma 3's file stores its gains as
``1 + w`` already, so the same class reads both files), :class:`GatedMLP` (SwiGLU and GeGLU),
:func:`next_token_losses` (the loss of every next-token prediction),
:func:`check_token_ids` (a model's input, checked once), :class:`DecoderConfig` (the sizes every
model's file states under the same GGUF keys), and :class:`DecoderStack`, the stages
every model here runs in the same way (its blocks, a range at a time, and the unembedding tied to
the token embedding), so that a model's own file holds only what differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from mha_ref import _validation as check

__all__ = [
    "ACTIVATIONS",
    "DecoderConfig",
    "DecoderStack",
    "GatedMLP",
    "RMSNorm",
    "check_token_ids",
    "token_embedding",
    "next_token_losses",
]

#: the gates of :class:`GatedMLP`: SiLU (SwiGLU: LLaMA, SmolLM2) and GELU with its tanh
#: approximation (GeGLU: Gemma)
ACTIVATIONS = {"silu": F.silu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh")}


class RMSNorm(nn.Module):
    r"""Root-mean-square normalisation with a learned gain, computed in float32.

    Math: :math:`y = g \odot x / \sqrt{\tfrac{1}{d}\sum_i x_i^2 + \epsilon}`; unlike layer
    normalisation, no mean is subtracted and there is no bias.

    Args:
        dim: features ``d``.
        eps: added to the mean square, for stability.
        device: where the gain is created (``"meta"`` to fill it later).

    Shape:
        - Input: ``(..., dim)``. Output: the same shape and dtype.

    Source:
        Zhang and Sennrich 2019, "Root Mean Square Layer Normalization", arXiv:1910.07467,
        eq. 4; ``torch.nn.RMSNorm`` computes the same.
    """

    def __init__(self, dim: int, eps: float, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device))  # (dim,) the gain g

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()  # (..., dim)
        inverse_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)
        return self.weight * (x32 * inverse_rms).to(x.dtype)  # (..., dim)


class GatedMLP(nn.Module):
    r"""The gated feed-forward layer: :math:`W_2\,(\phi(W_1 x) \odot W_3 x)`.

    Math: ``gate_proj`` is :math:`W_1`, ``up_proj`` :math:`W_3`, ``down_proj`` :math:`W_2`, all
    without bias; :math:`\phi` is SiLU, :math:`z\,\sigma(z)` (SwiGLU), or GELU with the tanh
    approximation (GeGLU).

    Args:
        embed_dim: input and output width.
        ffn_dim: hidden width.
        activation: ``"silu"`` or ``"gelu_tanh"`` (the keys of :data:`ACTIVATIONS`).
        device: where the weights are created (``"meta"`` to fill them later).

    Shape:
        - Input: ``(..., embed_dim)``. Output: ``(..., embed_dim)``.

    Raises:
        ValueError: if ``activation`` is not a key of :data:`ACTIVATIONS`.

    Source:
        Shazeer 2020, "GLU Variants Improve Transformer", arXiv:2002.05202, eqs. 5 and 6
        (FFN_GEGLU, FFN_SwiGLU).
    """

    def __init__(
        self,
        embed_dim: int,
        ffn_dim: int,
        activation: str,
        device: torch.device | str | None = None,
    ) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}."
            )
        super().__init__()
        self.activation = activation
        self.gate_proj = nn.Linear(embed_dim, ffn_dim, bias=False, device=device)
        self.up_proj = nn.Linear(embed_dim, ffn_dim, bias=False, device=device)
        self.down_proj = nn.Linear(ffn_dim, embed_dim, bias=False, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = ACTIVATIONS[self.activation](self.gate_proj(x))  # (..., ffn_dim)
        return self.down_proj(gate * self.up_proj(x))  # (..., embed_dim)


def token_embedding(
    vocab_size: int, embed_dim: int, device: torch.device | str | None = None
) -> torch.nn.Embedding:
    """A model's token embedding table, ``nn.Embedding(vocab_size, embed_dim)``.

    On the meta device (where a loader builds a model before its weights are read from the
    file) the table is left uninitialised: ``nn.Embedding`` draws random weights on creation,
    and on the meta device that first draw imports ``torch._dynamo`` (1 to 1.5 s of a model's
    load, for weights the file replaces). Anywhere else the table is ``nn.Embedding``'s own,
    randomly initialised.

    Args:
        vocab_size: number of token ids (rows).
        embed_dim: width of the residual stream (columns).
        device: where the table lives; ``"meta"`` for a model whose weights are loaded next
            (``load_state_dict(..., assign=True)``).

    Returns:
        torch.nn.Embedding: weight ``(vocab_size, embed_dim)``, float32.

    Source:
        ``torch.nn.Embedding`` and ``torch.nn.Embedding.from_pretrained`` (which takes the
        given tensor as the weight and draws nothing).
    """
    if device is not None and torch.device(device).type == "meta":
        empty = torch.empty(vocab_size, embed_dim, device=device)  # (vocab_size, embed_dim)
        return nn.Embedding.from_pretrained(empty, freeze=False)
    return nn.Embedding(vocab_size, embed_dim, device=device)


def check_token_ids(
    tokens: object, vocab_size: int, context_length: int, min_len: int = 1
) -> torch.Tensor:
    """Validate token ids and return them as ``(batch, seq_len)``.

    Args:
        tokens: ``(batch, seq_len)`` or ``(seq_len,)`` integer tensor.
        vocab_size: the model's number of token ids.
        context_length: the longest sequence the model takes.
        min_len: the fewest tokens allowed.

    Returns:
        torch.Tensor: ``(batch, seq_len)``, ``torch.long``.

    Raises:
        TypeError: if ``tokens`` is not an integer tensor.
        ValueError: if it is not 1-D or 2-D, is shorter than ``min_len``, holds an id
            outside ``0 .. vocab_size - 1``, or is longer than ``context_length`` (split
            the text into windows of at most that many tokens).
    """
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(
            f"tokens must be a torch.Tensor of ids, got {type(tokens).__name__}. Use "
            f"model.tokenizer.encode(text)."
        )
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must be an integer tensor, got dtype {tokens.dtype}.")
    if tokens.dim() == 1:
        tokens = tokens[None]  # (1, seq_len)
    if tokens.dim() != 2:
        raise ValueError(
            f"tokens must be (batch, seq_len) or (seq_len,), got shape {tuple(tokens.shape)}."
        )
    seq_len, limit = tokens.shape[1], context_length
    if seq_len < min_len:
        raise ValueError(f"tokens must hold at least {min_len} tokens, got {seq_len}.")
    if seq_len > limit:
        raise ValueError(
            f"tokens has {seq_len} positions, more than the model's context of {limit} "
            f"tokens (its rotary table and its training stop there). Split the text into "
            f"windows of at most {limit} tokens."
        )
    low, high = int(tokens.min()), int(tokens.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(
            f"tokens must be ids in 0 .. {vocab_size - 1}, got {bad}. Use "
            f"model.tokenizer.encode(text)."
        )
    return tokens.long()


def next_token_losses(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each position's prediction of the next token, in nats.

    Args:
        logits: ``(batch, seq_len, vocab_size)``.
        tokens: ``(batch, seq_len)``.

    Returns:
        torch.Tensor: ``(batch, seq_len - 1)``.
    """
    batch, seq_len, vocab_size = logits.shape
    predictions = logits[:, :-1].float()  # (batch, seq_len - 1, vocab_size)
    targets = tokens[:, 1:]  # (batch, seq_len - 1)
    # one row per prediction, the vocabulary last and contiguous: cross_entropy's fast path
    # (over dim 1 of a transposed (batch, vocab_size, seq_len - 1) it took 2.4x as long)
    losses = F.cross_entropy(
        predictions.reshape(-1, vocab_size), targets.reshape(-1), reduction="none"
    )  # (batch * (seq_len - 1),)
    return losses.view(batch, seq_len - 1)  # (batch, seq_len - 1)


@dataclass(frozen=True)
class DecoderConfig:
    """The sizes every decoder model here has; each model's config adds its own.

    Attributes:
        vocab_size: the number of token ids (rows of the embedding table).
        embed_dim: width of the residual stream, ``d_model``.
        num_layers: decoder blocks.
        num_heads: query heads per block.
        num_kv_heads: key/value heads per block; ``num_heads // num_kv_heads`` neighbouring
            query heads share one (query heads ``0 .. group - 1`` read key/value head 0).
        head_dim: features per head.
        ffn_dim: hidden width of the gated feed-forward layer (:class:`GatedMLP`).
        rope_base: the rotary embedding's frequency base (the global blocks' where a model has
            two).
        rms_eps: the epsilon inside RMS normalisation (:class:`RMSNorm`).
        context_length: the longest sequence the model was trained on, in tokens.

    Source:
        The GGUF specification's keys for language models (``[llm].embedding_length``,
        ``[llm].block_count``, ``[llm].attention.head_count`` ...), ggml's ``docs/gguf.md``,
        section "LLM".
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

    @staticmethod
    def sizes_from_metadata(metadata: dict, architecture: str, model: str) -> dict:
        """The eight sizes every model file states under its architecture's keys.

        ``vocab_size`` and ``head_dim`` are not among them: files state them in different
        ways (a key, the token list's length, or ``embed_dim // num_heads``), so each model's
        ``from_metadata`` adds them.

        Args:
            metadata: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.metadata`.
            architecture: the file's ``general.architecture`` this code reads (``"llama"``,
                ``"gemma3"``), also the prefix of its keys.
            model: the model's name, for the error messages (``"SmolLM2"``).

        Returns:
            dict: ``embed_dim``, ``num_layers``, ``num_heads``, ``num_kv_heads``, ``ffn_dim``
            and ``context_length`` as int, ``rope_base`` and ``rms_eps`` as float.

        Raises:
            ValueError: if the file's architecture is not ``architecture``, or a key is
                missing.
        """
        found = metadata.get("general.architecture")
        if found != architecture:
            raise ValueError(
                f"the file's architecture is {found!r}; {model} and this code are "
                f"{architecture!r}. Use the {model} file (model_file())."
            )
        keys = {
            "embed_dim": ("embedding_length", int),
            "num_layers": ("block_count", int),
            "num_heads": ("attention.head_count", int),
            "num_kv_heads": ("attention.head_count_kv", int),
            "ffn_dim": ("feed_forward_length", int),
            "rope_base": ("rope.freq_base", float),
            "rms_eps": ("attention.layer_norm_rms_epsilon", float),
            "context_length": ("context_length", int),
        }
        sizes = {}
        for name, (key, kind) in keys.items():
            full_key = f"{architecture}.{key}"
            if full_key not in metadata:
                raise ValueError(
                    f"the file's metadata has no {full_key!r} (the {name} of the model); "
                    f"the file is incomplete. Use the {model} file (model_file())."
                )
            sizes[name] = kind(metadata[full_key])
        return sizes


class DecoderStack(nn.Module):
    """What SmolLM2 and Gemma 3 run in the same way: blocks in order, a final norm, the
    unembedding tied to the token embedding, and the checks of a token or a head.

    A model subclasses it, names its ``STOP_TOKENS`` (the control tokens that end
    :meth:`generate_greedy`) and sets, in its constructor: ``config`` (with ``num_layers``,
    ``num_heads``, ``vocab_size`` and ``context_length``), ``embedding`` (``nn.Embedding``),
    ``layers`` (``nn.ModuleList`` of blocks called as ``block(residual, need_weights)`` and
    returning ``(residual, weights)``) and ``final_norm``. Its own ``embed`` and ``forward``
    stay in its file: they are where models differ (Gemma 3 scales the embedding, and computes
    logits only where asked).

    Shape:
        - residual stream: ``(batch, seq_len, embed_dim)``, float32.
        - attention weights: ``(batch, num_heads, seq_len, seq_len)`` per block.

    Source:
        Radford et al. 2019 (GPT-2) and Touvron et al. 2023 ("LLaMA", arXiv:2302.13971,
        Sec. 2.2): a decoder-only stack of pre-norm blocks with a final norm; Press and Wolf
        2017, "Using the Output Embedding to Improve Language Models", arXiv:1608.05859 (tied
        input and output embeddings).
    """

    def run_layers(
        self,
        residual: torch.Tensor,
        start: int = 0,
        stop: int | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Blocks ``start .. stop - 1`` on a residual stream.

        Args:
            residual: ``(batch, seq_len, embed_dim)``, the stream entering block ``start``.
            start: first block (0-based). Default: 0.
            stop: one past the last block. Default: all of them.
            need_weights: also return each block's attention weights (the explicit path of
                :class:`~mha_ref.GroupedQueryAttention`; otherwise PyTorch's fused kernel).

        Returns:
            tuple[torch.Tensor, list[torch.Tensor]]: the stream after block ``stop - 1``,
            ``(batch, seq_len, embed_dim)``, and one ``(batch, num_heads, seq_len, seq_len)``
            weight tensor per block run (an empty list without ``need_weights``).

        Raises:
            ValueError: if ``0 <= start <= stop <= num_layers`` does not hold.
        """
        stop = self.config.num_layers if stop is None else stop
        if not (isinstance(start, int) and isinstance(stop, int)) or not (
            0 <= start <= stop <= self.config.num_layers
        ):
            raise ValueError(
                f"need 0 <= start <= stop <= num_layers={self.config.num_layers}, got "
                f"start={start!r}, stop={stop!r}."
            )
        all_weights = []
        for block in self.layers[start:stop]:
            residual, weights = block(residual, need_weights)  # (batch, seq_len, embed_dim)
            if need_weights:
                all_weights.append(weights)  # (batch, num_heads, seq_len, seq_len)
        return residual, all_weights

    def unembed(self, residual: torch.Tensor) -> torch.Tensor:
        """The residual stream after the last block -> next-token logits (tied embedding).

        Args:
            residual: ``(batch, seq_len, embed_dim)``.

        Returns:
            torch.Tensor: ``(batch, seq_len, vocab_size)``.
        """
        return self.final_norm(residual) @ self.embedding.weight.T  # (batch, seq_len, vocab)

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

    def decode(
        self, tokens: torch.Tensor, caches: list, logits_at: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits for new tokens, the earlier ones' keys and values being in ``caches``.

        Feeding a sequence in pieces (a prompt, then one token at a time) gives the logits of
        the model's ``forward`` on the whole sequence (up to rounding). Each block decodes with
        its own cache (``block.decode(residual, cache)``); the model's ``new_caches`` makes
        them (SmolLM2: a ``KVCache`` per block; Gemma 3: ring buffers in its local blocks),
        and :meth:`check_caches` checks them before any block runs.

        Args:
            tokens: ``(batch, new_len)`` ids (or ``(new_len,)``).
            caches: from the model's ``new_caches``; updated in place.
            logits_at: positions among the new tokens whose logits are made (``(n,)``,
                ``torch.long``; default: all of them).

        Returns:
            torch.Tensor: ``(batch, new_len, vocab_size)``, or ``(batch, n, vocab_size)``.

        Raises:
            TypeError, ValueError: as :meth:`check_tokens` and :meth:`check_caches`, or if a
                cache does not fit (``mha_ref.GroupedQueryAttention.decode``).

        Source:
            Shazeer 2019, "Fast Transformer Decoding", arXiv:1911.02150, Sec. 2.4
            (incremental decoding).
        """
        residual = self.embed(tokens)  # (batch, new_len, embed_dim)
        self.check_caches(caches, residual.shape[1])
        for block, cache in zip(self.layers, caches, strict=True):
            residual = block.decode(residual, cache)  # (batch, new_len, embed_dim)
        if logits_at is not None:
            residual = residual[:, logits_at.to(residual.device)]  # (batch, n, embed_dim)
        return self.unembed(residual)  # (batch, new_len or n, vocab_size)

    @torch.no_grad()
    def generate_greedy(self, tokens: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """Continue ``tokens`` by always taking the most likely next token (KV-cached).

        The prompt is decoded at once into the model's caches (``new_caches``), then one token
        at a time; generation stops after ``max_new_tokens`` or after one of the model's
        ``STOP_TOKENS`` (spellings of control tokens, looked up in its tokenizer).

        Args:
            tokens: ``(seq_len,)`` prompt ids, as the model's tokenizer encodes them (Gemma 3's
                with ``<bos>`` first).
            max_new_tokens: tokens to add, at most.

        Returns:
            torch.Tensor: ``(new_len,)`` the generated ids, ``new_len <= max_new_tokens``.

        Raises:
            TypeError: as :meth:`check_tokens`, or if ``max_new_tokens`` is not an int.
            ValueError: as :meth:`check_tokens`, if ``tokens`` holds more than one prompt,
                if ``max_new_tokens`` is negative, or if the prompt and the new tokens do not
                fit in ``context_length``.

        Source:
            transformers' ``generate`` with ``do_sample=False`` (greedy search; the tests
            compare the two token for token); Shazeer 2019, arXiv:1911.02150, Sec. 2.4
            (incremental decoding).
        """
        prompt = self.check_tokens(tokens)  # (1, seq_len)
        if prompt.shape[0] != 1:
            raise ValueError(f"tokens must be one prompt (seq_len,), got {tuple(tokens.shape)}.")
        _require_max_new_tokens(max_new_tokens, prompt.shape[1], self.config.context_length)
        stop_ids = {self.tokenizer.control_tokens[name] for name in self.STOP_TOKENS}
        caches = self.new_caches(1, prompt.shape[1] + max_new_tokens)
        last = torch.tensor([-1])  # (1,): the logits of the last position only
        logits = self.decode(prompt, caches, logits_at=last)  # (1, 1, vocab_size)
        generated = []
        for _ in range(max_new_tokens):
            next_id = int(logits[0, -1].argmax())
            generated.append(next_id)
            if next_id in stop_ids:
                break
            logits = self.decode(torch.tensor([[next_id]]), caches)  # (1, 1, vocab_size)
        return torch.tensor(generated, dtype=torch.long)  # (new_len,)

    def check_cache_length(self, max_len: int | None) -> int:
        """The length of the caches ``new_caches(batch, max_len)`` builds: ``max_len``, or
        ``context_length`` when it is None.

        Args:
            max_len: the most tokens the caches will hold, or None.

        Returns:
            int: the checked length.

        Raises:
            ValueError: if ``max_len`` is not a positive int or is above ``context_length``
                (the rotary tables have no larger positions).
        """
        context_length = self.config.context_length
        if max_len is None:
            return context_length
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
            raise ValueError(f"max_len must be a positive int or None, got {max_len!r}.")
        if max_len > context_length:
            raise ValueError(
                f"max_len={max_len} is above the model's context_length={context_length}: the "
                f"rotary tables have no larger positions. Pass max_len <= {context_length}."
            )
        return max_len

    def check_caches(self, caches: object, new_len: int) -> None:
        """Raise unless ``caches`` is a list of one cache per block (a model adds its own
        checks, before any block runs, so that a refused call leaves every cache as it was).

        Args:
            caches: the caches given to :meth:`decode`.
            new_len: tokens about to be decoded.

        Raises:
            ValueError: if ``caches`` is not a list of ``num_layers`` caches.
        """
        if not isinstance(caches, list) or len(caches) != len(self.layers):
            got = f"{len(caches)} caches" if isinstance(caches, list) else type(caches).__name__
            raise ValueError(
                f"caches must be a list of one cache per block ({len(self.layers)}), got {got}. "
                f"Build them with model.new_caches()."
            )

    def check_tokens(self, tokens: object, min_len: int = 1) -> torch.Tensor:
        """The model's input checked by
        :func:`~mha_ref.tutorial.real_models.layers.check_token_ids` with this model's
        ``vocab_size`` and ``context_length``: its arguments, shapes and errors are that
        function's.
        """
        return check_token_ids(
            tokens, self.config.vocab_size, self.config.context_length, min_len
        )  # (batch, seq_len)

    def check_head(self, layer: object, head: object) -> tuple[int, int]:
        """Validate a (layer, head) pair, both 0-based.

        Args:
            layer: block index, ``0 .. num_layers - 1``.
            head: query head index, ``0 .. num_heads - 1``.

        Returns:
            tuple[int, int]: ``(layer, head)``.

        Raises:
            TypeError: if either is not an int.
            ValueError: if either is out of range (the message gives the ranges).
        """
        c = self.config
        for name, value in (("layer", layer), ("head", head)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r}).")
        if not (0 <= layer < c.num_layers and 0 <= head < c.num_heads):
            raise ValueError(
                f"there is no head ({layer}, {head}): layers are 0 .. {c.num_layers - 1} and "
                f"heads 0 .. {c.num_heads - 1} (both 0-based)."
            )
        return layer, head


def _require_max_new_tokens(max_new_tokens: object, prompt_len: int, context_length: int) -> None:
    """Raise unless ``max_new_tokens`` is an int in ``0 .. context_length - prompt_len``."""
    check.require_int("max_new_tokens", max_new_tokens)
    room = context_length - prompt_len
    if max_new_tokens < 0:
        raise ValueError(
            f"max_new_tokens (the number of tokens to generate) must be 0 or more, got "
            f"max_new_tokens={max_new_tokens}. Pass the most tokens to add, for example "
            f"max_new_tokens=20 (generation also stops at the model's end-of-text tokens)."
        )
    if max_new_tokens > room:
        raise ValueError(
            f"max_new_tokens={max_new_tokens} does not fit: the prompt has {prompt_len} tokens "
            f"and the model's context_length is {context_length}, which leaves room for "
            f"{room} new tokens. Pass max_new_tokens={room} or less, or a shorter prompt."
        )
