"""Plotting helpers for the gallery: attention-weight grids, mask pictures, CJK fonts.

The gallery scripts stay thin by calling these. Every function returns a
:class:`matplotlib.figure.Figure` made with :mod:`matplotlib.pyplot` (so sphinx-gallery captures
it and ``plt.show()`` displays it) and accepts torch tensors or NumPy arrays.

Any text given to these helpers that contains Chinese (or other CJK) characters makes them
call :func:`use_cjk_font` first, so the glyphs render instead of empty boxes.
"""

from __future__ import annotations

import math
import re
import unicodedata
import warnings
from collections.abc import Mapping, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import font_manager
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

__all__ = [
    "CJK_FONT_CANDIDATES",
    "find_cjk_font",
    "use_cjk_font",
    "use_cjk_font_for",
    "plot_heads",
    "plot_mask",
    "plot_masks",
    "plot_lines",
    "text_table",
]

#: Font families tried in order by :func:`find_cjk_font`. Simplified Chinese first.
CJK_FONT_CANDIDATES: tuple[str, ...] = (
    "Noto Sans CJK SC",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Microsoft YaHei",
    "PingFang SC",
    "Hiragino Sans GB",
    "SimHei",
    "Noto Sans SC",
    "Noto Sans CJK TC",
    "Noto Sans CJK JP",
    "Source Han Sans",
    "Arial Unicode MS",
)

_FONT_FIX = (
    "Install one, e.g. `apt-get install fonts-noto-cjk` (Debian/Ubuntu), then delete "
    "matplotlib's font cache (~/.cache/matplotlib) so it is found."
)

# CJK ideographs, CJK punctuation, full-width forms, kana and hangul.
_CJK_RE = re.compile(
    "[\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3200-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]"
)


def _installed_font_names() -> set[str]:
    """Family names of every font matplotlib's font manager knows about."""
    return {entry.name for entry in font_manager.fontManager.ttflist}


def find_cjk_font() -> str | None:
    """Return the first installed font family of :data:`CJK_FONT_CANDIDATES`, or ``None``."""
    installed = _installed_font_names()
    for name in CJK_FONT_CANDIDATES:
        if name in installed:
            return name
    return None


def use_cjk_font() -> str | None:
    """Put an installed CJK font first in ``rcParams["font.sans-serif"]``.

    Returns:
        The font family name, or ``None`` when no CJK font is installed. In that case a
        :class:`UserWarning` says how to install one; figures still draw, with empty boxes
        in place of the Chinese characters.
    """
    name = find_cjk_font()
    if name is None:
        warnings.warn(
            "No CJK font found for matplotlib (tried "
            + ", ".join(CJK_FONT_CANDIDATES[:6])
            + ", ...); Chinese text in figures will show as empty boxes. "
            + _FONT_FIX,
            UserWarning,
            stacklevel=2,
        )
        return None
    others = [f for f in mpl.rcParams["font.sans-serif"] if f != name]
    mpl.rcParams["font.sans-serif"] = [name, *others]
    mpl.rcParams["font.family"] = "sans-serif"
    return name


def has_cjk(text: object) -> bool:
    """True when ``text`` (or any string inside a sequence) contains a CJK character."""
    if text is None:
        return False
    if isinstance(text, str):
        return _CJK_RE.search(text) is not None
    if isinstance(text, Sequence):
        return any(has_cjk(t) for t in text)
    return False


def use_cjk_font_for(*texts: object) -> str | None:
    """Call :func:`use_cjk_font` only when one of ``texts`` contains CJK characters.

    Scripts that draw their own matplotlib figures call this with their titles and axis labels,
    so an English page keeps matplotlib's default font and a Chinese page gets a CJK one.
    """
    if any(has_cjk(t) for t in texts):
        return use_cjk_font()
    return None


def _to_numpy(x: object) -> np.ndarray:
    """Tensor or array-like -> float or bool NumPy array on the CPU."""
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch here
        x = x.detach().cpu()
        if x.dtype.is_floating_point:
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


