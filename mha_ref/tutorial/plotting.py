"""Plotting helpers for the gallery: attention-weight grids, mask pictures, line plots.

The gallery scripts stay thin by calling these. Every function returns a
:class:`matplotlib.figure.Figure` made with :mod:`matplotlib.pyplot` (so sphinx-gallery captures
it and ``plt.show()`` displays it) and accepts torch tensors or NumPy arrays.

Any text given to these helpers that contains Chinese (or other CJK) characters makes them
call :func:`mha_ref.tutorial.fonts.use_cjk_font` first, so the glyphs render instead of empty boxes.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from mha_ref.tutorial.fonts import has_cjk, use_cjk_font_for
from mha_ref.tutorial.interactive import attach_mask_view_data, attach_view_data, view_html

__all__ = [
    "plot_heads",
    "plot_mask",
    "plot_masks",
    "plot_lines",
    "text_table",
]

def _to_numpy(x: object) -> np.ndarray:
    """Tensor or array-like -> float or bool NumPy array on the CPU."""
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch here
        x = x.detach().cpu()
        if x.dtype.is_floating_point and x.element_size() < 4:  # float16, bfloat16: no loss
            x = x.float()
        x = x.numpy()
    return np.asarray(x)


def _default_labels(query_labels, key_labels, query_len: int, key_len: int):
    """Positions ``0, 1, ...`` where no labels are given; keys reuse query labels that fit."""
    if query_labels is None:
        query_labels = [str(i) for i in range(query_len)]
    if key_labels is None:
        same = len(query_labels) == key_len
        key_labels = query_labels if same else [str(i) for i in range(key_len)]
    return list(query_labels), list(key_labels)


def _grid(n: int, ncols: int | None) -> tuple[int, int]:
    ncols = min(n, 4) if ncols is None else max(1, min(ncols, n))
    return math.ceil(n / ncols), ncols


#: Widest figure (inches) the heatmap helpers aim for: 700 px at matplotlib's 100 dpi, which a
#: gallery page shows unshrunk in a window about 1000 px wide or more; narrower windows (phones)
#: shrink every figure, and a wider figure would shrink sooner, its text with it.
_MAX_FIGURE_WIDTH = 7.0
_TICK_FONTSIZE = 8.0
#: Annotation font sizes (points): the largest used, and the smallest still written by default.
_ANNOTATION_MAX_FONTSIZE = 8.0
_ANNOTATION_MIN_FONTSIZE = 6.5


def _text_width_pt(labels: Sequence[str], fontsize: float) -> float:
    """Rough width in points of the widest label: CJK characters 1 em, others 0.6 em."""
    widest = max((_display_width(str(label)) for label in labels), default=0)
    return 0.55 * fontsize * widest


def _xtick_style(labels: Sequence[str], cell_inches: float) -> dict:
    """Tick labels for the columns: horizontal when the widest fits in a cell, else turned 45
    degrees, or 90 where the cells are too narrow for turned labels to clear each other (CJK
    glyphs are as tall as the font size, Latin lower case about half as tall)."""
    if _text_width_pt(labels, _TICK_FONTSIZE) <= 0.9 * cell_inches * 72:
        return {"rotation": 0, "ha": "center"}
    line_height = _TICK_FONTSIZE * (1.3 if has_cjk(list(labels)) else 0.9)
    if cell_inches * 72 * math.sin(math.radians(45)) < line_height:
        return {"rotation": 90, "ha": "center"}
    return {"rotation": 45, "ha": "right", "rotation_mode": "anchor"}


def _side_margin(labels: Sequence[str]) -> float:
    """Inches taken by tick labels left of a heatmap."""
    return (_text_width_pt(labels, _TICK_FONTSIZE) + 6) / 72


def _below_margin(labels: Sequence[str], rotated: bool) -> float:
    """Inches taken by tick labels below a heatmap, horizontal or turned 45 degrees."""
    if rotated:  # 45 degrees; a label turned 90 takes its width, a little more than this
        return (0.8 * (_text_width_pt(labels, _TICK_FONTSIZE) + _TICK_FONTSIZE) + 6) / 72
    return (1.3 * _TICK_FONTSIZE + 6) / 72


def _annotation_fontsize(cell_inches: float) -> float:
    """Font size (points) at which ``"0.00"`` fills about 70 % of a square cell's width."""
    return min(_ANNOTATION_MAX_FONTSIZE, cell_inches * 72 / 3.1)


