"""The interactive twin of an attention-weight figure: the drawn numbers, ready for a web page.

:func:`mha_ref.tutorial.plotting.plot_heads` attaches to the figure it returns the exact weights
it drew, with the token labels, the heatmaps' names, the blocked cells and the colour scale
(:func:`attach_view_data`). Whoever shows the figure can then also show an interactive view of
the same numbers: the docs' image scraper (``docs/_ext/mha_ref_build/figures.py``) writes
:func:`view_html` next to each static image, and in a Jupyter notebook ``plot_heads`` displays
the same view (:func:`view_html` with ``standalone=True``) under the figure.

The view itself is ``static/attention-view.js`` and ``static/attention-view.css`` beside this
file: no third-party JavaScript, no request off the page. The site loads them once (they are
among its static files); a notebook gets them inline.

The data is small: each weight is written with the fewest digits that read back as the same
value in the precision it was computed in (float32 weights: at most 9 significant digits).

Why no charting library (Vega-Lite with vega and vega-embed was the candidate): a heatmap of a
few dozen cells is a CSS grid, and what the view must do beyond drawing it is what such a
library leaves to the page: one focusable cell at a time moved by the arrow keys, an ARIA grid
whose every cell names its query, key and weight, a real table as the alternative, colours that
follow the theme's dark mode, and a notebook copy with no files beside it. Vega's SVG renderer
can give each mark an ARIA description, but its marks take no keyboard focus; the glue to add
all of that would outweigh the heatmap, on top of 840 kB of vendored JavaScript (vega 6.4.0,
vega-lite 6.5.0 and vega-embed 7.3.0, minified). The view is about 44 kB (12 kB compressed) of
plain script, tested in Chromium by ``tests/browser``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from mha_ref.tutorial.fonts import has_cjk

__all__ = [
    "attach_view_data",
    "attach_mask_view_data",
    "view_data",
    "view_json",
    "view_html",
]

#: the folder holding the view's JavaScript and CSS (the docs add it to their static files)
_STATIC_DIR = Path(__file__).with_name("static")
#: the attribute of a :class:`~matplotlib.figure.Figure` that holds its view data
_ATTRIBUTE = "mha_ref_view"
#: version of the data layout read by attention-view.js
FORMAT_VERSION = 1
#: colour-map stops sent to the page (linear interpolation between them)
_COLOUR_STOPS = 17


def _shortest(values: np.ndarray) -> list:
    """Nested lists of Python floats (``None`` for NaN), each the shortest decimal that reads
    back as the same number in ``values``' own precision (float16, float32 or float64)."""
    if values.dtype not in (np.float16, np.float32, np.float64):
        values = values.astype(np.float64)

    def number(v) -> float | None:
        return None if np.isnan(v) else float(np.format_float_positional(v, unique=True))

    if values.ndim == 1:
        return [number(v) for v in values]
    return [_shortest(row) for row in values]


def attach_view_data(
    fig: Figure,
    weights: np.ndarray,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    *,
    names: Sequence[str] | None = None,
    layers: Sequence[str] | None = None,
    layer_word: str | None = None,
    blocked: np.ndarray | None = None,
    title: str | None = None,
    vmax: float,
    cmap,
    colorbar_label: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    blocked_label: str | None = None,
) -> dict:
    """Attach to ``fig`` what it draws, for :func:`view_html`; return that data.

    Args:
        fig: the figure that draws these weights.
        weights: ``(num_heads, query_len, key_len)`` in the precision they were computed in
            (NaN where a row had nothing to attend to).
        query_labels, key_labels: one token per row and per column.
        names: one name per heatmap (default: the page's word for "head" and its number).
        layers: one layer name per heatmap, when the heatmaps come from several layers.
        layer_word: what the page calls a layer, in the view's labels ("the block menu",
            "Heads by block"); default: the view's word for a layer in the page's language.
        blocked: bool, of ``weights``' shape, True where a mask blocked the query from the key.
        title: the figure's title.
        vmax: the top of the colour scale (the bottom is 0).
        cmap: the matplotlib colour map the figure uses.
        colorbar_label, xlabel, ylabel, blocked_label: the figure's other texts.

    Raises:
        TypeError: ``layer_word`` is neither ``None`` nor a non-empty string.
        ValueError: ``names``, ``layers`` or the labels do not match ``weights``' shape.
    """
    num_heads, query_len, key_len = weights.shape
    data = {
        "version": FORMAT_VERSION,
        "kind": "weights",
        "lang": "zh_CN" if has_cjk([query_labels, key_labels, names, title]) else "en",
        "title": title,
        "queries": [str(q) for q in query_labels],
        "keys": [str(k) for k in key_labels],
        "names": None if names is None else [str(n) for n in names],
        "layers": None if layers is None else [str(n) for n in layers],
        "layer_word": layer_word,
        "weights": _shortest(weights),
        # one string of 0s and 1s per row, 1 = blocked; absent when nothing is blocked
        "blocked": None,
        "vmax": float(vmax),
        "colours": [
            "#{:02x}{:02x}{:02x}".format(*(round(255 * c) for c in cmap(x)[:3]))
            for x in np.linspace(0.0, 1.0, _COLOUR_STOPS)
        ],
        "colorbar_label": colorbar_label,
        "xlabel": xlabel,
        "ylabel": ylabel,
        "blocked_label": blocked_label,
    }
    if blocked is not None and blocked.any():
        data["blocked"] = [
            ["".join("1" if cell else "0" for cell in row) for row in head] for head in blocked
        ]
    if names is not None and len(names) != num_heads:
        raise ValueError(f"attach_view_data: {len(names)} names for {num_heads} heatmaps")
    if layer_word is not None and not (isinstance(layer_word, str) and layer_word.strip()):
        raise TypeError(
            f"attach_view_data: layer_word must be a non-empty str, got {layer_word!r}; pass "
            'the word the page uses for a layer ("block"), or None for the view\'s own'
        )
    if layers is not None and len(layers) != num_heads:
        raise ValueError(f"attach_view_data: {len(layers)} layer names for {num_heads} heatmaps")
    if (len(data["queries"]), len(data["keys"])) != (query_len, key_len):
        raise ValueError("attach_view_data: one label per row and per column")
    setattr(fig, _ATTRIBUTE, data)
    return data


