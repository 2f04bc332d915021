r"""Scaled dot-product attention written out step by step, and the head split/merge reshapes.

The pipeline of one attention call, with the names used throughout ``mha_ref``:

.. code-block:: text

    attn_scores  = query @ key^T * scale          # (..., query_len, key_len)
    attn_scores  = mask(attn_scores)              # blocked positions -> -inf
    attn_weights = softmax(attn_scores, dim=-1)   # each row sums to 1
    attn_weights = dropout(attn_weights)          # training only
    context      = attn_weights @ value           # (..., query_len, value_dim)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from mha_ref import _validation as check
from mha_ref.masks import _causal_mask

__all__ = ["scaled_dot_product_attention", "split_heads", "merge_heads", "repeat_kv_heads"]


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | torch.Tensor | None = None,
    enable_gqa: bool = False,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Scaled dot-product attention, one named step per line.

    Math: :math:`\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(
    \frac{QK^\top}{\sqrt{d_k}} + M\right) V`, where :math:`M` is ``0`` at allowed positions and
    :math:`-\infty` at blocked ones.

    The signature, broadcasting and mask rules are those of
    ``torch.nn.functional.scaled_dot_product_attention`` (checked with torch 2.13):

    * a **bool** ``attn_mask`` is ``True`` where the query **may attend** (the opposite of
      ``torch.nn.MultiheadAttention``);
    * a **float** ``attn_mask`` is **added** to the scores (``-inf`` blocks; a 0/1 float mask
      blocks nothing);
    * ``is_causal=True`` applies the *top-left* aligned lower triangle of shape
      ``(query_len, key_len)``, see ``mha_ref.causal_mask``; together with ``attn_mask`` both
      apply (a position must be allowed by each), as PyTorch's default CPU kernel computes
      for 4-D inputs;
    * dropout is always applied when ``dropout_p > 0`` (pass ``0.0`` in evaluation);
      ``dropout_p=1`` zeroes every weight;
    * ``scale`` may be any finite real number: ``0`` gives uniform weights, a negative scale
      reverses each query's preference;
    * ``float16``/``bfloat16`` inputs are computed in ``float32`` and returned in their own
      dtype, as PyTorch does, so scores beyond ``float16``'s range (``65504``) stay exact;
    * inside ``torch.autocast`` the inputs are cast as autocast casts PyTorch's function
      (floating point except ``float64`` to the autocast dtype).

    Three deliberate differences (see ``MultiHeadAttention``'s list): ``attn_mask`` together
    with ``is_causal=True`` is computed for inputs of any rank, where PyTorch's math backend
    (which it uses e.g. for 3-D inputs) raises ``RuntimeError``; a non-finite ``scale``
    raises ``ValueError``, where PyTorch returns NaN (``inf``) or zeros (``nan``); and a
    ``scale <= 0`` with ``is_causal=True`` gives the formula's weights over the allowed keys
    (uniform for ``0``, each query's preference reversed for a negative scale), as PyTorch's
    math backend does, where PyTorch's default CPU kernel returns NaN (it multiplies the
    blocked scores, ``-inf``, by the scale).

    **Rows whose keys are all masked.** If every key of a query row is blocked, the softmax
    would divide ``0`` by ``0``. Here that row gets weights ``0`` and therefore output ``0``
    (and zero gradient); it never produces NaN, and never affects other rows or batch
    elements. PyTorch's ``scaled_dot_product_attention`` also returns ``0`` there in recent
    releases (checked with torch 2.13; older releases returned NaN). What
    ``torch.nn.MultiheadAttention`` returns for such a row depends on its path (torch 2.13,
    CPU): NaN when ``need_weights=True``, and NaN in its inference fast path (evaluation mode,
    autograd off, ``bias=True``, ``batch_first=True``, self-attention, ...: the full list is in
    ``MultiHeadAttention``'s docstring); with ``need_weights=False`` outside the
    fast path, the attention output is ``0`` before the output projection, so the module
    returns ``out_proj.bias`` there. Only rows whose scores are all ``-inf`` count as fully
    masked; a large finite negative float mask still gives a normal softmax.

    Args:
        query: Queries.
        key: Keys.
        value: Values.
        attn_mask: Optional bool or float mask, broadcastable to ``(..., L, S)``.
        dropout_p: Probability of zeroing an attention weight, in ``[0, 1]``; the survivors
            are scaled by ``1 / (1 - dropout_p)``. Default: ``0.0``.
        is_causal: Apply a top-left causal mask (as well as ``attn_mask``, if given). A
            ``bool``, as in PyTorch (``0``/``1``, ``numpy.bool_`` or a string raise
            ``TypeError``). Default: ``False``.
        scale: Factor multiplying the scores: a finite real number (``float``, ``int``,
            ``bool``, NumPy scalar) or a 0-d tensor. Default: ``1 / sqrt(head_dim)``.
        enable_gqa: Grouped-query attention: each group of ``Hq / H`` query heads shares one
            key head and each group of ``Hq / Hv`` one value head (``key`` and ``value`` are
            repeated along dim ``-3``; ``H`` and ``Hv`` may differ). A ``bool``, as
            ``is_causal``. Default: ``False``.
        return_weights: Also return the attention weights (after dropout). Default: ``False``.

    Shape:
        - query: ``(..., Hq, L, head_dim)``; ``...`` are batch dimensions, ``L`` = query_len.
        - key: ``(..., H, S, head_dim)``; ``S`` = key_len.
        - value: ``(..., Hv, S, value_dim)``.
        - attn_mask: broadcastable to ``(..., Hq, L, S)``.
        - Output: ``(..., Hq, L, value_dim)``; weights: ``(..., Hq, L, S)``.
        - dtypes: ``query``, ``key``, ``value`` share one floating-point dtype (after
          autocast's cast); ``attn_mask`` is ``torch.bool`` or floating point, cast to the
          dtype of the scores (PyTorch accepts only ``float32`` or the query's dtype and
          raises for other float masks).
        - devices: ``key``, ``value`` and ``attn_mask`` are on the device of ``query``.

        Without ``enable_gqa`` the head dimension is not special: any leading dimensions that
        broadcast are accepted, as in PyTorch.

    Returns:
        torch.Tensor or tuple[torch.Tensor, torch.Tensor]: the output, or
        ``(output, attn_weights)`` when ``return_weights=True``. Same dtype as ``query``.

    Raises:
        TypeError: If an input is not a floating-point tensor, a mask is neither bool nor
            float, or ``is_causal`` or ``enable_gqa`` is not a ``bool``.
        ValueError: If ranks or shapes do not fit, a tensor is on another device than
            ``query``, ``scale`` is not finite, or ``dropout_p`` is outside ``[0, 1]``.

    Source:
        Vaswani et al. 2017, "Attention Is All You Need", arXiv:1706.03762, Sec. 3.2.1,
        Eq. (1); Ainslie et al. 2023, "GQA", arXiv:2305.13245 (``enable_gqa``); mirrors
        ``torch.nn.functional.scaled_dot_product_attention``.
    """
    query, key, value, attn_mask = _autocast_inputs(query, key, value, attn_mask)
    _check_sdpa_inputs(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    query_len, key_len, head_dim = query.shape[-2], key.shape[-2], query.shape[-1]
    scale = _default_scale(head_dim) if scale is None else float(scale)
    if enable_gqa:
        key = _repeat_heads(key, num_heads=query.shape[-3])  # (..., Hq, S, head_dim)
        value = _repeat_heads(value, num_heads=query.shape[-3])  # (..., Hq, S, value_dim)
    if is_causal:
        allowed = _causal_mask(query_len, key_len, device=query.device)  # (L, S)
        attn_mask = allowed if attn_mask is None else _and_causal(attn_mask, allowed)
    output, attn_weights = _attention(query, key, value, attn_mask, dropout_p, scale)
    if return_weights:
        return output, attn_weights
    return output


def _attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention pipeline on tensors already checked (the modules call this directly).

    For ``float16``/``bfloat16`` inputs the scores, softmax and weighted sum run in
    ``float32`` (with autocast off for these lines), and the results come back in the query's
    dtype, as in PyTorch's math backend: a score of ``200 * 200 * 8 / sqrt(8) = 113137`` does
    not fit in ``float16`` (largest finite value ``65504``). ``scale`` is split as
    ``sqrt(|scale|)`` onto the queries before the product and onto the scores after it (PyTorch's
    math backend puts the second factor onto the keys), so no factor overflows where the product
    does not, and the keys, a whole cache when decoding, are never copied.

    Shape: query ``(..., L, head_dim)``; key ``(..., S, head_dim)``; value
    ``(..., S, value_dim)``; attn_mask broadcastable to ``(..., L, S)``, bool ``True`` = may
    attend or float added; returns output ``(..., L, value_dim)`` and weights ``(..., L, S)``.
    """
    compute_dtype = _compute_dtype(query.dtype)
    with torch.autocast(query.device.type, enabled=False):
        query_c = query.to(compute_dtype)  # (..., L, head_dim)
        key_c = key.to(compute_dtype)  # (..., S, head_dim)
        value_c = value.to(compute_dtype)  # (..., S, value_dim)
        root = math.sqrt(abs(scale))  # scale = sign * root * root
        query_c = query_c * (root if scale >= 0 else -root)  # (..., L, head_dim)
        # the second factor goes onto the scores, not onto a scaled copy of the keys: the keys
        # (a whole cache when decoding) are read once and never copied
        attn_scores = query_c @ key_c.transpose(-2, -1)  # (..., L, S)
        if math.isfinite(root):  # root is inf only for head_dim = 0, where the scores are 0
            attn_scores.mul_(root)  # (..., L, S), in place: matmul's backward does not need it
        if attn_mask is None:
            attn_weights = torch.softmax(attn_scores, dim=-1)  # (..., L, S), rows sum to 1
        else:
            attn_scores = _apply_mask(attn_scores, attn_mask)  # (..., L, S)
            attn_weights = _softmax_over_keys(attn_scores)  # (..., L, S), rows sum to 1 (or 0)
        if dropout_p > 0.0:
            attn_weights = F.dropout(attn_weights, p=dropout_p, training=True)  # (..., L, S)
        output = attn_weights @ value_c  # (..., L, value_dim)
    return output.to(query.dtype), attn_weights.to(query.dtype)


def _and_causal(attn_mask: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Apply ``attn_mask`` and the causal triangle both, as PyTorch's default CPU kernel does.

    Shape: attn_mask broadcastable to ``(..., L, S)``; allowed ``(L, S)``, ``True`` = may attend;
    output: the broadcast of the two, bool (``and``) or float (``-inf`` where not allowed).
    """
    if attn_mask.dtype == torch.bool:
        return attn_mask & allowed  # (..., L, S)
    return torch.where(allowed, attn_mask, float("-inf"))  # (..., L, S)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """``float32`` for the 16-bit float dtypes (as PyTorch's math backend), else ``dtype``."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _default_scale(head_dim: int) -> float:
    """``1 / sqrt(head_dim)``; ``inf`` for ``head_dim = 0`` (empty dot products give 0 anyway).

    Source: ``torch.nn.functional.scaled_dot_product_attention`` (``sdp::calculate_scale``).
    """
    return 1.0 / math.sqrt(head_dim) if head_dim > 0 else math.inf


def _autocast_inputs(*tensors: object) -> tuple[object, ...]:
    """Cast like ``torch.autocast`` casts the inputs of ``F.scaled_dot_product_attention``.

    Inside an enabled autocast region for the query's device, every floating-point tensor
    except ``float64`` is cast to the autocast dtype (e.g. ``bfloat16``); outside, or for
    anything else (``None``, bool masks, non-tensors, which the checks then report), the input
    is returned unchanged.

    Source: ``torch.autocast``, "CPU/CUDA Ops that can autocast to lower precision".
    """
    query = tensors[0]
    if not isinstance(query, torch.Tensor) or not _autocast_active(query.device.type):
        return tensors
    autocast_dtype = torch.get_autocast_dtype(query.device.type)
    return tuple(
        tensor.to(autocast_dtype)
        if isinstance(tensor, torch.Tensor)
        and torch.is_floating_point(tensor)
        and tensor.dtype != torch.float64
        else tensor
        for tensor in tensors
    )


def _autocast_active(device_type: str) -> bool:
    """True inside an enabled ``torch.autocast`` region for ``device_type`` (``"cpu"``...)."""
    return torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type)


