"""Attention masks and conversions between PyTorch's two mask conventions.

PyTorch uses two opposite meanings for a boolean mask:

=====================================================  ===============================
API                                                    ``True`` means
=====================================================  ===============================
``torch.nn.functional.scaled_dot_product_attention``   the query **may attend** there
``torch.nn.MultiheadAttention`` (``attn_mask``,        the position is **blocked**
``key_padding_mask``)                                  (ignored, padding)
=====================================================  ===============================

Every builder in this module returns the first convention (``True`` = may attend), the one used
by ``mha_ref.scaled_dot_product_attention``. Use ``allowed_to_blocked`` before handing a mask to
``torch.nn.MultiheadAttention`` or ``mha_ref.MultiHeadAttention``, and ``blocked_to_allowed``
for the way back. A float ("additive") mask means the same thing in both APIs: it is added to
the attention scores, ``0.0`` keeps a position and ``-inf`` removes it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mha_ref import _validation as check

__all__ = [
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "document_mask",
    "allowed_to_blocked",
    "blocked_to_allowed",
    "allowed_to_additive",
]


def causal_mask(
    query_len: int,
    key_len: int | None = None,
    *,
    alignment: str = "top_left",
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Build a causal mask: each query may attend to keys at its own position or earlier.

    Math: ``allowed[i, j] = (j <= i + offset)`` with ``offset = 0`` for ``"top_left"`` and
    ``offset = key_len - query_len`` for ``"bottom_right"``.

    For a square mask both alignments agree: the lower triangle including the diagonal, the
    complement of the textbook's ``torch.triu(torch.ones(n, n), diagonal=1)`` (which marks the
    *blocked* positions strictly above the diagonal).

    When ``query_len != key_len`` the alignments differ:

    * ``"top_left"`` (what ``is_causal=True`` means in PyTorch) puts query 0 at key 0.
    * ``"bottom_right"`` puts the last query at the last key. This is the right mask when the
      queries are the newest ``query_len`` tokens of a sequence whose ``key_len`` keys are all
      known, e.g. decoding with a KV cache. If ``query_len > key_len``, the first
      ``query_len - key_len`` rows have no allowed key at all.

    A length may be ``0`` (an empty sequence): the mask is then empty, e.g. of shape ``(0, 0)``,
    so ``is_causal=True`` works on empty inputs as it does in PyTorch.

    Args:
        query_len: Number of query positions ``L``.
        key_len: Number of key positions ``S``. Default: ``query_len``.
        alignment: ``"top_left"`` or ``"bottom_right"``.
        device: Device of the returned mask. Default: the default device.

    Shape:
        Output: ``(query_len, key_len)``, dtype ``torch.bool``; ``True`` = may attend.

    Returns:
        torch.Tensor: The boolean mask in the ``scaled_dot_product_attention`` convention.

    Raises:
        TypeError: If a length is not an integer.
        ValueError: If a length is negative or ``alignment`` is unknown.

    Source:
        Vaswani et al. 2017, "Attention Is All You Need", arXiv:1706.03762, Sec. 3.2.3
        (masking out illegal connections in the decoder); PyTorch
        ``torch.nn.attention.bias.CausalVariation`` (``UPPER_LEFT``, ``LOWER_RIGHT``).
    """
    key_len = query_len if key_len is None else key_len
    check.require_non_negative_int("query_len", query_len, "number of query positions")
    check.require_non_negative_int("key_len", key_len, "number of key positions")
    check.require_alignment(alignment)
    return _causal_mask(query_len, key_len, alignment=alignment, device=device)


