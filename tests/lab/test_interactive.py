"""The data of the interactive attention views: what plot_heads drew, exactly, and nothing else."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from mha_ref import causal_mask  # noqa: E402
from mha_ref.tutorial import interactive, live_views  # noqa: E402
from mha_ref.tutorial.plotting import plot_heads  # noqa: E402

TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
ZH_TOKENS = ["你的", "旅程", "开始", "于", "一", "步"]


# every test: default matplotlib settings, no figure left open (conftest.py)
pytestmark = pytest.mark.usefixtures("clean_matplotlib")


def _weights(num_heads: int, n: int = 6, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(num_heads, n, n, generator=g, dtype=dtype), dim=-1)


def _round_trip(fig, lang=None) -> dict:
    return json.loads(interactive.view_json(interactive.view_data(fig), lang))


def test_the_embedded_weights_are_the_tensor_bit_for_bit():
    w = _weights(3)
    data = _round_trip(plot_heads(w, TOKENS, titles=["a", "b", "c"], suptitle="three heads"))
    embedded = np.array(data["weights"], dtype=np.float32)
    assert embedded.shape == (3, 6, 6)
    assert np.array_equal(embedded, w.numpy())  # float32 in, the same float32 out
    assert data["queries"] == TOKENS and data["keys"] == TOKENS
    assert data["names"] == ["a", "b", "c"] and data["title"] == "three heads"
    assert data["blocked"] is None and data["lang"] == "en"
    assert data["vmax"] == pytest.approx(float(w.max()))


def test_float64_weights_keep_their_precision():
    w = _weights(1, dtype=torch.float64)[0]
    data = _round_trip(plot_heads(w, TOKENS))
    assert np.array_equal(np.array(data["weights"][0]), w.numpy())


def test_numbers_use_the_fewest_digits_that_read_back():
    w = torch.tensor([[[0.1, 0.9], [1.0, 0.0]]])
    text = interactive.view_json(interactive.view_data(plot_heads(w)))
    assert '"weights":[[[0.1,0.9],[1.0,0.0]]]' in text


def test_blocked_cells_are_marked_not_zero():
    mask = causal_mask(6)  # True = may attend
    scores = torch.randn(2, 6, 6).masked_fill(~mask, float("-inf"))
    w = scores.softmax(-1)
    data = _round_trip(plot_heads(w, TOKENS, blocked=~mask, blocked_label="masked out"))
    assert data["blocked"][0][0] == "011111" and data["blocked"][1][5] == "000000"
    blocked = np.array([[[c == "1" for c in row] for row in head] for head in data["blocked"]])
    assert np.array_equal(blocked, np.broadcast_to(~mask.numpy(), (2, 6, 6)))
    assert data["blocked_label"] == "masked out"


def test_a_nan_row_is_null():
    w = _weights(1)
    w[0, 2] = float("nan")
    data = _round_trip(plot_heads(w, TOKENS))
    assert data["weights"][0][2] == [None] * 6
    assert data["weights"][0][1][0] == pytest.approx(float(w[0, 1, 0]))


def test_default_names_are_left_to_the_page_and_chinese_labels_mean_a_chinese_view():
    data = _round_trip(plot_heads(_weights(2), ZH_TOKENS))
    assert data["names"] is None  # the view writes "head 0" or "头 0" in the page's language
    assert data["lang"] == "zh_CN"
    assert _round_trip(plot_heads(_weights(2), ZH_TOKENS), "en")["lang"] == "en"


def test_layers_are_kept_and_checked():
    layers = ["layer 0", "layer 0", "layer 1", "layer 1"]
    data = _round_trip(plot_heads(_weights(4), TOKENS, layers=layers))
    assert data["layers"] == layers
    with pytest.raises(ValueError, match="3 layer names for 4 heatmaps"):
        plot_heads(_weights(4), TOKENS, layers=layers[:3])


def test_the_pages_word_for_a_layer_is_kept_and_checked():
    layers = ["block 0", "block 0", "block 1", "block 1"]
    data = _round_trip(plot_heads(_weights(4), TOKENS, layers=layers, layer_word="block"))
    assert data["layer_word"] == "block"
    assert _round_trip(plot_heads(_weights(4), TOKENS, layers=layers))["layer_word"] is None
    for bad in ("", "  ", 3):
        with pytest.raises(TypeError, match="layer_word must be a non-empty str"):
            plot_heads(_weights(4), TOKENS, layers=layers, layer_word=bad)


def test_colours_are_the_figures_colour_map():
    data = _round_trip(plot_heads(_weights(1), TOKENS))
    assert data["colours"][0] == "#440154" and data["colours"][-1] == "#fde725"  # viridis


def test_html_cannot_be_closed_by_a_label():
    fig = plot_heads(_weights(1, n=2), ["</script><b>", "a&b"])
    html = interactive.view_html(fig, "en")
    assert html.count("</script>") == 1 and "<b>" not in html
    assert _round_trip(fig)["queries"] == ["</script><b>", "a&b"]


def test_standalone_html_carries_its_script_and_style():
    fig = plot_heads(_weights(1), TOKENS)
    page = interactive.view_html(fig, standalone=True)
    assert page.startswith("<style>") and "function View(" in page
    assert re.search(r"https?://", page.replace("http://www.w3.org", "")) is None
    assert interactive.view_html(plt.figure()) is None  # a figure without data has no view


def test_the_largest_gallery_size_of_figure_stays_small():
    # 8 heads of 16 x 16 float32 weights, the largest the gallery draws today, blocked half
    mask = causal_mask(16)
    w = torch.randn(8, 16, 16).masked_fill(~mask, float("-inf")).softmax(-1)
    text = interactive.view_json(
        interactive.view_data(plot_heads(w, [f"tok{i}" for i in range(16)], blocked=~mask))
    )
    assert len(text.encode()) < 40_000


def test_mask_pictures_carry_their_masks():
    from mha_ref.tutorial.plotting import plot_mask, plot_masks

    allowed = causal_mask(4)
    data = _round_trip(plot_masks([allowed, ~allowed], TOKENS[:4], titles=["causal", None]))
    assert data["kind"] == "mask" and data["names"] == ["causal", ""]
    assert np.array_equal(np.array(data["weights"]), np.stack([allowed, ~allowed]).astype(float))
    assert data["blocked"][0] == ["0111", "0011", "0001", "0000"]
    assert (data["allowed_label"], data["blocked_label"]) == ("may attend", "blocked")
    single = _round_trip(plot_mask(allowed, legend=("可以关注", "被屏蔽")))
    assert single["names"] is None and single["allowed_label"] == "可以关注"
    # masks of different shapes in one figure: the picture only
    wide = causal_mask(2, 4, alignment="bottom_right")
    assert interactive.view_data(plot_masks([allowed, wide])) is None


def test_a_notebook_shows_the_view_under_the_figure(monkeypatch):
    # the kernel inherits the environment: with MPLBACKEND=Agg (as `nox -s tests` sets it)
    # matplotlib would not show the picture inline, as it does for a reader
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    code = (
        "import torch\n"
        "from mha_ref.tutorial.plotting import plot_heads\n"
        "w = torch.tensor([[[0.25, 0.75], [1.0, 0.0]]])\n"
        "fig = plot_heads(w, ['你', '好'])"
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert len(html) == 1 and 'class="mha-attn"' in html[0]
    assert "function View(" in html[0] and "[[[0.25,0.75],[1.0,0.0]]]" in html[0]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the picture as well


#: labels an attacker (or an unlucky tokenizer) could give: HTML that ends the element, reST
#: that includes a file, and every character that ends a line for docutils or JavaScript
HOSTILE_LABELS = [
    "</script><script>alert(1)</script>",
    "a\n\n.. include:: /etc/hostname\n\n",
    "b\u2028.. include:: /etc/hostname",
    "c\u2029.. raw:: html",
    "d\x85e",
    "nul\x00",
    "cr\rvt\x0bff\x0cfs\x1c",
    "<!--",
    "&amp;",
    "中文 ‘quoted’",
]


class _ViewParser:
    """The elements of a view's HTML and the text of each script, via html.parser."""

    def __init__(self, html: str):
        from html.parser import HTMLParser

        self.tags, self.scripts = [], []
        outer = self

        class Parser(HTMLParser):
            def handle_starttag(self, tag, attrs):
                outer.tags.append((tag, dict(attrs)))
                if tag == "script":
                    outer.scripts.append([dict(attrs).get("type"), ""])

            def handle_data(self, data):
                if outer.tags and outer.tags[-1][0] == "script" and outer.scripts:
                    outer.scripts[-1][1] += data

        parser = Parser(convert_charrefs=False)
        parser.feed(html)
        parser.close()