#: Colour of heatmap cells that hold no weight to show: blocked by a mask, or NaN.
_NAN_COLOUR = "#d0d0d0"


def plot_heads(
    weights: object,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    titles: Sequence[str] | None = None,
    suptitle: str | None = None,
    ncols: int | None = None,
    annotate: bool | None = None,
    annotate_min: float | None = None,
    vmax: float | None = None,
    cmap: str = "viridis",
    colorbar_label: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    blocked: object | None = None,
    blocked_label: str = "blocked by the mask",
    layers: Sequence[str] | None = None,
    layer_word: str | None = None,
) -> Figure:
    """Draw one heatmap per head in a grid, with token labels and one shared colour bar.

    The figure is sized to stay about 7 inches wide (700 px, which a gallery page shows unshrunk
    in a window about 1000 px wide or more): the more heatmaps per row and the longer the
    sequences, the smaller the cells.

    Args:
        weights: attention weights ``(num_heads, query_len, key_len)``, or ``(query_len, key_len)``
            for a single head. Any stack of matrices works (e.g. one per mask).
        query_labels: ``query_len`` tokens for the rows (default: positions ``0, 1, ...``).
        key_labels: ``key_len`` tokens for the columns (default: ``query_labels`` when the
            lengths match, else positions).
        titles: one title per heatmap (default: ``"head 0"``, ``"head 1"``, ...).
        suptitle: a title for the whole figure.
        ncols: heatmaps per row (default: up to 4).
        annotate: write each value in its cell, in a font scaled to the cell. Default: when a
            matrix has at most 64 cells and the cells are large enough for a readable font.
        annotate_min: write only the values at least this large (e.g. ``0.01``, so a heatmap of
            near-one-hot rows is not covered in ``0.00``); NaN is always written.
        vmax: top of the shared colour scale (default: the largest finite weight); the bottom is 0.
        cmap: matplotlib colour map name. NaN cells (e.g. a fully masked row) are drawn grey.
        colorbar_label: a label for the colour bar.
        xlabel, ylabel: one label for all columns (keys) and one for all rows (queries).
        blocked: bool ``(query_len, key_len)`` or ``(num_heads, query_len, key_len)``, ``True``
            where a mask blocked the query from the key (PyTorch's ``attn_mask`` convention).
            Those cells are drawn grey without a number, so a blocked cell cannot be mistaken
            for one the softmax made small, and a legend entry says what grey means.
        blocked_label: the legend's text for the grey cells (pass it in the page's language).
        layers: one layer name per heatmap, when they come from several layers: the
            interactive view then offers a choice of layer, then of head.
        layer_word: what the page calls a layer, for the interactive view's labels (``"block"``
            where ``layers`` are a real model's blocks); default: the view's word for a layer.

    Returns:
        The figure, with ``num_heads`` heatmap axes followed by the colour-bar axes. It carries
        the exact weights it draws, with the labels and blocked cells
        (``mha_ref.tutorial.interactive.view_data``), from which the docs write an
        interactive view beside the picture; in a Jupyter notebook that view is displayed
        under the figure.

    Raises:
        TypeError: ``blocked`` is not boolean (the message says how to convert it).
        ValueError: ``weights`` is not 2-D or 3-D; the label or title counts do not match it;
            ``blocked`` is not of its shape; or a cell marked blocked holds a non-zero weight
            (the mask did not act as ``blocked`` says: grey would hide it).
    """
    computed = _to_numpy(weights)  # in the precision the weights were computed in
    if computed.ndim == 2:
        computed = computed[None]
    w = computed.astype(np.float64)
    if w.ndim != 3:
        raise ValueError(
            "plot_heads: weights must be (num_heads, query_len, key_len) or (query_len, key_len), "
            f"got shape {tuple(w.shape)}; for a batch, pass weights[0]"
        )
    num_heads, query_len, key_len = w.shape
    query_labels, key_labels = _default_labels(query_labels, key_labels, query_len, key_len)
    if len(query_labels) != query_len or len(key_labels) != key_len:
        raise ValueError(
            f"plot_heads: got {len(query_labels)} query labels and {len(key_labels)} key labels "
            f"for weights of shape {tuple(w.shape)}; pass one label per row and per column"
        )
    is_blocked = _check_blocked(blocked, w)  # (num_heads, query_len, key_len), bool
    default_titles = titles is None
    if titles is None:
        titles = [f"head {h}" for h in range(num_heads)]
    if layers is not None and len(layers) != num_heads:
        raise ValueError(f"plot_heads: got {len(layers)} layer names for {num_heads} heatmaps")
    if len(titles) != num_heads:
        raise ValueError(f"plot_heads: got {len(titles)} titles for {num_heads} heatmaps")
    use_cjk_font_for(query_labels, key_labels, titles, suptitle, colorbar_label, xlabel, ylabel)

    nrows, ncols = _grid(num_heads, ncols)
    # Size the cells so that the whole grid fits _MAX_FIGURE_WIDTH (cells at most 0.42 inch).
    # The rows of every heatmap are the same queries: only the first column names them.
    fixed = _side_margin(query_labels) + 0.15 * ncols + (0.75 if colorbar_label else 0.55)
    fixed += (0.3 if ylabel else 0.0) + 0.2
    cell = min(0.42, max(0.12, (_MAX_FIGURE_WIDTH - fixed) / (ncols * key_len)))
    xticks = _xtick_style(key_labels, cell)
    below = _below_margin(key_labels, rotated=xticks["rotation"] != 0)
    width = ncols * cell * key_len + fixed
    height = (
        nrows * (cell * query_len + below + 0.3)
        + (0.4 if suptitle else 0.0)
        + (0.3 if xlabel else 0.0)
        + (0.3 if blocked is not None else 0.0)  # the legend for the grey cells
        + 0.1
    )

    fontsize = _annotation_fontsize(cell)
    if annotate is None:
        annotate = query_len * key_len <= 64 and fontsize >= _ANNOTATION_MIN_FONTSIZE
    finite = w[np.isfinite(w)]
    if vmax is None:
        vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    colours = mpl.colormaps[cmap].with_extremes(bad=_NAN_COLOUR)

    fig = plt.figure(figsize=(width, height), layout="compressed")
    # room between rows, so a title does not touch the tick labels of the row above
    fig.get_layout_engine().set(h_pad=0.06, hspace=0.06, w_pad=0.04, wspace=0.02)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    image = None
    for h in range(nrows * ncols):
        ax = axes.flat[h]
        if h >= num_heads:
            ax.remove()
            continue
        shown = np.where(is_blocked[h], np.nan, w[h])  # blocked cells take the grey "bad" colour
        image = ax.imshow(shown, cmap=colours, vmin=0.0, vmax=vmax, aspect="equal")
        ax.set_title(titles[h], fontsize=10)
        ax.set_xticks(range(key_len), labels=list(key_labels), fontsize=_TICK_FONTSIZE, **xticks)
        ax.set_yticks(range(query_len), labels=list(query_labels), fontsize=_TICK_FONTSIZE)
        ax.tick_params(length=0, labelleft=h % ncols == 0)
        if annotate:
            for i in range(query_len):
                for j in range(key_len):
                    v = w[h, i, j]
                    if is_blocked[h, i, j]:
                        continue
                    if annotate_min is not None and np.isfinite(v) and v < annotate_min:
                        continue
                    dark = np.isfinite(v) and v < 0.6 * vmax
                    ax.text(
                        j,
                        i,
                        "nan" if np.isnan(v) else f"{v:.2f}",
                        ha="center",
                        va="center",
                        fontsize=fontsize,
                        color="white" if dark else "black",
                    )
    colorbar = fig.colorbar(image, ax=list(axes.flat[:num_heads]), shrink=0.8)
    if colorbar_label:
        colorbar.set_label(colorbar_label)
    if blocked is not None:
        # the layout gives the figure's bottom margin to a legend or to a supxlabel, not to
        # both stacked; so the x label becomes the title of the legend, centred above it
        grey = Patch(facecolor=_NAN_COLOUR, edgecolor="#999999", label=blocked_label)
        fig.legend(
            handles=[grey],
            loc="outside lower center",
            frameon=False,
            fontsize=9,
            title=xlabel,
            title_fontsize=10,
        )
    elif xlabel:
        fig.supxlabel(xlabel, fontsize=10)
    if ylabel:
        fig.supylabel(ylabel, fontsize=10)
    if suptitle:
        fig.suptitle(suptitle)
    attach_view_data(
        fig,
        computed,
        query_labels,
        key_labels,
        names=None if default_titles else titles,
        layers=layers,
        layer_word=layer_word,
        blocked=is_blocked if blocked is not None else None,
        title=suptitle,
        vmax=vmax,
        cmap=colours,
        colorbar_label=colorbar_label,
        xlabel=xlabel,
        ylabel=ylabel,
        blocked_label=blocked_label if blocked is not None else None,
    )
    _show_view_in_notebook(fig)
    return fig