def _causal_mask(
    query_len: int,
    key_len: int,
    *,
    alignment: str = "top_left",
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``causal_mask`` without the checks, for the lengths of tensors a module holds.

    Shape: output ``(query_len, key_len)``, bool, ``True`` = may attend.
    """
    offset = 0 if alignment == "top_left" else key_len - query_len
    ones = torch.ones(query_len, key_len, dtype=torch.bool, device=device)  # (query_len, key_len)
    return torch.tril(ones, diagonal=offset)  # (query_len, key_len)


def padding_mask(
    lengths: torch.Tensor | Sequence[int], max_len: int | None = None
) -> torch.Tensor:
    """Mark the real tokens of right-padded sequences.

    Math: ``is_real[b, j] = (j < lengths[b])``.

    The result is ``True`` for real tokens, so it plugs into ``scaled_dot_product_attention``
    after adding the query dimension: ``attn_mask = padding_mask(lengths)[:, None, None, :]``
    has shape ``(batch, 1, 1, max_len)`` and broadcasts over heads and queries.

    ``torch.nn.MultiheadAttention`` wants the opposite: its ``key_padding_mask`` is ``True``
    where a key is padding and must be **ignored**. Pass
    ``key_padding_mask=allowed_to_blocked(padding_mask(lengths))`` (that is, ``~mask``).

    Args:
        lengths: Number of real tokens of each sequence, a 1-D integer tensor or a list of ints.
        max_len: Padded length. Default: ``max(lengths)``.

    Shape:
        - lengths: ``(batch,)``.
        - Output: ``(batch, max_len)``, dtype ``torch.bool``; ``True`` = real token.

    Returns:
        torch.Tensor: ``True`` at real tokens, ``False`` at padding.

    Raises:
        TypeError: If ``lengths`` does not hold integers or ``max_len`` is not an int.
        ValueError: If ``lengths`` is not 1-D, a length is negative or larger than ``max_len``.

    Source:
        PyTorch ``torch.nn.MultiheadAttention`` (``key_padding_mask``) and
        ``torch.nn.functional.scaled_dot_product_attention`` (``attn_mask``) conventions.
    """
    if not isinstance(lengths, torch.Tensor) and len(lengths) == 0:
        lengths = torch.zeros(0, dtype=torch.long)  # (0,): an empty batch (as_tensor gives float)
    lengths = torch.as_tensor(lengths)  # (batch,)
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() > 0 else 0
    else:
        check.require_int("max_len", max_len)
    check.require_valid_lengths(lengths, max_len)
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return positions[None, :] < lengths[:, None]  # (batch, max_len)


def sliding_window_mask(
    query_len: int,
    key_len: int | None = None,
    *,
    window: int,
    alignment: str = "top_left",
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Build a banded causal mask: each query sees its own key and the ``window - 1`` before it.

    Math: ``allowed[i, j] = (i + offset - window < j <= i + offset)``, with ``offset`` as in
    :func:`causal_mask` (``0`` for ``"top_left"``, ``key_len - query_len`` for
    ``"bottom_right"``). ``window`` counts the keys a query may see, its own included, so
    ``window=1`` lets each token see only itself and ``window >= key_len`` gives back
    ``causal_mask``. Stacking ``n`` such layers lets information travel up to
    ``n * (window - 1)`` positions back (the receptive field grows with depth).

    Args:
        query_len: Number of query positions ``L``.
        key_len: Number of key positions ``S``. Default: ``query_len``.
        window: Keys each query may attend to, its own position included; a positive int.
        alignment: ``"top_left"`` or ``"bottom_right"`` (the newest ``L`` queries of a
            sequence of ``S`` keys, as when decoding with a cache).
        device: Device of the returned mask. Default: the default device.

    Shape:
        Output: ``(query_len, key_len)``, dtype ``torch.bool``; ``True`` = may attend.

    Returns:
        torch.Tensor: The banded mask in the ``scaled_dot_product_attention`` convention.

    Raises:
        TypeError: If a length or ``window`` is not an integer.
        ValueError: If a length is negative, ``window <= 0`` or ``alignment`` is unknown.

    Source:
        Beltagy et al. 2020, "Longformer", arXiv:2004.05150, Sec. 3.1 (sliding window);
        Jiang et al. 2023, "Mistral 7B", arXiv:2310.06825, Sec. 2 (sliding window attention,
        ``W`` keys per query).
    """
    key_len = query_len if key_len is None else key_len
    check.require_non_negative_int("query_len", query_len, "number of query positions")
    check.require_non_negative_int("key_len", key_len, "number of key positions")
    _require_window(window)
    check.require_alignment(alignment)
    return _sliding_window_mask(query_len, key_len, window, alignment=alignment, device=device)


def _require_window(window: object) -> None:
    """Raise unless ``window`` is a positive int (the keys a query may see, itself included)."""
    if isinstance(window, bool) or not isinstance(window, int):
        raise TypeError(
            f"window must be an int (keys each query may see, its own included), got "
            f"{type(window).__name__} ({window!r})."
        )
    if window <= 0:
        raise ValueError(
            f"window must be positive (the keys each query may see, its own included), got "
            f"window={window}. Use window=1 for a token that sees only itself, or "
            f"causal_mask for no window at all."
        )


def _sliding_window_mask(
    query_len: int,
    key_len: int,
    window: int,
    *,
    alignment: str = "top_left",
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``sliding_window_mask`` without the checks. Shape: ``(query_len, key_len)``, bool."""
    offset = 0 if alignment == "top_left" else key_len - query_len
    query_pos = torch.arange(query_len, device=device)[:, None] + offset  # (query_len, 1)
    key_pos = torch.arange(key_len, device=device)[None, :]  # (1, key_len)
    return (key_pos <= query_pos) & (key_pos > query_pos - window)  # (query_len, key_len)


def document_mask(
    document_ids: torch.Tensor, key_document_ids: torch.Tensor | None = None
) -> torch.Tensor:
    """Let each query attend only to keys of its own document (sequence packing).

    Math: ``allowed[..., i, j] = (document_ids[..., i] == key_document_ids[..., j])``. Several
    short documents packed into one row then do not see each other. Combine it with a causal
    mask (``document_mask(ids) & causal_mask(n)``) for a decoder.

    Args:
        document_ids: Integer id of the document each query token belongs to.
        key_document_ids: Ids of the keys' documents. Default: ``document_ids``
            (self-attention).

    Shape:
        - document_ids: ``(..., L)``, an integer dtype.
        - key_document_ids: ``(..., S)``, leading dimensions broadcastable with those of
          ``document_ids``.
        - Output: ``(..., L, S)``, dtype ``torch.bool``; ``True`` = may attend. For
          ``(batch, L)`` ids, add the head dimension with ``mask[:, None]``.

    Returns:
        torch.Tensor: The block-diagonal mask.

    Raises:
        TypeError: If an ids argument is not an integer tensor.
        ValueError: If an ids tensor has no dimension, or the two do not broadcast.

    Source:
        Krell et al. 2021, "Efficient Sequence Packing without Cross-contamination",
        arXiv:2107.02027; PyTorch FlexAttention documentation (``document_masking`` example).
    """
    key_document_ids = document_ids if key_document_ids is None else key_document_ids
    for name, ids in (("document_ids", document_ids), ("key_document_ids", key_document_ids)):
        check.require_tensor(name, ids)
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TypeError(
                f"{name} must be an integer tensor (one document id per token), got dtype "
                f"{ids.dtype}. Build it e.g. with torch.repeat_interleave."
            )
        if ids.dim() == 0:
            raise ValueError(
                f"{name} must have a token dimension, shape (..., seq_len), got a 0-d tensor."
            )
    try:
        torch.broadcast_shapes(document_ids.shape[:-1], key_document_ids.shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"the leading dimensions of document_ids (shape {tuple(document_ids.shape)}) and "
            f"key_document_ids (shape {tuple(key_document_ids.shape)}) must broadcast. Give "
            f"both the same batch size."
        ) from None
    return document_ids[..., :, None] == key_document_ids[..., None, :]  # (..., L, S)


def _require_polarity_mask(name: str, mask: object) -> None:
    """Raise unless ``mask`` is a bool or float tensor (the two kinds a mask can be)."""
    check.require_tensor(name, mask)
    check.require_mask_dtype(name, mask, "True = may attend, or True = blocked")


def allowed_to_blocked(mask: torch.Tensor) -> torch.Tensor:
    """Convert an "allowed" mask (SDPA convention) to a "blocked" mask (``nn.MultiheadAttention``).

    Math: ``blocked = not allowed`` for a bool mask; a float (additive) mask is returned
    unchanged, because it means the same thing in both APIs.

    Args:
        mask: ``True`` = may attend, as used by ``scaled_dot_product_attention``.

    Shape:
        Any shape; the output has the same shape.

    Returns:
        torch.Tensor: ``True`` = blocked (ignored), as used by ``torch.nn.MultiheadAttention``'s
        ``attn_mask`` and ``key_padding_mask``.

    Raises:
        TypeError: If ``mask`` is not a tensor, or has an integer dtype.

    Source:
        PyTorch documentation of ``torch.nn.functional.scaled_dot_product_attention`` (note on
        the inverse boolean mask semantics of ``torch.nn.MultiheadAttention``).
    """
    _require_polarity_mask("mask", mask)
    if mask.dtype != torch.bool:
        return mask  # additive masks have no polarity
    return ~mask  # same shape as mask


def blocked_to_allowed(mask: torch.Tensor) -> torch.Tensor:
    """Convert a "blocked" mask (``nn.MultiheadAttention``) to an "allowed" mask (SDPA).

    Math: ``allowed = not blocked`` for a bool mask; a float (additive) mask is returned
    unchanged.

    Args:
        mask: ``True`` = blocked, as used by ``torch.nn.MultiheadAttention``.

    Shape:
        Any shape; the output has the same shape.

    Returns:
        torch.Tensor: ``True`` = may attend, as used by ``scaled_dot_product_attention``.

    Raises:
        TypeError: If ``mask`` is not a tensor, or has an integer dtype.

    Source:
        PyTorch documentation of ``torch.nn.functional.scaled_dot_product_attention``.
    """
    _require_polarity_mask("mask", mask)
    if mask.dtype != torch.bool:
        return mask  # additive masks have no polarity
    return ~mask  # same shape as mask


def allowed_to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Turn a boolean "allowed" mask into an additive float mask.

    Math: ``additive[i, j] = 0`` where ``allowed[i, j]`` and ``-inf`` elsewhere, so that
    ``softmax(scores + additive)`` gives blocked positions exactly zero weight.

    Note that a float mask of ones and zeros does **not** mask anything: adding ``1.0`` to some
    scores only shifts them. Blocking needs ``-inf``.

    Args:
        mask: Boolean mask, ``True`` = may attend. For an ``nn.MultiheadAttention``-style mask
            (``True`` = blocked) call ``allowed_to_additive(blocked_to_allowed(mask))``.
        dtype: Floating-point dtype of the result; use the dtype of your query.

    Shape:
        Any shape; the output has the same shape.

    Returns:
        torch.Tensor: ``0.0`` where allowed, ``-inf`` where blocked.

    Raises:
        TypeError: If ``mask`` is not a bool tensor or ``dtype`` is not floating point.

    Source:
        PyTorch ``torch.nn.functional._canonical_mask`` (the same conversion, used inside
        ``torch.nn.MultiheadAttention``).
    """
    check.require_tensor("mask", mask)
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = may attend), got mask.dtype={mask.dtype}. "
            f"A float mask is already additive; an integer mask needs mask.bool() first."
        )
    if not dtype.is_floating_point:
        raise TypeError(
            f"dtype must be a floating-point dtype, got dtype={dtype}. "
            f"Pass the dtype of your query, e.g. dtype=torch.float32."
        )
    return _allowed_to_additive(mask, dtype)


def _allowed_to_additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``allowed_to_additive`` without the checks, for masks a module built or checked.

    Shape: mask any shape, bool ``True`` = may attend; output the same shape, ``0`` or ``-inf``.
    """
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)  # same shape as mask
    return additive.masked_fill(~mask, float("-inf"))  # same shape as mask
