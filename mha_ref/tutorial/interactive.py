"""The interactive twin of an attention-weight figure: the drawn numbers, ready for a web page.

:func:`mha_ref.tutorial.plotting.plot_heads` attaches to the figure it returns the exact weights
it drew, with the token labels, the heatmaps' names, the blocked cells and the colour scale
(:func:`attach_view_data`). Whoever shows the figure can then also show an interactive view of
the same numbers: the docs' image scraper (``docs/_ext/mha_ref_site.py``) writes
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
vega-lite 6.5.0 and vega-embed 7.3.0, minified). The view is about 22 kB (6 kB compressed) of
plain script, tested in Chromium by ``tests/browser``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from mha_ref.tutorial.fonts import has_cjk

__all__ = [
    "attach_view_data",
    "attach_mask_view_data",
    "attach_layer_head_view",
    "export_model",
    "live_forward",
    "attach_live_model",
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
        blocked: bool, of ``weights``' shape, True where a mask blocked the query from the key.
        title: the figure's title.
        vmax: the top of the colour scale (the bottom is 0).
        cmap: the matplotlib colour map the figure uses.
        colorbar_label, xlabel, ylabel, blocked_label: the figure's other texts.
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
    if layers is not None and len(layers) != num_heads:
        raise ValueError(f"attach_view_data: {len(layers)} layer names for {num_heads} heatmaps")
    if (len(data["queries"]), len(data["keys"])) != (query_len, key_len):
        raise ValueError("attach_view_data: one label per row and per column")
    setattr(fig, _ATTRIBUTE, data)
    return data


def attach_layer_head_view(
    fig: Figure,
    weights: np.ndarray,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    *,
    layer_names: Sequence[str] | None = None,
    head_names: Sequence[str] | None = None,
    decimals: int | None = None,
    **options,
) -> dict:
    """Attach to ``fig`` the weights of every head of every layer, for the "all layers x heads"
    overview of :func:`view_html`; return that data.

    The view then offers a layer menu, each layer's heads, and a button that shows every head
    of every layer at once: one row of small heatmaps per layer, each of which opens its head.
    Example 10 gets it from :func:`~mha_ref.tutorial.plotting.plot_heads` (``layers=``); a
    real model's figure (30 layers of 9 heads, say) calls this with the stacked weights.

    Args:
        fig: the figure the view goes with.
        weights: ``(num_layers, num_heads, query_len, key_len)``, one layer after another.
        query_labels, key_labels: one token per row and per column.
        layer_names: one name per layer (default: ``"layer 0"``, ``"layer 1"``, ...).
        head_names: one name per head of a layer (default: ``"head 0"``, ...); each heatmap is
            named ``"<layer name> <head name>"``.
        decimals: round the weights to this many decimals first (the view shows 3), to keep a
            page with hundreds of heads light; ``None`` keeps every digit.
        **options: passed on to :func:`attach_view_data` (``vmax`` and ``cmap`` are needed).

    Raises:
        ValueError: ``weights`` is not 4-D, or the names do not match its layers and heads.
    """
    weights = np.asarray(weights)
    if weights.ndim != 4:
        raise ValueError(
            "attach_layer_head_view: weights must be (num_layers, num_heads, query_len, key_len), "
            f"got shape {weights.shape}; stack one (num_heads, query_len, key_len) per layer"
        )
    num_layers, num_heads = weights.shape[:2]
    layer_names = [f"layer {n}" for n in range(num_layers)] if layer_names is None else layer_names
    head_names = [f"head {n}" for n in range(num_heads)] if head_names is None else head_names
    if len(layer_names) != num_layers or len(head_names) != num_heads:
        raise ValueError(
            f"attach_layer_head_view: {len(layer_names)} layer names and {len(head_names)} head "
            f"names for {num_layers} layers of {num_heads} heads; give one name each"
        )
    if decimals is not None:
        weights = np.round(weights, decimals)
    return attach_view_data(
        fig,
        weights.reshape(num_layers * num_heads, *weights.shape[2:]),
        query_labels,
        key_labels,
        names=[f"{layer} {head}" for layer in layer_names for head in head_names],
        layers=[layer for layer in layer_names for _ in head_names],
        **options,
    )


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


# ------------------------------------------------------------------------------------------------
# a model that runs in the page
# ------------------------------------------------------------------------------------------------

#: the parts of one attention layer, in the order they are packed
_LAYER_TENSORS = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")


def export_model(model) -> dict:
    """The parameters of a trained attention-only model, packed for a web page.

    The model is example 10's
    :class:`~mha_ref.tutorial.induction.AttentionOnlyTransformer` with learned positions. Every
    parameter is written as float32, little-endian, all in one base64 string (4 bytes a
    parameter, plus a third for base64), in the order of ``tensors``; the page's script
    (``static/attention-view.js``) and :func:`live_forward` read it back bit for bit.

    Args:
        model: an ``AttentionOnlyTransformer`` with ``position="learned"``.

    Returns:
        dict: ``vocab_size``, ``seq_len``, ``embed_dim``, ``num_heads``, ``num_layers``,
        ``tensors`` (``[name, shape]`` pairs) and ``data`` (the base64 text).

    Raises:
        ValueError: the model has another position scheme or layers whose search runs without
            positions (the page runs the plain forward pass only).
    """
    if getattr(model, "position", None) != "learned" or getattr(model, "positionless_layers", ()):
        raise ValueError(
            "export_model: only an AttentionOnlyTransformer with position='learned' and no "
            f"positionless_layers runs in the page; got position={getattr(model, 'position', None)!r}"
        )
    state = model.state_dict()
    num_layers = len(model.layers)
    # the order the forward pass reads them: embeddings, each layer, the unembedding
    names = [
        "token_embedding.weight",
        "position_embedding.weight",
        *(f"layers.{layer}.{part}" for layer in range(num_layers) for part in _LAYER_TENSORS),
        "unembed.weight",
        "unembed.bias",
    ]
    arrays = [state[name].detach().cpu().numpy() for name in names]
    blob = b"".join(np.ascontiguousarray(a, dtype="<f4").tobytes() for a in arrays)
    return {
        "vocab_size": int(state["token_embedding.weight"].shape[0]),
        "seq_len": int(state["position_embedding.weight"].shape[0]),
        "embed_dim": int(model.layers[0].embed_dim),
        "num_heads": int(model.layers[0].num_heads),
        "num_layers": num_layers,
        "tensors": [[name, list(a.shape)] for name, a in zip(names, arrays, strict=True)],
        "data": base64.b64encode(blob).decode("ascii"),
    }


def _unpack(exported: dict) -> dict[str, np.ndarray]:
    blob = np.frombuffer(base64.b64decode(exported["data"]), dtype="<f4")  # all parameters
    tensors, offset = {}, 0
    for name, shape in exported["tensors"]:
        size = int(np.prod(shape))
        tensors[name] = blob[offset : offset + size].reshape(shape)
        offset += size
    return tensors


def live_forward(exported: dict, tokens: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The forward pass the page runs, step by step as ``attention-view.js`` does, in float64.

    ``x = token_embedding[tokens] + position_embedding[:L]``; for each layer, the heads'
    queries, keys and values from ``in_proj``, causal softmax of ``q . k / sqrt(head_dim)``,
    the weighted values, ``out_proj``, added to ``x``; then ``logits = unembed(x)``
    (Vaswani et al. 2017, Sec. 3.2.2; the model of :mod:`mha_ref.tutorial.induction`). It is
    the JavaScript's twin, kept to test that the exported weights give the build's numbers.

    Args:
        exported: what :func:`export_model` returns.
        tokens: ``L`` token ids, ``1 <= L <= seq_len``.

    Returns:
        ``(logits (L, vocab_size), weights (num_layers, num_heads, L, L))``, float64.

    Raises:
        ValueError: no tokens, too many, or an id outside the vocabulary.
    """
    tokens = [int(t) for t in tokens]
    if not 1 <= len(tokens) <= exported["seq_len"]:
        raise ValueError(
            f"live_forward: 1 to {exported['seq_len']} tokens (the position embedding's rows), "
            f"got {len(tokens)}"
        )
    if any(not 0 <= t < exported["vocab_size"] for t in tokens):
        raise ValueError(f"live_forward: token ids are 0 to {exported['vocab_size'] - 1}, got {tokens}")
    p = {name: a.astype(np.float64) for name, a in _unpack(exported).items()}
    seq_len, heads = len(tokens), exported["num_heads"]
    embed_dim = exported["embed_dim"]
    head_dim = embed_dim // heads
    x = p["token_embedding.weight"][tokens] + p["position_embedding.weight"][:seq_len]  # (L, E)
    blocked = np.triu(np.ones((seq_len, seq_len), dtype=bool), k=1)  # (L, L) True = future key
    all_weights = []
    for layer in range(exported["num_layers"]):
        qkv = x @ p[f"layers.{layer}.in_proj_weight"].T + p[f"layers.{layer}.in_proj_bias"]  # (L, 3E)
        q, k, v = (
            qkv[:, n * embed_dim : (n + 1) * embed_dim].reshape(seq_len, heads, head_dim).transpose(1, 0, 2)
            for n in range(3)
        )  # (h, L, head_dim) each
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(head_dim)  # (h, L, L)
        scores = np.where(blocked, -np.inf, scores)  # (h, L, L)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))  # (h, L, L)
        weights = scores / scores.sum(axis=-1, keepdims=True)  # (h, L, L)
        heads_out = (weights @ v).transpose(1, 0, 2).reshape(seq_len, embed_dim)  # (L, E)
        x = x + heads_out @ p[f"layers.{layer}.out_proj.weight"].T + p[f"layers.{layer}.out_proj.bias"]
        all_weights.append(weights)
    logits = x @ p["unembed.weight"].T + p["unembed.bias"]  # (L, V)
    return logits, np.stack(all_weights)  # (L, V), (layers, h, L, L)