def _show_view_in_notebook(fig: Figure) -> None:
    """In a Jupyter kernel, display the interactive view of ``fig`` (it follows the picture,
    which the notebook's matplotlib backend shows at the end of the cell). Elsewhere (a script,
    the docs build) do nothing: there the picture is shown, and the docs add the view.

    A figure shows one view: when its view data change after it was displayed (a live model
    attached to it), the displayed view is replaced in place (IPython's ``display_id``), not
    followed by a second one."""
    import sys

    if not SHOW_VIEW_IN_NOTEBOOK or "ipykernel" not in sys.modules:
        return
    from IPython import get_ipython
    from IPython.display import HTML, display

    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return
    view = HTML(view_html(fig, standalone=True))
    handle = getattr(fig, "_mha_notebook_view", None)
    if handle is None:
        fig._mha_notebook_view = display(view, display_id=True)
    else:
        handle.update(view)


#: set to False to keep ``plot_heads`` from displaying its interactive view in a notebook
SHOW_VIEW_IN_NOTEBOOK = True


def _check_blocked(blocked: object, w: np.ndarray) -> np.ndarray:
    """``blocked`` as a bool array of ``w``'s shape, after checking it against the weights."""
    num_heads, query_len, key_len = w.shape
    if blocked is None:
        return np.zeros(w.shape, dtype=bool)
    b = _to_numpy(blocked)
    if b.dtype != np.bool_:
        raise _mask_dtype_error("plot_heads", "blocked", b.dtype, true_means_blocked=True)
    if b.shape not in ((query_len, key_len), (num_heads, query_len, key_len)):
        raise ValueError(
            f"plot_heads: blocked must have shape {(query_len, key_len)} or "
            f"{(num_heads, query_len, key_len)} to match weights of shape {w.shape}, "
            f"got {tuple(b.shape)}"
        )
    b = np.broadcast_to(b, w.shape)
    leaked = b & np.isfinite(w) & (w != 0)
    if leaked.any():
        h, i, j = (int(k) for k in np.argwhere(leaked)[0])
        raise ValueError(
            f"plot_heads: cell (head {h}, query {i}, key {j}) is marked blocked but has weight "
            f"{w[h, i, j]:.3g}; blocked cells must have weight 0: check that the mask passed "
            "to attention is the one passed here, in the same convention (True = blocked); "
            "for a mask where True means 'may attend' (e.g. mha_ref.causal_mask), pass "
            "blocked=~mask"
        )
    return b