def attach_mask_view_data(
    fig: Figure,
    masks: Sequence[np.ndarray],
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    *,
    names: Sequence[str | None] | None,
    title: str | None,
    legend: tuple[str, str],
    allowed_colour: str,
    xlabel: str | None = None,
    ylabel: str | None = None,
) -> dict | None:
    """Attach to ``fig`` the bool masks it draws (True = may attend), for :func:`view_html`.

    The view reads each cell out as ``legend[0]`` (may attend) or ``legend[1]`` (blocked).
    Masks of different shapes in one figure get no view (returns ``None``).
    """
    if len({m.shape for m in masks}) != 1:
        return None
    allowed = np.stack([np.asarray(m, dtype=bool) for m in masks])
    if names is not None and all(n is None for n in names):
        names = None
    data = attach_view_data(
        fig,
        allowed.astype(np.float64),
        query_labels,
        key_labels,
        names=None if names is None else [n or "" for n in names],
        blocked=~allowed,
        title=title,
        vmax=1.0,
        cmap=lambda x: _hex_to_rgb(allowed_colour),
        xlabel=xlabel,
        ylabel=ylabel,
        blocked_label=legend[1],
    )
    data["kind"] = "mask"
    data["allowed_label"] = legend[0]
    data["colours"] = data["colours"][:2]
    return data


def _hex_to_rgb(colour: str) -> tuple[float, float, float]:
    return tuple(int(colour[k : k + 2], 16) / 255 for k in (1, 3, 5))


#: the integer that stands for a positive weight too small to show as a unit (see below)
_BELOW_ONE_UNIT = -1


def _as_integer_weights(data: dict) -> dict:
    """``data`` with weights rounded to ``weights_decimals`` decimals written as integers, in
    units of ``1 / weights_scale`` (``12`` for 0.012 at 3 decimals): the page divides them back.
    A view of hundreds of heads is about 40% lighter so (``0.012,`` is six characters).

    A positive weight that rounds to 0 is written ``-1`` (no weight is negative), so that the
    page can show it as ``<0.001`` and not as a zero; ``0`` stays for an exact zero (a masked
    position), ``null`` for NaN."""
    scale = 10 ** data["weights_decimals"]

    def integer(value: float) -> int:
        units = round(value * scale)
        return _BELOW_ONE_UNIT if units == 0 and value > 0 else units

    def integers(values):
        if isinstance(values, list):
            return [integers(v) for v in values]
        return None if values is None else integer(values)

    return {**data, "weights": integers(data["weights"]), "weights_scale": scale}


def view_data(fig: Figure) -> dict | None:
    """The data :func:`attach_view_data` attached to ``fig``, or ``None``."""
    return getattr(fig, _ATTRIBUTE, None)


def view_json(data: dict, lang: str | None = None) -> str:
    """``data`` as compact JSON that no label can break out of, wherever it is embedded.

    The text is one line of printable ASCII: every character outside it is written as a JSON
    escape (``\\u4e2d`` for a Chinese character, ``\\u2028`` for the line separator,
    ``\\u0000`` for NUL), and so are ``<``, ``>`` and ``&``. So ``</script>`` or ``<!--`` in a
    label cannot end an HTML ``<script>`` element, and no character can end the line of a reST
    ``raw`` block (which ends at a line or paragraph separator, U+2028, U+2029 or U+0085, too);
    JavaScript's ``JSON.parse`` reads the same labels back.

    Args:
        data: what :func:`view_data` returns.
        lang: the page's language (``"en"`` or ``"zh_CN"``), for the view's own words; by
            default the language the labels are in.

    Returns:
        str: the JSON text.
    """
    if lang is not None:
        data = {**data, "lang": lang}
    if data.get("weights_decimals") is not None:
        data = _as_integer_weights(data)
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    # "</script>" or "<!--" inside a label must not end the element
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def view_html(fig: Figure, lang: str | None = None, *, standalone: bool = False) -> str | None:
    """The HTML of the interactive view of ``fig``, or ``None`` when it carries no view data.

    Args:
        fig: a figure made by :func:`~mha_ref.tutorial.plotting.plot_heads`.
        lang: the page's language (``"en"`` or ``"zh_CN"``); by default the labels' language.
        standalone: include the view's JavaScript and CSS (for a notebook); a site loads them
            once for all its pages instead.
    """
    data = view_data(fig)
    if data is None:
        return None
    html = (
        '<div class="mha-attn" data-mha-attn="1">'
        f'<script type="application/json">{view_json(data, lang)}</script></div>'
    )
    if standalone:
        css = (_STATIC_DIR / "attention-view.css").read_text(encoding="utf-8")
        js = (_STATIC_DIR / "attention-view.js").read_text(encoding="utf-8")
        html = f"<style>{css}</style>{html}<script>{js}</script>"
    return html
