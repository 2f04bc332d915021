"""Tests for mha_ref.tutorial.plotting: what the figures contain."""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from mha_ref.tutorial import plotting as viz  # noqa: E402

TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
ZH_TOKENS = ["你的", "旅程", "开始", "于", "一", "步"]

# every test: default matplotlib settings, no figure left open (conftest.py)
pytestmark = pytest.mark.usefixtures("clean_matplotlib")


def _weights(num_heads: int, n: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(num_heads, n, n, generator=g), dim=-1)


def _heatmap_axes(fig):
    return [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]


def _tick_texts(labels):
    return [t.get_text() for t in labels]


def _drawn_with_warnings(fig) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("num_heads", [1, 2, 8])
def test_plot_heads_one_heatmap_per_head_and_one_colorbar(num_heads):
    fig = viz.plot_heads(_weights(num_heads), TOKENS, TOKENS)
    heatmaps = _heatmap_axes(fig)
    assert len(heatmaps) == num_heads
    colorbars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(colorbars) == 1
    assert [ax.get_title() for ax in heatmaps] == [f"head {h}" for h in range(num_heads)]


def test_plot_heads_tick_labels_are_the_tokens():
    fig = viz.plot_heads(_weights(2), TOKENS, TOKENS[::-1])
    first, second = _heatmap_axes(fig)
    for ax in (first, second):
        assert _tick_texts(ax.get_xticklabels()) == TOKENS[::-1]
    # every heatmap has the same query rows: only the first one of a row of heatmaps names them
    assert _tick_texts(first.get_yticklabels()) == TOKENS
    assert _tick_texts(second.get_yticklabels()) == []


def test_plot_heads_grid_columns_and_row_labels():
    fig = viz.plot_heads(_weights(4), TOKENS, ncols=2)
    axes = _heatmap_axes(fig)
    rows = sorted({round(ax.get_position().y0, 3) for ax in axes})
    assert len(rows) == 2  # 2 x 2
    labelled = [bool(_tick_texts(ax.get_yticklabels())) for ax in axes]
    assert labelled == [True, False, True, False]


def test_plot_heads_fits_a_page_and_labels_the_colorbar():
    fig = viz.plot_heads(_weights(8, n=5), None, colorbar_label="attention weight")
    assert fig.get_size_inches()[0] <= 7.05  # a page shows ~7 inches without shrinking the text
    (bar,) = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert bar.get_ylabel() == "attention weight"
    fig.canvas.draw()
    heatmaps = _heatmap_axes(fig)
    # no wide empty gap between the last column of heatmaps and the colour bar
    gap = bar.get_position().x0 - max(ax.get_position().x1 for ax in heatmaps)
    assert gap < 0.08


def test_plot_heads_annotation_font_follows_the_cell_size():
    big = viz.plot_heads(_weights(1), TOKENS)
    small = viz.plot_heads(_weights(3), TOKENS)
    (ax_big,) = _heatmap_axes(big)
    ax_small = _heatmap_axes(small)[0]
    assert ax_big.texts and ax_small.texts
    assert ax_small.texts[0].get_fontsize() < ax_big.texts[0].get_fontsize()
    # eight heads of 6 x 6 in one row: cells too small for a readable number, so none is written
    crowded = viz.plot_heads(_weights(8), TOKENS, ncols=8)
    assert all(len(ax.texts) == 0 for ax in _heatmap_axes(crowded))
    # asked for explicitly, they are written anyway
    forced = viz.plot_heads(_weights(8), TOKENS, ncols=8, annotate=True)
    assert all(len(ax.texts) == 36 for ax in _heatmap_axes(forced))


def test_plot_heads_annotate_min_skips_small_values():
    w = torch.zeros(1, 4, 4)
    w[0, :, 0] = 1.0
    fig = viz.plot_heads(w, None, annotate_min=0.01)
    (ax,) = _heatmap_axes(fig)
    assert [t.get_text() for t in ax.texts] == ["1.00"] * 4


