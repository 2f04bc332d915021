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
    "argmax_copying_fraction",
    "composition_score",
    "composition_scores",
    "copy_qk",
    "copying_score",
    "eigenvalue_copying_score",
    "head_contexts",
    "head_matrices",
    "head_outputs",
    "ov_matrix",
    "plot_matrices",
    "qk_matrix",
    "random_composition_baseline",
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


def argmax_copying_fraction(circuit: torch.Tensor) -> float:
    """Fraction of rows of a square ``circuit`` whose largest entry is on the diagonal.

    A simple reading of "does this head copy": for how many attended tokens the head raises that
    token's own logit most. It is *not* Elhage et al.'s copying score, which is
    :func:`eigenvalue_copying_score`.

    Args:
        circuit: ``(V, V)``, e.g. :func:`token_ov_circuit`.
    """
    _check_square(circuit, "circuit")
    on_diagonal = circuit.argmax(dim=1) == torch.arange(circuit.shape[0])  # (V,)
    return round(float(on_diagonal.double().mean()), 6)


#: The earlier name of :func:`argmax_copying_fraction`, kept so that old code runs.
copying_score = argmax_copying_fraction


def _check_square(matrix: torch.Tensor, name: str) -> None:
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(
            f"{name} must be a square (V, V) matrix, got shape {tuple(matrix.shape)}; pass the "
            "output of token_ov_circuit"
        )


def eigenvalue_copying_score(circuit: torch.Tensor) -> float:
    r"""Elhage et al.'s copying score of an OV circuit: :math:`\sum_i \lambda_i / \sum_i
    |\lambda_i|` over the eigenvalues :math:`\lambda_i` of the ``(V, V)`` circuit.

    Near ``+1``: the head's OV circuit maps tokens mostly onto themselves (copying); near
    ``-1``: away from themselves; near ``0``: neither. Computed in float64; the real part of the
    (complex) sum is returned, rounded to 6 digits.

    Source: Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits", section
    "Copying / Primitive In-Context Learning" (the eigenvalue summary of OV circuits).

    Raises:
        ValueError: ``circuit`` is not square, or all its eigenvalues are zero.
    """
    _check_square(circuit, "circuit")
    eigenvalues = torch.linalg.eigvals(circuit.detach().double())  # (V,) complex
    total = eigenvalues.abs().sum()
    if total == 0:
        raise ValueError("circuit has only zero eigenvalues; its copying score is undefined")
    return round(float(eigenvalues.sum().real / total), 6)


def composition_score(first: torch.Tensor, second: torch.Tensor) -> float:
    r"""Elhage et al.'s composition score :math:`\|M_1 M_2\|_F / (\|M_1\|_F \|M_2\|_F)`.

    How much of what ``first`` writes lies where ``second`` reads: 1 if the product keeps all of
    both norms, small for matrices in unrelated subspaces. Compare it with the score of random
    matrices of the same shapes and ranks (:func:`composition_scores` does).

    Args:
        first: ``(E, E)``, the earlier head's OV matrix (``x @ W`` convention).
        second: ``(E, E)``, the later head's matrix on the read side (see
            :func:`composition_scores`).

    Raises:
        ValueError: the shapes do not chain, or a matrix is zero.
    """
    if first.ndim != 2 or second.ndim != 2 or first.shape[1] != second.shape[0]:
        raise ValueError(
            f"first @ second must be defined, got shapes {tuple(first.shape)} and "
            f"{tuple(second.shape)}"
        )
    m1, m2 = first.detach().double(), second.detach().double()
    norms = torch.linalg.matrix_norm(m1) * torch.linalg.matrix_norm(m2)
    if norms == 0:
        raise ValueError("a matrix is zero; the composition score is undefined")
    return round(float(torch.linalg.matrix_norm(m1 @ m2) / norms), 6)


def composition_scores(
    first: MultiHeadAttention, head: int, second: MultiHeadAttention, later_head: int
) -> dict[str, float]:
    r"""Q-, K- and V-composition scores of ``head`` of ``first`` into ``later_head`` of ``second``.

    With the earlier head's OV matrix :math:`OV_1` (:func:`ov_matrix`) and the later head's QK
    and OV matrices (``x @ W`` convention, scores ``x_i @ QK @ y_j``):

    * ``"Q"``: the earlier head writes into the later head's queries, :math:`OV_1 \, QK_2`;
    * ``"K"``: into its keys, :math:`OV_1 \, QK_2^\top`;
    * ``"V"``: into its values, :math:`OV_1 \, OV_2`;

    each scored by :func:`composition_score`. (Elhage et al. write the same products in the
    column-vector convention.)

    Source: Elhage et al. 2021, section "Virtual Attention Heads" / composition scores.

    Returns:
        ``{"Q": score, "K": score, "V": score}``.
    """
    ov_1 = ov_matrix(first, head)  # (E, E)
    qk_2 = qk_matrix(second, later_head)  # (E, E)
    ov_2 = ov_matrix(second, later_head)  # (E, E)
    return {
        "Q": composition_score(ov_1, qk_2),
        "K": composition_score(ov_1, qk_2.T),
        "V": composition_score(ov_1, ov_2),
    }


def random_composition_baseline(
    embed_dim: int, head_dim: int, *, draws: int = 200, seed: int = 0
) -> float:
    """Mean :func:`composition_score` of two random rank-``head_dim`` products of Gaussian
    matrices of size ``(embed_dim, head_dim) @ (head_dim, embed_dim)``: what two heads score
    when nothing in training aligned them (Elhage et al. compare against such a baseline).

    Raises:
        ValueError: if ``head_dim`` is not in ``1..embed_dim`` or ``draws < 1``.
    """
    if not 1 <= head_dim <= embed_dim or draws < 1:
        raise ValueError(
            f"need 1 <= head_dim <= embed_dim and draws >= 1, got head_dim={head_dim}, "
            f"embed_dim={embed_dim}, draws={draws}"
        )
    generator = torch.Generator().manual_seed(seed)
    scores = []
    for _ in range(draws):
        a, b, c, d = (
            torch.randn(shape, generator=generator, dtype=torch.float64)
            for shape in [(embed_dim, head_dim), (head_dim, embed_dim)] * 2
        )
        scores.append(composition_score(a @ b, c @ d))  # (E, E) @ (E, E)
    return round(sum(scores) / len(scores), 6)


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
