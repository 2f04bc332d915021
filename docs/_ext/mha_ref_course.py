"""Sphinx extension for the course around the examples: the package a reader installs, folded
exercise answers, and the architecture figure.

- The package's wheel: built from this checkout once per change of the package
  (``build/wheel/``), shipped with each language as ``_downloads/<wheel>`` and added to the two
  zips of all examples. The ``mha-wheel`` role links to it, the ``mha-wheel-install`` directive shows
  the command that installs it, and every example page's download area says the same.
- Exercise answers: a ``dropdown`` with ``:class-container: mha-answer`` that ends a text cell of
  an example takes the code cell after it, with that cell's output, inside the fold.
- ``mha-architecture``: a figure of multi-head attention with the tensor shapes on its arrows,
  drawn by matplotlib at build time, labelled in the page's language.

Unlike ``mha_ref_site``, nothing here changes what an example prints, so this file is not among
the files whose change re-runs every example.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective, SphinxRole

ROOT = Path(__file__).resolve().parents[2]
WHEEL_DIR = ROOT / "build" / "wheel"
FIGURE_DIR = ROOT / "build" / "figures"
DOWNLOADS = "_downloads"

logger = logging.getLogger(__name__)


# -- the package's wheel ------------------------------------------------------------------------
def wheel_name() -> str:
    """The file name of the wheel this checkout builds (``mha_ref-<version>-py3-none-any.whl``)."""
    import mha_ref

    return f"mha_ref-{mha_ref.__version__}-py3-none-any.whl"


def install_command(wheel: str) -> str:
    """The command that installs the wheel with the extra the examples import."""
    return f'python -m pip install "{wheel}[tutorial]"'


def _wheel_inputs() -> list[Path]:
    files = sorted(p for p in (ROOT / "mha_ref").rglob("*") if p.is_file() and _packaged(p))
    return [*files, ROOT / "pyproject.toml", ROOT / "README.md"]


def _packaged(path: Path) -> bool:
    # what pyproject.toml packages: the modules, py.typed, and the interactive view's static files
    return "__pycache__" not in path.parts and path.suffix in {".py", ".typed", ".js", ".css"}


def _inputs_hash(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _source_date_epoch() -> str:
    """The commit's time, so that two builds of one commit date the wheel's files alike."""
    try:
        done = subprocess.run(
            ["git", "log", "-1", "--format=%ct"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=20,
        )
        return str(max(int(done.stdout.strip()), 315532800))  # zip dates start in 1980
    except (OSError, subprocess.SubprocessError, ValueError):
        return "315532800"


def make_wheel(out_dir: Path) -> Path:
    """Build the package's wheel into ``out_dir``; return its path.

    ``pip wheel --no-deps --no-build-isolation`` on a copy of the package's files (so the
    checkout gets no ``build/lib`` or ``.egg-info``), with the setuptools the environment pins:
    no network. The files inside are dated by the commit (``SOURCE_DATE_EPOCH``), so two builds
    of one checkout give the same bytes.
    """
    name = wheel_name()
    with tempfile.TemporaryDirectory(prefix="mha-ref-wheel-") as tmp:
        src, out = Path(tmp, "src"), Path(tmp, "out")
        for path in _wheel_inputs():
            copy = src / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
        env = {**os.environ, "SOURCE_DATE_EPOCH": _source_date_epoch(), "PIP_NO_INPUT": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
             "--no-index", "-q", "-w", str(out), str(src)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )  # fmt: skip
        built = out / name
        if done.returncode != 0 or not built.is_file():
            raise ExtensionError(
                f"pip wheel failed (exit {done.returncode}), or made no {name}:\n"
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, out_dir / name)
    return out_dir / name


def build_wheel() -> Path:
    """The wheel in ``build/wheel/``, built again only when the package's files changed."""
    name = wheel_name()
    target = WHEEL_DIR / name
    stamp = WHEEL_DIR / f"{name}.sha256"
    current = _inputs_hash(_wheel_inputs())
    if target.is_file() and stamp.is_file() and stamp.read_text().strip() == current:
        return target
    for old in WHEEL_DIR.glob("*.whl"):
        old.unlink()
    make_wheel(WHEEL_DIR)
    stamp.write_text(current + "\n")
    logger.info(f"built {target.relative_to(ROOT)}")
    return target


def _build_wheel(app: Sphinx, config: Config) -> None:
    app.mha_wheel = build_wheel()  # type: ignore[attr-defined]


def wheel_uri(docname: str) -> str:
    """The wheel's address relative to the page ``docname``."""
    return posixpath.relpath(f"{DOWNLOADS}/{wheel_name()}", posixpath.dirname(docname) or ".")


class WheelRole(SphinxRole):
    """``{mha-wheel}`download the package```: a link to the wheel shipped with the site."""

    def run(self):
        uri = wheel_uri(self.env.docname)
        node = nodes.reference(self.rawtext, self.text, refuri=uri, classes=["mha-wheel"])
        return [node], []


class WheelInstall(SphinxDirective):
    """The command that installs the shipped wheel, then the directive's own lines, as bash."""

    has_content = True

    def run(self):
        lines = [install_command(wheel_name()), *self.content]
        block = nodes.literal_block("\n".join(lines), "\n".join(lines))
        block["language"] = "bash"
        return [block]


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    context["mha_wheel"] = wheel_name()
    context["mha_wheel_uri"] = wheel_uri(pagename)
    context["mha_wheel_install"] = install_command(wheel_name())


