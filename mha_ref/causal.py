"""From one causal head to many: the textbook progression, one idea per class.

1. ``CausalAttention``: one head with trainable ``W_query``, ``W_key``, ``W_value``, a causal
   mask and dropout on the attention weights.
2. ``MultiHeadAttentionWrapper``: several independent ``CausalAttention`` heads whose outputs
   are concatenated.
3. ``CausalMultiHeadAttention``: the same computation batched over heads (one projection per
   role, split into heads), followed by an output projection ``out_proj``.

``wrapper_to_batched`` copies a wrapper's weights into the batched module and shows that the
two compute the same numbers.

**Two meanings of ``d_out``** (a frequent source of confusion in the textbook):

* in ``CausalAttention`` and ``MultiHeadAttentionWrapper``, ``d_out`` is the width of **one
  head**; the wrapper's output has ``num_heads * d_out`` features;
* in ``CausalMultiHeadAttention``, ``d_out`` is the **total** width of all heads together;
  each head has ``head_dim = d_out // num_heads`` features and the output has ``d_out``.
"""

from __future__ import annotations

import torch
from torch import nn

from mha_ref import _validation as check
from mha_ref.functional import _attention, _default_scale, _merge_heads, _split_heads
from mha_ref.masks import causal_mask

__all__ = [
    "CausalAttention",
    "MultiHeadAttentionWrapper",
    "CausalMultiHeadAttention",
    "wrapper_to_batched",
]


def _check_causal_arguments(
    d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int = 1
) -> None:
    """Validate the constructor arguments shared by the three causal modules."""
    check.require_positive_int("d_in", d_in, "features per input token")
    check.require_positive_int("d_out", d_out, "output features")
    check.require_positive_int("context_length", context_length, "longest supported sequence")
    check.require_probability("dropout", dropout)
    check.require_positive_int("num_heads", num_heads, "number of heads")


def _check_causal_input(x: object, d_in: int, context_length: int, weight: torch.Tensor):
    """Validate the input of a causal module: a (batch, num_tokens, d_in) float tensor."""
    check.require_tensor("x", x)
    check.require_rank("x", x, (3,), "(batch, num_tokens, d_in)")
    check.require_floating("x", x)
    check.require_feature_size("x", x, d_in, "d_in")
    check.require_matching_dtype("x", x, weight.dtype)
    check.require_matching_device("x", x, weight.device)
    check.require_within_context(x.shape[1], context_length)


class CausalAttention(nn.Module):
    r"""One causal self-attention head with trainable weights (the textbook's single head).

    Math: :math:`\mathrm{softmax}\!\left(\frac{(XW_q)(XW_k)^\top}{\sqrt{d_{out}}} + M\right)
    (XW_v)`, where :math:`M` is :math:`-\infty` above the diagonal (a token cannot look at
    later tokens).

    Parameters are created in the order ``W_query``, ``W_key``, ``W_value`` (each
    ``nn.Linear(d_in, d_out, bias=qkv_bias)``), so that ``torch.manual_seed(123)`` before
    construction reproduces the textbook's numbers.

    The causal mask is a non-persistent bool buffer ``causal_mask`` (``True`` = may attend) of
    shape ``(context_length, context_length)``; it is rebuilt from ``context_length`` and not
    stored in the ``state_dict``. The textbook instead stores a float buffer ``mask`` (``1`` =
    blocked); to load such a checkpoint, drop its ``"mask"`` entry first.

    Args:
        d_in: Features per input token.
        d_out: Features of this head's output (the width of **one head**).
        context_length: Longest sequence the module accepts (size of the causal mask).
        dropout: Dropout probability on the attention weights, in ``[0, 1)``.
        qkv_bias: Add a bias to the query, key and value projections. Default: ``False``.

    Shape:
        - Input ``x``: ``(batch, num_tokens, d_in)`` with ``num_tokens <= context_length``.
        - Output: ``(batch, num_tokens, d_out)``.

    Raises:
        TypeError: If a size is not an int, or ``x`` has the wrong type or dtype.
        ValueError: If a size is not positive, ``dropout`` is outside ``[0, 1)``, or ``x`` has
            the wrong shape or more than ``context_length`` tokens.

    Source:
        S. Raschka, "Build a Large Language Model (From Scratch)", ch. 3.5 (``CausalAttention``),
        rasbt/LLMs-from-scratch ``ch03``; Vaswani et al. 2017, arXiv:1706.03762, Sec. 3.2.1.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        qkv_bias: bool = False,
    ) -> None:
        _check_causal_arguments(d_in, d_out, context_length, dropout)
        super().__init__()
        self.d_in = d_in
        self.d_out = d_out
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("causal_mask", causal_mask(context_length), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend from every token to itself and the tokens before it.

        Args:
            x: Input token vectors, shape ``(batch, num_tokens, d_in)``.

        Returns:
            torch.Tensor: Context vectors, shape ``(batch, num_tokens, d_out)``.
        """
        _check_causal_input(x, self.d_in, self.context_length, self.W_query.weight)
        num_tokens = x.shape[1]
        queries = self.W_query(x)  # (batch, num_tokens, d_out)
        keys = self.W_key(x)  # (batch, num_tokens, d_out)
        values = self.W_value(x)  # (batch, num_tokens, d_out)

        attn_scores = queries @ keys.transpose(1, 2)  # (batch, num_tokens, num_tokens)
        allowed = self.causal_mask[:num_tokens, :num_tokens]  # (num_tokens, num_tokens)
        attn_scores = attn_scores.masked_fill(~allowed, float("-inf"))  # same shape
        scaled_scores = attn_scores / keys.shape[-1] ** 0.5  # (batch, num_tokens, num_tokens)
        attn_weights = torch.softmax(scaled_scores, dim=-1)  # (batch, num_tokens, num_tokens)
        attn_weights = self.dropout(attn_weights)  # (batch, num_tokens, num_tokens)
        context_vec = attn_weights @ values  # (batch, num_tokens, d_out)
        return context_vec


