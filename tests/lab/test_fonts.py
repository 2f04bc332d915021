"""Tests for mha_ref.tutorial.fonts: Chinese figure text from the bundled font file.

None of these depend on the fonts the machine has installed: the font comes from the
``noto-cjk-sans-otc`` package, and the tests check that the drawn text really uses that file.
"""

from __future__ import annotations

import sys
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib import font_manager  # noqa: E402

from mha_ref.tutorial import fonts  # noqa: E402
from mha_ref.tutorial import plotting as viz  # noqa: E402

ZH_TOKENS = ["你的", "旅程", "开始", "于", "一", "步"]


# every test: default matplotlib settings, no figure left open (conftest.py)
pytestmark = pytest.mark.usefixtures("clean_matplotlib")


def _glyph_warnings(fig) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    return [str(w.message) for w in caught if "Glyph" in str(w.message)]


def test_has_cjk():
    assert fonts.has_cjk("注意力")
    assert fonts.has_cjk(["head", "头 0"])
    assert fonts.has_cjk("（")  # full-width punctuation needs the CJK font too
    assert not fonts.has_cjk("head 0 √d_k −1")
    assert not fonts.has_cjk(None)


def test_font_file_comes_from_the_package_and_is_a_collection():
    path = fonts.cjk_font_path()
    assert path.is_file()
    assert path.suffix == ".ttc"
    assert "site-packages" in path.parts or "dist-packages" in path.parts


def test_use_cjk_font_registers_the_simplified_chinese_face_of_that_file():
    assert fonts.use_cjk_font() == "Noto Sans CJK SC"
    assert matplotlib.rcParams["font.sans-serif"][0] == "Noto Sans CJK SC"
    assert matplotlib.rcParams["font.sans-serif"].count("Noto Sans CJK SC") == 1
    found = font_manager.findfont(
        font_manager.FontProperties(family=["sans-serif"]), fallback_to_default=False
    )
    assert found == str(fonts.cjk_font_path())
    entries = [e for e in font_manager.fontManager.ttflist if e.name == "Noto Sans CJK SC"]
    assert entries and all(e.fname == str(fonts.cjk_font_path()) for e in entries)


def test_chinese_labels_draw_every_glyph():
    fig = viz.plot_heads(
        torch.softmax(torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(0)), -1),
        ZH_TOKENS,
        titles=["头 0", "头 1"],
        suptitle="注意力权重（查询 × 键）",
    )
    assert _glyph_warnings(fig) == []
    fig = viz.plot_mask(
        torch.ones(6, 6, dtype=torch.bool).tril(), ZH_TOKENS, legend=("可以关注", "被屏蔽")
    )
    assert _glyph_warnings(fig) == []


def test_without_the_cjk_font_matplotlib_would_draw_boxes():
    """The control for the test above: DejaVu Sans alone lacks these glyphs."""
    fig = plt.figure()
    fig.text(0.1, 0.5, "注意力", family="DejaVu Sans")
    assert _glyph_warnings(fig), "expected matplotlib to report missing glyphs"


def test_raise_on_missing_glyphs_names_the_character():
    fig = plt.figure()
    fig.text(0.1, 0.5, "头", family="DejaVu Sans")
    with pytest.raises(fonts.MissingGlyphError, match=r"'头' \(U\+5934\)") as caught:
        with fonts.raise_on_missing_glyphs():
            fig.canvas.draw()
    assert caught.value.character == "头"


def test_raise_on_missing_glyphs_passes_a_complete_figure_and_other_warnings():
    fonts.use_cjk_font()
    fig = plt.figure()
    fig.text(0.1, 0.5, "头 0：注意力")
    with pytest.warns(UserWarning, match="unrelated"):
        with fonts.raise_on_missing_glyphs():
            fig.canvas.draw()
            warnings.warn("unrelated", UserWarning, stacklevel=1)


def test_missing_font_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "noto_cjk_sans_otc", None)  # import now fails
    with pytest.raises(ModuleNotFoundError, match=r"mha-ref\[tutorial\]"):
        fonts.cjk_font_path()


def test_english_labels_leave_the_default_font_alone():
    before = list(matplotlib.rcParams["font.sans-serif"])
    assert fonts.use_cjk_font_for("head 0", ["query", "key"]) is None
    assert matplotlib.rcParams["font.sans-serif"] == before
