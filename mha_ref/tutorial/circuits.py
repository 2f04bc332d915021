r"""One head's output, decomposed: each head writes its own term, through its own QK and OV.

**Source.** Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"
(transformer-circuits.pub/2021/framework), sections "Attention Heads are Independent and
Additive" and "Thinking of Attention Heads as QK and OV Circuits".

Concatenating the heads and multiplying by :math:`W^O` is the same as giving each head its own
rows of :math:`W^O` and adding the results:

.. math::

    \mathrm{MultiHead}(X) = \sum_h A^h X W_V^h W_O^h + b^O,
    \qquad A^h = \mathrm{softmax}\Big(\frac{X W_Q^h (X W_K^h)^\top}{\sqrt{d_k}}\Big).

So a head is two independent matrices of size ``(embed_dim, embed_dim)``: the **QK** matrix
:math:`W_Q^h {W_K^h}^\top` decides *where the head looks* (its attention pattern), and the
**OV** matrix :math:`W_V^h W_O^h` decides *what it writes* from the tokens it looks at. Both have
rank at most ``head_dim``. Matrices here use the ``x @ W`` convention (rows are inputs); PyTorch
stores the transposes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from mha_ref.functional import scaled_dot_product_attention, split_heads
from mha_ref.masks import blocked_to_allowed
from mha_ref.multihead import MultiHeadAttention

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.figure import Figure

__all__ = [
    "copy_qk",
    "copying_score",
    "head_contexts",
    "head_matrices",
    "head_outputs",
    "ov_matrix",
    "plot_matrices",
    "qk_matrix",
    "rank",
    "token_ov_circuit",
]


# ------------------------------------------------------------------------------------------------


def _check_module(module: MultiHeadAttention) -> None:
    if not isinstance(module, MultiHeadAttention):
        name = type(module).__name__
        raise TypeError(f"module must be an mha_ref.MultiHeadAttention, got {name}")
    if not module.batch_first:
        raise ValueError("module must be built with batch_first=True: inputs here are (N, L, E)")
    if module.bias_k is not None or module.add_zero_attn:
        raise ValueError("add_bias_kv and add_zero_attn add keys no head owns; build without them")


def _check_head(module: MultiHeadAttention, head: int) -> None:
    if not 0 <= head < module.num_heads:
        raise ValueError(f"head must be in 0..{module.num_heads - 1}, got {head}")


def head_matrices(
    module: MultiHeadAttention, head: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The four matrices of one head, ``x @ W`` convention.

    Args:
        module: an :class:`mha_ref.MultiHeadAttention` (``batch_first=True``, no extra keys).
        head: 0-based head index.

    Returns:
        ``(w_q, w_k, w_v, w_o)``: ``w_q``, ``w_k``, ``w_v`` of shape ``(embed_dim, head_dim)``
        (``kdim``/``vdim`` rows for keys/values), ``w_o`` of shape ``(head_dim, embed_dim)``; the
        module's dtype. Views of the parameters.

    Raises:
        TypeError: ``module`` is not an :class:`mha_ref.MultiHeadAttention`.
        ValueError: ``head`` out of range, or a module this decomposition does not cover.
    """
    _check_module(module)
    _check_head(module, head)
    rows = slice(head * module.head_dim, (head + 1) * module.head_dim)
    w_q, w_k, w_v = module.projection_weights()  # 3 x (embed_dim, in_dim), PyTorch layout
    w_out = module.out_proj.weight  # (embed_dim, embed_dim)
    return w_q[rows].T, w_k[rows].T, w_v[rows].T, w_out[:, rows].T  # (E, d) x 3, (d, E)


def qk_matrix(module: MultiHeadAttention, head: int) -> torch.Tensor:
    """The head's QK matrix :math:`W_Q^h {W_K^h}^\\top`, ``(embed_dim, kdim)``, rank <= head_dim.

    Without biases, the head's score of query ``x_i`` on key ``y_j`` is
    ``x_i @ qk @ y_j / sqrt(head_dim)`` (Elhage et al. 2021, "QK circuit").
    """
    w_q, w_k, _, _ = head_matrices(module, head)  # (E, d), (kdim, d)
    return w_q @ w_k.T  # (E, kdim)