def test_x_tick_labels_turn_only_when_they_do_not_fit():
    short = viz.plot_heads(_weights(1, n=4), ["t0", "t1", "t2", "t3"])
    (ax,) = _heatmap_axes(short)
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
    long = viz.plot_heads(_weights(1, n=4), ["a long token", "b", "c", "d"])
    (ax,) = _heatmap_axes(long)
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {45.0}


def test_plot_heads_shows_the_given_numbers():
    w = _weights(3)
    fig = viz.plot_heads(w, TOKENS)
    for h, ax in enumerate(_heatmap_axes(fig)):
        np.testing.assert_allclose(ax.images[0].get_array(), w[h].numpy(), rtol=0, atol=1e-6)
        # 6 x 6 = 36 cells is small: every value is written in its cell, 2 decimals
        texts = [t.get_text() for t in ax.texts]
        assert len(texts) == 36
        assert texts[0] == f"{w[h, 0, 0].item():.2f}"


def _causal_weights(num_heads: int, n: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention weights and the mask that made them (True = blocked)."""
    blocked = torch.ones(n, n, dtype=torch.bool).triu(1)  # (n, n)
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(num_heads, n, n, generator=g).masked_fill(blocked, float("-inf"))
    return torch.softmax(scores, dim=-1), blocked


def test_plot_heads_greys_out_blocked_cells_and_explains_them():
    w, blocked = _causal_weights(2)
    fig = viz.plot_heads(w, TOKENS, xlabel="key", blocked=blocked, blocked_label="masked out")
    for h, ax in enumerate(_heatmap_axes(fig)):
        shown = ax.images[0].get_array()  # masked where the cell takes the grey "bad" colour
        np.testing.assert_array_equal(np.ma.getmaskarray(shown), blocked.numpy())
        np.testing.assert_allclose(shown[~blocked.numpy()], w[h][~blocked].numpy(), atol=1e-6)
        # 21 cells on or below the diagonal carry a number; the 15 above it none
        texts = [t.get_text() for t in ax.texts]
        assert len(texts) == 21
        assert texts[0] == "1.00"  # the first query sees only itself
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["masked out"]
    # the x label sits above the legend, as its title (the layout cannot stack a supxlabel on it)
    assert legend.get_title().get_text() == "key"
    assert fig.get_supxlabel() == ""


def test_plot_heads_blocked_per_heatmap():
    w, blocked = _causal_weights(2)
    per_heatmap = torch.stack([blocked, torch.zeros_like(blocked)])  # (2, n, n)
    w = torch.stack([w[0], _weights(1)[0]])  # (2, n, n): causal, then unmasked
    fig = viz.plot_heads(w, TOKENS, blocked=per_heatmap)
    first, second = _heatmap_axes(fig)
    assert np.ma.getmaskarray(first.images[0].get_array()).sum() == 15
    assert np.ma.getmaskarray(second.images[0].get_array()).sum() == 0
    assert len(second.texts) == 36


def test_plot_heads_refuses_a_blocked_cell_with_weight():
    w, blocked = _causal_weights(1)
    allowed = ~blocked  # the allowed mask, in the wrong convention
    with pytest.raises(ValueError, match=r"cell \(head 0, query 0, key 0\) .* weight 1;") as info:
        viz.plot_heads(w, TOKENS, blocked=allowed)
    assert "(True = blocked)" in str(info.value)
    assert "True means 'may attend'" in str(info.value)
    assert "pass blocked=~mask" in str(info.value)
    viz.plot_heads(w, TOKENS, blocked=~allowed)  # the suggested fix works


@pytest.mark.parametrize(
    ("exception", "blocked", "message"),
    [
        (TypeError, torch.zeros(6, 6),
         r"plot_heads: blocked must be a bool mask \(True = blocked\), got dtype float32\. "
         r"Convert it: a bool mask with True = may attend, pass `~mask`; a 0/1 mask with "
         r"1 = may attend, pass `mask == 0`; an additive float mask \(0 = attend, "
         r"-inf = blocked\), pass `mask != 0`"),
        (ValueError, torch.zeros(5, 6, dtype=torch.bool),
         r"blocked must have shape \(6, 6\) or \(2, 6, 6\)"),
    ],
)
def test_plot_heads_blocked_argument_errors(exception, blocked, message):
    with pytest.raises(exception, match=message):
        viz.plot_heads(_weights(2), TOKENS, blocked=blocked)


def _float_masks(blocked: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same mask as a 0/1 float mask (1 = may attend) and as an additive one (0 / -inf)."""
    return {
        "0/1": (~blocked).float(),
        "additive": torch.zeros(blocked.shape).masked_fill(blocked, float("-inf")),
    }


@pytest.mark.parametrize("kind", ["0/1", "additive"])
def test_plot_heads_float_mask_fixes_in_the_message_work(kind):
    w, blocked = _causal_weights(2)
    mask = _float_masks(blocked)[kind]
    with pytest.raises(TypeError, match="got dtype float32") as info:
        viz.plot_heads(w, TOKENS, blocked=mask)
    fix, fixed = {"0/1": ("mask == 0", mask == 0), "additive": ("mask != 0", mask != 0)}[kind]
    assert f"pass `{fix}`" in str(info.value)
    fig = viz.plot_heads(w, TOKENS, blocked=fixed)  # the suggested fix works
    for ax in _heatmap_axes(fig):
        np.testing.assert_array_equal(np.ma.getmaskarray(ax.images[0].get_array()), blocked)


@pytest.mark.parametrize("draw", ["plot_mask", "plot_masks"])
@pytest.mark.parametrize("kind", ["0/1", "additive"])
def test_plot_mask_float_mask_fixes_in_the_message_work(draw, kind):
    blocked = torch.ones(6, 6, dtype=torch.bool).triu(1)
    mask = _float_masks(blocked)[kind]
    plot = viz.plot_mask if draw == "plot_mask" else lambda m: viz.plot_masks([m])
    with pytest.raises(TypeError, match=rf"{draw}: mask must be a bool mask \(True = may attend\), "
                                        r"got dtype float32") as info:
        plot(mask)
    fix, fixed = {"0/1": ("mask != 0", mask != 0), "additive": ("mask == 0", mask == 0)}[kind]
    assert f"pass `{fix}`" in str(info.value)
    assert "a bool mask with True = blocked, pass `~mask`" in str(info.value)
    fig = plot(fixed)  # the suggested fix works
    (ax,) = [a for a in fig.axes if a.images]
    np.testing.assert_array_equal(ax.images[0].get_array(), (~blocked).numpy().astype(np.int8))


def test_plot_heads_large_matrices_are_not_annotated():
    fig = viz.plot_heads(_weights(1, n=12), None)
    (ax,) = _heatmap_axes(fig)
    assert len(ax.texts) == 0
    assert _tick_texts(ax.get_xticklabels()) == [str(i) for i in range(12)]


def test_plot_heads_accepts_2d_titles_and_suptitle():
    fig = viz.plot_heads(_weights(1)[0], TOKENS, titles=["causal"], suptitle="one head")
    (ax,) = _heatmap_axes(fig)
    assert ax.get_title() == "causal"
    assert fig.get_suptitle() == "one head"


def test_plot_heads_rejects_a_batch_and_wrong_labels():
    with pytest.raises(ValueError, match=r"weights\[0\]"):
        viz.plot_heads(torch.rand(2, 8, 5, 5), None)
    with pytest.raises(ValueError, match="one label per row"):
        viz.plot_heads(_weights(2), TOKENS[:5], TOKENS)
    with pytest.raises(ValueError, match="titles"):
        viz.plot_heads(_weights(2), TOKENS, titles=["only one"])


def test_plot_heads_nan_row_is_drawn_and_labelled():
    w = _weights(1)
    w[0, 2] = float("nan")
    fig = viz.plot_heads(w, TOKENS)
    (ax,) = _heatmap_axes(fig)
    texts = [t.get_text() for t in ax.texts]
    assert texts[12:18] == ["nan"] * 6
    fig.canvas.draw()


def test_plot_mask_pixels_follow_true_means_may_attend():
    mask = torch.ones(4, 6, dtype=torch.bool).tril(diagonal=2)
    fig = viz.plot_mask(mask, TOKENS[2:], TOKENS, title="bottom-right causal")
    (ax,) = [a for a in fig.axes if a.images]
    np.testing.assert_array_equal(ax.images[0].get_array(), mask.numpy().astype(np.int8))
    assert _tick_texts(ax.get_xticklabels()) == TOKENS
    assert _tick_texts(ax.get_yticklabels()) == TOKENS[2:]
    assert ax.get_title() == "bottom-right causal"
    legend_texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend_texts == ["may attend", "blocked"]


@pytest.mark.parametrize("draw", ["mask", "masks", "heads"])
def test_y_tick_labels_are_upright(draw):
    queries, keys = ["足", "下"], ["千里", "之行", "始", "于", "足", "下"]
    mask = torch.ones(2, 6, dtype=torch.bool).tril()
    if draw == "mask":
        fig = viz.plot_mask(mask, queries, keys)
    elif draw == "masks":
        fig = viz.plot_masks([mask, mask], queries, keys)
    else:
        fig = viz.plot_heads(mask.float(), queries, keys)
    fig.canvas.draw()
    ax = [a for a in fig.axes if a.images][0]
    labels = ax.get_yticklabels()
    assert _tick_texts(labels) == queries
    assert [t.get_rotation() for t in labels] == [0.0, 0.0]


def test_single_chinese_characters_are_drawn_upright():
    """Compare the pixels of each y tick label with the same glyph drawn upright and turned."""

    def ink(rgba: np.ndarray) -> np.ndarray:
        grey = 255.0 - rgba[..., :3].mean(axis=-1)
        ys, xs = np.nonzero(grey > 60)
        return grey[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]

    def glyph(char: str, rotation: float) -> np.ndarray:
        fig = plt.figure(figsize=(1, 1), dpi=250)
        fig.text(0.5, 0.5, char, fontsize=8, rotation=rotation, ha="center", va="center")
        fig.canvas.draw()
        return ink(np.asarray(fig.canvas.buffer_rgba()))

    def similarity(a: np.ndarray, b: np.ndarray) -> float:
        size = (max(a.shape[0], b.shape[0]), max(a.shape[1], b.shape[1]))
        a2, b2 = np.zeros(size), np.zeros(size)
        a2[: a.shape[0], : a.shape[1]] = a
        b2[: b.shape[0], : b.shape[1]] = b
        return float((a2 * b2).sum() / np.sqrt((a2 * a2).sum() * (b2 * b2).sum()))

    mask = torch.ones(2, 6, dtype=torch.bool).tril()
    fig = viz.plot_mask(mask, ["足", "下"], ["千里", "之行", "始", "于", "足", "下"])
    fig.set_dpi(250)
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())
    height = image.shape[0]
    (ax,) = [a for a in fig.axes if a.images]
    for label in ax.get_yticklabels():
        box = label.get_window_extent()
        crop = image[
            int(height - box.y1) - 2 : int(height - box.y0) + 2, int(box.x0) - 2 : int(box.x1) + 2
        ]
        drawn = ink(crop)
        upright = similarity(drawn, glyph(label.get_text(), 0))
        turned = max(similarity(drawn, glyph(label.get_text(), r)) for r in (90, -90))
        assert upright > 0.8 and upright > turned + 0.3, (label.get_text(), upright, turned)