def _ship_wheel(app: Sphinx, exception: Exception | None) -> None:
    """Copy the wheel into the language's ``_downloads/`` and into the two zips of all examples.

    An example's own zip (its script and notebook) does not carry it: that page links to the
    wheel, and one copy per example would add the wheel's size to the site once per example.
    """
    if exception is not None or app.builder.format != "html":
        return
    wheel: Path = app.mha_wheel  # type: ignore[attr-defined]
    downloads = Path(app.outdir, DOWNLOADS)
    downloads.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(wheel, downloads / wheel.name)
    data = wheel.read_bytes()
    for archive in sorted(downloads.glob("*/auto_examples_*.zip")):
        with zipfile.ZipFile(archive) as existing:
            if wheel.name in existing.namelist():
                continue
        with zipfile.ZipFile(archive, "a", compression=zipfile.ZIP_STORED) as zipped:
            info = zipfile.ZipInfo(wheel.name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zipped.writestr(info, data)


# -- example pages: how to install, and answers folded with their code --------------------------
_INSTALL_NOTE = {
    "en": (
        "To run this example on your machine, first install the ``mha_ref`` package it "
        "imports: download :mha-wheel:`{wheel}` (built from the same commit as this page) and, "
        "in the folder where you saved it, run ``{command}``."
    ),
    "zh_CN": (
        # reST ends inline markup only before a space or some punctuation, not before "（":
        # an escaped space (removed from the output) ends the role instead
        "要在自己的电脑上运行这个示例，先安装它导入的 ``mha_ref`` 包：下载 :mha-wheel:`{wheel}`\\ "
        "（与本页出自同一次提交），然后在保存它的目录里运行 ``{command}``。"
    ),
}
_FOOTER = re.compile(
    r"^(?P<indent>[ ]*)\.\. container:: sphx-glr-footer sphx-glr-footer-example\n", re.MULTILINE
)
_GENERATED = re.compile(r"^\.\. GENERATED FROM PYTHON SOURCE LINES .*$", re.MULTILINE)
ANSWER_CLASS = "mha-answer"


def _example_page(app: Sphinx, docname: str, source: list[str]) -> None:
    if not docname.startswith("auto_examples/plot_"):
        return
    source[0] = fold_answers(source[0], docname)
    lang = app.config.language or "en"
    note = _INSTALL_NOTE[lang].format(wheel=wheel_name(), command=install_command(wheel_name()))
    match = _FOOTER.search(source[0])
    if match is None:
        raise ExtensionError(f"{docname}: no sphinx-gallery download footer to add the wheel to")
    indent = match.group("indent")
    block = f"{indent}.. rst-class:: mha-install\n\n{indent}{note}\n\n"
    source[0] = source[0][: match.start()] + block + source[0][match.start() :]


def fold_answers(rst: str, docname: str = "") -> str:
    """Move the code cell (and its output) that follows an answer dropdown into the dropdown.

    An answer is a ``.. dropdown::`` with ``:class-container: mha-answer`` that ends a text
    cell. sphinx-gallery writes each cell after a ``.. GENERATED FROM PYTHON SOURCE LINES``
    comment; the cell after the answer's is indented into the dropdown's body.
    """
    marks = list(_GENERATED.finditer(rst))
    pieces, cursor = [], 0
    skip_until = -1
    for i, mark in enumerate(marks):
        if mark.start() < skip_until:
            continue
        end = marks[i + 1].start() if i + 1 < len(marks) else len(rst)
        cell = rst[mark.start() : end]
        if ANSWER_CLASS not in cell or f":class-container: {ANSWER_CLASS}" not in cell:
            continue
        if i + 1 >= len(marks):
            raise ExtensionError(f"{docname}: an answer dropdown ends the page with no code")
        nxt_end = marks[i + 2].start() if i + 2 < len(marks) else _footer_start(rst)
        code = rst[marks[i + 1].start() : nxt_end]
        if ".. code-block:: Python" not in code:
            raise ExtensionError(f"{docname}: the cell after an answer dropdown holds no code")
        pieces.append(rst[cursor:end].rstrip("\n") + "\n\n")
        indented = [f"   {line}" if line.strip() else line for line in code.splitlines(True)]
        pieces.append("".join(indented).rstrip("\n") + "\n\n")
        cursor = nxt_end
        skip_until = nxt_end
    pieces.append(rst[cursor:])
    return "".join(pieces)


def _footer_start(rst: str) -> int:
    match = re.search(r"^\.\. _sphx_glr_download_", rst, re.MULTILINE)
    return match.start() if match else len(rst)


# -- the architecture figure ---------------------------------------------------------------------
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


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _build_wheel, priority=800)
    app.add_role("mha-wheel", WheelRole())
    app.add_directive("mha-wheel-install", WheelInstall)
    app.add_directive("mha-architecture", ArchitectureFigure)
    app.connect("html-page-context", _page_context)
    app.connect("source-read", _example_page, priority=400)
    app.connect("build-finished", _ship_wheel)
    app.add_js_file("table-stack.js")  # docs/_static: tables of 3+ columns stack on phones
    app.add_js_file("scroll-cue.js")  # docs/_static: a shadow where a code block scrolls sideways
    return {
        "parallel_read_safe": True,
        "parallel_write_safe": True,
        "version": "1",
        "env_version": int(hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12], 16),
    }