def ov_matrix(module: MultiHeadAttention, head: int) -> torch.Tensor:
    """The head's OV matrix :math:`W_V^h W_O^h`, ``(vdim, embed_dim)``, rank <= head_dim.

    A key it attends to with weight ``a`` adds ``a * (y_j @ ov)`` (plus the value bias's term)
    to the output (Elhage et al. 2021, "OV circuit").
    """
    _, _, w_v, w_o = head_matrices(module, head)  # (vdim, d), (d, E)
    return w_v @ w_o  # (vdim, E)


def rank(matrix: torch.Tensor) -> int:
    """Numerical rank of a matrix, computed in float64 (``torch.linalg.matrix_rank``)."""
    return int(torch.linalg.matrix_rank(matrix.detach().double()))


def token_ov_circuit(model: torch.nn.Module, layer: int, head: int) -> torch.Tensor:
    """What a head writes, read from tokens to logits: ``W_E @ ov @ W_U^T``, ``(V, V)``.

    Row ``i`` is the change in the logits when the head attends fully to token ``i``, along the
    direct path (token embedding in, unembedding out; Elhage et al. 2021, "OV circuit"). A head
    that *copies* has its largest entry of each row on the diagonal.

    Args:
        model: a model with ``token_embedding`` ``(V, E)``, ``layers`` (of
            :class:`mha_ref.MultiHeadAttention`) and ``unembed`` ``(V, E)``, such as
            :class:`mha_ref.tutorial.induction.AttentionOnlyTransformer`.
        layer, head: 0-based indices.
    """
    w_e = model.token_embedding.weight  # (V, E)
    w_u = model.unembed.weight  # (V, E)
    return w_e @ ov_matrix(model.layers[layer], head) @ w_u.T  # (V, V)


def copying_score(circuit: torch.Tensor) -> float:
    """Fraction of rows of a square ``circuit`` whose largest entry is on the diagonal."""
    on_diagonal = circuit.argmax(dim=1) == torch.arange(circuit.shape[0])  # (V,)
    return round(float(on_diagonal.double().mean()), 6)


