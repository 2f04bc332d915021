r"""Induction heads in a two-layer attention-only transformer, trained and then ablated.

**Source.** Olsson et al. 2022, "In-context Learning and Induction Heads" (arXiv:2209.11895),
sections 2 (the two-head circuit: a previous-token head, then an induction head that uses it)
and 3 (the phase change in the loss); the model is the attention-only transformer of Elhage et
al. 2021, "A Mathematical Framework for Transformer Circuits" (transformer-circuits.pub).

**The task.** Each sequence is ``filler + segment + segment``: a random ``segment`` of
``period`` distinct tokens appears twice in a row, after filler tokens drawn from the rest of the
vocabulary. ``period`` varies from sequence to sequence, so no fixed position holds the answer:
in the second copy the next token can only be found by content, "find where the current token
occurred before, and copy the token that followed it". That is what an induction head does, with
the help of a previous-token head in the layer before it.

**Training** is in :mod:`mha_ref.tutorial.induction_training`.

**The model.** Token and learned position embeddings, two causal
:class:`mha_ref.MultiHeadAttention` layers that add to a residual stream, and an unembedding;
no MLP and no layer norm. Its ``position`` option swaps the learned position embedding for
another scheme (sinusoidal, rotary, ALiBi, or none), everything else kept: example 20 compares
them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from mha_ref.alibi import alibi_bias
from mha_ref.functional import merge_heads, scaled_dot_product_attention, split_heads
from mha_ref.masks import allowed_to_additive, allowed_to_blocked, causal_mask
from mha_ref.multihead import MultiHeadAttention
from mha_ref.rope import RotaryEmbedding

__all__ = [
    "POSITIONS",
    "AttentionOnlyTransformer",
    "ablate_heads",
    "accuracy_with_ablation",
    "check_periods",
    "composition_ablation",
    "head_scores",
    "induction_score",
    "make_repeated_batch",
    "corrupt_first_copy",
    "patched_logits",
    "previous_token_score",
    "second_copy_accuracy",
    "second_copy_mask",
    "sinusoidal_positions",
]

_EVAL_SEED = 3_000_017  # fixed: every run is evaluated on the same sequences

#: The position schemes of :class:`AttentionOnlyTransformer`, the default first.
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")


# ------------------------------------------------------------------------------------------------
# the task
# ------------------------------------------------------------------------------------------------


def make_repeated_batch(
    batch_size: int,
    seq_len: int,
    vocab_size: int,
    generator: torch.Generator,
    min_period: int,
    max_period: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences ``filler + segment + segment`` with a random period per sequence.

    Args:
        batch_size: number of sequences ``N``.
        seq_len: tokens per sequence ``L``.
        vocab_size: token ids ``0 .. vocab_size - 1``.
        generator: the random stream.
        min_period, max_period: the segment length ``period`` is drawn uniformly from this range
            (both included); the segment's tokens are distinct, the filler uses the others.

    Returns:
        ``tokens`` ``(N, L)`` int64 and ``periods`` ``(N,)`` int64; the second copy of the
        segment occupies positions ``L - period .. L - 1``.

    Raises:
        ValueError: the periods do not fit (:func:`check_periods`).
    """
    check_periods(seq_len, vocab_size, min_period, max_period)
    periods = torch.randint(min_period, max_period + 1, (batch_size,), generator=generator)  # (N,)
    order = torch.rand(batch_size, vocab_size, generator=generator).argsort(dim=1)  # (N, V)
    positions = torch.arange(seq_len)  # (L,)
    start = seq_len - 2 * periods  # (N,) first position of the first copy
    offset = positions[None, :] - start[:, None]  # (N, L) position inside the two copies
    in_segment = offset >= 0  # (N, L)
    segment_index = offset.clamp(min=0) % periods[:, None]  # (N, L)
    # filler: a token drawn from those ranked after the segment's in this sequence's order
    filler_rank = periods[:, None] + (
        torch.rand(batch_size, seq_len, generator=generator)
        * (vocab_size - periods[:, None])
    ).long()  # (N, L) in period .. V - 1
    rank = torch.where(in_segment, segment_index, filler_rank)  # (N, L)
    tokens = order.gather(1, rank)  # (N, L)
    return tokens, periods


