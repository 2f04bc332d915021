r"""Multi-head latent attention (MLA): cache one small latent per token instead of keys and values.

DeepSeek-V2 (arXiv:2405.04434, Sec. 2.1) compresses each token's hidden state ``h`` into a
latent ``c = W^{DKV} h`` of ``kv_latent_dim`` numbers and rebuilds every head's key and value
from it with per-head up-projections:

.. code-block:: text

    c      = W^DKV h                    # (kv_latent_dim,)     the only thing cached ...
    k_i^C  = W_i^UK c,  v_i = W_i^UV c  # (head_dim,) per head  rebuilt from c
    q_i^C  = W_i^Q h                    # (head_dim,) per head
    q_i^R  = RoPE(W_i^QR h)             # (rope_dim,) per head
    k^R    = RoPE(W^KR h)               # (rope_dim,) shared  ... with this decoupled RoPE key
    score  = [q_i^C; q_i^R] . [k_i^C; k^R] / sqrt(head_dim + rope_dim)

Because ``q_i^C . (W_i^UK c) = ((W_i^UK)^T q_i^C) . c``, the key up-projection can be folded
into the query projection, and because the output is linear in the values, ``W_i^UV`` can be
folded into the output projection: at decode time attention runs directly against the cached
latents (the **absorbed** form), as multi-query attention with one shared key of
``kv_latent_dim + rope_dim`` features and one shared value of ``kv_latent_dim``. RoPE cannot be
folded (the rotation sits between the two matrices and depends on the position), which is why
the positional part of the key is a separate, small, shared vector. The tests check that the
two forms agree to rounding.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from mha_ref import _validation as check
from mha_ref.functional import _merge_heads, _split_heads, scaled_dot_product_attention
from mha_ref.masks import _causal_mask
from mha_ref.rope import RotaryEmbedding, _require_positions

__all__ = ["MultiHeadLatentAttention", "LatentKVCache", "latent_cache_bytes_per_token"]


class LatentKVCache:
    """Preallocated buffers for the latents and the shared RoPE keys of ``max_len`` tokens.

    What MLA caches per token and layer: ``kv_latent_dim + rope_dim`` numbers, against
    ``2 * num_kv_heads * head_dim`` for a ``KVCache``. Build one with
    ``MultiHeadLatentAttention.new_cache(batch, max_len)``.

    Args:
        batch: Number of sequences decoded together.
        max_len: Largest number of tokens the cache can hold.
        kv_latent_dim: Features of the latent ``c``.
        rope_dim: Features of the decoupled RoPE key (may be ``0``).
        device: Device of the buffers.
        dtype: Dtype of the buffers. Default: the default dtype.

    Shape:
        - ``latents`` (property): ``(batch, cached_len, kv_latent_dim)``.
        - ``rope_keys`` (property): ``(batch, cached_len, rope_dim)``.

    Raises:
        TypeError: If a size is not an int.
        ValueError: If ``batch`` or ``kv_latent_dim`` is not positive, or ``max_len`` or
            ``rope_dim`` is negative.

    Source:
        DeepSeek-AI 2024, "DeepSeek-V2", arXiv:2405.04434, Sec. 2.1.2-2.1.3 (cached ``c^{KV}``
        and ``k^R``).
    """

    def __init__(
        self,
        batch: int,
        max_len: int,
        kv_latent_dim: int,
        rope_dim: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        check.require_positive_int("batch", batch, "number of sequences")
        check.require_non_negative_int("max_len", max_len, "largest number of cached tokens")
        check.require_positive_int("kv_latent_dim", kv_latent_dim, "features of the latent")
        check.require_non_negative_int("rope_dim", rope_dim, "features of the RoPE key")
        self._latents = torch.zeros(batch, max_len, kv_latent_dim, device=device, dtype=dtype)
        self._rope_keys = torch.zeros(batch, max_len, rope_dim, device=device, dtype=dtype)
        self.cached_len = 0

    @property
    def max_len(self) -> int:
        """Largest number of tokens the buffers hold."""
        return self._latents.shape[1]

    @property
    def latents(self) -> torch.Tensor:
        """The cached latents, a view ``(batch, cached_len, kv_latent_dim)``."""
        return self._latents[:, : self.cached_len]  # (batch, cached_len, kv_latent_dim)

    @property
    def rope_keys(self) -> torch.Tensor:
        """The cached (rotated) RoPE keys, a view ``(batch, cached_len, rope_dim)``."""
        return self._rope_keys[:, : self.cached_len]  # (batch, cached_len, rope_dim)

    def nbytes(self) -> int:
        """Bytes of the two preallocated buffers."""
        size = self._latents.element_size()
        return (self._latents.numel() + self._rope_keys.numel()) * size

    def append(
        self, latent: torch.Tensor, rope_key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the latents and RoPE keys of ``new_len`` tokens; return all cached so far.

        Shape:
            - latent: ``(batch, new_len, kv_latent_dim)``; rope_key: ``(batch, new_len,
              rope_dim)``.
            - Output: ``(batch, cached_len + new_len, kv_latent_dim)`` and
              ``(batch, cached_len + new_len, rope_dim)``.

        Raises:
            TypeError: If an input is not a tensor or has another dtype than the cache.
            ValueError: If a shape does not fit, the device differs, or the cache would
                exceed ``max_len``.
        """
        for name, tensor, buffer in (
            ("latent", latent, self._latents),
            ("rope_key", rope_key, self._rope_keys),
        ):
            check.require_tensor(name, tensor)
            if tensor.dim() != 3 or tensor.shape[0] != buffer.shape[0] or (
                tensor.shape[2] != buffer.shape[2]
            ):
                raise ValueError(
                    f"{name} must have shape (batch, new_len, features) = ({buffer.shape[0]}, "
                    f"new_len, {buffer.shape[2]}) to fit this cache, got "
                    f"{name}.shape={tuple(tensor.shape)}."
                )
            check.require_matching_dtype(name, tensor, buffer.dtype)
            check.require_same_device(name, tensor, "the cache", buffer.device)
        check.require_same_new_tokens(
            "latent", latent, "rope_key", rope_key, dim=1,
            fix="Pass the latents and RoPE keys of the same tokens "
            "(module.compress(x, positions)).",
        )
        self._append(latent, rope_key)
        return self.latents, self.rope_keys

    def crop(self, length: int) -> None:
        """Forget every token after the first ``length`` (e.g. to decode again from there).

        Raises:
            ValueError: If ``length`` is negative or more than ``cached_len``.
        """
        check.require_crop_length(length, self.cached_len)
        self.cached_len = length

    def _append(self, latent: torch.Tensor, rope_key: torch.Tensor) -> None:
        """``append`` without the checks (a module's own tensors)."""
        start, stop = self.cached_len, self.cached_len + latent.shape[1]
        if stop > self.max_len:
            raise ValueError(
                f"the cache holds {self.cached_len} of at most max_len={self.max_len} tokens "
                f"and cannot take {latent.shape[1]} more. Build it with a larger max_len."
            )
        self._latents[:, start:stop] = latent  # (batch, new_len, kv_latent_dim)
        self._rope_keys[:, start:stop] = rope_key  # (batch, new_len, rope_dim)
        self.cached_len = stop


