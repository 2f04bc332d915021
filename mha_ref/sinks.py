r"""Giving a head a way to attend to nothing: a sink logit per head, or softmax plus one.

The softmax's weights over the keys always sum to one, so a head that has nothing useful to
read for a token must still put its weight somewhere; trained models park it on the first tokens
(the "attention sinks" of Xiao et al. 2023). Adding one more logit that belongs to no key
removes the constraint: the weights over the real keys then sum to less than one, and the
missing mass reads a value of zero.

.. code-block:: text

    weights_j = exp(s_j) / (exp(sink) + sum_k exp(s_k))   # per head, sink learned (gpt-oss)
    sink = 0:   exp(s_j) / (1 + sum_k exp(s_k))           # "softmax plus one" (Miller 2023)

``torch.nn.MultiheadAttention(add_zero_attn=True)`` is a third form: a key and value of zeros
appended to every sequence, i.e. a sink logit of ``0`` whose value is ``0`` *before* the
output projection's bias (its score against any query is ``0``).
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
    _softmax_over_keys,
)
from mha_ref.masks import _causal_mask

__all__ = ["softmax_plus_one", "attention_with_sink"]


def softmax_plus_one(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""Softmax with an extra ``1`` in the denominator: the weights may sum to less than one.

    Math: :math:`w_j = e^{s_j} / (1 + \sum_k e^{s_k})`, computed stably as
    :math:`e^{s_j - m} / (e^{-m} + \sum_k e^{s_k - m})` with :math:`m = \max(0, \max_k s_k)`.
    It is ``attention_with_sink``'s weights with a sink logit of ``0``. A row of ``-inf``
    gives weights ``0``.

    Args:
        scores: Attention scores (after scaling and masking).
        dim: Dimension of the keys. Default: ``-1``.

    Shape:
        Any shape; the output has the same shape and dtype.

    Returns:
        torch.Tensor: Non-negative weights whose sum along ``dim`` is below one.

    Raises:
        TypeError: If ``scores`` is not a floating-point tensor.

    Source:
        Miller 2023, "Attention Is Off By One" (blog post, ``softmax_1``); Xiao et al. 2023,
        arXiv:2309.17453, Sec. 3.3 (a learnable sink token / "SoftMax-off-by-One").
    """
    check.require_tensor("scores", scores)
    check.require_floating("scores", scores)
    top = scores.amax(dim=dim, keepdim=True).clamp(min=0.0)  # (..., 1, ...), max(0, max_k s_k)
    exps = torch.exp(scores - top)  # same shape as scores
    return exps / (torch.exp(-top) + exps.sum(dim=dim, keepdim=True))  # same shape as scores


def attention_with_sink(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    sink_logits: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Scaled dot-product attention with one extra logit per head that belongs to no key.

    Math: for head :math:`h` with sink logit :math:`b_h`,
    :math:`w_{ij} = e^{s_{ij}} / (e^{b_h} + \sum_k e^{s_{ik}})` and
    :math:`o_i = \sum_j w_{ij} v_j`: the sink's share :math:`1 - \sum_j w_{ij}` reads nothing.
    ``sink_logits = -inf`` gives ordinary attention, ``0`` gives :func:`softmax_plus_one`.
    Masks follow ``scaled_dot_product_attention``; a row whose keys are all blocked puts all
    its weight on the sink (output ``0``, also with a sink of ``-inf``). A NaN in a query, key
    or sink logit gives NaN in the rows it reaches, as in ``scaled_dot_product_attention``.
    No dropout.

    Args:
        query: Queries.
        key: Keys.
        value: Values.
        sink_logits: One logit per head (a learnable ``nn.Parameter`` in gpt-oss).
        attn_mask: Optional bool (``True`` = may attend) or float mask.
        is_causal: Apply the top-left causal mask (a ``bool``), with ``attn_mask`` if given.
        scale: Score factor. Default: ``1 / sqrt(head_dim)``.
        return_weights: Also return the weights over the real keys. Default: ``False``.

    Shape:
        - query: ``(..., num_heads, L, head_dim)``; key ``(..., num_heads, S, head_dim)``;
          value ``(..., num_heads, S, value_dim)``.
        - sink_logits: ``(num_heads,)``, floating point, cast to the dtype of the scores.
        - Output: ``(..., num_heads, L, value_dim)``; weights ``(..., num_heads, L, S)``.
        - dtypes: ``query``, ``key``, ``value`` share one floating-point dtype; ``float16``
          and ``bfloat16`` are computed in ``float32`` (scores, softmax, weighted sum) and the
          output and weights return in the input's dtype, as in
          ``scaled_dot_product_attention``, so scores beyond ``float16``'s range (``65504``)
          stay exact; inside ``torch.autocast`` the inputs are cast as there.

    Returns:
        torch.Tensor or tuple[torch.Tensor, torch.Tensor]: the output, or
        ``(output, weights)``.

    Raises:
        TypeError: If an input is not a floating-point tensor, or ``is_causal`` is not a
            ``bool``.
        ValueError: If shapes do not fit, or ``sink_logits`` is not ``(num_heads,)``.

    Source:
        OpenAI 2025, "gpt-oss-120b & gpt-oss-20b Model Card", arXiv:2508.10925, Sec. 2.1
        (a learned bias in the softmax's denominator per head); Xiao et al. 2023,
        arXiv:2309.17453.
    """
    query, key, value, attn_mask = _autocast_inputs(query, key, value, attn_mask)
    _check_sdpa_inputs(query, key, value, attn_mask, 0.0, is_causal, scale, False)
    check.require_tensor("sink_logits", sink_logits)
    check.require_floating("sink_logits", sink_logits)
    num_heads = query.shape[-3] if query.dim() >= 3 else None
    if num_heads is None or tuple(sink_logits.shape) != (num_heads,):
        raise ValueError(
            f"sink_logits must have shape (num_heads,), one logit per head of query "
            f"(..., num_heads, L, head_dim) with num_heads={num_heads}, got "
            f"sink_logits.shape={tuple(sink_logits.shape)}."
        )
    scale = _default_scale(query.shape[-1]) if scale is None else float(scale)
    if is_causal:
        allowed = _causal_mask(query.shape[-2], key.shape[-2], device=query.device)  # (L, S)
        attn_mask = allowed if attn_mask is None else _and_causal(attn_mask, allowed)
    compute_dtype = _compute_dtype(query.dtype)  # float32 for float16 / bfloat16
    with torch.autocast(query.device.type, enabled=False):
        query_c = query.to(compute_dtype)  # (..., H, L, head_dim)
        key_c = key.to(compute_dtype)  # (..., H, S, head_dim)
        value_c = value.to(compute_dtype)  # (..., H, S, value_dim)
        scores = query_c @ key_c.transpose(-2, -1) * scale  # (..., H, L, S)
        if attn_mask is not None:
            scores = _apply_mask(scores, attn_mask)  # (..., H, L, S), blocked -> -inf
        sink = sink_logits.to(compute_dtype)[:, None, None]  # (H, 1, 1)
        sink = sink.expand(scores.shape[:-1] + (1,))  # (..., H, L, 1)
        with_sink = torch.cat((scores, sink), dim=-1)  # (..., H, L, S + 1), the sink column last
        # a row of -inf only (every key blocked, sink -inf) gets weights 0; a NaN stays NaN
        weights = _softmax_over_keys(with_sink)[..., :-1]  # (..., H, L, S), sink share dropped
        output = weights @ value_c  # (..., H, L, value_dim)
    output, weights = output.to(query.dtype), weights.to(query.dtype)  # the input's dtype
    return (output, weights) if return_weights else output