def _mask_dtype_error(caller: str, name: str, dtype, true_means_blocked: bool) -> TypeError:
    """The error for a mask that is not bool, with the conversion for each kind of mask."""
    meaning, other = ("blocked", "may attend") if true_means_blocked else ("may attend", "blocked")
    from_01, from_additive = ("== 0", "!= 0") if true_means_blocked else ("!= 0", "== 0")
    return TypeError(
        f"{caller}: {name} must be a bool mask (True = {meaning}), got dtype {dtype}. Convert "
        f"it: a bool mask with True = {other}, pass `~mask`; a 0/1 mask with 1 = may attend, "
        f"pass `mask {from_01}`; an additive float mask (0 = attend, -inf = blocked), pass "
        f"`mask {from_additive}`"
    )


def _check_mask(mask: object, query_labels, key_labels, caller: str) -> np.ndarray:
    """The mask as a 2-D bool array, after checking its dtype, its shape and the label counts."""
    m = _to_numpy(mask)
    if m.dtype != np.bool_:
        raise _mask_dtype_error(caller, "mask", m.dtype, true_means_blocked=False)
    if m.ndim != 2:
        raise ValueError(
            f"{caller}: mask must be (query_len, key_len), got shape {tuple(m.shape)}; for a "
            "batch or per-head mask, pass mask[0]"
        )
    rows, cols = _default_labels(query_labels, key_labels, *m.shape)
    if len(rows) != m.shape[0] or len(cols) != m.shape[1]:
        raise ValueError(
            f"{caller}: got {len(rows)} query labels and {len(cols)} key labels "
            f"for a mask of shape {tuple(m.shape)}"
        )
    return m