class MultiHeadAttentionWrapper(nn.Module):
    """Several independent ``CausalAttention`` heads, outputs concatenated along features.

    Math: :math:`\\mathrm{Concat}(\\mathrm{head}_1, \\dots, \\mathrm{head}_h)` with
    :math:`\\mathrm{head}_i = \\mathrm{CausalAttention}_i(X)`; there is no output projection.

    The heads are created one after the other, each creating its ``W_query``, ``W_key``,
    ``W_value`` in that order, as in the textbook.

    Args:
        d_in: Features per input token.
        d_out: Features of **each head's** output. The wrapper outputs ``num_heads * d_out``.
        context_length: Longest sequence the module accepts.
        dropout: Dropout probability on the attention weights, in ``[0, 1)``.
        num_heads: Number of heads.
        qkv_bias: Add a bias to the query, key and value projections. Default: ``False``.

    Shape:
        - Input ``x``: ``(batch, num_tokens, d_in)``.
        - Output: ``(batch, num_tokens, num_heads * d_out)``.

    Raises:
        TypeError: If a size is not an int, or ``x`` has the wrong type or dtype.
        ValueError: If a size is not positive, ``dropout`` is outside ``[0, 1)``, or ``x`` has
            the wrong shape or more than ``context_length`` tokens.

    Source:
        S. Raschka, "Build a Large Language Model (From Scratch)", ch. 3.6.1
        (``MultiHeadAttentionWrapper``); Vaswani et al. 2017, arXiv:1706.03762, Sec. 3.2.2.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
    ) -> None:
        _check_causal_arguments(d_in, d_out, context_length, dropout, num_heads)
        super().__init__()
        self.heads = nn.ModuleList(
            [
                CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                for _ in range(num_heads)
            ]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run every head on ``x`` and concatenate their outputs.

        Args:
            x: Input token vectors, shape ``(batch, num_tokens, d_in)``.

        Returns:
            torch.Tensor: Shape ``(batch, num_tokens, num_heads * d_out)``.
        """
        head_outputs = [head(x) for head in self.heads]  # num_heads x (batch, num_tokens, d_out)
        return torch.cat(head_outputs, dim=-1)  # (batch, num_tokens, num_heads * d_out)