def _check_sdpa_inputs(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | torch.Tensor | None,
    enable_gqa: bool,
) -> None:
    """Validate the arguments of ``scaled_dot_product_attention``; raise on the first problem."""
    check.require_bool("is_causal", is_causal)
    check.require_bool("enable_gqa", enable_gqa)
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        check.require_tensor(name, tensor)
        check.require_min_rank(name, tensor, 2, "(..., seq_len, head_dim)")
        check.require_floating(name, tensor)
    check.require_same_device("key", key, "query", query.device)
    check.require_same_device("value", value, "query", query.device)
    check.require_same_dtype("key", key, "query", query)
    check.require_same_dtype("value", value, "query", query)
    check.require_same_head_dim(query, key)
    check.require_same_length(key, value, seq_dim=-2)
    if enable_gqa:
        check.require_gqa_heads(query, key, value)
        check.require_broadcastable("query", query.shape[:-3], "key", key.shape[:-3])
        check.require_broadcastable("key", key.shape[:-3], "value", value.shape[:-3])
        batch_dims = torch.broadcast_shapes(query.shape[:-3], key.shape[:-3])
        scores_shape = (*batch_dims, query.shape[-3], query.shape[-2], key.shape[-2])
    else:
        check.require_broadcastable("query", query.shape[:-2], "key", key.shape[:-2])
        check.require_broadcastable("key", key.shape[:-2], "value", value.shape[:-2])
        batch_dims = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
        scores_shape = (*batch_dims, query.shape[-2], key.shape[-2])
    if attn_mask is not None:
        check.require_tensor("attn_mask", attn_mask)
        check.require_mask_dtype("attn_mask", attn_mask, "True = may attend")
        check.require_same_device("attn_mask", attn_mask, "query", query.device)
        check.require_mask_broadcasts("attn_mask", attn_mask, scores_shape)
    check.require_probability("dropout_p", dropout_p)
    check.require_finite_scale(scale)


