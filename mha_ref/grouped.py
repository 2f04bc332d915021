r"""Grouped-query attention (GQA): several query heads share one key/value head.

``num_kv_heads == num_heads`` is ordinary multi-head attention; ``num_kv_heads == 1`` is
multi-query attention (MQA). Fewer key/value heads shrink the key/value projections and,
above all, the KV cache kept while generating text: ``2 * num_kv_heads * head_dim`` numbers per
token and layer instead of ``2 * embed_dim``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from mha_ref import _validation as check
from mha_ref.functional import (
    _attention,
    _autocast_active,
    _default_scale,
    _merge_heads,
    _repeat_heads,
    _split_heads,
)
from mha_ref.masks import causal_mask

__all__ = ["GroupedQueryAttention"]


class GroupedQueryAttention(nn.Module):
    r"""Grouped-query attention with ``num_heads`` query heads and ``num_kv_heads`` key/value heads.

    Math: :math:`\mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_{g(i)}^K, VW_{g(i)}^V)` with
    :math:`g(i) = \lfloor i / (h / h_{kv}) \rfloor`; the output is
    :math:`\mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h) W^O`.

    Layers, created in this order: ``q_proj = nn.Linear(embed_dim, embed_dim)``,
    ``k_proj`` and ``v_proj = nn.Linear(embed_dim, num_kv_heads * head_dim)``,
    ``out_proj = nn.Linear(embed_dim, embed_dim)``, all with ``bias=bias``.

    Masks follow ``scaled_dot_product_attention`` (not ``nn.MultiheadAttention``): a bool
    ``attn_mask`` is ``True`` where the query **may attend**; a float mask is added to the
    scores. ``is_causal=True`` applies the top-left causal mask. There is no separate
    ``key_padding_mask``: for right-padded keys pass
    ``attn_mask=padding_mask(lengths)[:, None, None, :]`` (shape ``(N, 1, 1, S)``).

    **Two paths, as in** ``MultiHeadAttention``. With ``need_weights=True`` the attention step is
    the explicit ``mha_ref.scaled_dot_product_attention(..., enable_gqa=True)``, whose
    intermediates you can inspect. With ``need_weights=False`` (the default here) it calls
    ``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)``, which computes
    the same thing with fused kernels, unless ``use_fused=False``. Inputs and masks are checked
    the same way on both paths, and a float mask is cast to the query's dtype on both.

    Args:
        embed_dim: Model width (query features and output features).
        num_heads: Number of query heads; must divide ``embed_dim``.
        num_kv_heads: Number of key/value heads; must divide ``num_heads``.
        dropout: Dropout probability on the attention weights (training only), in ``[0, 1)``.
        bias: Add biases to all projections. Default: ``True``.
        batch_first: Inputs are ``(batch, seq, feature)``; else ``(seq, batch, feature)``.
            Default: ``True``.
        device: Device of the parameters.
        dtype: Dtype of the parameters.
        use_fused: Keyword-only. Use PyTorch's fused attention when ``need_weights=False``.
            Can also be changed later through the attribute ``use_fused``. Use
            ``use_fused=False`` for higher-order gradients (some fused kernels have no double
            backward). Default: ``True``, as in ``MultiHeadAttention``.

    Shape:
        - query: ``(N, L, embed_dim)`` (``(L, N, embed_dim)`` if not ``batch_first``).
        - key, value: ``(N, S, embed_dim)``; default to ``query`` (self-attention).
        - attn_mask: broadcastable to ``(N, num_heads, L, S)``.
        - Output: ``(N, L, embed_dim)``; weights ``(N, num_heads, L, S)``.

    Raises:
        TypeError: If a size is not an integer.
        ValueError: If a size is not positive, ``embed_dim`` is not divisible by
            ``num_heads``, ``num_kv_heads`` does not divide ``num_heads``, or ``dropout`` is
            outside ``[0, 1)``.

    Source:
        Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from
        Multi-Head Checkpoints", arXiv:2305.13245, Sec. 2.2; Shazeer 2019, "Fast Transformer
        Decoding: One Write-Head is All You Need", arXiv:1911.02150 (MQA).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_kv_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        batch_first: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        use_fused: bool = True,
    ) -> None:
        check.require_positive_int("embed_dim", embed_dim, "model width")
        check.require_positive_int("num_heads", num_heads, "number of query heads")
        check.require_positive_int("num_kv_heads", num_kv_heads, "number of key/value heads")
        check.require_divisible_heads(embed_dim, num_heads)
        check.require_kv_heads_divide(num_heads, num_kv_heads)
        check.require_probability("dropout", dropout)
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.use_fused = use_fused
        kv_dim = num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory_kwargs)
        self.k_proj = nn.Linear(embed_dim, kv_dim, bias=bias, **factory_kwargs)
        self.v_proj = nn.Linear(embed_dim, kv_dim, bias=bias, **factory_kwargs)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory_kwargs)

    def kv_cache_size_per_token(self) -> int:
        """Numbers stored in a KV cache per token (one layer): ``2 * num_kv_heads * head_dim``.

        Math: one key and one value vector of ``head_dim`` numbers for each key/value head.

        Returns:
            int: Elements per token; multiply by the element size in bytes for memory.
        """
        return 2 * self.num_kv_heads * self.head_dim

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Project, split into query and key/value heads, attend in groups, merge, project out.

        Args:
            query: Queries, ``(N, L, embed_dim)``.
            key: Keys, ``(N, S, embed_dim)``. Default: ``query``.
            value: Values, ``(N, S, embed_dim)``. Default: ``key``.
            attn_mask: Bool (``True`` = may attend) or float (added) mask, broadcastable to
                ``(N, num_heads, L, S)``.
            is_causal: Apply the top-left causal mask; not together with ``attn_mask``.
            need_weights: Also return the per-head weights ``(N, num_heads, L, S)``.

        Returns:
            tuple[torch.Tensor, torch.Tensor | None]: ``(output, weights)``, ``weights`` is
            ``None`` unless ``need_weights``.

        Raises:
            TypeError: If an input is not a floating-point tensor of the parameters' dtype.
            ValueError: If shapes do not fit, an input is on another device than the
                parameters, ``attn_mask`` is on another device than ``query``, or both
                ``attn_mask`` and ``is_causal`` are given.
        """
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        self._check_attn_mask(attn_mask, is_causal, query, key)
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            attn_mask = attn_mask.to(query.dtype)  # float mask: same dtype on both paths
        if not self.batch_first:  # (seq_len, batch, embed_dim) -> (batch, seq_len, embed_dim)
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))

        queries = self.q_proj(query)  # (batch, query_len, embed_dim)
        keys = self.k_proj(key)  # (batch, key_len, num_kv_heads * head_dim)
        values = self.v_proj(value)  # (batch, key_len, num_kv_heads * head_dim)
        queries = _split_heads(queries, self.num_heads)  # (batch, num_heads, query_len, head_dim)
        keys = _split_heads(keys, self.num_kv_heads)  # (batch, num_kv_heads, key_len, head_dim)
        values = _split_heads(values, self.num_kv_heads)  # (batch, num_kv_heads, key_len, ..)
        context, weights = self._attend(
            queries, keys, values, attn_mask, is_causal, need_weights
        )  # (batch, num_heads, query_len, head_dim), (batch, num_heads, query_len, key_len)
        merged = _merge_heads(context)  # (batch, query_len, embed_dim)
        output = self.out_proj(merged)  # (batch, query_len, embed_dim)

        if not self.batch_first:
            output = output.transpose(0, 1)  # (query_len, batch, embed_dim)
        return output, weights

    def _attend(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        attn_mask: torch.Tensor | None,
        is_causal: bool,
        need_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attention with each key/value head shared by ``num_heads / num_kv_heads`` queries."""
        dropout_p = self.dropout if self.training else 0.0
        if self.use_fused and not need_weights:
            # No weights wanted: PyTorch's fused kernels compute the same context faster.
            context = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask, dropout_p, is_causal, enable_gqa=True
            )  # (batch, num_heads, query_len, head_dim)
            return context, None
        if is_causal:
            attn_mask = causal_mask(queries.shape[2], keys.shape[2], device=queries.device)
        keys = _repeat_heads(keys, self.num_heads)  # (batch, num_heads, key_len, head_dim)
        values = _repeat_heads(values, self.num_heads)  # (batch, num_heads, key_len, head_dim)
        context, weights = _attention(
            queries, keys, values, attn_mask, dropout_p, scale=_default_scale(self.head_dim)
        )  # (batch, num_heads, query_len, head_dim), (batch, num_heads, query_len, key_len)
        return context, (weights if need_weights else None)

    def _check_inputs(self, query: object, key: object, value: object) -> None:
        """Validate the forward inputs: 3-D float tensors of width ``embed_dim``, same batch."""
        parameter = self.q_proj.weight
        layout = "(batch, seq_len, features)" if self.batch_first else "(seq_len, batch, features)"
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            check.require_tensor(name, tensor)
            check.require_rank(name, tensor, (3,), layout)
            check.require_floating(name, tensor)
            if not _autocast_active(tensor.device.type):  # autocast casts in the projections
                check.require_matching_dtype(name, tensor, parameter.dtype)
            check.require_matching_device(name, tensor, parameter.device)
            check.require_feature_size(name, tensor, self.embed_dim, "embed_dim")
        check.require_same_batch(query, "key", key, self.batch_first)
        check.require_same_batch(query, "value", value, self.batch_first)
        check.require_same_length(key, value, seq_dim=1 if self.batch_first else 0)

    def _check_attn_mask(
        self, attn_mask: object, is_causal: bool, query: torch.Tensor, key: torch.Tensor
    ) -> None:
        """Validate ``attn_mask`` once, for both paths.

        Bool or float, on the query's device, broadcastable to ``(N, num_heads, L, S)``, and
        not together with ``is_causal``.
        """
        if attn_mask is None:
            return
        check.require_tensor("attn_mask", attn_mask)
        check.require_mask_dtype("attn_mask", attn_mask, "True = may attend")
        check.require_same_device("attn_mask", attn_mask, "query", query.device)
        check.require_not_mask_and_causal(attn_mask, is_causal)
        batch_dim, seq_dim = (0, 1) if self.batch_first else (1, 0)
        scores_shape = (query.shape[batch_dim], self.num_heads, query.shape[seq_dim],
                        key.shape[seq_dim])
        check.require_mask_broadcasts("attn_mask", attn_mask, scores_shape)