def attach_live_model(
    fig: Figure,
    model,
    token_names: Sequence[str],
    *,
    initial_layer: str | None = None,
) -> dict:
    """Make the view of ``fig`` a live one: the page runs ``model`` on the reader's sequence.

    ``fig`` is a :func:`~mha_ref.tutorial.plotting.plot_heads` figure of the model's heads (one
    heatmap per head, layer after layer, labelled by ``token_names``) on a starting sequence.
    The view gains a text box holding that sequence; when the reader edits it, the page's
    script runs the model's forward pass (:func:`live_forward`, in JavaScript) and redraws the
    heads' weights and the model's next-token predictions. The weights travel in the page
    (:func:`export_model`); nothing is requested. In a notebook, the live view is displayed.

    Args:
        fig: the figure, with its view data (``plot_heads`` attaches it).
        model: the model drawn, as :func:`export_model` takes it.
        token_names: one name per token id, as the figure's labels use them.
        initial_layer: the layer the view opens on (a name of the figure's ``layers``).

    Returns:
        dict: the view data, now with ``live``.

    Raises:
        ValueError: ``fig`` has no view data, its labels are not token names, or
            ``token_names`` does not name every token id.
    """
    data = view_data(fig)
    if data is None:
        raise ValueError("attach_live_model: fig has no view data; draw it with plot_heads first")
    exported = export_model(model)
    names = [str(n) for n in token_names]
    if len(names) != exported["vocab_size"] or len(set(names)) != len(names):
        raise ValueError(
            f"attach_live_model: token_names must give {exported['vocab_size']} distinct names, "
            f"one per token id; got {len(names)} ({len(set(names))} distinct)"
        )
    if data["queries"] != data["keys"] or any(q not in names for q in data["queries"]):
        raise ValueError("attach_live_model: the figure's labels must be the sequence's token names")
    expected = exported["num_layers"] * exported["num_heads"]
    if len(data["weights"]) != expected:
        raise ValueError(
            f"attach_live_model: the figure draws {len(data['weights'])} heatmaps; the model has "
            f"{expected} heads (draw every head, layer after layer)"
        )
    if initial_layer is not None and initial_layer not in (data["layers"] or []):
        raise ValueError(
            f"attach_live_model: initial_layer={initial_layer!r} is not one of the figure's "
            f"layers {sorted(set(data['layers'] or []))}"
        )
    data["live"] = {**exported, "token_names": names, "initial_layer": initial_layer}
    _display_in_notebook(fig)
    return data


def _display_in_notebook(fig: Figure) -> None:
    from mha_ref.tutorial.plotting import _show_view_in_notebook

    _show_view_in_notebook(fig)