def test_plot_masks_axis_labels():
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    fig = viz.plot_masks([mask, mask], ["a", "b", "c"], xlabel="key", ylabel="query")
    first, second = [a for a in fig.axes if a.images]
    assert first.get_xlabel() == second.get_xlabel() == "key"
    assert first.get_ylabel() == "query"
    assert second.get_ylabel() == ""
    fig = viz.plot_mask(mask, ["a", "b", "c"], xlabel="键", ylabel="查询")
    (ax,) = [a for a in fig.axes if a.images]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("键", "查询")


def test_plot_mask_refuses_float_masks_with_the_fix():
    with pytest.raises(TypeError, match="mask == 0"):
        viz.plot_mask(torch.zeros(3, 3), None)


def test_plot_masks_one_axes_per_mask_and_one_legend():
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    padding = torch.tensor([True] * 4 + [False] * 2).expand(6, 6)
    fig = viz.plot_masks(
        [causal, padding, causal & padding], TOKENS, titles=["causal", "padding", "both"]
    )
    axes = [a for a in fig.axes if a.images]
    assert [a.get_title() for a in axes] == ["causal", "padding", "both"]
    assert len(fig.legends) == 1
    np.testing.assert_array_equal(
        axes[2].images[0].get_array(), (causal & padding).numpy().astype(np.int8)
    )


