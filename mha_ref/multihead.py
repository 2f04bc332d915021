r"""``MultiHeadAttention``: a readable drop-in for ``torch.nn.MultiheadAttention``.

Same constructor, same forward arguments and return values, same ``state_dict`` keys and
shapes, same initialisation, so weights move both ways with ``load_state_dict`` (or with
``MultiHeadAttention.from_torch`` and ``MultiHeadAttention.to_torch``).

Where PyTorch writes one long function (``torch.nn.functional.multi_head_attention_forward``),
the forward pass here is a sequence of named steps, each with its shapes (``N`` = batch,
``L`` = query_len, ``S`` = key_len, ``E`` = embed_dim, ``H`` = num_heads, as in PyTorch's docs):

.. code-block:: text

    to batch-first      (L, N, E)            -> (N, L, E)
    project             (N, L, E)            -> q (N, L, E), k (N, S, E), v (N, S, E)
    append bias_k/v     (N, S, E)            -> (N, S + 1, E)          if add_bias_kv
    split heads         (N, S, E)            -> (N, H, S, head_dim)
    append zero key     (N, H, S, head_dim)  -> (N, H, S + 1, head_dim) if add_zero_attn
    build mask          attn_mask, key_padding_mask, is_causal -> additive (N, H, L, S)
    attend              -> context (N, H, L, head_dim), weights (N, H, L, S)
    merge heads         (N, H, L, head_dim)  -> (N, L, E)
    output projection   (N, L, E)            -> (N, L, E)
    back to caller's layout
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.init import constant_, xavier_normal_, xavier_uniform_
from torch.nn.modules.linear import NonDynamicallyQuantizableLinear

from mha_ref import _validation as check
from mha_ref.functional import (
    _attention,
    _autocast_active,
    _default_scale,
    _merge_heads,
    _split_heads,
)
from mha_ref.masks import _allowed_to_additive, _causal_mask

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(nn.MultiheadAttention):
    r"""Multi-head attention with the interface of ``torch.nn.MultiheadAttention``.

    Math: :math:`\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots,
    \mathrm{head}_h) W^O`, :math:`\mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_i^K,
    VW_i^V)`, with :math:`d_k = d_v = \text{embed_dim} / h`.

    Parameters (names, shapes and initialisation as in PyTorch):

    * ``in_proj_weight`` ``(3 * embed_dim, embed_dim)``: :math:`W^Q`, :math:`W^K`, :math:`W^V`
      stacked row-wise in that order (rows ``0:E`` project queries, ``E:2E`` keys, ``2E:3E``
      values), when ``kdim == vdim == embed_dim``; otherwise ``None``, and the three matrices
      are ``q_proj_weight`` ``(embed_dim, embed_dim)``, ``k_proj_weight``
      ``(embed_dim, kdim)``, ``v_proj_weight`` ``(embed_dim, vdim)``. Xavier-uniform init.
    * ``in_proj_bias`` ``(3 * embed_dim,)`` (zeros) if ``bias``, else ``None``.
    * ``out_proj`` an ``nn.Linear(embed_dim, embed_dim, bias=bias)`` (bias zeroed), :math:`W^O`.
    * ``bias_k``, ``bias_v`` ``(1, 1, embed_dim)`` (Xavier-normal) if ``add_bias_kv``.

    Parameters are created and initialised in the same order as PyTorch's, so the same
    ``torch.manual_seed`` gives the same initial weights.

    **A subclass of** ``torch.nn.MultiheadAttention``, so ``isinstance(m,
    torch.nn.MultiheadAttention)`` is ``True`` and code that reads its attributes works:
    ``nn.TransformerEncoderLayer``/``nn.TransformerEncoder`` accept it as ``self_attn``
    (in their inference fast path they call PyTorch's fused layer kernel with this module's
    weights, see below), ``out_proj`` is a ``NonDynamicallyQuantizableLinear`` as in PyTorch,
    so ``torch.ao.quantization.quantize_dynamic`` leaves it alone, and ``torch.autocast``
    works (``bfloat16`` activations with ``float32`` weights). ``torch.compile(m,
    fullgraph=True)`` compiles the forward without graph breaks. Only ``forward`` (and the
    constructor's checks) are this package's; everything else is inherited.

    **Differences from PyTorch, on purpose.** This list is complete (checked with torch 2.13;
    each item has a test, and ``tests/reference/test_differential.py`` classifies random comparisons
    into "equal", "both raise" or one of these items); everything else computes as
    ``torch.nn.MultiheadAttention`` on each of its paths.

    * ``is_causal=True`` **without** ``attn_mask`` builds the causal mask (top-left aligned,
      shape ``(L, S)``; the keys of ``add_bias_kv``/``add_zero_attn`` stay visible). PyTorch
      does not: on its regular path it raises ``RuntimeError: Need attn_mask if specifying the
      is_causal hint``, and in its inference fast path (evaluation mode, autograd off or no
      parameter requiring grad, ``bias=True``, ``batch_first=True``, self-attention with one
      tensor as query, key and value, ``kdim = vdim = embed_dim``, an even ``num_heads``, no
      ``add_bias_kv``/``add_zero_attn``, no float mask, no autocast, and
      ``torch.backends.mha.get_fastpath_enabled()``) it ignores ``is_causal`` and computes
      **non-causal** attention, with no error and no warning. Code that relies on this module
      building the mask therefore loses causality silently after ``to_torch()`` at inference:
      when moving to PyTorch, pass ``attn_mask=~mha_ref.causal_mask(L, S)`` (``True`` =
      blocked).
    * ``is_causal=True`` **with** ``attn_mask`` is the hint that ``attn_mask`` *is* the
      top-left causal mask, and both libraries follow PyTorch's regular path on it: with
      ``need_weights=False`` and no ``key_padding_mask`` the top-left triangle over all keys
      (the extra keys of ``add_bias_kv``/``add_zero_attn`` included) **replaces**
      ``attn_mask``, which is then not read (a float mask gets no gradient); otherwise
      ``attn_mask`` is applied as given. A bottom-right (KV-cache) or any non-causal mask
      passed with ``is_causal=True`` is therefore silently replaced there, in PyTorch as here.
      The difference: PyTorch's inference fast path ignores ``is_causal`` and applies
      ``attn_mask``, so there the two differ unless the mask is the top-left triangle.
    * A query row whose keys are all masked gets attention weights ``0``, so its attention
      output is ``0`` and the module returns ``out_proj.bias`` there; never NaN. PyTorch returns
      NaN for such rows when ``need_weights=True``, and also with ``need_weights=False`` in its
      inference fast path; with ``need_weights=False`` outside the fast path it returns the
      same ``out_proj.bias`` as here.
    * ``float16``/``bfloat16``: the explicit path (``need_weights=True``) computes the scores,
      softmax and weighted sum in ``float32`` and rounds the results to the input dtype, as
      ``F.scaled_dot_product_attention`` (the fused path, in both libraries) does. PyTorch's
      ``need_weights=True`` path computes them in the input dtype, so it returns NaN where a
      ``float16`` score exceeds ``65504`` and differs by rounding elsewhere.
    * A float ``attn_mask`` or ``key_padding_mask`` of another float dtype than the query
      (e.g. ``float64`` masks with ``float32`` inputs) is cast to the query's dtype; PyTorch
      raises ``RuntimeError`` there.
    * A bool mask combined with a float one (e.g. a bool ``attn_mask`` with a float
      ``key_padding_mask``, or the reverse) is accepted silently: each becomes additive and
      they are summed. PyTorch computes the same result but warns (``UserWarning``: "Support
      for mismatched key_padding_mask and attn_mask is deprecated").
    * ``is_causal`` must be a ``bool``: anything else (``1``, ``numpy.bool_``, a tensor, the
      string ``"False"``) raises ``TypeError``. PyTorch's module raises ``TypeError`` there
      only with ``need_weights=False`` (``F.scaled_dot_product_attention`` takes nothing but a
      ``bool``); with ``need_weights=True`` it takes any truthy object as ``True``, so
      ``is_causal="False"`` applies the causal mask.
    * Bad input raises ``ValueError``/``TypeError`` with a message that names the argument and
      the fix, instead of ``AssertionError``/``RuntimeError``. This includes a mask on another
      device than the inputs, which PyTorch does not check: a ``meta`` mask with CPU inputs
      returns garbage there, with no error; a mask of the wrong shape that PyTorch would
      drop unread (the replaced ``attn_mask`` above); and shapes that do not fit when a tensor
      is empty, which ``F.scaled_dot_product_attention`` does not check.
    * Empty inputs (a batch, query or key length of ``0``) give an empty or ``out_proj.bias``
      result on every path. PyTorch fails on some of them with ``need_weights=False``
      (``RuntimeError: cannot reshape tensor of 0 elements``, e.g. with a 3-D ``attn_mask``),
      and its inference fast path returns ``None`` for the weights of an empty batch.
    * Sizes accept what PyTorch accepts, any integer (``int``, ``numpy.int64``, ...; ``kdim``
      and ``vdim`` may be ``0``), but a ``bool`` or a float raises ``TypeError`` naming the
      argument.
    * ``dropout`` must be in ``[0, 1]`` (``bool`` counts as ``0``/``1``). PyTorch's
      constructor accepts any number, then in training raises for a value above ``1``, raises
      for a negative one with ``need_weights=False``, and silently ignores a negative one with
      ``need_weights=True``.
    * ``mha_ref.scaled_dot_product_attention`` and ``GroupedQueryAttention`` share the mask
      rules: fully masked rows give ``0`` (as PyTorch's function does), float masks are cast
      to the query's dtype (``F.scaled_dot_product_attention`` accepts only ``float32`` or the
      query's dtype), masks on another device raise ``ValueError``. The function applies
      ``attn_mask`` together with ``is_causal=True`` (both masks) for inputs of any rank, as
      PyTorch's default CPU kernel does for 4-D inputs; PyTorch's math backend, which it uses
      e.g. for 3-D inputs, raises ``RuntimeError`` there. It raises ``ValueError`` for a
      non-finite ``scale`` (PyTorch returns NaN for ``inf`` and zeros for ``nan``). With
      ``scale <= 0`` and ``is_causal=True`` it computes the formula over the allowed keys
      (uniform weights for ``0``, each query's preference reversed for a negative scale), as
      PyTorch's math backend does; PyTorch's default CPU kernel returns NaN there, for a
      negative scale as for ``0``.
    * No inference fast path and no NestedTensor support in ``forward``. Inside
      ``nn.TransformerEncoderLayer`` in its own fast path (evaluation mode, no autograd,
      ``batch_first=True``, ``bias=True``...), PyTorch does not call ``self_attn.forward``: its
      fused layer kernel reads ``in_proj_weight``, ``out_proj`` and ``merge_masks`` from this
      module, so the result is PyTorch's (NaN rows included) and ``is_causal`` is ignored there.
    * ``torch.jit.script`` raises (``RuntimeError``): ``forward`` and its input checks use
      Python that TorchScript cannot compile (``object`` annotations, f-string messages), and
      ``torch.jit.script`` is deprecated in PyTorch (it warns so). Use ``torch.compile`` or
      ``torch.export``, or script ``m.to_torch()``.

    **Two paths, like PyTorch.** When the weights are returned (``need_weights=True``, the
    default) the attention step is the explicit ``mha_ref.scaled_dot_product_attention``: every
    intermediate is a tensor you can inspect. When they are not (``need_weights=False``) the
    step calls ``torch.nn.functional.scaled_dot_product_attention``, as
    ``torch.nn.MultiheadAttention`` does: it computes the same thing, with a fused kernel where
    the device and inputs allow one. Whether the ``(batch, num_heads, L, S)`` weights are ever
    stored depends on the kernel: the fused ones (flash, memory-efficient, cuDNN) never store
    them; the math backend, which PyTorch falls back to when no fused kernel accepts the inputs,
    does (example 9 measures the peak memory of each path). Everything around that one call
    (projections, head split, masks, merge, output projection) is the same code.
    ``use_fused=False`` keeps the explicit path for ``need_weights=False`` too (slower; for
    study, debugging, and higher-order gradients: some fused kernels have no double backward).

    Args:
        embed_dim: Total model width :math:`d_{model}` (query features and output features).
        num_heads: Number of heads :math:`h`; must divide ``embed_dim``.
        dropout: Dropout probability on the attention weights (training mode only), in
            ``[0, 1]``. Default: ``0.0``.
        bias: Add biases to the input and output projections. Default: ``True``.
        add_bias_kv: Append a learned key and value (``bias_k``, ``bias_v``) to the key and
            value sequences. Default: ``False``.
        add_zero_attn: Append an all-zero key and value after the heads are split.
            Default: ``False``.
        kdim: Features of ``key``. Default: ``embed_dim``.
        vdim: Features of ``value``. Default: ``embed_dim``.
        batch_first: Inputs and outputs are ``(batch, seq, feature)`` instead of
            ``(seq, batch, feature)``. Default: ``False`` (as in PyTorch).
        device: Device of the parameters.
        dtype: Dtype of the parameters.
        use_fused: Keyword-only. Use PyTorch's fused attention when ``need_weights=False``.
            Can also be changed later through the attribute ``use_fused``. Use
            ``use_fused=False`` for higher-order gradients (``torch.autograd.grad`` with
            ``create_graph=True``, ``gradgradcheck``): some fused kernels, e.g. flash attention
            on CPU, have no double backward. Default: ``True``.

    Shape:
        - query: ``(L, E)`` unbatched, ``(L, N, E)`` or ``(N, L, E)`` with ``batch_first``;
          ``L`` = query_len, ``N`` = batch, ``E`` = embed_dim.
        - key: ``(S, kdim)``, ``(S, N, kdim)`` or ``(N, S, kdim)``; ``S`` = key_len.
        - value: ``(S, vdim)``, ``(S, N, vdim)`` or ``(N, S, vdim)``.
        - key_padding_mask: ``(N, S)`` or ``(S,)`` unbatched; bool ``True`` = **ignore** that
          key (padding), or float added to the scores.
        - attn_mask: ``(L, S)``, or ``(N * num_heads, L, S)`` (``(num_heads, L, S)``
          unbatched), batch-major (index ``n * num_heads + h``); bool ``True`` = **blocked**,
          or float added to the scores.
        - attn_output: same layout as ``query`` with ``E`` features.
        - attn_weights: ``(N, L, S)`` averaged over heads, or ``(N, num_heads, L, S)`` with
          ``average_attn_weights=False`` (no ``N`` when unbatched); ``S`` counts the extra keys
          of ``add_bias_kv`` and ``add_zero_attn``.

    Raises:
        TypeError: If a size is not an integer, or ``dropout`` is not a number.
        ValueError: If ``embed_dim`` or ``num_heads`` is not positive, ``kdim``/``vdim`` is
            negative, ``embed_dim`` is not divisible by ``num_heads``, or ``dropout`` is
            outside ``[0, 1]``.

    Source:
        Vaswani et al. 2017, "Attention Is All You Need", arXiv:1706.03762, Sec. 3.2.2;
        mirrors ``torch.nn.MultiheadAttention`` and
        ``torch.nn.functional.multi_head_attention_forward``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        use_fused: bool = True,
    ) -> None:
        _check_constructor_arguments(embed_dim, num_heads, dropout, kdim, vdim)
        factory_kwargs = {"device": device, "dtype": dtype}
        # The parameters are created here, in PyTorch's order, so the same torch.manual_seed
        # gives the same weights. nn.MultiheadAttention.__init__ would do the same, so it is
        # skipped: nn.Module.__init__ is all this needs (a test checks that both constructors
        # set the same attributes).
        nn.Module.__init__(self)
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads

        if self._qkv_same_embed_dim:
            packed_shape = (3 * embed_dim, embed_dim)
            self.in_proj_weight = nn.Parameter(torch.empty(packed_shape, **factory_kwargs))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = nn.Parameter(torch.empty((embed_dim, embed_dim), **factory_kwargs))
            self.k_proj_weight = nn.Parameter(torch.empty((embed_dim, self.kdim), **factory_kwargs))
            self.v_proj_weight = nn.Parameter(torch.empty((embed_dim, self.vdim), **factory_kwargs))
            self.register_parameter("in_proj_weight", None)

        if bias:
            self.in_proj_bias = nn.Parameter(torch.empty(3 * embed_dim, **factory_kwargs))
        else:
            self.register_parameter("in_proj_bias", None)
        # a Linear that torch.ao.quantization.quantize_dynamic leaves alone, as in PyTorch
        self.out_proj = NonDynamicallyQuantizableLinear(
            embed_dim, embed_dim, bias=bias, **factory_kwargs
        )

        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty((1, 1, embed_dim), **factory_kwargs))
            self.bias_v = nn.Parameter(torch.empty((1, 1, embed_dim), **factory_kwargs))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self.use_fused = use_fused
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """Initialise like PyTorch: Xavier-uniform weights, zero biases, Xavier-normal bias_k/v.

        The same code as ``torch.nn.MultiheadAttention._reset_parameters``.
        """
        if self._qkv_same_embed_dim:
            xavier_uniform_(self.in_proj_weight)
        else:
            xavier_uniform_(self.q_proj_weight)
            xavier_uniform_(self.k_proj_weight)
            xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            constant_(self.in_proj_bias, 0.0)
            constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            xavier_normal_(self.bias_v)

    # ------------------------------------------------------------------------------------------
    # forward: the steps in order
    # ------------------------------------------------------------------------------------------

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = True,
        attn_mask: torch.Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` to ``key``/``value``; see the class docstring for shapes.

        Args:
            query: Queries, ``(L, E)``, ``(L, N, E)`` or ``(N, L, E)``.
            key: Keys, ``(S, kdim)``, ``(S, N, kdim)`` or ``(N, S, kdim)``.
            value: Values, ``(S, vdim)``, ``(S, N, vdim)`` or ``(N, S, vdim)``.
            key_padding_mask: ``(N, S)``; bool ``True`` = ignore that key, or float added.
            need_weights: Also return the attention weights. Default: ``True``.
            attn_mask: ``(L, S)`` or ``(N * num_heads, L, S)``; bool ``True`` = blocked, or
                float added to the scores.
            average_attn_weights: Average the returned weights over heads. Default: ``True``.
            is_causal: Causal attention, a ``bool``. Without ``attn_mask`` the top-left causal
                mask is built here (PyTorch raises, or ignores the flag in its inference fast
                path: see the class docstring). With ``attn_mask`` it is PyTorch's hint: with
                ``need_weights=False`` and no ``key_padding_mask`` the top-left triangle
                replaces ``attn_mask``; otherwise ``attn_mask`` is applied as given.

        Returns:
            tuple[torch.Tensor, torch.Tensor | None]: ``(attn_output, attn_weights)``;
            ``attn_weights`` is ``None`` when ``need_weights=False``. The weights are those
            after dropout, as in PyTorch.

        Raises:
            TypeError: If an input is not a tensor, is not floating point, does not have the
                parameters' dtype (outside ``torch.autocast``), a mask is neither bool nor
                float, or ``is_causal`` is not a ``bool``.
            ValueError: If ranks, feature sizes, batch sizes, lengths or mask shapes do not
                fit, an input is on another device than the parameters, or a mask is on
                another device than the inputs.
        """
        self._check_inputs(query, key, value, key_padding_mask, attn_mask, is_causal)
        is_batched = query.dim() == 3
        query, key, value = (self._to_batch_first(x, is_batched) for x in (query, key, value))
        if not is_batched and key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)  # (1, key_len)
        batch, query_len, key_len = query.shape[0], query.shape[1], key.shape[1]

        queries, keys, values = self._project(query, key, value)  # (batch, len, embed_dim)
        keys, values = self._append_bias_kv(keys, values)  # key_len + 1 if add_bias_kv
        queries = _split_heads(queries, self.num_heads)  # (batch, num_heads, query_len, head_dim)
        keys = _split_heads(keys, self.num_heads)  # (batch, num_heads, key_len, head_dim)
        values = _split_heads(values, self.num_heads)  # (batch, num_heads, key_len, head_dim)
        keys, values = self._append_zero_attn(keys, values)  # key_len + 1 if add_zero_attn
        all_keys = keys.shape[2]  # key_len plus the keys of add_bias_kv and add_zero_attn

        if _causal_replaces_mask(is_causal, attn_mask, key_padding_mask, need_weights):
            # PyTorch's rule: the hint says attn_mask *is* the causal mask, so the top-left
            # triangle over all keys is used and attn_mask is not read (not even for gradients).
            allowed = _causal_mask(query_len, all_keys, device=queries.device)  # (L, all_keys)
            mask = _allowed_to_additive(allowed, dtype=queries.dtype)  # (query_len, all_keys)
        else:
            mask = self._build_mask(
                attn_mask, key_padding_mask, is_causal, batch, query_len, key_len,
                queries.dtype, queries.device,
            )  # (batch or 1, num_heads or 1, query_len, key_len) or None
            mask = self._allow_extra_keys(mask, all_keys - key_len)  # (..., query_len, all_keys)
        context, weights = self._attend(queries, keys, values, mask, need_weights)
        # context (batch, num_heads, query_len, head_dim); weights (.., query_len, all_keys)

        merged = _merge_heads(context)  # (batch, query_len, embed_dim)
        attn_output = self.out_proj(merged)  # (batch, query_len, embed_dim)
        attn_output = self._from_batch_first(attn_output, is_batched)  # caller's layout
        if not need_weights:
            return attn_output, None
        return attn_output, self._format_weights(weights, average_attn_weights, is_batched)

    def _to_batch_first(self, x: torch.Tensor, is_batched: bool) -> torch.Tensor:
        """Bring an input to ``(batch, seq_len, features)``, adding a batch of 1 if unbatched."""
        if not is_batched:
            return x.unsqueeze(0)  # (1, seq_len, features)
        if self.batch_first:
            return x  # (batch, seq_len, features)
        return x.transpose(0, 1)  # (seq_len, batch, features) -> (batch, seq_len, features)

    def _from_batch_first(self, x: torch.Tensor, is_batched: bool) -> torch.Tensor:
        """Undo ``_to_batch_first`` on the output."""
        if not is_batched:
            return x.squeeze(0)  # (seq_len, features)
        if self.batch_first:
            return x  # (batch, seq_len, features)
        return x.transpose(0, 1)  # (seq_len, batch, features)

    def projection_weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return the query, key and value projection matrices :math:`W^Q, W^K, W^V`.

        With packed weights these are the row blocks ``0:E``, ``E:2E``, ``2E:3E`` of
        ``in_proj_weight`` (views, so gradients flow into ``in_proj_weight``).

        Shape:
            ``(embed_dim, embed_dim)``, ``(embed_dim, kdim)``, ``(embed_dim, vdim)``.

        Returns:
            tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ``(w_q, w_k, w_v)``, used as
            ``q = query @ w_q.T + b_q``.
        """
        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = self.in_proj_weight.chunk(3, dim=0)  # 3 x (embed_dim, embed_dim)
            return w_q, w_k, w_v
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def projection_biases(self) -> tuple[torch.Tensor | None, ...]:
        """Return the query, key and value biases (slices of ``in_proj_bias``), or Nones.

        Shape:
            Three tensors of shape ``(embed_dim,)``, or three ``None``.

        Returns:
            tuple: ``(b_q, b_k, b_v)``.
        """
        if self.in_proj_bias is None:
            return None, None, None
        b_q, b_k, b_v = self.in_proj_bias.chunk(3)  # 3 x (embed_dim,)
        return b_q, b_k, b_v

    def _project(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Apply the input projections :math:`QW^Q`, :math:`KW^K`, :math:`VW^V`."""
        w_q, w_k, w_v = self.projection_weights()
        b_q, b_k, b_v = self.projection_biases()
        queries = F.linear(query, w_q, b_q)  # (batch, query_len, embed_dim)
        keys = F.linear(key, w_k, b_k)  # (batch, key_len, embed_dim)
        values = F.linear(value, w_v, b_v)  # (batch, key_len, embed_dim)
        return queries, keys, values

    def _append_bias_kv(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """With ``add_bias_kv``, append the learned ``bias_k``/``bias_v`` as one more key/value."""
        if self.bias_k is None:
            return keys, values
        batch = keys.shape[0]
        bias_k = self.bias_k.expand(batch, 1, self.embed_dim)  # (batch, 1, embed_dim)
        bias_v = self.bias_v.expand(batch, 1, self.embed_dim)  # (batch, 1, embed_dim)
        keys = torch.cat([keys, bias_k], dim=1)  # (batch, key_len + 1, embed_dim)
        values = torch.cat([values, bias_v], dim=1)  # (batch, key_len + 1, embed_dim)
        return keys, values

    def _append_zero_attn(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """With ``add_zero_attn``, append an all-zero key and value to every head."""
        if not self.add_zero_attn:
            return keys, values
        batch, num_heads, _, head_dim = keys.shape
        zeros = keys.new_zeros(batch, num_heads, 1, head_dim)  # (batch, num_heads, 1, head_dim)
        keys = torch.cat([keys, zeros], dim=2)  # (batch, num_heads, key_len + 1, head_dim)
        values = torch.cat([values, zeros], dim=2)  # (batch, num_heads, key_len + 1, head_dim)
        return keys, values

    def _build_mask(
        self,
        attn_mask: torch.Tensor | None,
        key_padding_mask: torch.Tensor | None,
        is_causal: bool,
        batch: int,
        query_len: int,
        key_len: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> torch.Tensor | None:
        """Combine ``attn_mask``, ``key_padding_mask`` and ``is_causal`` into one additive mask.

        Bool masks here mean **blocked** (PyTorch MHA convention) and become ``-inf``; float
        masks are used as they are. The two masks are added.

        Returns:
            torch.Tensor | None: Float mask broadcastable to
            ``(batch, num_heads, query_len, key_len)``, or ``None``.
        """
        if attn_mask is None and is_causal:
            attn_mask = ~_causal_mask(query_len, key_len, device=device)  # True = blocked
        combined = None
        if attn_mask is not None:
            additive = _blocked_to_additive(attn_mask, dtype)  # same shape as attn_mask
            if additive.dim() == 2:
                combined = additive.reshape(1, 1, query_len, key_len)  # (1, 1, query_len, key_len)
            else:  # (batch * num_heads, ...) is batch-major: index = b * num_heads + h
                shape = (batch, self.num_heads, query_len, key_len)
                combined = additive.reshape(shape)  # (batch, num_heads, query_len, key_len)
        if key_padding_mask is not None:
            padding = _blocked_to_additive(key_padding_mask, dtype)  # (batch, key_len)
            padding = padding.reshape(batch, 1, 1, key_len)  # (batch, 1, 1, key_len)
            combined = padding if combined is None else combined + padding  # broadcast sum
        return combined

    def _allow_extra_keys(
        self, mask: torch.Tensor | None, num_extra_keys: int
    ) -> torch.Tensor | None:
        """Extend the mask with allowed (``0.0``) columns for the keys of bias_k / zero_attn."""
        if mask is None or num_extra_keys == 0:
            return mask
        return F.pad(mask, (0, num_extra_keys), value=0.0)  # (..., query_len, all_keys)

    def _attend(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None,
        need_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Scaled dot-product attention for all heads at once (fused only without weights)."""
        dropout_p = self.dropout if self.training else 0.0
        if self.use_fused and not need_weights:
            # No weights wanted: PyTorch's fused kernels compute the same context faster.
            context = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=mask, dropout_p=dropout_p
            )  # (batch, num_heads, query_len, head_dim)
            return context, None
        return _attention(
            queries, keys, values, mask, dropout_p, scale=_default_scale(self.head_dim)
        )  # (batch, num_heads, query_len, head_dim), (batch, num_heads, query_len, all_keys)

    def _format_weights(
        self, weights: torch.Tensor, average_attn_weights: bool, is_batched: bool
    ) -> torch.Tensor:
        """Average over heads if asked, and drop the batch dimension for unbatched input."""
        if average_attn_weights:
            weights = weights.mean(dim=1)  # (batch, query_len, all_keys)
        if not is_batched:
            weights = weights.squeeze(0)  # drop the batch of one
        return weights

    # ------------------------------------------------------------------------------------------
    # input checks
    # ------------------------------------------------------------------------------------------

    def _check_inputs(
        self,
        query: object,
        key: object,
        value: object,
        key_padding_mask: object,
        attn_mask: object,
        is_causal: object,
    ) -> None:
        """Validate the forward inputs; raise on the first problem with a message and a fix.

        Every message is written only when its check fails: on the success path nothing here
        builds text, so ``torch.compile`` traces comparisons alone.
        """
        check.require_tensor("query", query)
        check.require_tensor("key", key)
        check.require_tensor("value", value)
        check.require_bool("is_causal", is_causal)
        check.require_rank("query", query, (2, 3), _QUERY_LAYOUTS[self.batch_first])
        check.require_same_rank("key", key, "query", query)
        check.require_same_rank("value", value, "query", query)
        parameter = self.out_proj.weight
        # Under torch.autocast the projections cast the inputs, so their dtype may differ from
        # the parameters' (bfloat16 activations, float32 weights), as in PyTorch.
        autocast = _autocast_active(query.device.type)
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            check.require_floating(name, tensor)
            if not autocast:
                check.require_matching_dtype(name, tensor, parameter.dtype)
            check.require_matching_device(name, tensor, parameter.device)
        check.require_feature_size("query", query, self.embed_dim, "embed_dim")
        check.require_feature_size("key", key, self.kdim, "kdim")
        check.require_feature_size("value", value, self.vdim, "vdim")
        is_batched = query.dim() == 3
        if is_batched:
            check.require_same_batch(query, "key", key, self.batch_first)
            check.require_same_batch(query, "value", value, self.batch_first)
        seq_dim = 1 if (is_batched and self.batch_first) else 0
        check.require_same_length(key, value, seq_dim)
        query_len, key_len = query.shape[seq_dim], key.shape[seq_dim]
        batch = query.shape[1 - seq_dim] if is_batched else None
        self._check_key_padding_mask(key_padding_mask, batch, key_len, query.device)
        self._check_attn_mask(attn_mask, batch, query_len, key_len, query.device)

    def _check_key_padding_mask(
        self, mask: object, batch: int | None, key_len: int, device: torch.device
    ) -> None:
        """Validate ``key_padding_mask``: bool or float, shape ``(N, S)`` (``(S,)`` unbatched)."""
        if mask is None:
            return
        check.require_tensor("key_padding_mask", mask)

        def dtype_hint() -> str:
            if batch is not None and mask.shape == (batch,):
                return _lengths_hint(batch, key_len)
            return ""

        check.require_mask_dtype("key_padding_mask", mask, "True = ignore this key", dtype_hint)
        check.require_same_device("key_padding_mask", mask, "query", device)
        if batch is None:
            accepted = [("(key_len,)", (key_len,))]
        else:
            accepted = [("(batch, key_len)", (batch, key_len))]

        def shape_hint() -> str:
            if batch is not None and mask.shape == (key_len, batch):
                return _transposed_padding_hint(self.batch_first, batch, key_len)
            return "Give one row per sequence and one column per key, True = ignore that key."

        check.require_mask_shape("key_padding_mask", mask, accepted, shape_hint)

    def _check_attn_mask(
        self,
        mask: object,
        batch: int | None,
        query_len: int,
        key_len: int,
        device: torch.device,
    ) -> None:
        """Validate ``attn_mask``: bool or float, ``(L, S)`` or ``(N * num_heads, L, S)``."""
        if mask is None:
            return
        check.require_tensor("attn_mask", mask)
        check.require_mask_dtype("attn_mask", mask, "True = blocked")
        check.require_same_device("attn_mask", mask, "query", device)
        if batch is None:
            per_head = ("(num_heads, query_len, key_len)", (self.num_heads, query_len, key_len))
        else:
            per_head = (
                "(batch * num_heads, query_len, key_len)",
                (batch * self.num_heads, query_len, key_len),
            )
        accepted = [("(query_len, key_len)", (query_len, key_len)), per_head]

        def shape_hint() -> str:
            if batch is None:
                return ""
            per_batch_and_head = [(batch, h, query_len, key_len) for h in (self.num_heads, 1)]
            if mask.shape in per_batch_and_head:
                return _four_d_mask_hint(mask, self.num_heads)
            if mask.shape == (batch, query_len, key_len) and self.num_heads > 1:
                return (
                    "This looks like one mask per batch element: repeat it for every head with "
                    "attn_mask.repeat_interleave(num_heads, dim=0)."
                )
            return ""

        check.require_mask_shape("attn_mask", mask, accepted, shape_hint)

    # ------------------------------------------------------------------------------------------
    # conversion to and from torch.nn.MultiheadAttention
    # ------------------------------------------------------------------------------------------

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """Build a ``MultiHeadAttention`` with the configuration and weights of a torch module.

        Math: the copy computes the same function: ``ours(x) == module(x)`` for the same inputs.

        Args:
            module: A ``torch.nn.MultiheadAttention``.

        Returns:
            MultiHeadAttention: A new module on the same device and dtype, in the same
            training mode, holding copies of the weights.

        Raises:
            TypeError: If ``module`` is not a ``torch.nn.MultiheadAttention``.

        Source:
            ``torch.nn.MultiheadAttention`` (same ``state_dict`` keys).
        """
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(
                f"module must be a torch.nn.MultiheadAttention, got {type(module).__name__}. "
                f"For other modules copy the weights by hand."
            )
        parameter = module.out_proj.weight
        ours = cls(**_constructor_arguments(module), device=parameter.device,
                   dtype=parameter.dtype)
        ours.load_state_dict(module.state_dict())
        return ours.train(module.training)

    def to_torch(self) -> nn.MultiheadAttention:
        """Build a ``torch.nn.MultiheadAttention`` with this module's configuration and weights.

        Math: the copy computes the same function for the same arguments, except where the
        class docstring lists a difference. These change results without an error:

        * ``is_causal=True`` **without** ``attn_mask``: this module builds the causal mask;
          the copy raises ``RuntimeError`` on its regular path, but in its inference fast path
          (evaluation mode, no autograd, ``bias=True``, ``batch_first=True``, self-attention,
          ...) it silently ignores ``is_causal`` and computes non-causal attention. Code that
          relies on ``mha_ref`` building the mask loses causality there. Pass the mask
          explicitly before moving to PyTorch: ``attn_mask=~mha_ref.causal_mask(L, S)``
          (``True`` = blocked).
        * ``is_causal=True`` **with** a non-causal ``attn_mask`` in the copy's inference fast
          path: the copy applies ``attn_mask``, this module the top-left triangle (when
          ``need_weights=False`` and no ``key_padding_mask``).
        * Fully masked rows: NaN from the copy on some paths, ``out_proj.bias`` here.
        * ``float16`` with ``need_weights=True``: the copy computes the scores in ``float16``
          and returns NaN where one exceeds ``65504``; this module computes them in ``float32``.

        Returns:
            torch.nn.MultiheadAttention: A new module on the same device and dtype, in the same
            training mode.

        Source:
            ``torch.nn.MultiheadAttention`` (same ``state_dict`` keys).
        """
        parameter = self.out_proj.weight
        theirs = nn.MultiheadAttention(
            **_constructor_arguments(self), device=parameter.device, dtype=parameter.dtype
        )
        theirs.load_state_dict(self.state_dict())
        return theirs.train(self.training)


#: the layouts ``query`` may have, by ``batch_first``, for the message of a wrong rank
_QUERY_LAYOUTS = {
    True: "(batch, seq_len, features) or unbatched (seq_len, features)",
    False: "(seq_len, batch, features) or unbatched (seq_len, features)",
}


def _transposed_padding_hint(batch_first: bool, batch: int, key_len: int) -> str:
    """Advice for a ``key_padding_mask`` of shape ``(key_len, batch)``: layout first, then ``.T``.

    The usual cause is not a transposed mask but inputs in the other layout: with the default
    ``batch_first=False``, ``(batch, seq_len, features)`` inputs are read with batch and sequence
    swapped, and a correct ``(batch, seq_len)`` mask then looks transposed.
    """
    layout = "(batch, seq_len, features)" if batch_first else "(seq_len, batch, features)"
    other_layout = "(seq_len, batch, features)" if batch_first else "(batch, seq_len, features)"
    return (
        f"With batch_first={batch_first} the inputs are read as {layout}, so batch={batch} "
        f"and key_len={key_len}, and the mask is (key_len, batch). First check the layout: if "
        f"your inputs are {other_layout}, they are being misread too: build the module with "
        f"batch_first={not batch_first}, and the mask is right as it is. Otherwise the "
        f"mask is transposed: pass key_padding_mask.T, since key_padding_mask is "
        f"(batch, key_len) whatever batch_first is."
    )


def _lengths_hint(batch: int, key_len: int) -> str:
    """Advice for an integer ``key_padding_mask`` of shape ``(batch,)``: it holds lengths."""
    return (
        f"It has shape ({batch},), one number per sequence: if these are the sequence "
        f"lengths, build the mask from them, key_padding_mask="
        f"mha_ref.allowed_to_blocked(mha_ref.padding_mask(lengths, max_len={key_len})) with "
        f"lengths the tensor given here; that mask is (batch, key_len), True = padding."
    )


def _four_d_mask_hint(mask: torch.Tensor, num_heads: int) -> str:
    """Advice for an ``attn_mask`` of shape ``(N, H, L, S)`` or ``(N, 1, L, S)`` (SDPA's 4-D)."""
    batch, heads, query_len, key_len = mask.shape
    flat = f"reshape({batch * num_heads}, {query_len}, {key_len})"
    if heads == num_heads:
        fix = f"attn_mask.{flat}"
    else:
        fix = f"attn_mask.expand({batch}, {num_heads}, {query_len}, {key_len}).{flat}"
    hint = (
        f"This looks like a 4-D (batch, num_heads or 1, query_len, key_len) mask as taken by "
        f"F.scaled_dot_product_attention; like torch.nn.MultiheadAttention, this module takes "
        f"(query_len, key_len) or (batch * num_heads, query_len, key_len): pass {fix}."
    )
    if mask.dtype == torch.bool:
        hint += (
            f" A bool attn_mask here means True = blocked, the opposite of "
            f"scaled_dot_product_attention: if yours means True = may attend, pass ~{fix}."
        )
    return hint


def _constructor_arguments(module: nn.Module) -> dict:
    """Read the constructor arguments shared by both MHA classes back from a module."""
    return {
        "embed_dim": module.embed_dim,
        "num_heads": module.num_heads,
        "dropout": module.dropout,
        "bias": module.in_proj_bias is not None,
        "add_bias_kv": module.bias_k is not None,
        "add_zero_attn": module.add_zero_attn,
        "kdim": module.kdim,
        "vdim": module.vdim,
        "batch_first": module.batch_first,
    }


def _blocked_to_additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """MHA convention -> additive: bool ``True`` (blocked) -> ``-inf``; float cast to ``dtype``."""
    if mask.dtype == torch.bool:
        return _allowed_to_additive(~mask, dtype=dtype)  # same shape as mask
    return mask.to(dtype)  # same shape as mask


def _causal_replaces_mask(
    is_causal: bool,
    attn_mask: torch.Tensor | None,
    key_padding_mask: torch.Tensor | None,
    need_weights: bool,
) -> bool:
    """True where PyTorch's regular path replaces ``attn_mask`` by the causal triangle.

    ``F.multi_head_attention_forward`` (torch 2.13): ``if is_causal and key_padding_mask is
    None and not need_weights: attn_mask = None``, then ``scaled_dot_product_attention(...,
    is_causal=True)`` over all keys, those of ``add_bias_kv``/``add_zero_attn`` included.
    """
    return is_causal and attn_mask is not None and key_padding_mask is None and not need_weights


def _check_constructor_arguments(
    embed_dim: int, num_heads: int, dropout: float, kdim: int | None, vdim: int | None
) -> None:
    """Validate the constructor arguments of ``MultiHeadAttention``."""
    check.require_positive_int("embed_dim", embed_dim, "model width")
    check.require_positive_int("num_heads", num_heads, "number of heads")
    check.require_divisible_heads(embed_dim, num_heads)
    check.require_probability("dropout", dropout)
    if kdim is not None:
        check.require_non_negative_int("kdim", kdim, "features of key")
    if vdim is not None:
        check.require_non_negative_int("vdim", vdim, "features of value")