def _assert_view_holds_exactly(html: str, labels: list[str], standalone: bool) -> None:
    parsed = _ViewParser(html)
    expected = ["div", "script"] if not standalone else ["style", "div", "script", "script"]
    assert [tag for tag, _ in parsed.tags] == expected
    (data,) = [text for kind, text in parsed.scripts if kind == "application/json"]
    assert data.isascii() and len(data.splitlines()) == 1 and "</" not in data
    if not standalone:  # what a page embeds (in a reST raw block): one line of ASCII
        assert html.isascii() and len(html.splitlines()) == 1
    view = json.loads(data)
    assert view["queries"] == labels and view["keys"] == labels
    assert view["title"] == labels[2]


def test_hostile_labels_stay_data_in_the_page_and_the_notebook_html():
    """Through the public API that makes views (attach_view_data, view_html): whatever the
    labels hold, the HTML is one line of ASCII whose JSON reads back as exactly those labels,
    for the site (view_html) and for a notebook (standalone=True)."""
    n = len(HOSTILE_LABELS)
    fig = plt.figure()
    interactive.attach_view_data(
        fig,
        np.full((1, n, n), 1.0 / n),
        HOSTILE_LABELS,
        HOSTILE_LABELS,
        names=[HOSTILE_LABELS[1]],
        title=HOSTILE_LABELS[2],
        vmax=1.0,
        cmap=matplotlib.colormaps["viridis"],
        xlabel=HOSTILE_LABELS[3],
    )
    for standalone in (False, True):
        html = interactive.view_html(fig, "en", standalone=standalone)
        _assert_view_holds_exactly(html, HOSTILE_LABELS, standalone)