@pytest.mark.parametrize("as_array", [False, True])
def test_plot_masks_refuses_a_single_2d_mask(as_array):
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    given = mask.numpy() if as_array else mask
    with pytest.raises(ValueError) as info:
        viz.plot_masks(given)
    message = str(info.value)
    assert "got a single 2-D mask of shape (4, 4)" in message
    assert "plot_masks([mask])" in message and "plot_mask(mask)" in message
    # both suggested fixes work, and a 3-D stack of masks is still accepted
    assert len([a for a in viz.plot_masks([given]).axes if a.images]) == 1
    assert len([a for a in viz.plot_mask(given).axes if a.images]) == 1
    assert len([a for a in viz.plot_masks(torch.stack([mask, mask])).axes if a.images]) == 2


def test_plot_lines_draws_each_curve_with_its_label():
    d_k = [4, 16, 64, 256]
    fig = viz.plot_lines(
        d_k,
        {"unscaled": [4.1, 15.8, 63.0, 250.0], "scaled": [1.0, 0.99, 0.98, 0.97]},
        xlabel="d_k",
        ylabel="variance",
        title="variance of q.k",
        logx=True,
        logy=True,
    )
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.get_lines()] == ["unscaled", "scaled"]
    np.testing.assert_array_equal(ax.get_lines()[0].get_xdata(), d_k)
    np.testing.assert_array_equal(ax.get_lines()[1].get_ydata(), [1.0, 0.99, 0.98, 0.97])
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert _tick_texts(ax.get_xticklabels()) == ["4", "16", "64", "256"]
    assert ax.get_title() == "variance of q.k"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["unscaled", "scaled"]