def plot_mask(
    mask: object,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    title: str | None = None,
    legend: tuple[str, str] = ("may attend", "blocked"),
    xlabel: str | None = None,
    ylabel: str | None = None,
    ax=None,
) -> Figure:
    """Draw a boolean attention mask: True (may attend) dark, False (blocked) light.

    Args:
        mask: ``(query_len, key_len)`` bool, in mha_ref's convention (True = may attend). A float
            additive mask is refused; convert it with ``mask == 0`` first.
        query_labels, key_labels: tokens for rows and columns (default: positions).
        title: the axes title.
        legend: the two legend entries, (allowed, blocked); translate them for other languages.
        xlabel, ylabel: axis labels for the columns (keys) and the rows (queries).
        ax: draw into this axes instead of a new figure.

    Returns:
        The figure that holds the axes.
    """
    m = _check_mask(mask, query_labels, key_labels, "plot_mask")
    query_labels, key_labels = _default_labels(query_labels, key_labels, *m.shape)
    query_len, key_len = m.shape
    use_cjk_font_for(query_labels, key_labels, title, legend, xlabel, ylabel)
    xticks = _xtick_style(key_labels, _MASK_CELL)
    if ax is None:
        below = _below_margin(key_labels, rotated=xticks["rotation"] != 0)
        fig = plt.figure(
            figsize=(
                max(2.6, _MASK_CELL * key_len + _side_margin(query_labels) + 0.5),
                max(2.2, _MASK_CELL * query_len + below + 0.9 + (0.25 if xlabel else 0.0)),
            ),
            layout="constrained",
        )
        ax = fig.subplots()
        show_legend = True
    else:
        fig = ax.figure
        show_legend = False
    _draw_mask(ax, m, query_labels, key_labels, title, xlabel, ylabel, xticks)
    if show_legend:
        _mask_legend(fig, legend, _ALLOWED_COLOUR, _BLOCKED_COLOUR)
        attach_mask_view_data(
            fig,
            [m],
            query_labels,
            key_labels,
            names=[title],
            title=None,
            legend=legend,
            allowed_colour=_ALLOWED_COLOUR,
            xlabel=xlabel,
            ylabel=ylabel,
        )
        _show_view_in_notebook(fig)
    return fig