def repeat_kv_heads(
    key: torch.Tensor, value: torch.Tensor, num_heads: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Repeat each key/value head so that every query head has its own copy (for GQA).

    Math: key/value head ``g`` serves query heads ``g * group_size ... (g + 1) * group_size - 1``
    with ``group_size = num_heads // num_kv_heads``.

    Args:
        key: Keys with ``num_kv_heads`` heads in dim ``-3``.
        value: Values with ``num_kv_heads`` heads in dim ``-3``.
        num_heads: Number of query heads, a multiple of ``num_kv_heads``.

    Shape:
        - key, value: ``(..., num_kv_heads, key_len, head_dim)``.
        - Output: two tensors of shape ``(..., num_heads, key_len, head_dim)``.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: The repeated key and value.

    Raises:
        ValueError: If ``key``/``value`` have fewer than 3 dimensions, different head counts,
            or ``num_heads`` is not a multiple of their head count.

    Source:
        Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from
        Multi-Head Checkpoints", arXiv:2305.13245, Sec. 2.2; the reference code in the
        documentation of ``torch.nn.functional.scaled_dot_product_attention``.
    """
    check.require_positive_int("num_heads", num_heads, "number of query heads")
    check.require_kv_heads(key, value)
    check.require_head_groups(num_heads, key.shape[-3], "num_heads", "In repeat_kv_heads")
    key = _repeat_heads(key, num_heads)  # (..., num_heads, key_len, head_dim)
    value = _repeat_heads(value, num_heads)  # (..., num_heads, key_len, value_dim)
    return key, value


def _repeat_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Repeat each head of ``x`` (dim ``-3``) ``num_heads // x.shape[-3]`` times, unchecked.

    Shape: x ``(..., num_kv_heads, seq_len, dim)``; output ``(..., num_heads, seq_len, dim)``.
    """
    group_size = num_heads // x.shape[-3]
    return x.repeat_interleave(group_size, dim=-3)  # (..., num_heads, seq_len, dim)


def _apply_mask(attn_scores: torch.Tensor, attn_mask: torch.Tensor) -> torch.Tensor:
    """Block positions in the scores: bool ``False`` -> ``-inf``; a float mask is added.

    Shape: attn_scores ``(..., L, S)``; attn_mask broadcastable to it; output ``(..., L, S)``.
    """
    if attn_mask.dtype == torch.bool:
        return attn_scores.masked_fill(~attn_mask, float("-inf"))  # (..., L, S)
    return attn_scores + attn_mask.to(attn_scores.dtype)  # (..., L, S)


def _softmax_over_keys(attn_scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the key dimension that gives all-zero weights to fully masked rows.

    A row whose scores are all ``-inf`` has no key to attend to; a plain softmax returns NaN
    there (``0 / 0``). We replace that row's scores by zeros before the softmax (so neither the
    forward nor the backward pass sees a NaN) and then set its weights to zero.

    Shape: attn_scores ``(..., L, S)``; output ``(..., L, S)``.
    """
    all_keys_masked = torch.isneginf(attn_scores).all(dim=-1, keepdim=True)  # (..., L, 1)
    safe_scores = attn_scores.masked_fill(all_keys_masked, 0.0)  # (..., L, S)
    attn_weights = torch.softmax(safe_scores, dim=-1)  # (..., L, S)
    return attn_weights.masked_fill(all_keys_masked, 0.0)  # (..., L, S)


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split the feature dimension into heads and move the head dimension before the sequence.

    Math: feature ``h * head_dim + d`` of ``x`` becomes feature ``d`` of head ``h``, with
    ``head_dim = embed_dim / num_heads``.

    Works on non-contiguous input (e.g. a transposed tensor): ``reshape`` copies when a
    ``view`` is impossible. The result is a transposed view and is in general not contiguous.

    Args:
        x: Projected queries, keys or values.
        num_heads: Number of heads ``h``.

    Shape:
        - x: ``(batch, seq_len, embed_dim)``.
        - Output: ``(batch, num_heads, seq_len, head_dim)``.

    Returns:
        torch.Tensor: The per-head tensor, same dtype as ``x``.

    Raises:
        TypeError: If ``x`` is not a tensor or ``num_heads`` is not an int.
        ValueError: If ``x`` is not 3-D, ``num_heads`` is not positive, or
            ``embed_dim`` is not divisible by ``num_heads``.

    Source:
        Vaswani et al. 2017, arXiv:1706.03762, Sec. 3.2.2 (the projections to
        :math:`d_k = d_{model} / h` per head).
    """
    check.require_tensor("x", x)
    check.require_rank("x", x, (3,), "(batch, seq_len, embed_dim)")
    check.require_positive_int("num_heads", num_heads, "number of heads")
    batch, seq_len, embed_dim = x.shape
    check.require_divisible_heads(embed_dim, num_heads, embed_name="x.shape[-1] (embed_dim)")
    return _split_heads(x, num_heads)  # (batch, num_heads, seq_len, head_dim)


def _split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``split_heads`` without the checks, for tensors a module built itself.

    Shape: x ``(batch, seq_len, embed_dim)``; output ``(batch, num_heads, seq_len, head_dim)``.
    """
    batch, seq_len, embed_dim = x.shape
    head_dim = embed_dim // num_heads
    x = x.reshape(batch, seq_len, num_heads, head_dim)  # (batch, seq_len, num_heads, head_dim)
    return x.transpose(1, 2)  # (batch, num_heads, seq_len, head_dim)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads back into one feature dimension (the inverse of ``split_heads``).

    Math: :math:`\\mathrm{Concat}(\\mathrm{head}_1, \\dots, \\mathrm{head}_h)`.

    After ``transpose`` the memory is not in ``(batch, seq_len, embed_dim)`` order, so
    ``x.view(...)`` would raise; ``reshape`` copies into a contiguous tensor (the textbook
    writes ``.contiguous().view(...)``, which is the same).

    Args:
        x: Per-head outputs.

    Shape:
        - x: ``(batch, num_heads, seq_len, head_dim)``.
        - Output: ``(batch, seq_len, num_heads * head_dim)``.

    Returns:
        torch.Tensor: The merged tensor, same dtype as ``x``.

    Raises:
        TypeError: If ``x`` is not a tensor.
        ValueError: If ``x`` is not 4-D.

    Source:
        Vaswani et al. 2017, arXiv:1706.03762, Sec. 3.2.2 (Concat before :math:`W^O`).
    """
    check.require_tensor("x", x)
    check.require_rank("x", x, (4,), "(batch, num_heads, seq_len, head_dim)")
    return _merge_heads(x)  # (batch, seq_len, embed_dim)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``merge_heads`` without the checks, for tensors a module built itself.

    Shape: x ``(batch, num_heads, seq_len, head_dim)``; output
    ``(batch, seq_len, num_heads * head_dim)``.
    """
    batch, num_heads, seq_len, head_dim = x.shape
    x = x.transpose(1, 2)  # (batch, seq_len, num_heads, head_dim)
    return x.reshape(batch, seq_len, num_heads * head_dim)  # (batch, seq_len, embed_dim)
