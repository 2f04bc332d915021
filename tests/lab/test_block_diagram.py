"""The figure of one pre-norm block (example 16): what it shows, in both languages."""

from __future__ import annotations

import io
from dataclasses import replace
from types import SimpleNamespace

import pytest

from mha_ref.tutorial import block_diagram as bd
from mha_ref.tutorial.fonts import CJK_FONT_FAMILY, raise_on_missing_glyphs
from mha_ref.tutorial.real_models.smollm2 import SmolLM2Config

pytestmark = pytest.mark.usefixtures("clean_matplotlib")

#: SmolLM2-135M's sizes, as its file's metadata states them (tests/lab/test_real_model.py
#: reads them from the file)
CONFIG = SmolLM2Config(vocab_size=49152, embed_dim=576, num_layers=30, num_heads=9,
                       num_kv_heads=3, head_dim=64, ffn_dim=1536, rope_base=100000.0,
                       rms_eps=1e-5, context_length=8192)

ZH_LABELS = {
    "title": "一个块；模型有 {num_layers} 个",
    "stream": "残差流 (batch, L, {embed_dim})",
    "enter": "来自前一个块",
    "leave": "送往下一个块",
    "norm": "RMSNorm",
    "attention": "注意力：{num_heads} 个查询头，{num_kv_heads} 个键/值头，head_dim {head_dim}",
    "mlp": "MLP {embed_dim} → {ffn_dim} → {embed_dim}",
    "add_attention": "x + 注意力",
    "add_mlp": "x + MLP",
}


def _texts(fig) -> list[str]:
    ax = fig.axes[0]
    return [t.get_text() for t in ax.texts] + [ax.get_title()]


def test_the_sizes_come_from_the_config():
    sizes = bd.block_sizes(CONFIG)
    assert list(sizes) == list(bd.BLOCK_SIZES)
    assert sizes == {"embed_dim": 576, "num_heads": 9, "num_kv_heads": 3, "head_dim": 64,
                     "ffn_dim": 1536, "num_layers": 30}
    other = replace(CONFIG, ffn_dim=2048, num_layers=12)
    texts = " ".join(_texts(bd.plot_prenorm_block(other)))
    assert "576 → 2048 → 576" in texts and "stacks 12 of them" in texts
    assert "1536" not in texts


def test_the_block_has_two_branches_each_added_back_to_the_stream():
    fig = bd.plot_prenorm_block(CONFIG)
    texts = _texts(fig)
    assert texts.count("+") == 2  # the two residual adds
    assert texts.count("RMSNorm") == 2  # pre-norm: one before each branch
    assert any("9 query heads, 3 key/value heads" in t for t in texts)
    circles = [p for p in fig.axes[0].patches if type(p).__name__ == "Circle"]
    assert len(circles) == 2


def test_chinese_labels_get_the_cjk_font_and_every_glyph():
    fig = bd.plot_prenorm_block(CONFIG, ZH_LABELS)
    import matplotlib as mpl

    assert mpl.rcParams["font.sans-serif"][0] == CJK_FONT_FAMILY
    assert any("9 个查询头，3 个键/值头" in t for t in _texts(fig))
    with raise_on_missing_glyphs():
        fig.savefig(io.BytesIO(), format="png", dpi=50)


def test_bad_labels_and_config_are_named():
    with pytest.raises(KeyError, match="mlp"):
        bd.plot_prenorm_block(CONFIG, {k: v for k, v in ZH_LABELS.items() if k != "mlp"})
    without_mlp = SimpleNamespace(**{name: 1 for name in bd.BLOCK_SIZES if name != "ffn_dim"})
    with pytest.raises(TypeError, match="'ffn_dim'"):
        bd.block_sizes(without_mlp)