def test_the_views_script_and_style_cannot_end_their_elements():
    """A notebook gets the view's JavaScript and CSS inline: neither may contain the end tag."""
    static = interactive._STATIC_DIR
    assert "</script" not in (static / "attention-view.js").read_text(encoding="utf-8").lower()
    assert "</style" not in (static / "attention-view.css").read_text(encoding="utf-8").lower()


def test_a_notebook_keeps_hostile_labels_as_data(monkeypatch):
    """plot_heads in a real kernel, with the hostile labels: its HTML output holds them as data."""
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    code = (
        "import json, torch, warnings\n"
        "warnings.simplefilter('ignore')  # matplotlib: no glyph for some of these characters\n"
        "from mha_ref.tutorial.plotting import plot_heads\n"
        f"labels = json.loads({json.dumps(json.dumps(HOSTILE_LABELS))})\n"
        "n = len(labels)\n"
        "fig = plot_heads(torch.full((1, n, n), 1.0 / n), labels, suptitle=labels[2])"
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    (html,) = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    _assert_view_holds_exactly(html, HOSTILE_LABELS, standalone=True)


# -- the "all layers x heads" overview -----------------------------------------------------------


def test_the_layer_head_overview_names_every_head_of_every_layer():
    g = torch.Generator().manual_seed(1)
    w = torch.softmax(torch.randn(3, 2, 4, 4, generator=g), dim=-1).numpy()  # (layers, heads, q, k)
    fig = plt.figure()
    data = live_views.attach_layer_head_view(
        fig, w, list("abcd"), list("abcd"), vmax=1.0, cmap=plt.get_cmap("viridis"), decimals=3
    )
    assert data["layers"] == ["layer 0"] * 2 + ["layer 1"] * 2 + ["layer 2"] * 2
    assert data["names"][3] == "layer 1 head 1"
    # heatmap 3 is layer 1's head 1, rounded to the 3 decimals the view shows
    assert np.array(data["weights"][3]) == pytest.approx(np.round(w[1, 1], 3), abs=1e-7)
    assert np.abs(np.array(data["weights"][3]) - w[1, 1]).max() <= 5e-4 + 1e-7
    # the page receives thousandths as integers, and dividing them back gives the same numbers
    page = _round_trip(fig)
    assert page["weights_scale"] == 1000 and all(
        isinstance(v, int) for head in page["weights"] for row in head for v in row
    )
    assert np.array(page["weights"][3]) / 1000 == pytest.approx(np.round(w[1, 1], 3), abs=1e-7)
    with pytest.raises(ValueError, match="num_layers, num_heads"):
        live_views.attach_layer_head_view(
            fig, w[0], list("abcd"), list("abcd"), vmax=1.0, cmap=None
        )
    with pytest.raises(ValueError, match="one name each"):
        live_views.attach_layer_head_view(
            fig,
            w,
            list("abcd"),
            list("abcd"),
            layer_names=["x"],
            vmax=1.0,
            cmap=plt.get_cmap("viridis"),
        )


def test_a_rounded_view_tells_a_tiny_positive_weight_from_a_zero():
    # one layer, one head, one query: a masked key (exactly 0), two positive weights too small
    # for a thousandth, and two that are not; the row sums to 1
    row = [0.0, 0.0003, 0.0004999, 0.012, 1.0 - 0.0003 - 0.0004999 - 0.012]
    w = np.array(row, dtype=np.float64).reshape(1, 1, 1, 5)  # (layers, heads, q, k)
    fig = plt.figure()
    data = live_views.attach_layer_head_view(
        fig, w, ["q"], list("abcde"), vmax=1.0, cmap=plt.get_cmap("viridis"), decimals=3
    )
    # the figure's data keeps the tiny ones positive; the page's integers mark them -1
    assert data["weights"][0][0][:4] == [0.0, 0.0003, 0.0004999, 0.012]
    page = _round_trip(fig)
    assert page["weights"][0][0] == [0, -1, -1, 12, 987]
    # the encoding itself, on data that was not rounded first
    tiny = {**data, "weights": [[[0.0, 1e-9, 0.0005001, 0.0014999, None]]]}
    assert json.loads(interactive.view_json(tiny))["weights"] == [[[0, -1, 1, 1, None]]]
    # the page's script decodes -1 to a flag and shows it as "<0.001", in a rounded title
    js = (Path(interactive.__file__).with_name("static") / "attention-view.js").read_text(
        encoding="utf-8"
    )
    assert "v === -1 ? BELOW_ONE_UNIT" in js and 'roundedTo: "rounded to {d} decimals"' in js


@pytest.mark.parametrize(
    ("decimals", "error", "message"),
    [(2, ValueError, "decimals must be at least 3 .* got decimals=2"),
     (3.0, TypeError, r"decimals must be an int or None, got float \(3.0\)"),
     (True, TypeError, "decimals must be an int or None, got bool")],
)
def test_the_layer_head_view_needs_the_3_decimals_it_shows(decimals, error, message):
    w = np.full((1, 1, 2, 2), 0.5)  # (layers, heads, q, k)
    with pytest.raises(error, match=message):
        live_views.attach_layer_head_view(
            plt.figure(), w, list("ab"), list("ab"), vmax=1.0, cmap=None, decimals=decimals
        )


# -- the live model ------------------------------------------------------------------------------

INDUCTION_CACHE = Path(__file__).resolve().parents[2] / "build" / ".cache" / "experiments"


@pytest.fixture(scope="module")
def induction_model():
    """Example 10's trained model (the docs build's cache when it holds it, else about 5 s)."""
    from mha_ref.tutorial.cache import CACHE_ENV_VAR
    from mha_ref.tutorial.induction_training import train_induction

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV_VAR, str(INDUCTION_CACHE))
        return train_induction(seed=0).model()


