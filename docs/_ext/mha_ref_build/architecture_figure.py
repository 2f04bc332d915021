"""The ``mha-architecture`` directive: a figure of multi-head attention as boxes and arrows, with
the tensor shape on every arrow, drawn by matplotlib when the page is read, labelled in the page's
language (a character its fonts lack fails the build).
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from mha_ref_build import ROOT

FIGURE_DIR = ROOT / "build" / "figures"


_ARCH_TEXT = {
    "en": {
        "input": "input x",
        "proj": "Linear {m}",
        "split": "split heads",
        "sdpa": "scaled dot-product attention, each head on its own",
        "sdpa2": r"$\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$",
        "heads": "h heads",
        "concat": "concatenate the heads",
        "out": "output projection  $W^O$",
        "output": "output",
        "alt": "Multi-head attention: the input x of shape (batch, L, d_model) goes through three "
        "linear projections W^Q, W^K, W^V, each to (batch, L, h*d_k); the heads are split to "
        "(batch, h, L, d_k); scaled dot-product attention runs on each head, giving "
        "(batch, h, L, d_v); the heads are concatenated to (batch, L, h*d_v); the output "
        "projection W^O gives the output, (batch, L, d_model).",
    },
    "zh_CN": {
        "input": "输入 x",
        "proj": "线性投影 {m}",
        "split": "拆分多头",
        "sdpa": "缩放点积注意力，每个头各算各的",
        "sdpa2": r"$\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$",
        "heads": "h 个头",
        "concat": "拼接各头的输出",
        "out": "输出投影  $W^O$",
        "output": "输出",
        "alt": "多头注意力：形状为 (batch, L, d_model) 的输入 x 经过三个线性投影 W^Q、W^K、W^V，"
        "各得到 (batch, L, h*d_k)；拆分多头后为 (batch, h, L, d_k)；每个头各做一次缩放点积注意力，"
        "得到 (batch, h, L, d_v)；拼接各头得到 (batch, L, h*d_v)；输出投影 W^O 给出形状为 "
        "(batch, L, d_model) 的输出。",
    },
}


def _shape(*dims: str) -> str:
    return "$(" + r",\ ".join(dims) + ")$"


def draw_architecture(lang: str, path: Path) -> None:
    """Draw multi-head attention as boxes and arrows, with the tensor shape on every arrow."""
    import matplotlib as mpl
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    from mha_ref.tutorial.fonts import raise_on_missing_glyphs, use_cjk_font_for

    text = _ARCH_TEXT[lang]
    with mpl.rc_context({"svg.hashsalt": "mha-ref", "font.size": 10}):
        use_cjk_font_for(*text.values())
        fig = Figure(figsize=(6.4, 8.0), dpi=100)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, 64)
        ax.set_ylim(0, 80)
        ax.axis("off")

        def box(x, y, w, h, label, color, layers=1):
            for k in reversed(range(layers)):
                patch = FancyBboxPatch(
                    (x - w / 2 + 0.8 * k, y - h / 2 + 0.8 * k),
                    w,
                    h,
                    boxstyle="round,pad=0.3,rounding_size=1.2",
                    linewidth=1.2,
                    edgecolor="#333333",
                    facecolor=color,
                )
                ax.add_patch(patch)
            ax.text(x, y, label, ha="center", va="center", fontsize=10, linespacing=1.8)

        def arrow(x0, y0, x1, y1, shape=None, side="right"):
            ax.add_patch(
                FancyArrowPatch(
                    (x0, y0),
                    (x1, y1),
                    arrowstyle="-|>",
                    mutation_scale=12,
                    linewidth=1.2,
                    color="#333333",
                    shrinkA=0,
                    shrinkB=0,
                )
            )
            if shape:
                dx = 1.2 if side == "right" else -1.2
                ax.text(
                    (x0 + x1) / 2 + dx,
                    (y0 + y1) / 2,
                    shape,
                    fontsize=8.5,
                    color="#1f4e9a",
                    ha="left" if side == "right" else "right",
                    va="center",
                )

        cols = {"Q": (12, "#dbe9f7"), "K": (32, "#e3f2df"), "V": (52, "#fbe7d3")}
        box(32, 75, 18, 4, text["input"], "#eeeeee")
        ax.text(
            32 + 10.5,
            75,
            _shape(r"\mathrm{batch}", "L", "d_{model}"),
            fontsize=8.5,
            color="#1f4e9a",
            va="center",
        )
        for name, (x, color) in cols.items():
            ax.add_patch(
                FancyArrowPatch(
                    (32, 72.6),
                    (x, 65.6),
                    arrowstyle="-|>",
                    mutation_scale=12,
                    linewidth=1.2,
                    color="#333333",
                )
            )
            box(x, 63, 15, 4, text["proj"].format(m=f"$W^{name}$"), color)
            arrow(
                x,
                60.6,
                x,
                52.4,
                _shape(r"\mathrm{batch}", "L", r"h\,d_k")
                if name != "V"
                else _shape(r"\mathrm{batch}", "L", r"h\,d_v"),
                side="right",
            )
            box(x, 50, 15, 4, text["split"], color)
            arrow(
                x,
                47.6,
                x,
                40.6,
                _shape(r"\mathrm{batch}", "h", "L", "d_k")
                if name != "V"
                else _shape(r"\mathrm{batch}", "h", "L", "d_v"),
                side="right",
            )
        box(32, 35.5, 54, 6, text["sdpa"] + "\n" + text["sdpa2"], "#f3e8f8", layers=3)
        ax.text(62.5, 32.0, text["heads"], fontsize=8.5, ha="right", va="top")
        arrow(32, 31.6, 32, 24.4, _shape(r"\mathrm{batch}", "h", "L", "d_v"))
        box(32, 22, 26, 4, text["concat"], "#eeeeee")
        arrow(32, 19.6, 32, 12.4, _shape(r"\mathrm{batch}", "L", r"h\,d_v"))
        box(32, 10, 26, 4, text["out"], "#fff3bf")
        arrow(32, 7.6, 32, 2.2, None)
        ax.text(
            32,
            1.0,
            text["output"] + "  " + _shape(r"\mathrm{batch}", "L", "d_{model}"),
            ha="center",
            va="center",
            fontsize=9.5,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        with raise_on_missing_glyphs():
            fig.savefig(path, dpi=200, metadata={"Software": None})


class ArchitectureFigure(SphinxDirective):
    """``{mha-architecture}``: the architecture figure, drawn now, in the page's language."""

    has_content = False

    def run(self):
        lang = self.config.language or "en"
        path = FIGURE_DIR / lang / "mha-architecture.png"
        draw_architecture(lang, path)
        self.env.note_dependency(__file__)
        uri = os.path.relpath(path, Path(self.env.srcdir, posixpath.dirname(self.env.docname)))
        image = nodes.image(
            uri=Path(uri).as_posix(),
            alt=_ARCH_TEXT[lang]["alt"],
            classes=["mha-architecture"],
            width="640px",
        )
        return [nodes.figure("", image, classes=["mha-architecture-figure"])]
