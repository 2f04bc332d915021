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
    _split_heads,
)
from mha_ref.kv_cache import KVCache
from mha_ref.masks import _causal_mask
from mha_ref.qk_norm import QKNorm
from mha_ref.rope import RotaryEmbedding, _require_positions

__all__ = ["GroupedQueryAttention", "mha_to_gqa"]


class GroupedQueryAttention(nn.Module):
    r"""Grouped-query attention with ``num_heads`` query heads and ``num_kv_heads`` key/value heads.

    Math: :math:`\mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_{g(i)}^K, VW_{g(i)}^V)` with
    :math:`g(i) = \lfloor i / (h / h_{kv}) \rfloor`; the output is
    :math:`\mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h) W^O`.

    Layers, created in this order: ``q_proj = nn.Linear(embed_dim, num_heads * head_dim)``,
    ``k_proj`` and ``v_proj = nn.Linear(embed_dim, num_kv_heads * head_dim)``,
    ``out_proj = nn.Linear(num_heads * head_dim, embed_dim)``, all with ``bias=bias``
    (``num_heads * head_dim`` is ``embed_dim`` unless ``head_dim`` is given).

    Masks follow ``scaled_dot_product_attention`` (not ``nn.MultiheadAttention``): a bool
    ``attn_mask`` is ``True`` where the query **may attend**; a float mask is added to the
    scores. ``is_causal=True`` applies the top-left causal mask. There is no separate
    ``key_padding_mask``: for right-padded keys pass
    ``attn_mask=padding_mask(lengths)[:, None, None, :]`` (shape ``(N, 1, 1, S)``).

    **Two paths, as in** ``MultiHeadAttention``. With ``need_weights=True`` the attention step is
    explicit: the queries of each group are stacked against their group's one key/value head, so
    the keys and values are never repeated to the query heads (the same numbers as
    ``mha_ref.scaled_dot_product_attention(..., enable_gqa=True)``, which repeats them), and every
    intermediate can be inspected. With ``need_weights=False`` (the default here) it calls
    ``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)``, which computes
    the same thing with fused kernels, unless ``use_fused=False``. Inputs and masks are checked
    the same way on both paths, and a float mask is cast to the query's dtype on both.

    Args:
        embed_dim: Model width (query features and output features).
        num_heads: Number of query heads; must divide ``embed_dim``.
        num_kv_heads: Number of key/value heads; must divide ``num_heads``.
        dropout: Dropout probability on the attention weights (training only), in ``[0, 1]``
            (``1`` zeroes every weight, as in PyTorch).
        bias: Add biases to all projections. Default: ``True``.
        batch_first: Inputs are ``(batch, seq, feature)``; else ``(seq, batch, feature)``.
            Default: ``True``.
        device: Device of the parameters.
        dtype: Dtype of the parameters.
        use_fused: Keyword-only. Use PyTorch's fused attention when ``need_weights=False``.
            Can also be changed later through the attribute ``use_fused``. Use
            ``use_fused=False`` for higher-order gradients (some fused kernels have no double
            backward). Default: ``True``, as in ``MultiHeadAttention``.
        rope: Keyword-only. A ``mha_ref.RotaryEmbedding`` with this layer's ``head_dim``:
            every head's queries and keys are rotated by their positions after the head split
            and before the scores (and the KV cache stores the keys after rotation). Default:
            ``None`` (no position information inside the layer).
        head_dim: Keyword-only. Features per head. Default: ``embed_dim // num_heads``. Given,
            the heads together may be wider or narrower than the model (Gemma 3 270M: 4 heads
            of 256 in a width of 640), and ``num_heads`` need not divide ``embed_dim``.
        qk_norm: Keyword-only. A ``mha_ref.QKNorm`` with this layer's ``head_dim``: every
            head's queries and keys are normalised after the head split and before ``rope``
            (Gemma 3, Qwen3). Default: ``None``.
        scale: Keyword-only. The factor on the scores, as in ``scaled_dot_product_attention``.
            Default: ``None``, ``1 / sqrt(head_dim)``.

    Shape:
        - query: ``(N, L, embed_dim)`` (``(L, N, embed_dim)`` if not ``batch_first``).
        - key, value: ``(N, S, embed_dim)``; default to ``query`` (self-attention).
        - attn_mask: broadcastable to ``(N, num_heads, L, S)``.
        - positions, key_positions (with ``rope``): ``(L,)`` and ``(S,)``, or ``(N, L)`` and
          ``(N, S)``, integer.
        - Output: ``(N, L, embed_dim)``; weights ``(N, num_heads, L, S)``.

    Raises:
        TypeError: If a size is not an integer, ``rope`` is not a ``RotaryEmbedding``,
            ``qk_norm`` is not a ``QKNorm``, or ``scale`` is not a real number.
        ValueError: If a size is not positive, ``embed_dim`` is not divisible by
            ``num_heads`` (without ``head_dim``), ``num_kv_heads`` does not divide
            ``num_heads``, ``dropout`` is outside ``[0, 1]``, ``scale`` is not finite, or
            ``rope`` or ``qk_norm`` was built for another ``head_dim``.

    Source:
        Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from
        Multi-Head Checkpoints", arXiv:2305.13245, Sec. 2.2; Shazeer 2019, "Fast Transformer
        Decoding: One Write-Head is All You Need", arXiv:1911.02150 (MQA); Su et al. 2021,
        "RoFormer", arXiv:2104.09864, Sec. 3.4 (``rope``).
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
        rope: RotaryEmbedding | None = None,
        head_dim: int | None = None,
        qk_norm: QKNorm | None = None,
        scale: float | None = None,
    ) -> None:
        check.require_positive_int("embed_dim", embed_dim, "model width")
        check.require_positive_int("num_heads", num_heads, "number of query heads")
        check.require_positive_int("num_kv_heads", num_kv_heads, "number of key/value heads")
        if head_dim is None:
            check.require_divisible_heads(embed_dim, num_heads)
        else:
            check.require_positive_int("head_dim", head_dim, "features per head")
        check.require_kv_heads_divide(num_heads, num_kv_heads)
        check.require_probability("dropout", dropout)
        check.require_finite_scale(scale)
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = embed_dim // num_heads if head_dim is None else head_dim
        self.dropout = dropout
        self.batch_first = batch_first
        self.use_fused = use_fused
        self.scale = None if scale is None else float(scale)  # a 0-d tensor too
        heads_dim = num_heads * self.head_dim  # embed_dim unless head_dim was given
        kv_dim = num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, heads_dim, bias=bias, **factory_kwargs)
        self.k_proj = nn.Linear(embed_dim, kv_dim, bias=bias, **factory_kwargs)
        self.v_proj = nn.Linear(embed_dim, kv_dim, bias=bias, **factory_kwargs)
        self.out_proj = nn.Linear(heads_dim, embed_dim, bias=bias, **factory_kwargs)
        _check_rope(rope, self.head_dim)
        self.rope = rope
        _check_qk_norm(qk_norm, self.head_dim)
        self.qk_norm = qk_norm

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
        *,
        positions: torch.Tensor | None = None,
        key_positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Project, split into query and key/value heads, attend in groups, merge, project out.

        With ``rope``, the queries and keys are rotated by their positions after the head
        split: ``apply_rotary(queries, positions)`` and ``apply_rotary(keys, key_positions)``.

        Args:
            query: Queries, ``(N, L, embed_dim)``.
            key: Keys, ``(N, S, embed_dim)``. Default: ``query``.
            value: Values, ``(N, S, embed_dim)``. Default: ``key``.
            attn_mask: Bool (``True`` = may attend) or float (added) mask, broadcastable to
                ``(N, num_heads, L, S)``.
            is_causal: Apply the top-left causal mask (a ``bool``); not together with
                ``attn_mask``.
            need_weights: Also return the per-head weights ``(N, num_heads, L, S)``.
            positions: Keyword-only, with ``rope``: the queries' positions. Default:
                ``torch.arange(L)``.
            key_positions: Keyword-only, with ``rope``: the keys' positions. Default:
                ``torch.arange(S)``.

        Returns:
            tuple[torch.Tensor, torch.Tensor | None]: ``(output, weights)``, ``weights`` is
            ``None`` unless ``need_weights``.

        Raises:
            TypeError: If an input is not a floating-point tensor of the parameters' dtype, or
                ``is_causal`` is not a ``bool``.
            ValueError: If shapes do not fit, an input is on another device than the
                parameters, ``attn_mask`` is on another device than ``query``, both
                ``attn_mask`` and ``is_causal`` are given, positions are given without
                ``rope``, or they do not fit the inputs or the rotary table.
        """
        key = query if key is None else key
        value = key if value is None else value
        check.require_bool("is_causal", is_causal)
        self._check_inputs(query, key, value)
        self._check_attn_mask(attn_mask, is_causal, query, key)
        batch_dim, seq_dim = (0, 1) if self.batch_first else (1, 0)
        batch = query.shape[batch_dim]
        positions = self._check_positions("positions", positions, batch, query.shape[seq_dim])
        key_positions = self._check_positions(
            "key_positions", key_positions, batch, key.shape[seq_dim]
        )
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
        if self.qk_norm is not None:  # each head's vectors normalised, before the rotation
            queries, keys = self.qk_norm(queries, keys)  # the same shapes
        if self.rope is not None:  # position enters here, inside each head
            queries = self.rope._rotate(queries, positions)  # (batch, num_heads, query_len, hd)
            keys = self.rope._rotate(keys, key_positions)  # (batch, num_kv_heads, key_len, hd)
        context, weights = self._attend(
            queries, keys, values, attn_mask, is_causal, need_weights
        )  # (batch, num_heads, query_len, head_dim), (batch, num_heads, query_len, key_len)
        merged = _merge_heads(context)  # (batch, query_len, num_heads * head_dim)
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
                queries, keys, values, attn_mask, dropout_p, is_causal, scale=self.scale,
                enable_gqa=True,
            )  # (batch, num_heads, query_len, head_dim)
            return context, None
        if is_causal:
            attn_mask = _causal_mask(queries.shape[2], keys.shape[2], device=queries.device)
        scale = _default_scale(self.head_dim) if self.scale is None else self.scale
        context, weights = _grouped_attention(
            queries, keys, values, attn_mask, dropout_p, scale=scale
        )  # (batch, num_heads, query_len, head_dim), (batch, num_heads, query_len, key_len)
        return context, (weights if need_weights else None)

    # ------------------------------------------------------------------------------------------
    # decoding with a KV cache
    # ------------------------------------------------------------------------------------------

    def new_cache(self, batch: int, max_len: int) -> KVCache:
        """An empty ``mha_ref.KVCache`` for this layer: ``num_kv_heads`` heads of ``head_dim``.

        Args:
            batch: Number of sequences decoded together.
            max_len: Largest number of tokens (prompt and generated) the cache will hold.

        Returns:
            KVCache: Buffers ``(batch, num_kv_heads, max_len, head_dim)`` on the parameters'
            device and dtype, with ``cached_len = 0``.
        """
        parameter = self.k_proj.weight
        return KVCache(
            batch, self.num_kv_heads, max_len, self.head_dim,
            device=parameter.device, dtype=parameter.dtype,
        )

    def decode(self, query: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Causal self-attention for new tokens, with the earlier tokens' keys/values cached.

        Math: the new tokens are the last ``new_len`` positions of the sequence; their keys and
        values are appended to ``cache``, and each new token attends to every cached token and
        to the new tokens up to itself: the causal mask aligned **bottom-right**
        (``mha_ref.causal_mask(new_len, cached_len, alignment="bottom_right")``), not the
        top-left one of ``is_causal=True``. Feeding a sequence through ``decode`` in pieces
        (a prompt, then one token per step) gives the rows of ``forward(x, is_causal=True)``
        on the whole sequence. With ``rope``, the new tokens sit at positions
        ``cached_len, ..., cached_len + new_len - 1``; their queries and keys are rotated there
        before the keys are cached, so the cache holds rotated keys and no cached key is ever
        rotated again.

        Autograd goes through decoding: a loss on the outputs of several ``decode`` steps has
        the gradients of ``forward(x, is_causal=True)`` on the whole sequence (the cache then
        writes out of place, see ``mha_ref.KVCache``). Generation itself belongs under
        ``torch.no_grad()`` or ``torch.inference_mode()``, where the cache writes in place.

        Args:
            query: The new tokens' features (self-attention: keys and values come from them).
            cache: The cache of this layer (``new_cache``); updated in place.

        Shape:
            - query: ``(N, new_len, embed_dim)`` (``(new_len, N, embed_dim)`` if not
              ``batch_first``).
            - Output: the same shape as ``query``.

        Returns:
            torch.Tensor: The attention output for the new tokens.

        Raises:
            TypeError: If ``query`` is not a floating-point tensor of the parameters' dtype, or
                ``cache`` is not a ``KVCache``.
            ValueError: If ``query`` does not fit the module, or ``cache`` does not fit
                ``query`` (batch, heads, head_dim, device, dtype) or is full.

        Source:
            Shazeer 2019, "Fast Transformer Decoding", arXiv:1911.02150, Sec. 2.4
            (incremental decoding); PyTorch ``torch.nn.attention.bias.CausalVariation.LOWER_RIGHT``.
        """
        self._check_query(query)
        x = query if self.batch_first else query.transpose(0, 1)  # (batch, new_len, embed_dim)
        self._check_cache(cache, x.shape[0], x.shape[1])
        if self.rope is not None:
            self._check_rope_table(cache.cached_len + x.shape[1])
        queries = _split_heads(self.q_proj(x), self.num_heads)  # (batch, num_heads, new_len, hd)
        new_keys = _split_heads(self.k_proj(x), self.num_kv_heads)  # (batch, kv, new_len, hd)
        new_values = _split_heads(self.v_proj(x), self.num_kv_heads)  # (batch, kv, new_len, hd)
        if self.qk_norm is not None:  # as in forward: normalised, then rotated, then cached
            queries, new_keys = self.qk_norm(queries, new_keys)  # the same shapes
        if self.rope is not None:  # the new tokens' positions follow the cached ones
            start = cache.cached_len
            positions = torch.arange(start, start + x.shape[1], device=x.device)  # (new_len,)
            queries = self.rope._rotate(queries, positions)  # (batch, num_heads, new_len, hd)
            new_keys = self.rope._rotate(new_keys, positions)  # (batch, kv, new_len, hd)
        cache._append(new_keys, new_values)
        keys, values = cache.keys, cache.values  # (batch, num_kv_heads, cached_len, head_dim)
        new_len, cached_len = x.shape[1], cache.cached_len
        attn_mask = None  # one new token: it may attend to every cached key
        if new_len > 1:
            attn_mask = _causal_mask(
                new_len, cached_len, alignment="bottom_right", device=x.device
            )  # (new_len, cached_len)
        context, _ = self._attend(queries, keys, values, attn_mask, False, need_weights=False)
        output = self.out_proj(_merge_heads(context))  # (batch, new_len, embed_dim)
        return output if self.batch_first else output.transpose(0, 1)

    def _check_cache(self, cache: object, batch: int, new_len: int) -> None:
        """Raise unless ``cache`` is a ``KVCache`` built for this layer with room for new_len."""
        if not isinstance(cache, KVCache):
            raise TypeError(
                f"cache must be an mha_ref.KVCache, got {type(cache).__name__}. Build one with "
                f"module.new_cache(batch, max_len)."
            )
        expected = (batch, self.num_kv_heads, self.head_dim)
        given = (cache._keys.shape[0], cache._keys.shape[1], cache._keys.shape[3])
        if given != expected:
            raise ValueError(
                f"cache must hold (batch, num_kv_heads, head_dim) = {expected} for this layer "
                f"and input, got a cache with {given}. Build it with "
                f"module.new_cache({batch}, max_len)."
            )
        parameter = self.k_proj.weight
        if cache._keys.dtype != parameter.dtype or cache._keys.device != parameter.device:
            raise ValueError(
                f"cache is {cache._keys.dtype} on {cache._keys.device} but the module's "
                f"parameters are {parameter.dtype} on {parameter.device}. Build it with "
                f"module.new_cache(batch, max_len)."
            )
        if cache.cached_len + new_len > cache.max_len:
            raise ValueError(
                f"the cache holds {cache.cached_len} of at most max_len={cache.max_len} tokens "
                f"and cannot take {new_len} more. Build it with a larger max_len."
            )

    def _check_positions(
        self, name: str, positions: torch.Tensor | None, batch: int, seq_len: int
    ) -> torch.Tensor | None:
        """Validate ``positions`` for the rotary table; default ``arange(seq_len)``."""
        if self.rope is None:
            if positions is not None:
                raise ValueError(
                    f"{name} was given, but this layer has no rotary embedding: positions "
                    f"matter only with rope. Build it with rope=mha_ref.RotaryEmbedding("
                    f"{self.head_dim}), or leave {name} out."
                )
            return None
        if positions is None:  # built here, 0 ... seq_len - 1: only its length needs a check
            self._check_rope_table(seq_len)
            return torch.arange(seq_len, device=self.q_proj.weight.device)  # (seq_len,)
        shape = torch.empty(batch, 1, seq_len, self.head_dim, device="meta")  # its shape only
        _require_positions(positions, shape, max_len=self.rope.max_len)
        return positions

    def _check_rope_table(self, num_positions: int) -> None:
        """Raise unless the rotary table covers positions ``0 ... num_positions - 1``."""
        if num_positions > self.rope.max_len:
            raise ValueError(
                f"positions must be below max_len={self.rope.max_len} (the rotary table's "
                f"size), got a position of {num_positions - 1}. Build RotaryEmbedding with "
                f"max_len={num_positions} or more."
            )

    def _check_inputs(self, query: object, key: object, value: object) -> None:
        """Validate the forward inputs: 3-D float tensors of width ``embed_dim``, same batch."""
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            self._check_features(name, tensor)
        check.require_same_batch(query, "key", key, self.batch_first)
        check.require_same_batch(query, "value", value, self.batch_first)
        check.require_same_length(key, value, seq_dim=1 if self.batch_first else 0)

    def _check_query(self, query: object) -> None:
        """Validate the one input of ``decode`` (keys and values are projected from it)."""
        self._check_features("query", query)

    def _check_features(self, name: str, tensor: object) -> None:
        """Raise unless ``tensor`` is 3-D, floating point, of width ``embed_dim``, on the
        parameters' device and (outside autocast) of their dtype."""
        parameter = self.q_proj.weight
        layout = "(batch, seq_len, features)" if self.batch_first else "(seq_len, batch, features)"
        check.require_tensor(name, tensor)
        check.require_rank(name, tensor, (3,), layout)
        check.require_floating(name, tensor)
        if not _autocast_active(tensor.device.type):  # autocast casts in the projections
            check.require_matching_dtype(name, tensor, parameter.dtype)
        check.require_matching_device(name, tensor, parameter.device)
        check.require_feature_size(name, tensor, self.embed_dim, "embed_dim")

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


def _check_rope(rope: object, head_dim: int) -> None:
    """Raise unless ``rope`` is ``None`` or a ``RotaryEmbedding`` for ``head_dim``."""
    if rope is None:
        return
    if not isinstance(rope, RotaryEmbedding):
        raise TypeError(
            f"rope must be an mha_ref.RotaryEmbedding or None, got {type(rope).__name__}. "
            f"Build one with mha_ref.RotaryEmbedding(head_dim={head_dim})."
        )
    if rope.head_dim != head_dim:
        raise ValueError(
            f"rope was built for head_dim={rope.head_dim}, but this layer's head_dim is "
            f"{head_dim} (embed_dim / num_heads). Build it with RotaryEmbedding({head_dim})."
        )


def _check_qk_norm(qk_norm: object, head_dim: int) -> None:
    """Raise unless ``qk_norm`` is ``None`` or a ``QKNorm`` for ``head_dim``."""
    if qk_norm is None:
        return
    if not isinstance(qk_norm, QKNorm):
        raise TypeError(
            f"qk_norm must be an mha_ref.QKNorm or None, got {type(qk_norm).__name__}. "
            f"Build one with mha_ref.QKNorm(head_dim={head_dim}, kind='rms')."
        )
    if qk_norm.head_dim != head_dim:
        raise ValueError(
            f"qk_norm was built for head_dim={qk_norm.head_dim}, but this layer's head_dim is "
            f"{head_dim}. Build it with QKNorm({head_dim})."
        )


def _grouped_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention where each key/value head serves a group of query heads, without copying K/V.

    The ``group = num_heads // num_kv_heads`` query heads of one key/value head are stacked
    along the query-length dimension, ``(batch, num_kv_heads, group * L, head_dim)``, so one
    ordinary matrix product per key/value head serves the whole group: the keys and values are
    read as they are, never repeated to ``num_heads`` heads (``repeat_kv_heads`` would copy
    them ``group`` times) nor copied to be scaled (the scale goes onto the queries and the
    scores). A mask with a head or query dimension is expanded to the same
    ``(group * L, S)`` layout (bool masks are small next to the scores).

    Shape: queries ``(batch, num_heads, L, head_dim)``; keys ``(batch, num_kv_heads, S,
    head_dim)``; values ``(batch, num_kv_heads, S, value_dim)``; attn_mask broadcastable to
    ``(batch, num_heads, L, S)``; returns context ``(batch, num_heads, L, value_dim)`` and weights
    ``(batch, num_heads, L, S)``.
    """
    batch, num_heads, query_len, head_dim = queries.shape
    num_kv_heads, key_len = keys.shape[1], keys.shape[2]
    group = num_heads // num_kv_heads
    grouped = queries.reshape(batch, num_kv_heads, group * query_len, head_dim)  # (B, kv, G*L, hd)
    if attn_mask is not None:
        attn_mask = _group_mask(attn_mask, num_kv_heads, group, query_len)  # (b, kv|1, G*L, S|1)
    context, weights = _attention(
        grouped, keys, values, attn_mask, dropout_p, scale
    )  # (batch, num_kv_heads, group * L, value_dim), (batch, num_kv_heads, group * L, S)
    context = context.reshape(batch, num_heads, query_len, -1)  # (batch, num_heads, L, value_dim)
    weights = weights.reshape(batch, num_heads, query_len, key_len)  # (batch, num_heads, L, S)
    return context, weights


def _group_mask(
    attn_mask: torch.Tensor, num_kv_heads: int, group: int, query_len: int
) -> torch.Tensor:
    """Lay out a mask broadcastable to ``(B, num_heads, L, S)`` as ``(B|1, kv|1, G*L, S|1)``."""
    while attn_mask.dim() < 4:
        attn_mask = attn_mask.unsqueeze(0)  # (b, h, l, s), each full or 1
    if attn_mask.shape[1] == 1:
        attn_mask = attn_mask.unsqueeze(2)  # (b, 1, 1, l, s)
    else:
        attn_mask = attn_mask.unflatten(1, (num_kv_heads, group))  # (b, kv, G, l, s)
    b, kv, _, _, s = attn_mask.shape
    attn_mask = attn_mask.expand(b, kv, group, query_len, s)  # (b, kv, G, L, s)
    return attn_mask.reshape(b, kv, group * query_len, s)  # (b, kv, G*L, s)


def mha_to_gqa(module: nn.MultiheadAttention, num_kv_heads: int) -> GroupedQueryAttention:
    r"""Convert a multi-head attention layer to grouped-query attention by mean-pooling K/V heads.

    Math: key/value head ``j`` of the new layer gets the mean of the key (and value) projection
    rows of the ``group = num_heads / num_kv_heads`` original heads ``j * group ... (j + 1) *
    group - 1`` (weights and biases alike); the query and output projections are copied. With
    ``num_kv_heads == num_heads`` nothing is pooled and the new layer computes the same function
    (with ``GroupedQueryAttention``'s mask convention, below). With fewer key/value heads the
    result is an approximation, which Ainslie et al. then "uptrain" for a few percent of the
    original training steps.

    The masks change convention: the new layer takes ``scaled_dot_product_attention``'s bool
    masks (``True`` = may attend), where ``torch.nn.MultiheadAttention`` takes ``True`` =
    blocked; convert with ``mha_ref.blocked_to_allowed``.

    Args:
        module: A ``torch.nn.MultiheadAttention`` or ``mha_ref.MultiHeadAttention`` with
            ``kdim == vdim == embed_dim``, without ``add_bias_kv`` and ``add_zero_attn``.
        num_kv_heads: Key/value heads of the new layer; must divide ``module.num_heads``.

    Shape:
        The new layer's ``k_proj``/``v_proj`` weights are ``(num_kv_heads * head_dim,
        embed_dim)``; ``q_proj`` and ``out_proj`` keep ``(embed_dim, embed_dim)``.

    Returns:
        GroupedQueryAttention: A new layer on the same device and dtype, with the same
        ``dropout``, ``batch_first`` and training mode.

    Raises:
        TypeError: If ``module`` is not a ``torch.nn.MultiheadAttention`` or ``num_kv_heads``
            is not an int.
        ValueError: If ``num_kv_heads`` does not divide ``num_heads``, or ``module`` uses
            ``kdim``/``vdim``, ``add_bias_kv`` or ``add_zero_attn``.

    Source:
        Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from
        Multi-Head Checkpoints", arXiv:2305.13245, Sec. 2.1 (mean pooling, uptraining).
    """
    if not isinstance(module, nn.MultiheadAttention):
        raise TypeError(
            f"module must be a torch.nn.MultiheadAttention or mha_ref.MultiHeadAttention, got "
            f"{type(module).__name__}. Copy other layers' weights by hand."
        )
    check.require_positive_int("num_kv_heads", num_kv_heads, "number of key/value heads")
    check.require_kv_heads_divide(module.num_heads, num_kv_heads)
    unsupported = [
        name
        for name, used in (
            ("kdim/vdim different from embed_dim", not module._qkv_same_embed_dim),
            ("add_bias_kv=True", module.bias_k is not None),
            ("add_zero_attn=True", module.add_zero_attn),
        )
        if used
    ]
    if unsupported:
        raise ValueError(
            f"module uses {', '.join(unsupported)}, which GroupedQueryAttention has no "
            f"counterpart for. Convert a module built without these options."
        )
    embed_dim, num_heads = module.embed_dim, module.num_heads
    head_dim, group = embed_dim // num_heads, num_heads // num_kv_heads
    parameter = module.out_proj.weight
    gqa = GroupedQueryAttention(
        embed_dim, num_heads, num_kv_heads, dropout=module.dropout,
        bias=module.in_proj_bias is not None, batch_first=module.batch_first,
        device=parameter.device, dtype=parameter.dtype,
    )
    w_q, w_k, w_v = module.in_proj_weight.detach().chunk(3)  # 3 x (embed_dim, embed_dim)

    def pool(rows: torch.Tensor) -> torch.Tensor:
        """Mean over each group of heads: (num_heads * head_dim, ...) -> (num_kv_heads * ...)."""
        grouped = rows.reshape(num_kv_heads, group, head_dim, *rows.shape[1:])  # (kv, G, hd, ..)
        return grouped.mean(dim=1).reshape(num_kv_heads * head_dim, *rows.shape[1:])

    with torch.no_grad():
        gqa.q_proj.weight.copy_(w_q)  # (embed_dim, embed_dim)
        gqa.k_proj.weight.copy_(pool(w_k))  # (num_kv_heads * head_dim, embed_dim)
        gqa.v_proj.weight.copy_(pool(w_v))  # (num_kv_heads * head_dim, embed_dim)
        gqa.out_proj.weight.copy_(module.out_proj.weight)  # (embed_dim, embed_dim)
        if module.in_proj_bias is not None:
            b_q, b_k, b_v = module.in_proj_bias.detach().chunk(3)  # 3 x (embed_dim,)
            gqa.q_proj.bias.copy_(b_q)  # (embed_dim,)
            gqa.k_proj.bias.copy_(pool(b_k))  # (num_kv_heads * head_dim,)
            gqa.v_proj.bias.copy_(pool(b_v))  # (num_kv_heads * head_dim,)
            gqa.out_proj.bias.copy_(module.out_proj.bias)  # (embed_dim,)
    return gqa.train(module.training)