def _draw_mask(ax, m, query_labels, key_labels, title, xlabel, ylabel, xticks) -> None:
    query_len, key_len = m.shape
    ax.imshow(
        m.astype(np.int8),
        cmap=ListedColormap([_BLOCKED_COLOUR, _ALLOWED_COLOUR]),
        vmin=0,
        vmax=1,
        aspect="equal",
    )
    ax.set_xticks(np.arange(key_len + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(query_len + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xticks(range(key_len), labels=list(key_labels), fontsize=_TICK_FONTSIZE, **xticks)
    ax.set_yticks(range(query_len), labels=list(query_labels), fontsize=_TICK_FONTSIZE, rotation=0)
    ax.tick_params(length=0)
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=9)
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=9)
    if title:
        ax.set_title(title, fontsize=10)


#: Side of one mask cell, in inches (at most), and the colours of the two kinds of cell.
_MASK_CELL = 0.36
_ALLOWED_COLOUR, _BLOCKED_COLOUR = "#2b6ca3", "#eeeeee"


def _mask_legend(fig: Figure, legend: tuple[str, str], allowed: str, blocked: str) -> None:
    handles = [
        Patch(facecolor=allowed, label=legend[0]),
        Patch(facecolor=blocked, edgecolor="#999999", label=legend[1]),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False, fontsize=9)


def plot_masks(
    masks: Sequence[object],
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    titles: Sequence[str] | None = None,
    suptitle: str | None = None,
    legend: tuple[str, str] = ("may attend", "blocked"),
    xlabel: str | None = None,
    ylabel: str | None = None,
) -> Figure:
    """Draw several bool masks side by side (same labels), with one legend.

    ``masks`` is a sequence of ``(query_len, key_len)`` bool masks, or a 3-D bool tensor.
    ``xlabel`` and ``ylabel`` name the columns (keys) and rows (queries) once for all masks.
    """
    if getattr(masks, "ndim", None) == 2:  # one tensor or array: its rows are not masks
        raise ValueError(
            f"plot_masks: masks must be a sequence of (query_len, key_len) masks or a 3-D "
            f"stack of them, got a single 2-D mask of shape {tuple(masks.shape)}; pass a list, "
            "plot_masks([mask]), or draw it alone with plot_mask(mask)"
        )
    masks = list(masks)
    if titles is None:
        titles = [None] * len(masks)
    if len(titles) != len(masks):
        raise ValueError(f"plot_masks: got {len(titles)} titles for {len(masks)} masks")
    use_cjk_font_for(query_labels, key_labels, titles, suptitle, legend, xlabel, ylabel)
    shapes = [tuple(_to_numpy(m).shape) for m in masks]
    q = max(s[0] for s in shapes)
    k = max(s[-1] for s in shapes)
    rows, cols = _default_labels(query_labels, key_labels, q, k)
    side = _side_margin(rows) + 0.2
    extra = 0.35 if ylabel else 0.1
    cell = min(
        _MASK_CELL, max(0.2, (_MAX_FIGURE_WIDTH - extra - len(masks) * side) / (len(masks) * k))
    )
    xticks = _xtick_style(cols, cell)
    below = _below_margin(cols, rotated=xticks["rotation"] != 0)
    fig = plt.figure(
        figsize=(
            len(masks) * (cell * k + side) + extra,
            cell * q + below + 0.95 + (0.4 if suptitle else 0.0) + (0.25 if xlabel else 0.0),
        ),
        layout="constrained",
    )
    axes = fig.subplots(1, len(masks), squeeze=False)[0]
    checked = []
    for i, (ax, m, t) in enumerate(zip(axes, masks, titles, strict=True)):
        m = _check_mask(m, query_labels, key_labels, "plot_masks")
        checked.append(m)
        query_labels_i, key_labels_i = _default_labels(query_labels, key_labels, *m.shape)
        # the key label under every mask (the legend sits below them), the query label once
        ylabel_i = ylabel if i == 0 else None
        _draw_mask(ax, m, query_labels_i, key_labels_i, t, xlabel, ylabel_i, xticks)
    _mask_legend(fig, legend, _ALLOWED_COLOUR, _BLOCKED_COLOUR)
    if suptitle:
        fig.suptitle(suptitle)
    if attach_mask_view_data(
        fig,
        checked,
        *_default_labels(query_labels, key_labels, *checked[0].shape),
        names=titles,
        title=suptitle,
        legend=legend,
        allowed_colour=_ALLOWED_COLOUR,
        xlabel=xlabel,
        ylabel=ylabel,
    ):
        _show_view_in_notebook(fig)
    return fig


def plot_lines(
    x: object,
    lines: Mapping[str, object],
    *,
    xlabel: str | None = None,
    ylabel: str | None = None,
    title: str | None = None,
    logx: bool = False,
    logy: bool = False,
    styles: Mapping[str, dict] | None = None,
    ax=None,
) -> Figure:
    """Draw measured curves against one x axis, with markers and a legend.

    Args:
        x: the shared x values, e.g. head dimensions.
        lines: ``{legend label: y values}``, one curve each, drawn in order.
        xlabel, ylabel, title: axis labels and title (any language).
        logx, logy: logarithmic axes (base 2 for x, base 10 for y); x ticks show the x values.
        styles: extra ``Axes.plot`` keyword arguments per label, e.g. ``{"d_k": {"ls": "--"}}``.
        ax: draw into this axes instead of a new figure.

    Returns:
        The figure that holds the axes.
    """
    use_cjk_font_for(list(lines), xlabel, ylabel, title)
    xs = _to_numpy(x).astype(np.float64)
    if ax is None:
        fig = plt.figure(figsize=(5.2, 3.6), layout="constrained")
        ax = fig.subplots()
    else:
        fig = ax.figure
    styles = styles or {}
    for label, ys in lines.items():
        ys = _to_numpy(ys).astype(np.float64)
        if ys.shape != xs.shape:
            raise ValueError(
                f"plot_lines: {label!r} has {ys.shape[0] if ys.ndim else 0} values for "
                f"{xs.shape[0]} x values; pass one y per x"
            )
        kwargs = {"marker": "o", "markersize": 4} | dict(styles.get(label, {}))
        ax.plot(xs, ys, label=label, **kwargs)
    if logx:
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, labels=[f"{v:g}" for v in xs])
        ax.minorticks_off()
    if logy:
        ax.set_yscale("log")
        # plain numbers (2, 5, 10) on the ticks, not 2 x 10^0: a reader reads ratios off them
        ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(_plain_log_tick))
        low, high = ax.get_ylim()
        if high / low <= 100:  # within two decades the 2s, 3s and 5s are labelled too
            ax.yaxis.set_minor_formatter(mpl.ticker.FuncFormatter(_plain_log_tick))
        else:
            ax.yaxis.set_minor_formatter(mpl.ticker.NullFormatter())
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _plain_log_tick(value: float, _position: int) -> str:
    """A log axis's tick as a plain number, only at 1, 2, 3 and 5 times a power of ten."""
    if value <= 0:
        return ""
    leading = value / 10 ** math.floor(math.log10(value))  # in [1, 10)
    return f"{value:g}" if any(abs(leading - d) < 1e-6 for d in (1, 2, 3, 5)) else ""


def _display_width(text: str) -> int:
    """Columns ``text`` takes in a monospaced font: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def text_table(header: Sequence[object], rows: Sequence[Sequence[object]]) -> str:
    """Format a small table as aligned plain text, for ``print`` in the examples.

    Columns are left-aligned and separated by two spaces. Widths count display columns, so a
    table with Chinese text stays aligned in a monospaced font (a CJK character is two columns).

    Args:
        header: the column titles.
        rows: the rows, each with one value per column; values are formatted with ``str``.

    Returns:
        str: the table, a header line, a rule of dashes, then one line per row.
    """
    table = [[str(cell) for cell in header]] + [[str(cell) for cell in row] for row in rows]
    for i, row in enumerate(table):
        if len(row) != len(table[0]):
            raise ValueError(
                f"text_table: row {i - 1} has {len(row)} cells, the header has {len(table[0])}"
            )
    widths = [max(_display_width(row[c]) for row in table) for c in range(len(table[0]))]

    def line(cells: list[str]) -> str:
        padded = [
            cell + " " * (w - _display_width(cell)) for cell, w in zip(cells, widths, strict=True)
        ]
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(table[0]), rule] + [line(row) for row in table[1:]])
