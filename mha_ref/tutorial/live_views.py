"""Views beyond one figure's heads: every layer's heads at once, and a model that runs in the page.

Both build on :mod:`mha_ref.tutorial.interactive` (the data a figure carries, which the docs
write next to its picture) and on the same script, ``static/attention-view.js``:

* :func:`attach_layer_head_view` gives a figure the weights of every head of every layer; the
  view then offers an "all layers x heads" overview, one row of small heatmaps per layer.
  Example 10 gets it through :func:`~mha_ref.tutorial.plotting.plot_heads` (``layers=``); a
  real model's page (30 layers of 9 heads) calls this function with the stacked weights.
* :func:`attach_live_model` puts a small trained model in the view: :func:`export_model` packs
  its parameters (float32, base64), and the page's script runs its forward pass on the
  sequence the reader types, in the browser, with no library and no request.
  :func:`live_forward` is that script's forward pass in NumPy, line for line, so that a test
  can check the exported weights against the model (``tests/lab/test_interactive.py``; the
  browser test checks the page's own numbers).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from mha_ref.tutorial.interactive import attach_view_data, view_data

__all__ = ["attach_layer_head_view", "export_model", "live_forward", "attach_live_model"]


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
    overview of :func:`~mha_ref.tutorial.interactive.view_html`; return that data.

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
        decimals: round the weights to this many decimals first (at least 3, the decimals
            the view shows), to keep a page with hundreds of heads light: the page then
            receives them as integers, in units of ``10 ** -decimals``, and divides them back;
            a positive weight that would round to 0 is kept as it is here and sent as ``-1``,
            which the page shows as ``<0.001``, not as a zero. ``None`` keeps every digit.
        **options: passed on to :func:`~mha_ref.tutorial.interactive.attach_view_data`
            (``vmax`` and ``cmap`` are needed).

    Raises:
        TypeError: ``decimals`` is neither ``None`` nor an int.
        ValueError: ``weights`` is not 4-D, the names do not match its layers and heads, or
            ``decimals`` is below 3 (the view shows 3 decimals, which the page would not have).
    """
    if decimals is not None:
        if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
            raise TypeError(
                f"attach_layer_head_view: decimals must be an int or None, got "
                f"{type(decimals).__name__} ({decimals!r}); pass decimals=3, the view's own."
            )
        if decimals < 3:
            raise ValueError(
                f"attach_layer_head_view: decimals must be at least 3 (the view shows 3 "
                f"decimals), got decimals={decimals}; pass decimals=3, or None for every digit."
            )
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
        rounded = np.round(weights, decimals)
        # a positive weight that rounds to 0 keeps its value: the page marks it "<0.001"
        weights = np.where((weights > 0) & (rounded == 0), weights, rounded)
    data = attach_view_data(
        fig,
        weights.reshape(num_layers * num_heads, *weights.shape[2:]),
        query_labels,
        key_labels,
        names=[f"{layer} {head}" for layer in layer_names for head in head_names],
        layers=[layer for layer in layer_names for _ in head_names],
        **options,
    )
    if decimals is not None:  # the page receives them as integers (interactive.view_json)
        data["weights_decimals"] = int(decimals)
    return data


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
        ValueError: the model has another position scheme, or ``positionless_layers``.
    """
    if getattr(model, "position", None) != "learned" or getattr(model, "positionless_layers", ()):
        raise ValueError(
            "export_model: only an AttentionOnlyTransformer with position='learned' and no "
            "positionless_layers runs in the page; got "
            f"position={getattr(model, 'position', None)!r}"
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
        raise ValueError(
            f"live_forward: token ids are 0 to {exported['vocab_size'] - 1}, got {tokens}"
        )
    p = {name: a.astype(np.float64) for name, a in _unpack(exported).items()}
    seq_len, heads = len(tokens), exported["num_heads"]
    embed_dim = exported["embed_dim"]
    head_dim = embed_dim // heads
    x = p["token_embedding.weight"][tokens] + p["position_embedding.weight"][:seq_len]  # (L, E)
    blocked = np.triu(np.ones((seq_len, seq_len), dtype=bool), k=1)  # (L, L) True = future key
    all_weights = []
    for layer in range(exported["num_layers"]):
        qkv = (
            x @ p[f"layers.{layer}.in_proj_weight"].T + p[f"layers.{layer}.in_proj_bias"]
        )  # (L, 3E)
        q, k, v = (
            qkv[:, n * embed_dim : (n + 1) * embed_dim]
            .reshape(seq_len, heads, head_dim)
            .transpose(1, 0, 2)
            for n in range(3)
        )  # (h, L, head_dim) each
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(head_dim)  # (h, L, L)
        scores = np.where(blocked, -np.inf, scores)  # (h, L, L)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))  # (h, L, L)
        weights = scores / scores.sum(axis=-1, keepdims=True)  # (h, L, L)
        heads_out = (weights @ v).transpose(1, 0, 2).reshape(seq_len, embed_dim)  # (L, E)
        x = (
            x
            + heads_out @ p[f"layers.{layer}.out_proj.weight"].T
            + p[f"layers.{layer}.out_proj.bias"]
        )
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
    (:func:`export_model`); nothing is requested. In a notebook, the live view replaces the
    plain view that ``plot_heads`` displayed, in place.

    Args:
        fig: the figure, with its view data (``plot_heads`` attaches it).
        model: the model drawn, as :func:`export_model` takes it.
        token_names: one name per token id, as the figure's labels use them.
        initial_layer: the layer the view opens on (a name of the figure's ``layers``).

    Returns:
        dict: the view data, now with ``live``.

    Raises:
        ValueError: ``fig`` has no view data or other labels, or ``token_names`` is wrong.
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
        raise ValueError(
            "attach_live_model: the figure's labels must be the sequence's token names"
        )
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