class CausalMultiHeadAttention(nn.Module):
    r"""Causal multi-head self-attention batched over heads, with an output projection.

    Math: :math:`\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots,
    \mathrm{head}_h) W^O`, :math:`\mathrm{head}_i = \mathrm{softmax}\!\left(
    \frac{Q_i K_i^\top}{\sqrt{d_{head}}} + M\right) V_i`, with :math:`Q = XW_q` split into
    ``num_heads`` slices of ``head_dim`` features (likewise :math:`K`, :math:`V`).

    Parameters are created in the order ``W_query``, ``W_key``, ``W_value`` (each
    ``nn.Linear(d_in, d_out, bias=qkv_bias)``), then ``out_proj = nn.Linear(d_out, d_out)``, as
    in the textbook, so seeded construction reproduces its numbers.

    Args:
        d_in: Features per input token.
        d_out: **Total** output features of all heads together (not per head);
            ``head_dim = d_out // num_heads``.
        context_length: Longest sequence the module accepts.
        dropout: Dropout probability on the attention weights, in ``[0, 1)``.
        num_heads: Number of heads; must divide ``d_out``.
        qkv_bias: Add a bias to the query, key and value projections. Default: ``False``.

    Shape:
        - Input ``x``: ``(batch, num_tokens, d_in)``.
        - Output: ``(batch, num_tokens, d_out)``.

    Raises:
        TypeError: If a size is not an int, or ``x`` has the wrong type or dtype.
        ValueError: If a size is not positive, ``d_out`` is not divisible by ``num_heads``,
            ``dropout`` is outside ``[0, 1)``, or ``x`` has the wrong shape or more than
            ``context_length`` tokens.

    Source:
        S. Raschka, "Build a Large Language Model (From Scratch)", ch. 3.6.2
        (``MultiHeadAttention``); Vaswani et al. 2017, arXiv:1706.03762, Sec. 3.2.2.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
    ) -> None:
        _check_causal_arguments(d_in, d_out, context_length, dropout, num_heads)
        check.require_divisible_heads(d_out, num_heads, embed_name="d_out")
        super().__init__()
        self.d_in = d_in
        self.d_out = d_out
        self.context_length = context_length
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("causal_mask", causal_mask(context_length), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Project, split into heads, attend causally, merge heads, project out.

        Args:
            x: Input token vectors, shape ``(batch, num_tokens, d_in)``.

        Returns:
            torch.Tensor: Shape ``(batch, num_tokens, d_out)``.
        """
        _check_causal_input(x, self.d_in, self.context_length, self.W_query.weight)
        num_tokens = x.shape[1]
        queries = self.W_query(x)  # (batch, num_tokens, d_out)
        keys = self.W_key(x)  # (batch, num_tokens, d_out)
        values = self.W_value(x)  # (batch, num_tokens, d_out)
        queries = _split_heads(queries, self.num_heads)  # (batch, num_heads, num_tokens, head_dim)
        keys = _split_heads(keys, self.num_heads)  # (batch, num_heads, num_tokens, head_dim)
        values = _split_heads(values, self.num_heads)  # (batch, num_heads, num_tokens, head_dim)

        allowed = self.causal_mask[:num_tokens, :num_tokens]  # (num_tokens, num_tokens)
        dropout_p = self.dropout.p if self.training else 0.0
        context, _ = _attention(
            queries, keys, values, allowed, dropout_p, scale=_default_scale(self.head_dim)
        )  # (batch, num_heads, num_tokens, head_dim); the weights are not needed
        context_vec = _merge_heads(context)  # (batch, num_tokens, d_out)
        return self.out_proj(context_vec)  # (batch, num_tokens, d_out)


def wrapper_to_batched(wrapper: MultiHeadAttentionWrapper) -> CausalMultiHeadAttention:
    """Copy a ``MultiHeadAttentionWrapper`` into an equivalent ``CausalMultiHeadAttention``.

    Math: stacking the heads' projection matrices row-wise,
    :math:`W_q = [W_{q,1}; \\dots; W_{q,h}]` (likewise :math:`W_k`, :math:`W_v`), puts head
    ``i``'s features in slice ``i`` of the batched projection, which is exactly what
    ``split_heads`` hands to head ``i``. Setting ``out_proj`` to the identity (weight ``I``,
    bias ``0``) leaves the concatenation unchanged, so both modules compute the same output.

    The new module has ``d_out = num_heads * wrapper_head_width`` (its total width), the same
    ``context_length``, dropout probability, dtype, device and training mode.

    Args:
        wrapper: The module to convert.

    Shape:
        Both modules map ``(batch, num_tokens, d_in)`` to
        ``(batch, num_tokens, num_heads * d_out_per_head)``.

    Returns:
        CausalMultiHeadAttention: A new module; the wrapper is not modified.

    Raises:
        TypeError: If ``wrapper`` is not a ``MultiHeadAttentionWrapper``.

    Source:
        S. Raschka, "Build a Large Language Model (From Scratch)", ch. 3.6.2 (the batched module
        computes the wrapper's heads in one matrix multiplication).
    """
    if not isinstance(wrapper, MultiHeadAttentionWrapper):
        raise TypeError(
            f"wrapper must be a MultiHeadAttentionWrapper, got {type(wrapper).__name__}. "
            f"Build one with MultiHeadAttentionWrapper(d_in, d_out, context_length, dropout, "
            f"num_heads)."
        )
    first_head = wrapper.heads[0]
    num_heads = len(wrapper.heads)
    weight = first_head.W_query.weight
    batched = CausalMultiHeadAttention(
        d_in=first_head.d_in,
        d_out=num_heads * first_head.d_out,
        context_length=first_head.context_length,
        dropout=first_head.dropout.p,
        num_heads=num_heads,
        qkv_bias=first_head.W_query.bias is not None,
    ).to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        for role in ("W_query", "W_key", "W_value"):
            head_layers = [getattr(head, role) for head in wrapper.heads]
            target = getattr(batched, role)
            target.weight.copy_(torch.cat([layer.weight for layer in head_layers], dim=0))
            if target.bias is not None:
                target.bias.copy_(torch.cat([layer.bias for layer in head_layers], dim=0))
        batched.out_proj.weight.copy_(torch.eye(batched.d_out))  # (d_out, d_out) identity
        batched.out_proj.bias.zero_()  # (d_out,)
    batched.train(wrapper.training)
    return batched