def head_contexts(
    module: MultiHeadAttention,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each head's context and attention weights, step by step from the module's parameters.

    Args:
        module: the module (``batch_first=True``, no ``add_bias_kv``/``add_zero_attn``), in eval
            mode or with ``dropout=0``.
        query: ``(N, L, E)``; key: ``(N, S, kdim)``; value: ``(N, S, vdim)``.
        attn_mask: optional bool ``(L, S)``, ``True`` = blocked (the module's convention).

    Returns:
        ``context`` ``(N, h, L, head_dim)`` and ``weights`` ``(N, h, L, S)``.
    """
    _check_module(module)
    w_q, w_k, w_v = module.projection_weights()  # 3 x (E, in_dim)
    b_q, b_k, b_v = module.projection_biases()  # 3 x (E,) or None
    queries = torch.nn.functional.linear(query, w_q, b_q)  # (N, L, E)
    keys = torch.nn.functional.linear(key, w_k, b_k)  # (N, S, E)
    values = torch.nn.functional.linear(value, w_v, b_v)  # (N, S, E)
    queries = split_heads(queries, module.num_heads)  # (N, h, L, head_dim)
    keys = split_heads(keys, module.num_heads)  # (N, h, S, head_dim)
    values = split_heads(values, module.num_heads)  # (N, h, S, head_dim)
    allowed = None if attn_mask is None else blocked_to_allowed(attn_mask)  # (L, S)
    return scaled_dot_product_attention(
        queries, keys, values, attn_mask=allowed, return_weights=True
    )  # (N, h, L, head_dim), (N, h, L, S)


def head_outputs(
    module: MultiHeadAttention,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Each head's term of the module's output: its context times its rows of ``W^O``.

    ``head_outputs(...).sum(dim=1) + module.out_proj.bias`` equals the module's output
    (Elhage et al. 2021, "Attention Heads are Independent and Additive").

    Args:
        module, query, key, value, attn_mask: as in :func:`head_contexts`.

    Returns:
        ``(N, h, L, E)``, the module's dtype.
    """
    context, _ = head_contexts(module, query, key, value, attn_mask)  # (N, h, L, head_dim)
    w_out = module.out_proj.weight  # (E, E), PyTorch layout: out = merged @ w_out.T
    w_o = w_out.T.reshape(module.num_heads, module.head_dim, -1)  # (h, head_dim, E)
    return torch.einsum("nhld,hde->nhle", context, w_o)  # (N, h, L, E)


def copy_qk(module: MultiHeadAttention, source: int, target: int) -> None:
    """Give head ``target`` the query and key parameters of head ``source``, in place.

    The two heads then compute the same attention weights on every input, while their value
    and output parameters, hence what they write, stay their own.

    Raises:
        ValueError: a head index is out of range.
    """
    _check_head(module, source)
    _check_head(module, target)
    d, e = module.head_dim, module.embed_dim
    src, dst = slice(source * d, (source + 1) * d), slice(target * d, (target + 1) * d)
    with torch.no_grad():
        w_q, w_k, _ = module.projection_weights()  # 3 x (E, in_dim), views
        w_q[dst] = w_q[src]  # (head_dim, E)
        w_k[dst] = w_k[src]  # (head_dim, kdim)
        if module.in_proj_bias is not None:
            bias = module.in_proj_bias  # (3E,): b_q, b_k, b_v
            bias[dst] = bias[src]  # (head_dim,) query bias
            key_src = slice(e + source * d, e + (source + 1) * d)
            key_dst = slice(e + target * d, e + (target + 1) * d)
            bias[key_dst] = bias[key_src]  # (head_dim,) key bias


def plot_matrices(
    matrices: Sequence[torch.Tensor],
    titles: Sequence[str],
    *,
    suptitle: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    tick_labels: Sequence[str] | None = None,
    ncols: int | None = None,
) -> Figure:
    """Draw matrices side by side on one symmetric blue-white-red scale (0 is white).

    Args:
        matrices: 2-D tensors of one shape.
        titles: one per matrix (any language).
        suptitle, xlabel, ylabel: figure title and axis labels.
        tick_labels: names of the rows and columns (square matrices), e.g. tokens.
        ncols: matrices per row (default: all in one row).

    Raises:
        ValueError: the counts of matrices and titles differ.
    """
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for

    if len(matrices) != len(titles):
        raise ValueError(f"plot_matrices: {len(matrices)} matrices but {len(titles)} titles")
    use_cjk_font_for(titles, suptitle, xlabel, ylabel, tick_labels)
    arrays = [m.detach().double().numpy() for m in matrices]
    limit = max(float(abs(a).max()) for a in arrays) or 1.0
    ncols = ncols or len(arrays)
    nrows = -(-len(arrays) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.3 * ncols + 0.8, 3.3 * nrows + 0.3), layout="constrained",
        squeeze=False,
    )
    for ax in axes.flat[len(arrays) :]:
        ax.remove()
    for ax, array, title in zip(axes.flat, arrays, titles, strict=False):
        image = ax.imshow(array, cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax.set_title(title, fontsize=10)
        if tick_labels is not None:
            ticks = range(len(tick_labels))
            ax.set_xticks(ticks, labels=list(tick_labels), fontsize=6)
            ax.set_yticks(ticks, labels=list(tick_labels), fontsize=6)
        if xlabel:
            ax.set_xlabel(xlabel)
    if ylabel:
        for row in axes:
            row[0].set_ylabel(ylabel)
    fig.colorbar(image, ax=list(axes.flat[: len(arrays)]), shrink=0.8)
    if suptitle:
        fig.suptitle(suptitle)
    return fig