def plot_heads(
    weights: object,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    titles: Sequence[str] | None = None,
    suptitle: str | None = None,
    ncols: int | None = None,
    annotate: bool | None = None,
    vmax: float | None = None,
    cmap: str = "viridis",
    colorbar_label: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
) -> Figure:
    """Draw one heatmap per head, side by side, with token labels and one shared colour bar.

    Args:
        weights: attention weights ``(num_heads, query_len, key_len)``, or ``(query_len, key_len)``
            for a single head. Any stack of matrices works (e.g. one per mask).
        query_labels: ``query_len`` tokens for the rows (default: positions ``0, 1, ...``).
        key_labels: ``key_len`` tokens for the columns (default: ``query_labels`` when the
            lengths match, else positions).
        titles: one title per heatmap (default: ``"head 0"``, ``"head 1"``, ...).
        suptitle: a title for the whole figure.
        ncols: heatmaps per row (default: up to 4).
        annotate: write each value in its cell (default: when a matrix has at most 64 cells).
        vmax: top of the shared colour scale (default: the largest finite weight); the bottom is 0.
        cmap: matplotlib colour map name. NaN cells (e.g. a fully masked row) are drawn grey.
        colorbar_label: a label for the colour bar.
        xlabel, ylabel: one label for all columns (keys) and one for all rows (queries).

    Returns:
        The figure, with ``num_heads`` heatmap axes followed by the colour-bar axes.
    """
    w = _to_numpy(weights).astype(np.float64)
    if w.ndim == 2:
        w = w[None]
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
    if titles is None:
        titles = [f"head {h}" for h in range(num_heads)]
    if len(titles) != num_heads:
        raise ValueError(f"plot_heads: got {len(titles)} titles for {num_heads} heatmaps")
    use_cjk_font_for(query_labels, key_labels, titles, suptitle, colorbar_label, xlabel, ylabel)

    if annotate is None:
        annotate = query_len * key_len <= 64
    finite = w[np.isfinite(w)]
    if vmax is None:
        vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    colours = mpl.colormaps[cmap].with_extremes(bad="#d0d0d0")

    nrows, ncols = _grid(num_heads, ncols)
    cell = 0.42
    width = max(2.4, cell * key_len + 1.0)
    height = max(2.2, cell * query_len + 1.0)
    fig = plt.figure(
        figsize=(width * ncols + 0.9, height * nrows + (0.5 if suptitle else 0.1)),
        layout="constrained",
    )
    axes = fig.subplots(nrows, ncols, squeeze=False)
    image = None
    for h in range(nrows * ncols):
        ax = axes.flat[h]
        if h >= num_heads:
            ax.remove()
            continue
        image = ax.imshow(w[h], cmap=colours, vmin=0.0, vmax=vmax, aspect="equal")
        ax.set_title(titles[h], fontsize=10)
        ax.set_xticks(
            range(key_len),
            labels=list(key_labels),
            rotation=45,
            ha="right",
            rotation_mode="anchor",
            fontsize=8,
        )
        ax.set_yticks(range(query_len), labels=list(query_labels), fontsize=8)
        ax.tick_params(length=0)
        if annotate:
            for i in range(query_len):
                for j in range(key_len):
                    v = w[h, i, j]
                    dark = np.isfinite(v) and v < 0.6 * vmax
                    ax.text(
                        j,
                        i,
                        "nan" if np.isnan(v) else f"{v:.2f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if dark else "black",
                    )
    bar = fig.colorbar(image, ax=list(axes.flat[:num_heads]), shrink=0.8)
    if colorbar_label:
        bar.set_label(colorbar_label)
    if xlabel:
        fig.supxlabel(xlabel, fontsize=10)
    if ylabel:
        fig.supylabel(ylabel, fontsize=10)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def plot_mask(
    mask: object,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    title: str | None = None,
    legend: tuple[str, str] = ("may attend", "blocked"),
    ax=None,
) -> Figure:
    """Draw a boolean attention mask: True (may attend) dark, False (blocked) light.

    Args:
        mask: ``(query_len, key_len)`` bool, in mha_ref's convention (True = may attend). A float
            additive mask is refused; convert it with ``mask == 0`` first.
        query_labels, key_labels: tokens for rows and columns (default: positions).
        title: the axes title.
        legend: the two legend entries, (allowed, blocked); translate them for other languages.
        ax: draw into this axes instead of a new figure.

    Returns:
        The figure that holds the axes.
    """
    m = _to_numpy(mask)
    if m.dtype != np.bool_:
        raise TypeError(
            f"plot_mask: expected a bool mask (True = may attend), got dtype {m.dtype}; for an "
            "additive float mask (0 = attend, -inf = blocked) pass `mask == 0`"
        )
    if m.ndim != 2:
        raise ValueError(
            f"plot_mask: mask must be (query_len, key_len), got shape {tuple(m.shape)}; for a "
            "batch or per-head mask, pass mask[0]"
        )
    query_len, key_len = m.shape
    query_labels, key_labels = _default_labels(query_labels, key_labels, query_len, key_len)
    if len(query_labels) != query_len or len(key_labels) != key_len:
        raise ValueError(
            f"plot_mask: got {len(query_labels)} query labels and {len(key_labels)} key labels "
            f"for a mask of shape {tuple(m.shape)}"
        )
    use_cjk_font_for(query_labels, key_labels, title, legend)
    if ax is None:
        fig = plt.figure(
            figsize=(max(2.6, 0.42 * key_len + 1.2), max(2.6, 0.42 * query_len + 1.4)),
            layout="constrained",
        )
        ax = fig.subplots()
        show_legend = True
    else:
        fig = ax.figure
        show_legend = False
    blocked_colour, allowed_colour = "#eeeeee", "#2b6ca3"
    ax.imshow(
        m.astype(np.int8),
        cmap=ListedColormap([blocked_colour, allowed_colour]),
        vmin=0,
        vmax=1,
        aspect="equal",
    )
    ax.set_xticks(np.arange(key_len + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(query_len + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xticks(
        range(key_len),
        labels=list(key_labels),
        rotation=45,
        ha="right",
        rotation_mode="anchor",
        fontsize=8,
    )
    ax.set_yticks(range(query_len), labels=list(query_labels), fontsize=8)
    ax.tick_params(length=0)
    if title:
        ax.set_title(title, fontsize=10)
    if show_legend:
        _mask_legend(fig, legend, allowed_colour, blocked_colour)
    return fig


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
) -> Figure:
    """Draw several bool masks side by side (same labels), with one legend.

    ``masks`` is a sequence of ``(query_len, key_len)`` bool masks, or a 3-D bool tensor.
    """
    masks = list(masks)
    if titles is None:
        titles = [None] * len(masks)
    if len(titles) != len(masks):
        raise ValueError(f"plot_masks: got {len(titles)} titles for {len(masks)} masks")
    use_cjk_font_for(query_labels, key_labels, titles, suptitle, legend)
    shapes = [tuple(_to_numpy(m).shape) for m in masks]
    q = max(s[0] for s in shapes)
    k = max(s[-1] for s in shapes)
    fig = plt.figure(
        figsize=(
            len(masks) * max(2.4, 0.42 * k + 1.0) + 0.3,
            max(2.6, 0.42 * q + 1.6) + (0.4 if suptitle else 0.0),
        ),
        layout="constrained",
    )
    axes = fig.subplots(1, len(masks), squeeze=False)[0]
    for ax, m, t in zip(axes, masks, titles, strict=True):
        plot_mask(m, query_labels, key_labels, title=t, legend=legend, ax=ax)
    _mask_legend(fig, legend, "#2b6ca3", "#eeeeee")
    if suptitle:
        fig.suptitle(suptitle)
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
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


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