def latent_cache_bytes_per_token(
    num_layers: int, kv_latent_dim: int, rope_dim: int, dtype: torch.dtype = torch.float32
) -> int:
    """Bytes an MLA cache needs per token: ``num_layers * (kv_latent_dim + rope_dim) * itemsize``.

    Compare with ``kv_cache_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype)``, the
    ``2 * num_kv_heads * head_dim`` numbers of a key/value cache. The count does not depend on
    the number of heads.

    Raises:
        TypeError: If a size is not an int or ``dtype`` is not a ``torch.dtype``.
        ValueError: If ``num_layers`` or ``kv_latent_dim`` is not positive or ``rope_dim`` is
            negative.

    Source:
        DeepSeek-AI 2024, arXiv:2405.04434, Sec. 2.1.4, Table 1 (``(d_c + d_h^R) l``
        elements per token).
    """
    check.require_positive_int("num_layers", num_layers, "number of attention layers")
    check.require_positive_int("kv_latent_dim", kv_latent_dim, "features of the latent")
    check.require_non_negative_int("rope_dim", rope_dim, "features of the RoPE key")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype must be a torch.dtype such as torch.float16, got {type(dtype).__name__}."
        )
    itemsize = torch.empty((), dtype=dtype).element_size()
    return num_layers * (kv_latent_dim + rope_dim) * itemsize