def check_periods(seq_len: int, vocab_size: int, min_period: int, max_period: int) -> None:
    """Raise ValueError unless ``1 <= min_period <= max_period``, ``2 * max_period <= seq_len``
    and ``max_period < vocab_size`` (distinct segment tokens, and one left for the filler)."""
    if not 1 <= min_period <= max_period or 2 * max_period > seq_len:
        raise ValueError(
            f"need 1 <= min_period <= max_period and 2 * max_period <= seq_len, got "
            f"min_period={min_period}, max_period={max_period}, seq_len={seq_len}"
        )
    if max_period >= vocab_size:
        raise ValueError(
            f"max_period={max_period} must be below vocab_size={vocab_size}: the segment's "
            "tokens are distinct and the filler needs at least one other token"
        )


def second_copy_mask(periods: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Query positions whose next token is predictable by induction.

    Position ``t`` predicts token ``t + 1``; in the second copy (``t >= L - period``) that token
    repeats the one after the earlier occurrence of token ``t``, at ``t - period + 1``.

    Args:
        periods: ``(N,)`` segment lengths from :func:`make_repeated_batch`.
        seq_len: ``L``.

    Returns:
        bool ``(N, L)``, ``True`` for ``L - period <= t <= L - 2``.
    """
    positions = torch.arange(seq_len)  # (L,)
    first = seq_len - periods  # (N,)
    return (positions[None, :] >= first[:, None]) & (positions[None, :] <= seq_len - 2)  # (N, L)


# ------------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------------


class AttentionOnlyTransformer(nn.Module):
    """Embeddings, causal attention layers on a residual stream, an unembedding; no MLP.

    ``x = embed(tokens) + pos``, then for each layer ``x = x + attention(x)``, then
    ``logits = unembed(x)`` (Elhage et al. 2021, section "Model simplifications").

    Where the position information enters is set by ``position``; nothing else changes:

    * ``"learned"`` (the default, example 10's model): a trained position embedding
      ``(seq_len, embed_dim)`` added to the token embeddings (Vaswani et al. 2017, Sec. 3.5);
    * ``"sinusoidal"``: the fixed sines and cosines of Vaswani et al. added instead
      (:func:`sinusoidal_positions`);
    * ``"rope"``: nothing added; each head's queries and keys are rotated by their positions
      (:class:`mha_ref.RotaryEmbedding`, base 10000, adjacent pairs), Su et al. 2021;
    * ``"alibi"``: nothing added; each head's scores get ``-slope * distance``
      (:func:`mha_ref.alibi_bias`, the paper's slopes), Press et al. 2022;
    * ``"none"``: no position information at all but the causal mask (Haviv et al. 2022).

    For one ``torch.manual_seed`` every scheme starts from the same token embedding, attention
    and unembedding weights: the schemes without a learned table draw the random numbers such a
    table would take, so the comparison changes the positions alone.

    Args:
        vocab_size: number of token ids ``V``.
        seq_len: longest sequence ``L`` for ``"learned"`` (size of the position embedding);
            the other schemes take any length (``"rope"``: up to 4096 tokens).
        embed_dim: residual width ``d_model``.
        num_heads: heads per layer ``h`` (must divide ``embed_dim``).
        num_layers: attention layers.
        position: keyword-only, one of :data:`POSITIONS`. Default: ``"learned"``.

    Shape:
        - tokens: ``(N, L)`` int64.
        - logits: ``(N, L, V)``; weights: a list, one ``(N, h, L, L)`` per layer.

    Raises:
        ValueError: ``position`` is not one of :data:`POSITIONS`.
    """

    def __init__(
        self,
        vocab_size: int,
        seq_len: int,
        embed_dim: int,
        num_heads: int,
        num_layers: int = 2,
        *,
        position: str = "learned",
    ) -> None:
        if position not in POSITIONS:
            raise ValueError(
                f"position must be one of {POSITIONS}, got position={position!r}; 'learned' is "
                "example 10's model"
            )
        super().__init__()
        self.position = position
        self.seq_len = seq_len
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        if position == "learned":
            self.position_embedding = nn.Embedding(seq_len, embed_dim)
        else:  # the same random draws as the table above, so the other weights start the same
            torch.empty(seq_len, embed_dim).normal_()
            self.position_embedding = None
        self.layers = nn.ModuleList(
            MultiHeadAttention(embed_dim, num_heads, batch_first=True) for _ in range(num_layers)
        )
        self.unembed = nn.Linear(embed_dim, vocab_size)
        self.rope = RotaryEmbedding(self.layers[0].head_dim) if position == "rope" else None
        #: 0-based layers whose search runs without positions (``positions.positions_removed``)
        self.positionless_layers: frozenset[int] = frozenset()

    def embed(self, tokens: torch.Tensor, with_positions: bool = True) -> torch.Tensor:
        """The residual stream before the first layer: ``(N, L)`` tokens -> ``(N, L, E)``.

        Token embeddings, plus the position embedding for ``"learned"`` and ``"sinusoidal"``
        (left out with ``with_positions=False``).
        """
        seq_len = tokens.shape[1]
        x = self.token_embedding(tokens)  # (N, L, E)
        if with_positions and self.position == "learned":
            positions = torch.arange(seq_len, device=tokens.device)  # (L,)
            x = x + self.position_embedding(positions)  # (N, L, E)
        elif with_positions and self.position == "sinusoidal":
            table = sinusoidal_positions(seq_len, x.shape[-1], device=tokens.device)  # (L, E)
            x = x + table.to(x.dtype)  # (N, L, E)
        return x

    def attend(
        self,
        layer: MultiHeadAttention,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        need_weights: bool = True,
        with_positions: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One causal attention layer of this model, with the model's positions inside it.

        ``"rope"`` rotates the queries and keys after the head split (``_rotary_attention``);
        ``"alibi"`` adds its biases to the causal mask; the others use the causal mask alone
        (their positions, if any, are in the inputs).

        Args:
            layer: one of ``self.layers``.
            query, key, value: ``(N, L, E)`` inputs of the layer (the same tensor, except in
                :func:`composition_ablation` and with ``positionless_layers``).
            need_weights: also return the weights; ``False`` uses the fused kernel, except for
                ``"rope"``.
            with_positions: ``False`` leaves out the rotation (``"rope"``) or the biases
                (``"alibi"``); the other schemes are unchanged.

        Returns:
            ``(output (N, L, E), weights (N, h, L, L) or None)``.
        """
        if self.rope is not None:
            return _rotary_attention(
                layer, self.rope, query, key, value, need_weights, rotate=with_positions
            )
        batch, seq_len = query.shape[0], query.shape[1]
        mask = allowed_to_blocked(causal_mask(seq_len, device=query.device))  # (L, L) blocked
        if with_positions and self.position == "alibi":
            mask = self._alibi_mask(layer, seq_len, query.dtype, query.device)  # (h, L, L)
            mask = mask.repeat(batch, 1, 1)  # (N * h, L, L), batch-major as MHA expects
        return layer(
            query,
            key,
            value,
            attn_mask=mask,
            need_weights=need_weights,
            average_attn_weights=False,
        )  # (N, L, E), (N, h, L, L) or None

    def _alibi_mask(
        self, layer: MultiHeadAttention, seq_len: int, dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        """ALiBi's biases with the causal mask: ``(h, L, L)`` float, ``-inf`` where blocked."""
        additive = allowed_to_additive(causal_mask(seq_len, device=device))  # (L, L) 0 / -inf
        bias = alibi_bias(layer.num_heads, seq_len, device=device)  # (h, L, L)
        return (additive + bias).to(dtype)  # (h, L, L)

    def attention_scores(
        self, layer: MultiHeadAttention, x: torch.Tensor, with_positions: bool = True
    ) -> torch.Tensor:
        """The scores of ``layer`` on its input ``x``, before the softmax.

        ``q_i . k_j / sqrt(head_dim)`` after the rotation (``"rope"``), plus the biases
        (``"alibi"``); ``-inf`` where the causal mask blocks. Their softmax over the keys is the
        weights that :meth:`attend` returns. ``with_positions=False`` leaves the rotation and
        the biases out (the causal mask stays).

        Args:
            layer: one of ``self.layers``; x: ``(N, L, E)``, the layer's input.
            with_positions: apply this layer's rotation or biases. Default: ``True``.

        Returns:
            ``(N, h, L, L)``.
        """
        seq_len = x.shape[1]
        w_q, w_k, _ = layer.projection_weights()
        b_q, b_k, _ = layer.projection_biases()
        queries = split_heads(F.linear(x, w_q, b_q), layer.num_heads)  # (N, h, L, head_dim)
        keys = split_heads(F.linear(x, w_k, b_k), layer.num_heads)  # (N, h, L, head_dim)
        if with_positions and self.rope is not None:
            positions = torch.arange(seq_len, device=x.device)  # (L,)
            queries, keys = self.rope(queries, positions), self.rope(keys, positions)
        scores = queries @ keys.transpose(-2, -1) / layer.head_dim**0.5  # (N, h, L, L)
        if with_positions and self.position == "alibi":
            return scores + self._alibi_mask(layer, seq_len, x.dtype, x.device)  # (N, h, L, L)
        allowed = causal_mask(seq_len, device=x.device)  # (L, L)
        return scores.masked_fill(~allowed, float("-inf"))  # (N, h, L, L)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        x = self.embed(tokens)  # (N, L, E)
        if self.positionless_layers:  # the position embedding alone, to take out of a search
            added = x - self.embed(tokens, with_positions=False)  # (N, L, E), 0 if none added
        all_weights = []
        for index, layer in enumerate(self.layers):
            if index in self.positionless_layers:  # queries and keys without positions
                search = x - added  # (N, L, E); the values and the residual keep them
                out, weights = self.attend(layer, search, search, x, with_positions=False)
            else:
                out, weights = self.attend(layer, x, x, x)  # (N, L, E), (N, h, L, L)
            x = x + out  # (N, L, E) the residual stream
            all_weights.append(weights)
        return self.unembed(x), all_weights  # (N, L, V), layers x (N, h, L, L)


def sinusoidal_positions(
    seq_len: int, embed_dim: int, device: torch.device | str | None = None
) -> torch.Tensor:
    r"""The fixed position encoding of Vaswani et al.: sines and cosines of falling frequency.

    Math: :math:`PE_{p, 2i} = \sin(p / 10000^{2i/d})`, :math:`PE_{p, 2i+1} = \cos(p /
    10000^{2i/d})` for position :math:`p` and :math:`d` = ``embed_dim``.

    Args:
        seq_len: number of positions ``L``.
        embed_dim: features ``E`` (even).
        device: device of the table.

    Returns:
        ``(L, E)`` float32.

    Raises:
        ValueError: ``embed_dim`` is odd or a size is not positive.

    Source:
        Vaswani et al. 2017, "Attention Is All You Need", arXiv:1706.03762, Sec. 3.5.
    """
    if seq_len < 0 or embed_dim <= 0 or embed_dim % 2:
        raise ValueError(
            f"sinusoidal_positions needs seq_len >= 0 and a positive even embed_dim, got "
            f"seq_len={seq_len}, embed_dim={embed_dim}"
        )
    positions = torch.arange(seq_len, dtype=torch.float64, device=device)  # (L,)
    pair = torch.arange(embed_dim // 2, dtype=torch.float64, device=device)  # (E / 2,)
    angles = positions[:, None] * 10000.0 ** (-2.0 * pair / embed_dim)  # (L, E / 2)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (L, E) sin, cos, ..
    return table.float()


def _rotary_positions(seq_len: int, rotate: bool, device: torch.device) -> torch.Tensor:
    """``0 .. L - 1``, or all zeros (no rotation) when ``rotate`` is False: ``(L,)`` int64."""
    if rotate:
        return torch.arange(seq_len, device=device)  # (L,)
    return torch.zeros(seq_len, dtype=torch.long, device=device)  # (L,)


def _rotary_attention(
    layer: MultiHeadAttention,
    rope: RotaryEmbedding,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    need_weights: bool,
    rotate: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``layer``'s causal attention with its queries and keys rotated after the head split.

    The steps of ``MultiHeadAttention.forward`` (project, split heads, attend, merge, output
    projection) with one more, the rotation; ``layer``'s own parameters are used, so hooks on
    ``layer.out_proj`` (:func:`ablate_heads`) act here too. ``MultiHeadAttention`` itself has
    no rotary option: it is a drop-in for ``torch.nn.MultiheadAttention``, and PyTorch code
    that reads its weights (``to_torch()``, the fast path of ``nn.TransformerEncoderLayer``)
    would silently leave the rotation out.

    ``rotate=False`` puts every token at position 0 (no rotation): the intervention of
    ``positions.positions_removed``.

    Shape: query, key, value ``(N, L, E)``; returns ``(N, L, E)`` and ``(N, h, L, L)`` or None.
    """
    w_q, w_k, w_v = layer.projection_weights()
    b_q, b_k, b_v = layer.projection_biases()
    queries = split_heads(F.linear(query, w_q, b_q), layer.num_heads)  # (N, h, L, head_dim)
    keys = split_heads(F.linear(key, w_k, b_k), layer.num_heads)  # (N, h, L, head_dim)
    values = split_heads(F.linear(value, w_v, b_v), layer.num_heads)  # (N, h, L, head_dim)
    positions = _rotary_positions(query.shape[1], rotate, query.device)  # (L,)
    # positions built here are valid: the rotation without the public checks (as in the layers)
    queries = rope._rotate(queries, positions)  # (N, h, L, head_dim) rotated by their positions
    keys = rope._rotate(keys, positions)  # (N, h, L, head_dim)
    context, weights = scaled_dot_product_attention(
        queries, keys, values, is_causal=True, return_weights=True
    )  # (N, h, L, head_dim), (N, h, L, L)
    output = layer.out_proj(merge_heads(context))  # (N, L, E)
    return output, (weights if need_weights else None)


@contextlib.contextmanager
def ablate_heads(
    model: AttentionOnlyTransformer, heads: Sequence[tuple[int, int]]
) -> Iterator[None]:
    """Within the block, the given heads write nothing: their context is zeroed before ``W^O``.

    Zeroing head ``h``'s slice of the merged context removes exactly that head's term from the
    layer's output (the output projection's bias stays); see :mod:`mha_ref.tutorial.circuits`.

    Args:
        model: the model.
        heads: ``(layer, head)`` pairs, both 0-based.

    Raises:
        ValueError: a layer or head index is out of range.
    """
    handles = []
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        if not 0 <= layer < len(model.layers) or not 0 <= head < model.layers[layer].num_heads:
            raise ValueError(f"no head ({layer}, {head}) in a model of {len(model.layers)} layers")
        by_layer.setdefault(layer, []).append(head)
    for layer, head_list in by_layer.items():
        head_dim = model.layers[layer].head_dim

        def zero_heads(_module, args, head_list=head_list, head_dim=head_dim):
            merged = args[0].clone()  # (N, L, E) the heads' contexts side by side
            for h in head_list:
                merged[..., h * head_dim : (h + 1) * head_dim] = 0.0  # (N, L, head_dim)
            return (merged,)

        handles.append(model.layers[layer].out_proj.register_forward_pre_hook(zero_heads))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


# ------------------------------------------------------------------------------------------------
# measuring the heads
# ------------------------------------------------------------------------------------------------


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """Mean attention weight on the previous token (key ``t - 1``), per head.

    Args:
        weights: ``(N, h, L, L)`` attention weights of one layer.

    Returns:
        ``(h,)`` float64, averaged over all sequences and query positions ``t >= 1``.
    """
    on_previous = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # (N, h, L - 1)
    return on_previous.double().mean(dim=(0, 2))  # (h,)


def induction_score(weights: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """Mean weight on the token after the earlier occurrence of the current one, per head.

    In the second copy, query ``t`` holds the token seen at ``t - period``; an induction head
    attends to the token that came next, at key ``t - period + 1``.

    Args:
        weights: ``(N, h, L, L)`` attention weights of one layer.
        periods: ``(N,)`` segment lengths.

    Returns:
        ``(h,)`` float64, averaged over the second-copy queries of :func:`second_copy_mask`.
    """
    batch, num_heads, seq_len, _ = weights.shape
    queries = second_copy_mask(periods, seq_len)  # (N, L)
    positions = torch.arange(seq_len)  # (L,)
    keys = (positions[None, :] - periods[:, None] + 1).clamp(min=0)  # (N, L)
    index = keys[:, None, :, None].expand(batch, num_heads, seq_len, 1)  # (N, h, L, 1)
    on_key = weights.gather(-1, index).squeeze(-1)  # (N, h, L)
    chosen = queries[:, None, :].expand_as(on_key)  # (N, h, L)
    return (on_key * chosen).double().sum(dim=(0, 2)) / chosen[:, 0].sum()  # (h,)


def second_copy_accuracy(
    logits: torch.Tensor, tokens: torch.Tensor, periods: torch.Tensor
) -> float:
    """Fraction of second-copy positions whose next token is the arg-max of the logits.

    Args:
        logits: ``(N, L, V)``; tokens: ``(N, L)``; periods: ``(N,)``.

    Returns:
        a float in ``[0, 1]``, rounded to 6 decimals.
    """
    queries = second_copy_mask(periods, tokens.shape[1])[:, :-1]  # (N, L - 1)
    predicted = logits[:, :-1].argmax(dim=-1)  # (N, L - 1)
    correct = predicted[queries] == tokens[:, 1:][queries]  # (n,)
    return round(float(correct.double().mean()), 6)


def head_scores(
    model: AttentionOnlyTransformer, tokens: torch.Tensor, periods: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Previous-token and induction scores of every head of ``model`` on a batch.

    Args:
        model: the model; tokens: ``(N, L)``; periods: ``(N,)``.

    Returns:
        ``(previous, induction)``, each ``(num_layers, h)`` float64 (row = layer, 0-based).
    """
    with torch.no_grad():
        _, weights = model(tokens)  # layers x (N, h, L, L)
    previous = torch.stack([previous_token_score(w) for w in weights])  # (layers, h)
    induction = torch.stack([induction_score(w, periods) for w in weights])  # (layers, h)
    return previous, induction


def accuracy_with_ablation(
    model: AttentionOnlyTransformer,
    tokens: torch.Tensor,
    periods: torch.Tensor,
    heads: Sequence[tuple[int, int]] = (),
) -> float:
    """Second-copy accuracy of ``model`` with the ``(layer, head)`` pairs ablated.

    Args:
        model: the model; tokens: ``(N, L)``; periods: ``(N,)``.
        heads: heads to zero (:func:`ablate_heads`); empty = the full model.

    Returns:
        the accuracy of :func:`second_copy_accuracy`.
    """
    with torch.no_grad(), ablate_heads(model, heads):
        logits, _ = model(tokens)  # (N, L, V)
    return second_copy_accuracy(logits, tokens, periods)


def composition_ablation(
    model: AttentionOnlyTransformer,
    tokens: torch.Tensor,
    periods: torch.Tensor,
    head: int,
) -> dict[str, float]:
    """Second-copy accuracy with one layer-1 head removed from *one input* of layer 2 only.

    For a two-layer model: layer 2 gets the residual stream without the head's term as its
    query input (``"Q"``), its key input (``"K"``) or its value input (``"V"``), the other two
    inputs and the path to the unembedding keep the full stream. This measures which composition
    (Elhage et al. 2021: Q-, K- or V-composition) the head's output is used through.

    Args:
        model: a two-layer model; tokens: ``(N, L)``; periods: ``(N,)``.
        head: the layer-1 head (0-based).

    Returns:
        ``{"none": acc, "Q": acc, "K": acc, "V": acc}``, accuracies as in
        :func:`second_copy_accuracy`.

    Raises:
        ValueError: the model does not have two layers, or no such head.
    """
    if len(model.layers) != 2:
        raise ValueError(f"composition_ablation needs a 2-layer model, got {len(model.layers)}")
    first, second = model.layers
    with torch.no_grad():
        x0 = model.embed(tokens)  # (N, L, E)
        full = x0 + model.attend(first, x0, x0, x0, need_weights=False)[0]  # (N, L, E)
        with ablate_heads(model, [(0, head)]):
            without = x0 + model.attend(first, x0, x0, x0, need_weights=False)[0]
        inputs = {
            "none": (full, full, full),
            "Q": (without, full, full),
            "K": (full, without, full),
            "V": (full, full, without),
        }
        accuracies = {}
        for name, (q, k, v) in inputs.items():
            out = model.attend(second, q, k, v, need_weights=False)[0]  # (N, L, E)
            logits = model.unembed(full + out)  # (N, L, V)
            accuracies[name] = second_copy_accuracy(logits, tokens, periods)
    return accuracies


def corrupt_first_copy(
    tokens: torch.Tensor, periods: torch.Tensor, vocab_size: int, index: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A corrupted copy of each sequence for activation patching, and where to read it.

    Token ``index`` of the *first* copy of the segment (position ``c``) is replaced by the
    smallest token id absent from the sequence. In the second copy the same token returns at
    ``q = c + period``; there the clean model should predict the token after the first
    occurrence, ``tokens[c + 1]``. With the first occurrence changed, the induction head's key
    at ``c + 1`` (which holds "my previous token was ...") no longer matches, and the prediction
    at ``q`` should fail.

    Args:
        tokens: ``(N, L)`` from :func:`make_repeated_batch`; periods: ``(N,)``.
        vocab_size: token ids ``0 .. vocab_size - 1``; a sequence must leave one unused.
        index: which token of the first copy to change, ``0 .. min(periods) - 2``.

    Returns:
        ``(corrupted (N, L), changed (N,) = c, query (N,) = q)``, positions as int64.

    Raises:
        ValueError: ``index`` leaves no next token inside the first copy, or a sequence uses
            every token id.
    """
    if not 0 <= index <= int(periods.min()) - 2:
        raise ValueError(
            f"index must be in 0..{int(periods.min()) - 2} (the token after it must be in the "
            f"first copy), got {index}"
        )
    batch = torch.arange(len(tokens))  # (N,)
    start = tokens.shape[1] - 2 * periods  # (N,) first position of the first copy
    changed = start + index  # (N,)
    present = torch.zeros(len(tokens), vocab_size, dtype=torch.bool)  # (N, V)
    present[batch[:, None], tokens] = True
    if present.all(dim=1).any():
        raise ValueError("a sequence uses every token id; there is no token to corrupt with")
    new_token = (~present).int().argmax(dim=1)  # (N,) smallest absent id
    corrupted = tokens.clone()  # (N, L)
    corrupted[batch, changed] = new_token
    return corrupted, changed, changed + periods


def patched_logits(
    model: AttentionOnlyTransformer,
    clean: torch.Tensor,
    corrupted: torch.Tensor,
    *,
    head: tuple[int, int] | None = None,
    position: torch.Tensor | None = None,
) -> torch.Tensor:
    """Activation patching: run ``corrupted``, with one activation taken from the ``clean`` run.

    * ``head=(layer, h)``: that head's term of its layer's output (every position,
      :func:`mha_ref.tutorial.circuits.head_outputs`) comes from the clean run;
    * ``position``: ``(N,)`` one position per sequence at which the residual stream *after
      layer 1* comes from the clean run (what later layers read there);
    * neither: the plain corrupted run (equal to ``model(corrupted)``).

    Everything downstream of the patched activation is recomputed on the corrupted run. Only
    for the ``"learned"``, ``"sinusoidal"`` and ``"none"`` position schemes (the layers see a
    causal mask only) and two-layer models.

    Source: the clean/corrupted patching of Meng et al. 2022 ("Locating and Editing Factual
    Associations in GPT", causal tracing) and Wang et al. 2022 (path patching), applied here
    to heads and positions.

    Returns:
        ``(N, L, V)`` logits.

    Raises:
        ValueError: both ``head`` and ``position`` given, another position scheme, or a model
            that does not have two layers.
    """
    from mha_ref.masks import causal_mask
    from mha_ref.tutorial.circuits import head_outputs

    if head is not None and position is not None:
        raise ValueError("patch one thing at a time: pass head or position, not both")
    if model.position not in ("learned", "sinusoidal", "none") or model.positionless_layers:
        raise ValueError(f"patched_logits covers position schemes with a causal mask only, "
                         f"got position={model.position!r}")
    if len(model.layers) != 2:
        raise ValueError(f"patched_logits needs a 2-layer model, got {len(model.layers)}")
    seq_len = clean.shape[1]
    blocked = ~causal_mask(seq_len, device=clean.device)  # (L, L), True = blocked

    def terms(layer: int, x: torch.Tensor) -> torch.Tensor:
        module = model.layers[layer]
        return head_outputs(module, x, x, x, blocked)  # (N, h, L, E)

    with torch.no_grad():
        x0_clean, x0 = model.embed(clean), model.embed(corrupted)  # (N, L, E) each
        first = model.layers[0]
        t1 = terms(0, x0)  # (N, h, L, E)
        if head is not None and head[0] == 0:
            t1[:, head[1]] = terms(0, x0_clean)[:, head[1]]
        x1 = x0 + t1.sum(dim=1) + first.out_proj.bias  # (N, L, E)
        if position is not None:
            x1_clean = x0_clean + terms(0, x0_clean).sum(dim=1) + first.out_proj.bias
            batch = torch.arange(len(clean))  # (N,)
            x1 = x1.clone()
            x1[batch, position] = x1_clean[batch, position]  # (N, E)
        second = model.layers[1]
        t2 = terms(1, x1)  # (N, h, L, E)
        if head is not None and head[0] == 1:
            x1_clean = x0_clean + terms(0, x0_clean).sum(dim=1) + first.out_proj.bias
            t2[:, head[1]] = terms(1, x1_clean)[:, head[1]]
        x2 = x1 + t2.sum(dim=1) + second.out_proj.bias  # (N, L, E)
        return model.unembed(x2)  # (N, L, V)