#: sequences the page may be given: example 10's starting one, a short one, one with no repeat,
#: a repeat at another distance, a single token
LIVE_SEQUENCES = ["WVUTSRQPONHEARTHEART", "ABCABC", "XWVUTSRQPONMLKJIHGFE", "QHEARTXWHEART", "K"]


def test_the_exported_weights_are_the_parameters_bit_for_bit(induction_model):
    exported = live_views.export_model(induction_model)
    unpacked = live_views._unpack(exported)
    state = induction_model.state_dict()
    assert set(unpacked) == set(state)
    for name, tensor in state.items():
        assert np.array_equal(unpacked[name], tensor.numpy()), name
    # 4 bytes a parameter, a third more as base64: the page's share of the live view
    count = sum(p.numel() for p in induction_model.parameters())
    assert len(exported["data"]) == 4 * ((4 * count + 2) // 3)


@pytest.mark.parametrize("text", LIVE_SEQUENCES)
def test_the_pages_forward_pass_is_the_models(induction_model, text):
    """live_forward is the JavaScript's forward pass line for line; on the exported weights it
    gives the model's own logits and weights to float32 rounding (the model runs in float32,
    the page in float64)."""
    names = list("ABCDEFGHIJKLMNOPQRSTUVWX")
    ids = [names.index(c) for c in text]
    exported = live_views.export_model(induction_model)
    logits, weights = live_views.live_forward(exported, ids)
    with torch.no_grad():
        expected_logits, expected_weights = induction_model(torch.tensor([ids]))
    assert logits.shape == (len(ids), 24) and weights.shape == (2, 2, len(ids), len(ids))
    np.testing.assert_allclose(logits, expected_logits[0].numpy(), rtol=1e-5, atol=1e-4)
    for layer in range(2):
        # float32 scores of size ~10 carry ~1e-6 of rounding, which the softmax passes on
        np.testing.assert_allclose(weights[layer], expected_weights[layer][0].numpy(), atol=1e-5)
    assert (logits.argmax(-1) == expected_logits[0].argmax(-1).numpy()).all()


def test_the_live_forward_pass_checks_its_input(induction_model):
    exported = live_views.export_model(induction_model)
    with pytest.raises(ValueError, match="1 to 20 tokens"):
        live_views.live_forward(exported, [0] * 21)
    with pytest.raises(ValueError, match="token ids are 0 to 23"):
        live_views.live_forward(exported, [24])


def test_only_the_plain_model_runs_in_the_page():
    from mha_ref.tutorial.induction import AttentionOnlyTransformer

    with pytest.raises(ValueError, match="position='learned'"):
        live_views.export_model(AttentionOnlyTransformer(24, 20, 32, 2, position="rope"))


def test_a_live_view_carries_the_model_and_its_tokens(induction_model):
    names = list("ABCDEFGHIJKLMNOPQRSTUVWX")
    text = "ABCABC"
    with torch.no_grad():
        _, weights = induction_model(torch.tensor([[names.index(c) for c in text]]))
    fig = plot_heads(
        [w[0, h] for w in weights for h in range(2)],
        list(text),
        layers=["layer 1", "layer 1", "layer 2", "layer 2"],
        blocked=~causal_mask(len(text)),
    )
    data = live_views.attach_live_model(fig, induction_model, names, initial_layer="layer 2")
    page = _round_trip(fig)
    assert page["live"]["token_names"] == names and page["live"]["initial_layer"] == "layer 2"
    assert page["live"]["data"] == live_views.export_model(induction_model)["data"]
    assert data is interactive.view_data(fig)
    with pytest.raises(ValueError, match="initial_layer"):
        live_views.attach_live_model(fig, induction_model, names, initial_layer="layer 3")
    with pytest.raises(ValueError, match="24 distinct names"):
        live_views.attach_live_model(fig, induction_model, names[:-1])
    with pytest.raises(ValueError, match="no view data"):
        live_views.attach_live_model(plt.figure(), induction_model, names)


def test_a_notebook_shows_one_view_per_figure_the_live_one_once_attached(monkeypatch):
    """In a kernel, plot_heads displays its view; attaching a live model then replaces that view
    in place (one display id), so the cell ends with the live view alone, not the plain view
    followed by the live one."""
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    code = (
        "import torch\n"
        "from mha_ref.masks import causal_mask\n"
        "from mha_ref.tutorial.induction import AttentionOnlyTransformer\n"
        "from mha_ref.tutorial.live_views import attach_live_model\n"
        "from mha_ref.tutorial.plotting import plot_heads\n"
        "torch.manual_seed(0)\n"
        "names = [chr(65 + i) for i in range(6)]\n"
        "model = AttentionOnlyTransformer(6, 8, 8, 2).eval()\n"
        "with torch.no_grad():\n"
        "    _, weights = model(torch.tensor([[0, 1, 2, 0, 1, 2]]))\n"
        "fig = plot_heads([w[0, h] for w in weights for h in range(2)], list('ABCABC'),\n"
        "                 layers=['layer 1'] * 2 + ['layer 2'] * 2, blocked=~causal_mask(6))\n"
        "attach_live_model(fig, model, names)"
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    views = [o for o in outputs if 'class="mha-attn"' in o.get("data", {}).get("text/html", "")]
    assert len(views) == 1, [o.get("output_type") for o in outputs]
    (view,) = views
    assert '"live":' in view["data"]["text/html"]  # the live model's data, not the plain view's
    assert view["output_type"] == "display_data"
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the picture as well
