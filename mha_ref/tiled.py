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

__all__ = ["tiled_attention", "attention_weights_from_lse"]


def tiled_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    *,
    scale: float | torch.Tensor | None = None,
    block_size: int = 128,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
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
    blocked gets output ``0``, as in ``scaled_dot_product_attention``: its running maximum
    stays ``-inf``. A NaN in a query or key gives NaN in the rows it reaches, as there. No
    dropout (the online softmax is an inference and training kernel trick; use
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
        return_lse: Also return the log-sum-exp of each query row's scores,
            ``running_max + log(running_sum)``, what fused kernels (FlashAttention,
            FlexAttention) keep for the backward pass; ``-inf`` for a row with no allowed key.
            :func:`attention_weights_from_lse` rebuilds the weights from it. Default:
            ``False``.

    Shape:
        - query: ``(..., L, head_dim)``; ``...`` are batch dimensions (e.g. batch, heads).
        - key: ``(..., S, head_dim)``.
        - value: ``(..., S, value_dim)``.
        - attn_mask: broadcastable to ``(..., L, S)``.
        - Output: ``(..., L, value_dim)``, the dtype of ``query``; lse ``(..., L)`` in the
          compute dtype (``float32`` for 16-bit inputs).
        - dtypes: ``query``, ``key``, ``value`` share one floating-point dtype; ``float16`` and
          ``bfloat16`` are computed in ``float32``, as in ``scaled_dot_product_attention``.

    Returns:
        torch.Tensor or tuple[torch.Tensor, torch.Tensor]: The attention output, or
        ``(output, lse)`` when ``return_lse=True``.

    Raises:
        TypeError: If an input is not a floating-point tensor, a mask is neither bool nor float,
            ``is_causal`` or ``return_lse`` is not a ``bool``, or ``block_size`` is not an int.
        ValueError: If shapes or devices do not fit, ``scale`` is not finite, or
            ``block_size`` is not positive.

    Source:
        Milakov & Gimelshein 2018, "Online normalizer calculation for softmax",
        arXiv:1805.02867, Algorithm 3 (the running maximum and normaliser); Rabe & Staats
        2021, "Self-attention Does Not Need O(n^2) Memory", arXiv:2112.05682 (the
        running output accumulator over key chunks); Dao et al. 2022, "FlashAttention",
        arXiv:2205.14135, Sec. 3.1 (tiling).
    """
    query, key, value, attn_mask = _autocast_inputs(query, key, value, attn_mask)
    _check_sdpa_inputs(query, key, value, attn_mask, 0.0, is_causal, scale, False)
    check.require_positive_int("block_size", block_size, "number of keys per block")
    check.require_bool("return_lse", return_lse)
    scale = _default_scale(query.shape[-1]) if scale is None else float(scale)
    output, lse = _tiled_attention(query, key, value, attn_mask, is_causal, scale, block_size)
    return (output, lse) if return_lse else output


def _tiled_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    scale: float,
    block_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The online-softmax loop on checked inputs: ``(output, lse)`` (see ``tiled_attention``)."""
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
    # a row with no allowed key keeps max -inf (output 0); a NaN score makes the max NaN, and
    # the NaN reaches the output, as in scaled_dot_product_attention
    no_keys = torch.isneginf(running_max)  # (..., L, 1), True for fully masked rows
    normaliser = running_sum.masked_fill(no_keys, 1.0)  # (..., L, 1), no division by 0
    output = torch.where(no_keys, 0.0, output / normaliser)  # (..., L, value_dim)
    lse = (running_max + torch.log(running_sum)).squeeze(-1)  # (..., L), -inf if no key
    return output.to(query.dtype), lse  # (..., L, value_dim), (..., L)


def attention_weights_from_lse(
    query: torch.Tensor,
    key: torch.Tensor,
    lse: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
) -> torch.Tensor:
    r"""Rebuild the attention weights a fused kernel does not return, from its log-sum-exp.

    Math: :math:`w_{ij} = \exp(s_{ij} - \mathrm{lse}_i)` with
    :math:`\mathrm{lse}_i = \log \sum_k e^{s_{ik}}`: the softmax needs nothing else once the
    normaliser is known. Fused kernels (FlashAttention, FlexAttention with
    ``return_aux=AuxRequest(lse=True)``, ``tiled_attention(..., return_lse=True)``) keep
    ``lse`` for their backward pass, so the weights of any block of queries can be recomputed
    later from the queries, the keys and one number per query, without storing ``L x S``
    weights. Pass the same mask and scale as the kernel; blocked positions and rows whose
    ``lse`` is ``-inf`` get weight ``0``.

    Args:
        query: Queries.
        key: Keys.
        lse: Log-sum-exp of each query row's (scaled, masked) scores.
        attn_mask: The kernel's bool (``True`` = may attend) or float mask, if any.
        is_causal: The kernel's ``is_causal`` (top-left), a ``bool``.
        scale: The kernel's scale. Default: ``1 / sqrt(head_dim)``.

    Shape:
        - query: ``(..., L, head_dim)``; key: ``(..., S, head_dim)``; lse: ``(..., L)``.
        - Output: ``(..., L, S)``, the dtype of ``query``.

    Returns:
        torch.Tensor: The attention weights; each row sums to one (zero for empty rows).

    Raises:
        TypeError: If an input is not a floating-point tensor or ``is_causal`` not a ``bool``.
        ValueError: If ``lse``'s shape does not match the queries, or shapes do not fit.

    Source:
        Dao et al. 2022, "FlashAttention", arXiv:2205.14135, Sec. 3.1 and Algorithm 2
        (the statistics saved for the backward pass); Rabe & Staats 2021, "Self-attention
        Does Not Need O(n^2) Memory", arXiv:2112.05682.
    """
    _check_sdpa_inputs(query, key, key, attn_mask, 0.0, is_causal, scale, False)
    check.require_tensor("lse", lse)
    check.require_floating("lse", lse)
    if tuple(lse.shape) != tuple(query.shape[:-1]):
        raise ValueError(
            f"lse must have shape query.shape[:-1] = {tuple(query.shape[:-1])}, one number per "
            f"query row, got lse.shape={tuple(lse.shape)}."
        )
    scale = _default_scale(query.shape[-1]) if scale is None else float(scale)
    compute_dtype = _compute_dtype(query.dtype)
    scores = query.to(compute_dtype) @ key.to(compute_dtype).transpose(-2, -1) * scale
    if is_causal:
        positions = torch.arange(query.shape[-2], device=query.device)[:, None]  # (L, 1)
        allowed = torch.arange(key.shape[-2], device=query.device) <= positions  # (L, S)
        attn_mask = allowed if attn_mask is None else _and_causal(attn_mask, allowed)
    if attn_mask is not None:
        scores = _apply_mask(scores, attn_mask)  # (..., L, S), blocked -> -inf
    lse = lse.to(compute_dtype)[..., None]  # (..., L, 1)
    empty = torch.isneginf(lse)  # (..., L, 1), rows with no allowed key
    weights = torch.exp(scores - lse.masked_fill(empty, 0.0))  # (..., L, S)
    return weights.masked_fill(empty | torch.isneginf(scores), 0.0).to(query.dtype)


def _mask_block(attn_mask: torch.Tensor | None, start: int, stop: int) -> torch.Tensor | None:
    """The columns ``start:stop`` of a mask broadcastable to ``(..., L, S)``.

    A mask whose key dimension is 1 (broadcast over the keys) is the same for every block.
    """
    if attn_mask is None or attn_mask.dim() == 0 or attn_mask.shape[-1] == 1:
        return attn_mask
    return attn_mask[..., start:stop]  # (..., L, block)