class MultiHeadLatentAttention(nn.Module):
    r"""Causal self-attention whose keys and values are rebuilt from a cached low-rank latent.

    Math (DeepSeek-V2, eqs. 9-11 and 14-19, without the query compression and the latent's
    RMSNorm): with :math:`c_t = W^{DKV} h_t`,

    .. math::

        q_{t,i} = [W^Q_i h_t;\ \mathrm{RoPE}(W^{QR}_i h_t)],\quad
        k_{j,i} = [W^{UK}_i c_j;\ \mathrm{RoPE}(W^{KR} h_j)],\quad
        v_{j,i} = W^{UV}_i c_j,

    :math:`o_{t,i} = \sum_j \mathrm{softmax}_j(q_{t,i} \cdot k_{j,i} / \sqrt{d_h + d_R})
    v_{j,i}` and :math:`u_t = W^O [o_{t,1}; \dots; o_{t,n_h}]`.

    Layers, created in this order, all ``bias=False`` (as in DeepSeek-V2):
    ``kv_down = Linear(embed_dim, kv_latent_dim)`` (:math:`W^{DKV}`),
    ``k_up`` and ``v_up = Linear(kv_latent_dim, num_heads * head_dim)`` (:math:`W^{UK}`,
    :math:`W^{UV}`), ``q_proj = Linear(embed_dim, num_heads * head_dim)`` (:math:`W^Q`),
    ``q_rope_proj = Linear(embed_dim, num_heads * rope_dim)`` (:math:`W^{QR}`),
    ``k_rope_proj = Linear(embed_dim, rope_dim)`` (:math:`W^{KR}`, one key shared by all
    heads), ``out_proj = Linear(num_heads * head_dim, embed_dim)`` (:math:`W^O`), and
    ``rope = RotaryEmbedding(rope_dim, max_len, base)``; with ``rope_dim == 0``,
    ``q_rope_proj``, ``k_rope_proj`` and ``rope`` are ``None`` (no position information).

    Two forms, equal to rounding: ``forward(x, absorbed=False)`` (the naive form: rebuild
    every head's keys and values, then ordinary attention) and ``absorbed=True`` (attention in
    the latent space with :meth:`absorbed_weights`). ``decode`` appends to a
    :class:`LatentKVCache` and uses either.

    Args:
        embed_dim: Model width.
        num_heads: Number of heads.
        kv_latent_dim: Features of the latent ``d_c``; at most ``embed_dim`` (it compresses).
        head_dim: Features of each head's content query/key and value. Default:
            ``embed_dim // num_heads`` (then ``num_heads`` must divide ``embed_dim``).
        rope_dim: Features of the decoupled RoPE query/key per head; even, at most
            ``head_dim``, ``0`` for none. Default: ``head_dim // 2`` rounded down to even
            (DeepSeek-V2 uses ``d_h / 2``).
        max_len: Positions in the rotary table. Default: ``4096``.
        base: RoPE frequency base. Default: ``10000.0``.
        device: Device of the parameters.
        dtype: Dtype of the parameters.

    Shape:
        - x: ``(N, L, embed_dim)`` (batch first).
        - Output: ``(N, L, embed_dim)``; weights ``(N, num_heads, L, S)``.

    Raises:
        TypeError: If a size is not an int.
        ValueError: If a size is not positive, ``kv_latent_dim > embed_dim`` (a latent wider
            than the model compresses nothing), ``num_heads`` does not divide ``embed_dim``
            when ``head_dim`` is not given, or ``rope_dim`` is odd, negative or larger than
            ``head_dim``.

    Source:
        DeepSeek-AI 2024, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
        Language Model", arXiv:2405.04434, Sec. 2.1.2 (low-rank key-value joint compression,
        absorbing :math:`W^{UK}` into :math:`W^Q` and :math:`W^{UV}` into :math:`W^O`) and
        Sec. 2.1.3 (decoupled rotary position embedding).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        kv_latent_dim: int,
        head_dim: int | None = None,
        rope_dim: int | None = None,
        *,
        max_len: int = 4096,
        base: float = 10000.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        check.require_positive_int("embed_dim", embed_dim, "model width")
        check.require_positive_int("num_heads", num_heads, "number of heads")
        check.require_positive_int("kv_latent_dim", kv_latent_dim, "features of the latent")
        if kv_latent_dim > embed_dim:
            raise ValueError(
                f"kv_latent_dim (={kv_latent_dim}) must be at most embed_dim (={embed_dim}): "
                f"the latent is a compression of the hidden state, and a wider one caches more "
                f"than the input it summarises. Pass kv_latent_dim={embed_dim // 2} or less "
                f"(DeepSeek-V2 uses 4 * head_dim)."
            )
        if head_dim is None:
            check.require_divisible_heads(embed_dim, num_heads)
            head_dim = embed_dim // num_heads
        check.require_positive_int("head_dim", head_dim, "features per head")
        if rope_dim is None:
            rope_dim = (head_dim // 2) - (head_dim // 2) % 2
        _require_rope_dim(rope_dim, head_dim)
        check.require_positive_int("max_len", max_len, "number of positions in the table")
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, head_dim
        self.kv_latent_dim, self.rope_dim = kv_latent_dim, rope_dim
        inner = num_heads * head_dim
        self.kv_down = nn.Linear(embed_dim, kv_latent_dim, bias=False, **factory)
        self.k_up = nn.Linear(kv_latent_dim, inner, bias=False, **factory)
        self.v_up = nn.Linear(kv_latent_dim, inner, bias=False, **factory)
        self.q_proj = nn.Linear(embed_dim, inner, bias=False, **factory)
        self.q_rope_proj = self.k_rope_proj = self.rope = None  # rope_dim == 0: no positions
        if rope_dim > 0:
            self.q_rope_proj = nn.Linear(embed_dim, num_heads * rope_dim, bias=False, **factory)
            self.k_rope_proj = nn.Linear(embed_dim, rope_dim, bias=False, **factory)
        self.out_proj = nn.Linear(inner, embed_dim, bias=False, **factory)
        if rope_dim > 0:
            self.rope = RotaryEmbedding(rope_dim, max_len, base, device=device)
        self.scale = 1.0 / math.sqrt(head_dim + rope_dim)

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
            f"kv_latent_dim={self.kv_latent_dim}, head_dim={self.head_dim}, "
            f"rope_dim={self.rope_dim}"
        )

    def cache_size_per_token(self) -> int:
        """Numbers cached per token (one layer): ``kv_latent_dim + rope_dim``."""
        return self.kv_latent_dim + self.rope_dim

    # ------------------------------------------------------------------------------------------
    # the pieces
    # ------------------------------------------------------------------------------------------

    def compress(
        self, x: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """What is cached for each token: the latent and the rotated shared RoPE key.

        Shape: x ``(N, S, embed_dim)``, positions ``(S,)``; output ``(N, S, kv_latent_dim)``
        and ``(N, S, rope_dim)``.
        """
        latent = self.kv_down(x)  # (N, S, kv_latent_dim)
        if self.rope is None:
            return latent, x.new_zeros(*x.shape[:2], 0)  # (N, S, 0): nothing positional
        rope_key = self.k_rope_proj(x)  # (N, S, rope_dim)
        rope_key = self.rope._rotate(rope_key, positions)  # (N, S, rope_dim)
        return latent, rope_key

    def _queries(
        self, x: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Content queries ``(N, H, L, head_dim)`` and rotated RoPE queries ``(N, H, L, d_R)``."""
        queries = _split_heads(self.q_proj(x), self.num_heads)  # (N, H, L, head_dim)
        if self.rope is None:
            return queries, queries[..., :0]  # (N, H, L, 0): nothing positional
        rope_q = _split_heads(self.q_rope_proj(x), self.num_heads)  # (N, H, L, rope_dim)
        rope_q = self.rope._rotate(rope_q, positions)  # (N, H, L, rope_dim)
        return queries, rope_q

    def absorbed_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The up-projections folded into the query and output projections.

        Math: :math:`\tilde W^Q_i = (W^{UK}_i)^\top W^Q_i` (the query read in latent space) and
        :math:`\tilde W^O_i = W^O_i W^{UV}_i` (the output written from latent space).

        Returns:
            tuple[torch.Tensor, torch.Tensor]: ``query_weight`` of shape
            ``(num_heads, kv_latent_dim, embed_dim)`` and ``output_weight`` of shape
            ``(embed_dim, num_heads, kv_latent_dim)``, in the parameters' dtype. Compute them
            once per model, not per step (they are recomputed here for clarity).
        """
        heads, head_dim, latent = self.num_heads, self.head_dim, self.kv_latent_dim
        w_q = self.q_proj.weight.view(heads, head_dim, self.embed_dim)  # (H, head_dim, E)
        w_uk = self.k_up.weight.view(heads, head_dim, latent)  # (H, head_dim, d_c)
        w_uv = self.v_up.weight.view(heads, head_dim, latent)  # (H, head_dim, d_c)
        w_o = self.out_proj.weight.view(self.embed_dim, heads, head_dim)  # (E, H, head_dim)
        query_weight = torch.einsum("hdc,hde->hce", w_uk, w_q)  # (H, d_c, E)
        output_weight = torch.einsum("ehd,hdc->ehc", w_o, w_uv)  # (E, H, d_c)
        return query_weight, output_weight

    # ------------------------------------------------------------------------------------------
    # the two forms
    # ------------------------------------------------------------------------------------------

    def _attend_naive(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        latents: torch.Tensor,
        rope_keys: torch.Tensor,
        attn_mask: torch.Tensor | None,
        need_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Rebuild every head's keys and values from the latents, then attend as usual."""
        queries, rope_q = self._queries(x, positions)  # (N, H, L, hd), (N, H, L, d_R)
        keys = _split_heads(self.k_up(latents), self.num_heads)  # (N, H, S, head_dim)
        values = _split_heads(self.v_up(latents), self.num_heads)  # (N, H, S, head_dim)
        shared = rope_keys[:, None].expand(-1, self.num_heads, -1, -1)  # (N, H, S, d_R)
        query = torch.cat((queries, rope_q), dim=-1)  # (N, H, L, head_dim + d_R)
        key = torch.cat((keys, shared), dim=-1)  # (N, H, S, head_dim + d_R)
        context, weights = scaled_dot_product_attention(
            query, key, values, attn_mask, scale=self.scale, return_weights=True
        )  # (N, H, L, head_dim), (N, H, L, S)
        output = self.out_proj(_merge_heads(context))  # (N, L, embed_dim)
        return output, (weights if need_weights else None)

    def _attend_absorbed(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        latents: torch.Tensor,
        rope_keys: torch.Tensor,
        attn_mask: torch.Tensor | None,
        need_weights: bool,
        folded: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend against the latents directly: multi-query attention in latent space."""
        if folded is None:
            folded = self.absorbed_weights()
        query_weight, output_weight = folded  # (H, d_c, E), (E, H, d_c)
        _, rope_q = self._queries(x, positions)  # (N, H, L, rope_dim)
        heads, latent_dim = self.num_heads, self.kv_latent_dim
        flat_query_weight = query_weight.reshape(heads * latent_dim, self.embed_dim)  # (H*d_c, E)
        latent_q = F.linear(x, flat_query_weight)  # (N, L, H * d_c), one matrix product
        latent_q = latent_q.unflatten(-1, (heads, latent_dim)).transpose(1, 2)  # (N, H, L, d_c)
        query = torch.cat((latent_q, rope_q), dim=-1)  # (N, H, L, d_c + d_R)
        key = torch.cat((latents, rope_keys), dim=-1)[:, None]  # (N, 1, S, d_c + d_R)
        value = latents[:, None]  # (N, 1, S, d_c): one value head shared by all heads
        # multi-query attention: stack the heads' queries as rows against the one shared key,
        # so the cached latents are read as stored, never repeated to num_heads heads
        batch, heads, query_len, _ = query.shape
        key_len = key.shape[2]
        stacked = query.reshape(batch, 1, heads * query_len, -1)  # (N, 1, H * L, d_c + d_R)
        if attn_mask is not None:
            attn_mask = attn_mask.expand(batch, heads, query_len, key_len)  # (N, H, L, S)
            attn_mask = attn_mask.reshape(batch, 1, heads * query_len, key_len)  # (N, 1, H*L, S)
        context, weights = scaled_dot_product_attention(
            stacked, key, value, attn_mask, scale=self.scale, return_weights=True
        )  # (N, 1, H * L, d_c), (N, 1, H * L, S)
        context = context.view(batch, heads, query_len, -1)  # (N, H, L, d_c)
        merged = context.transpose(1, 2).reshape(batch, query_len, heads * latent_dim)
        # merged: (N, L, H * d_c), the heads side by side
        flat_output_weight = output_weight.reshape(self.embed_dim, heads * latent_dim)  # (E, H*d_c)
        output = F.linear(merged, flat_output_weight)  # (N, L, embed_dim)
        weights = weights.view(batch, heads, query_len, key_len)  # (N, H, L, S)
        return output, (weights if need_weights else None)

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        *,
        positions: torch.Tensor | None = None,
        absorbed: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention over ``x``, in the naive form or (``absorbed=True``) the absorbed one.

        Args:
            x: Hidden states ``(N, L, embed_dim)``, the parameters' dtype and device.
            attn_mask: Bool (``True`` = may attend) or float mask, broadcastable to
                ``(N, num_heads, L, L)``.
            is_causal: Apply the causal mask (a ``bool``); not together with ``attn_mask``.
            need_weights: Also return the weights ``(N, num_heads, L, L)``.
            positions: Keyword-only. Token positions ``(L,)``, an integer tensor of values in
                ``0 .. max_len - 1``. Default: ``torch.arange(L)``.
            absorbed: Keyword-only. Use the absorbed form. Default: ``False``.

        Returns:
            tuple[torch.Tensor, torch.Tensor | None]: ``(output, weights)``.

        Raises:
            TypeError: If ``x`` is not a floating tensor of the parameters' dtype,
                ``is_causal``/``absorbed`` is not a ``bool``, or ``positions`` is not an
                integer tensor.
            ValueError: If ``x`` has the wrong shape or device, ``attn_mask`` and
                ``is_causal`` are both given, or ``positions`` is not ``(L,)``, has a negative
                position or one at or beyond ``max_len``.
        """
        self._check_x(x)
        check.require_bool("is_causal", is_causal)
        check.require_bool("absorbed", absorbed)
        check.require_not_mask_and_causal(attn_mask, is_causal)
        seq_len = x.shape[1]
        positions = self._check_positions(positions, x)  # (L,)
        if is_causal:
            attn_mask = _causal_mask(seq_len, seq_len, device=x.device)  # (L, L)
        latents, rope_keys = self.compress(x, positions)  # (N, L, d_c), (N, L, d_R)
        attend = self._attend_absorbed if absorbed else self._attend_naive
        return attend(x, positions, latents, rope_keys, attn_mask, need_weights)

    def new_cache(self, batch: int, max_len: int) -> LatentKVCache:
        """An empty :class:`LatentKVCache` on the parameters' device and dtype."""
        parameter = self.kv_down.weight
        return LatentKVCache(
            batch, max_len, self.kv_latent_dim, self.rope_dim,
            device=parameter.device, dtype=parameter.dtype,
        )

    def decode(
        self,
        x: torch.Tensor,
        cache: LatentKVCache,
        *,
        absorbed: bool = True,
        absorbed_weights: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Causal self-attention for ``new_len`` new tokens, earlier ones read from the cache.

        The new tokens take positions ``cache.cached_len ..``; their latents and RoPE keys
        are appended, then each attends to every cached token up to itself (bottom-right
        causal mask).

        Args:
            x: Hidden states of the new tokens ``(N, new_len, embed_dim)``.
            cache: A :class:`LatentKVCache` of this layer (``new_cache``).
            absorbed: Keyword-only. Attend in latent space (``True``, the decode-time form) or
                rebuild every cached key and value first (``False``). Default: ``True``.
            absorbed_weights: Keyword-only. The output of :meth:`absorbed_weights`, computed
                once and reused by every step (what an inference engine does); ``None``
                recomputes them at each call. Only with ``absorbed=True``.

        Returns:
            torch.Tensor: ``(N, new_len, embed_dim)``.

        Raises:
            TypeError: If ``x`` or ``absorbed_weights`` is not of the parameters' dtype, or
                ``cache`` is not a ``LatentKVCache``.
            ValueError: If shapes do not fit the layer or the cache, the cache is full, the
                new tokens' positions reach ``max_len`` (the rotary table's size), or
                ``absorbed_weights`` is not the pair :meth:`absorbed_weights` returns (shapes
                ``(num_heads, kv_latent_dim, embed_dim)`` and
                ``(embed_dim, num_heads, kv_latent_dim)``) or is given with ``absorbed=False``.
        """
        self._check_x(x)
        check.require_bool("absorbed", absorbed)
        if not isinstance(cache, LatentKVCache):
            raise TypeError(
                f"cache must be a LatentKVCache, got {type(cache).__name__}. Build it with "
                f"module.new_cache(batch, max_len)."
            )
        if absorbed_weights is not None:
            self._check_absorbed_weights(absorbed_weights, absorbed)
        new_len, start = x.shape[1], cache.cached_len
        self._check_rope_table(start + new_len)
        positions = torch.arange(start, start + new_len, device=x.device)  # (new_len,)
        latent, rope_key = self.compress(x, positions)  # (N, new_len, d_c), (N, new_len, d_R)
        latents, rope_keys = cache.append(latent, rope_key)  # (N, S, d_c), (N, S, d_R)
        mask = _causal_mask(new_len, latents.shape[1], alignment="bottom_right", device=x.device)
        if absorbed:
            return self._attend_absorbed(
                x, positions, latents, rope_keys, mask, False, absorbed_weights
            )[0]  # (N, new_len, embed_dim)
        return self._attend_naive(x, positions, latents, rope_keys, mask, False)[0]

    def _check_absorbed_weights(self, absorbed_weights: object, absorbed: bool) -> None:
        """Raise unless ``absorbed_weights`` is this module's pair from :meth:`absorbed_weights`."""
        if not absorbed:
            raise ValueError(
                "absorbed_weights was given with absorbed=False, where the naive form rebuilds "
                "the keys and values and never reads it. Pass absorbed=True to use it, or "
                "leave absorbed_weights out."
            )
        heads, latent, embed = self.num_heads, self.kv_latent_dim, self.embed_dim
        expected = ((heads, latent, embed), (embed, heads, latent))
        pair = absorbed_weights
        is_pair = isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
            isinstance(weight, torch.Tensor) for weight in pair
        )
        got = tuple(tuple(weight.shape) for weight in pair) if is_pair else None
        if got != expected:
            described = f"shapes {got[0]} and {got[1]}" if is_pair else _describe_pair(pair)
            raise ValueError(
                f"absorbed_weights must be the pair (query_weight, output_weight) of shapes "
                f"(num_heads, kv_latent_dim, embed_dim) = {expected[0]} and "
                f"(embed_dim, num_heads, kv_latent_dim) = {expected[1]} for this module, got "
                f"{described}. Pass absorbed_weights=module.absorbed_weights() of this same "
                f"module (computed once, before the decode loop)."
            )
        parameter = self.kv_down.weight
        for name, weight in zip(("absorbed_weights[0]", "absorbed_weights[1]"), pair, strict=True):
            check.require_matching_dtype(name, weight, parameter.dtype)
            check.require_matching_device(name, weight, parameter.device)

    def _check_positions(self, positions: object, x: torch.Tensor) -> torch.Tensor:
        """Validate ``positions`` as ``GroupedQueryAttention`` does; default ``arange(seq_len)``.

        Shape: x ``(N, L, embed_dim)``; positions and output ``(L,)``, an integer tensor.
        """
        seq_len = x.shape[1]
        if positions is None:  # built here, 0 ... seq_len - 1: only its length needs a check
            self._check_rope_table(seq_len)
            return torch.arange(seq_len, device=x.device)  # (L,)
        check.require_tensor("positions", positions, dtype="torch.long")
        if positions.dim() != 1 or positions.shape[0] != seq_len:
            raise ValueError(
                f"positions must have shape (seq_len,) = ({seq_len},), one position per token "
                f"of x (batch, seq_len, embed_dim), shared by the batch, got positions.shape="
                f"{tuple(positions.shape)} for x.shape={tuple(x.shape)}. Pass "
                f"torch.arange(start, start + {seq_len})."
            )
        _require_positions(positions, x)  # an integer dtype, no negative position
        if positions.numel() > 0:
            self._check_rope_table(int(positions.max()) + 1)
        return positions

    def _check_rope_table(self, num_positions: int) -> None:
        """Raise unless the rotary table covers positions ``0 ... num_positions - 1``."""
        if self.rope is not None and num_positions > self.rope.max_len:
            raise ValueError(
                f"positions must be below max_len={self.rope.max_len} (the rotary table's "
                f"size), got a position of {num_positions - 1}. Build "
                f"MultiHeadLatentAttention with max_len={num_positions} or more."
            )

    def _check_x(self, x: object) -> None:
        check.require_tensor("x", x)
        if x.dim() != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(
                f"x must have shape (batch, seq_len, embed_dim) with embed_dim="
                f"{self.embed_dim}, got x.shape={tuple(x.shape)}."
            )
        check.require_floating("x", x)
        check.require_matching_dtype("x", x, self.kv_down.weight.dtype)
        check.require_matching_device("x", x, self.kv_down.weight.device)


def _describe_pair(value: object) -> str:
    """How a value that is not a pair of tensors looks, for an error message."""
    if isinstance(value, (tuple, list)):
        kinds = ", ".join(type(item).__name__ for item in value)
        return f"a {type(value).__name__} of {len(value)} item(s) ({kinds})"
    if isinstance(value, torch.Tensor):
        return f"one tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def _require_rope_dim(rope_dim: object, head_dim: int) -> None:
    """Raise unless ``rope_dim`` is an even int in ``[0, head_dim]``."""
    check.require_non_negative_int("rope_dim", rope_dim, "features of the decoupled RoPE key")
    if rope_dim % 2 != 0:
        raise ValueError(
            f"rope_dim must be even, since RoPE rotates features two at a time, got "
            f"rope_dim={rope_dim}. Use {rope_dim - 1} or {rope_dim + 1}."
        )
    if rope_dim > head_dim:
        raise ValueError(
            f"rope_dim (={rope_dim}) does not fit the head: it must be at most head_dim "
            f"(={head_dim}). DeepSeek-V2 uses rope_dim = head_dim // 2 = "
            f"{head_dim // 2 - (head_dim // 2) % 2}."
        )
