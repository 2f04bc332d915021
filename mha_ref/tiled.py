r"""Attention computed block by block over the keys with the online softmax (FlashAttention's idea).

The full computation holds all the scores of a query row, ``(..., L, S)``, before the softmax.
The online softmax never does: it walks over the keys in blocks of ``block_size`` (a few
block-sized temporaries alive at a time) and keeps, per query row, three running quantities:

.. code-block:: text

    running_max  m   # (..., L, 1)          largest score seen so far
    running_sum  l   # (..., L, 1)          sum of exp(score - m) seen so far
    output       o   # (..., L, value_dim)  sum of exp(score - m) * value seen so far

When a new block raises the maximum from ``m`` to ``m'``, everything accumulated so far was
computed relative to the old maximum; multiplying it by ``exp(m - m')`` rescales it to the new
one. After the last block, ``o / l`` is exactly ``softmax(scores) @ value``: no approximation,
only a different order of the same additions.
"""

from __future__ import annotations

import torch

from mha_ref import _validation as check
from mha_ref.functional import (
    _and_causal,
    _apply_mask,
    _autocast_inputs,
    _check_sdpa_inputs,
    _compute_dtype,
    _default_scale,
)

__all__ = ["tiled_attention"]


def tiled_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    *,
    scale: float | torch.Tensor | None = None,
    block_size: int = 128,
) -> torch.Tensor:
    r"""Scaled dot-product attention over key blocks with a running max, sum and output.

    Math: for each key block :math:`B` with scores :math:`s_{ij}` (:math:`j \in B`),

    .. math::

        m' = \max(m, \max_{j \in B} s_{ij}),\quad
        l' = e^{m - m'} l + \sum_{j \in B} e^{s_{ij} - m'},\quad
        o' = e^{m - m'} o + \sum_{j \in B} e^{s_{ij} - m'} v_j,

    starting from :math:`m = -\infty, l = 0, o = 0`; the result is :math:`o / l`. It equals
    ``scaled_dot_product_attention(query, key, value, attn_mask, is_causal=is_causal,
    scale=scale)`` up to rounding (in ``float64`` to about ``1e-15``), whatever ``block_size``,
    including a ``block_size`` that does not divide ``key_len``.

    Memory grows with ``block_size``, not with ``S``: within a block the scores, the scores
    minus the running maximum and their exponentials are alive together, so about three
    tensors of shape ``(..., L, block_size)``, plus ``O(L * head_dim)`` (a scaled copy of the
    queries, the output, the running statistics), instead of the ``(..., L, S)`` scores and
    weights of the full computation; with ``block_size = S`` it saves nothing. FlashAttention
    also tiles the queries and keeps the blocks in on-chip memory; that part is about hardware
    and is not reproduced here. Autograd goes through the
    loop (the backward pass keeps every block's intermediates; FlashAttention recomputes them).

    Masks follow ``scaled_dot_product_attention``: a bool ``attn_mask`` is ``True`` where the
    query **may attend**, a float mask is added to the scores, ``is_causal=True`` applies the
    top-left causal triangle (together with ``attn_mask``, if given). A row whose keys are all
    blocked gets output ``0``, as in ``scaled_dot_product_attention``: its running sum stays
    ``0``. No dropout (the online softmax is an inference and training kernel trick; use
    ``scaled_dot_product_attention`` for dropout).

    Args:
        query: Queries.
        key: Keys.
        value: Values.
        attn_mask: Optional bool or float mask, broadcastable to ``(..., L, S)``.
        is_causal: Apply the top-left causal mask; a ``bool``, as in
            ``scaled_dot_product_attention``. Default: ``False``.
        scale: Factor multiplying the scores, a finite real number or a 0-d tensor.
            Default: ``1 / sqrt(head_dim)``.
        block_size: Keys per block, a positive int. Default: ``128``.

    Shape:
        - query: ``(..., L, head_dim)``; ``...`` are batch dimensions (e.g. batch, heads).
        - key: ``(..., S, head_dim)``.
        - value: ``(..., S, value_dim)``.
        - attn_mask: broadcastable to ``(..., L, S)``.
        - Output: ``(..., L, value_dim)``, the dtype of ``query``.
        - dtypes: ``query``, ``key``, ``value`` share one floating-point dtype; ``float16`` and
          ``bfloat16`` are computed in ``float32``, as in ``scaled_dot_product_attention``.

    Returns:
        torch.Tensor: The attention output.

    Raises:
        TypeError: If an input is not a floating-point tensor, a mask is neither bool nor float,
            ``is_causal`` is not a ``bool``, or ``block_size`` is not an int.
        ValueError: If shapes or devices do not fit, ``scale`` is not finite, or
            ``block_size`` is not positive.

    Source:
        Milakov & Gimelshein 2018, "Online normalizer calculation for softmax",
        arXiv:1805.02867, Algorithm 3; Dao et al. 2022, "FlashAttention", arXiv:2205.14135,
        Sec. 3.1 (tiling).
    """
    query, key, value, attn_mask = _autocast_inputs(query, key, value, attn_mask)
    _check_sdpa_inputs(query, key, value, attn_mask, 0.0, is_causal, scale, False)
    check.require_positive_int("block_size", block_size, "number of keys per block")
    scale = _default_scale(query.shape[-1]) if scale is None else float(scale)
    return _tiled_attention(query, key, value, attn_mask, is_causal, scale, block_size)


