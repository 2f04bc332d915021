r"""ALiBi: attention with linear biases, a per-head distance penalty added to the scores.

ALiBi adds no position embedding anywhere. Each head ``h`` subtracts ``m_h * distance`` from the
score of a query and a key ``distance`` tokens apart, with a fixed slope ``m_h`` per head taken
from a geometric sequence: some heads look far, others only near. The penalty is an additive
``attn_mask`` (a float mask is added to the scores), so it works with every attention path of
``mha_ref`` and of PyTorch: ``scaled_dot_product_attention(q, k, v, attn_mask=bias)``.
"""

from __future__ import annotations

import math

import torch

from mha_ref import _validation as check

__all__ = ["alibi_slopes", "alibi_bias"]


def alibi_slopes(num_heads: int) -> torch.Tensor:
    r"""The slope of each head: a geometric sequence starting at, and with ratio, ``2 ** (-8 / n)``.

    Math: for a power of two :math:`n`, :math:`m_h = 2^{-8h/n}` with the heads numbered
    :math:`h = 1, \dots, n` (from 1, as in the paper; 8 heads: :math:`1/2, 1/4, \dots, 1/256`).
    The tensor's index counts from 0, as every head index in ``mha_ref`` does, so entry ``i``
    is :math:`m_{i+1} = 2^{-8(i+1)/n}`: head 0's slope is :math:`2^{-8/n}`, not :math:`1`.
    For another :math:`n`, with :math:`p` the largest power of two below :math:`n`: the
    :math:`p` slopes of :math:`p` heads, then every other slope of :math:`2p` heads (the
    odd-numbered ones, :math:`h = 1, 3, 5, \dots`), until there are :math:`n`; this is the rule
    of the paper's reference code.

    Args:
        num_heads: Number of attention heads.

    Shape:
        - Output: ``(num_heads,)``, ``float64``, in score units per token of distance.

    Returns:
        torch.Tensor: The slopes, largest (most local head) first.

    Raises:
        TypeError: If ``num_heads`` is not an int.
        ValueError: If ``num_heads`` is not positive.

    Source:
        Press et al. 2022, "Train Short, Test Long: Attention with Linear Biases Enables Input
        Length Extrapolation", arXiv:2108.12409, Sec. 3 (and its code, ``get_slopes``).
    """
    check.require_positive_int("num_heads", num_heads, "number of attention heads")
    power = 2 ** math.floor(math.log2(num_heads))  # the largest power of two <= num_heads
    slopes = _power_of_two_slopes(power)  # (power,)
    if power < num_heads:
        extra = _power_of_two_slopes(2 * power)[0::2][: num_heads - power]  # (num_heads - power,)
        slopes = torch.cat([slopes, extra])  # (num_heads,)
    return slopes


def _power_of_two_slopes(num_heads: int) -> torch.Tensor:
    """``2 ** (-8 h / num_heads)`` for ``h = 1 .. num_heads``: ``(num_heads,)`` float64."""
    h = torch.arange(1, num_heads + 1, dtype=torch.float64)  # (num_heads,)
    return 2.0 ** (-8.0 * h / num_heads)  # (num_heads,)


def alibi_bias(
    num_heads: int,
    query_len: int,
    key_len: int | None = None,
    *,
    alignment: str = "top_left",
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""The additive ALiBi mask: ``-slope[h] * |i - j|`` for query ``i`` and key ``j``.

    Math: :math:`B_{h,i,j} = -m_h\,\lvert p_i - p_j\rvert` with the slopes :math:`m_h` of
    :func:`alibi_slopes`; query positions follow ``alignment`` as in ``mha_ref.causal_mask``
    (``"top_left"``: query ``i`` at position ``i``; ``"bottom_right"``: the last query at the
    last key, as when decoding with a KV cache). Add it to the scores through ``attn_mask``.
    The paper's model is causal: it combines this bias with the causal mask, and there only
    keys ``j <= i`` count, where :math:`\lvert p_i - p_j\rvert = p_i - p_j` is the paper's
    formula. Block the future with ``allowed_to_additive(causal_mask(...))`` added to it, or
    with ``is_causal=True``.

    Args:
        num_heads: Number of attention heads (one slope each).
        query_len: Number of query positions ``L``.
        key_len: Number of key positions ``S``. Default: ``query_len``.
        alignment: ``"top_left"`` or ``"bottom_right"``. Default: ``"top_left"``.
        dtype: Floating-point dtype of the mask. Default: ``torch.float32``.
        device: Device of the mask.

    Shape:
        - Output: ``(num_heads, query_len, key_len)``; broadcasts to
          ``(batch, num_heads, query_len, key_len)``.

    Returns:
        torch.Tensor: The float mask, ``0`` on the diagonal and negative elsewhere.

    Raises:
        TypeError: If a size is not an int or ``dtype`` is not a floating-point dtype.
        ValueError: If ``num_heads`` is not positive, a length is negative, or ``alignment`` is
            unknown.

    Source:
        Press et al. 2022, arXiv:2108.12409, Sec. 3, Fig. 3.
    """
    key_len = query_len if key_len is None else key_len
    check.require_non_negative_int("query_len", query_len, "number of query positions")
    check.require_non_negative_int("key_len", key_len, "number of key positions")
    check.require_alignment(alignment)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            f"dtype must be a floating-point torch.dtype such as torch.float32, got {dtype!r}: "
            f"the bias is added to the scores."
        )
    slopes = alibi_slopes(num_heads).to(device)  # (num_heads,)
    offset = 0 if alignment == "top_left" else key_len - query_len
    query_positions = torch.arange(query_len, device=device) + offset  # (query_len,)
    key_positions = torch.arange(key_len, device=device)  # (key_len,)
    distance = (query_positions[:, None] - key_positions[None, :]).abs()  # (query_len, key_len)
    bias = -slopes[:, None, None] * distance  # (num_heads, query_len, key_len), float64
    return bias.to(dtype)