def test_plot_lines_into_given_axes_and_length_check():
    fig, (left, right) = plt.subplots(1, 2)
    assert viz.plot_lines([1, 2], {"a": [1, 2]}, ax=right) is fig
    assert len(right.get_lines()) == 1 and len(left.get_lines()) == 0
    with pytest.raises(ValueError, match="one y per x"):
        viz.plot_lines([1, 2, 3], {"a": [1, 2]})


def test_plot_lines_chinese_labels_render():
    fig = viz.plot_lines([1, 2], {"未缩放": [1, 2]}, xlabel="维度", ylabel="方差", title="标题")
    messages = _drawn_with_warnings(fig)
    assert not [m for m in messages if "Glyph" in m], messages


def test_text_table_aligns_columns_by_display_width():
    rows = [["F.sdpa", "全为 0", True], ["mha_ref", "NaN", 1]]
    table = viz.text_table(["API", "结果", "ok"], rows)
    lines = table.splitlines()
    assert lines[0] == "API      结果    ok"
    assert lines[1] == "-------  ------  ----"
    assert lines[2] == "F.sdpa   全为 0  True"
    assert lines[3] == "mha_ref  NaN     1"
    assert len({viz._display_width(line) for line in lines[1:3]}) == 1  # same right edge


def test_text_table_rejects_ragged_rows():
    with pytest.raises(ValueError, match="row 0 has 1 cells"):
        viz.text_table(["a", "b"], [["only one"]])