def _tiled_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    scale: float,
    block_size: int,
) -> torch.Tensor:
    """The online-softmax loop on checked inputs (see ``tiled_attention``)."""
    compute_dtype = _compute_dtype(query.dtype)
    query_len, key_len = query.shape[-2], key.shape[-2]
    query_c = query.to(compute_dtype) * scale  # (..., L, head_dim)
    key_c = key.to(compute_dtype)  # (..., S, head_dim)
    value_c = value.to(compute_dtype)  # (..., S, value_dim)
    batch_dims = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    stats_shape = (*batch_dims, query_len, 1)
    running_max = query_c.new_full(stats_shape, float("-inf"))  # (..., L, 1)
    running_sum = query_c.new_zeros(stats_shape)  # (..., L, 1)
    output = query_c.new_zeros((*batch_dims, query_len, value.shape[-1]))  # (..., L, value_dim)
    query_positions = torch.arange(query_len, device=query.device)[:, None]  # (L, 1)
    for start in range(0, key_len, block_size):
        stop = min(start + block_size, key_len)
        key_block = key_c[..., start:stop, :]  # (..., block, head_dim)
        value_block = value_c[..., start:stop, :]  # (..., block, value_dim)
        scores = query_c @ key_block.transpose(-2, -1)  # (..., L, block)
        mask_block = _mask_block(attn_mask, start, stop)  # broadcastable to (..., L, block)
        if is_causal:
            key_positions = torch.arange(start, stop, device=query.device)  # (block,)
            allowed = key_positions <= query_positions  # (L, block), top-left
            mask_block = allowed if mask_block is None else _and_causal(mask_block, allowed)
        if mask_block is not None:
            scores = _apply_mask(scores, mask_block)  # (..., L, block), blocked -> -inf
        block_max = scores.amax(dim=-1, keepdim=True)  # (..., L, 1)
        new_max = torch.maximum(running_max, block_max)  # (..., L, 1)
        # rows with no allowed key so far keep max -inf; subtract 0 there instead (no NaN)
        safe_max = new_max.masked_fill(torch.isneginf(new_max), 0.0)  # (..., L, 1)
        correction = torch.exp(running_max - safe_max)  # (..., L, 1), rescales the old sums
        probs = torch.exp(scores - safe_max)  # (..., L, block), unnormalised weights
        running_sum = running_sum * correction + probs.sum(dim=-1, keepdim=True)  # (..., L, 1)
        output = output * correction + probs @ value_block  # (..., L, value_dim)
        running_max = new_max  # (..., L, 1)
    has_keys = running_sum > 0  # (..., L, 1), False for fully masked rows
    output = torch.where(has_keys, output / running_sum.masked_fill(~has_keys, 1.0), 0.0)
    return output.to(query.dtype)  # (..., L, value_dim)


def _mask_block(attn_mask: torch.Tensor | None, start: int, stop: int) -> torch.Tensor | None:
    """The columns ``start:stop`` of a mask broadcastable to ``(..., L, S)``.

    A mask whose key dimension is 1 (broadcast over the keys) is the same for every block.
    """
    if attn_mask is None or attn_mask.dim() == 0 or attn_mask.shape[-1] == 1:
        return attn_mask
    return attn_mask[..., start:stop]  # (..., L, block)
