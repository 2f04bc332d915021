"""Inline markup that the parser does not close shows as raw ``*``, ``**`` and double backticks.

No build is needed: these tests read the sources.

**reST** (the gallery's docstrings and text blocks, ``GALLERY_HEADER.rst``): an inline end-string
(the closing ``*``, ``**``, double backtick or backquote of a role) counts only when whitespace or
certain punctuation follows it, and a start-string only after whitespace or certain punctuation
(docutils' inline markup recognition rules, ``docutils.utils.punctuation_chars``). A full-width
opening parenthesis ``（`` or a Chinese character is neither, so in ``*多头潜在注意力*（…`` the
emphasis runs on to the next ``*`` that can close it, and the page shows the markup. The fix is
an escaped space, ``*多头潜在注意力*\\ （…``, which the page does not show (written ``\\\\ `` in a
script's docstring, a Python string; ``clean_markdown`` drops it from the notebooks).

**MyST Markdown** (``docs/<lang>/*.md``): parsed with MyST's own Markdown parser, the text a
reader sees must hold no ``*`` (CommonMark's flanking rules differ from reST's, but fail in the
same way, for example on ``**“引号”**后``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from docutils.utils import punctuation_chars as pc

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = ("en", "zh_CN")

# -- reST: the recognition rules ------------------------------------------------------------------
#: what may stand before a start-string: whitespace, an opener or a delimiter (or line start)
_START_PREFIX = re.compile(rf"[\s{pc.openers}{pc.delimiters}]")
#: what may stand after an end-string: whitespace, an escape (``\ ``), a closing delimiter, a
#: delimiter or a closer (or line end)
_END_SUFFIX = re.compile(rf"[\s\\{pc.closing_delimiters}{pc.delimiters}{pc.closers}]")

_LITERAL = re.compile(r"(?<!\\)``(?=\S)(?P<body>.+?)(?<=\S)``(?!`)", re.DOTALL)
_INTERPRETED = re.compile(
    r"(?<![\\`])(?P<role>:[\w.+:-]+:)?`(?=[^\s`])(?P<body>[^`]+?)(?<=\S)`(?!`)(?:__?)?"
)
_STARS = re.compile(r"(?<![\\*])\*{1,2}(?!\*)")
#: directives whose content is not prose
_LITERAL_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)\.\. (?:math|code-block|code|highlight)::")


def _fits(pattern: re.Pattern, char: str) -> bool:
    return char == "" or bool(pattern.fullmatch(char))


def rest_prose(text: str) -> list[str]:
    """The paragraphs of a reST text, without literal blocks, math blocks and comments."""
    paragraphs, current, skip_indent = [], [], None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not line.strip() or indent > skip_indent:
                continue
            skip_indent = None
        if not line.strip():
            paragraphs.append("\n".join(current))
            current = []
            continue
        directive = _LITERAL_DIRECTIVE.match(line)
        if directive or line.rstrip().endswith("::"):
            skip_indent = indent
            if directive:
                continue
        if line.lstrip().startswith("..") and "::" not in line:
            continue  # a comment or a target
        current.append(line)
    paragraphs.append("\n".join(current))
    return [p for p in paragraphs if p.strip()]


def unclosed_rest_markup(paragraph: str) -> list[str]:
    """Each piece of inline markup in a reST paragraph that docutils will not recognise, as
    ``'…context…'``: an end-string followed by a character that may not follow one, or a
    ``*``/``**`` that can be neither a start-string nor an end-string."""
    found = []

    def context(start: int, end: int) -> str:
        return paragraph[max(0, start - 12) : end + 12].replace("\n", " ")

    def check_span(match: re.Match) -> str:
        before = paragraph[match.start() - 1] if match.start() else ""
        after = paragraph[match.end()] if match.end() < len(paragraph) else ""
        if not _fits(_START_PREFIX, before) or not _fits(_END_SUFFIX, after):
            found.append(context(match.start(), match.end()))
        return "\x00" * (match.end() - match.start())  # keep the offsets, hide the span

    paragraph = _LITERAL.sub(check_span, paragraph)
    paragraph = _INTERPRETED.sub(check_span, paragraph)
    for match in _STARS.finditer(paragraph):
        before = paragraph[match.start() - 1] if match.start() else ""
        after = paragraph[match.end()] if match.end() < len(paragraph) else ""
        if before in ("", "\n") and after == " ":
            continue  # a bullet
        if before == "\x00" or after == "\x00":
            before = after = ""  # next to a literal or a role: judged there
        can_start = _fits(_START_PREFIX, before) and after not in ("", " ", "\n", "\t")
        can_end = before not in ("", " ", "\n", "\t") and _fits(_END_SUFFIX, after)
        if not (can_start or can_end):
            found.append(context(match.start(), match.end()))
    return found


def _gallery_rest(path: Path) -> str:
    """The reST a sphinx-gallery script holds: its docstring and its ``# %%`` text blocks."""
    source = path.read_text(encoding="utf-8")
    parts = [ast.get_docstring(ast.parse(source), clean=False) or ""]
    in_text = False
    for line in source.splitlines():
        if line.startswith("# %%"):
            in_text = True
            parts.append("")
        elif in_text and line.startswith("#"):
            parts.append(line[2:] if line.startswith("# ") else line[1:])
        else:
            in_text = False
    return "\n".join(parts)


def _rest_sources() -> list[Path]:
    return sorted(
        [*ROOT.glob("gallery/*/*.py"), *ROOT.glob("gallery/*/*.rst"), *ROOT.glob("docs/*/*.rst")]
    )


# -- the rules themselves, on known cases ----------------------------------------------------------
@pytest.mark.parametrize(
    "paragraph",
    [
        "DeepSeek-V2 的 *多头潜在注意力*（multi-head latent attention）保留",
        "近来的模型。**汇点 logit**（gpt-oss）、在 softmax 分母里加 ``1``",
        "得到 ``kv_latent_dim``个数",
        "不是近似；``a * b``（见下文）",
        "见:ref:`sphx_glr_auto_examples_plot_13_online_softmax.py`。",
        "结果是**精确的**，不是近似。",
    ],
)
def test_markup_that_docutils_leaves_open_is_found(paragraph):
    assert unclosed_rest_markup(paragraph), paragraph


@pytest.mark.parametrize(
    "paragraph",
    [
        "DeepSeek-V2 的 *多头潜在注意力*\\ （multi-head latent attention）保留",
        "结果是 **精确的**，不是近似；``a * b``\\ （见 :ref:`x <y>`）。",
        ":mha-wheel:`下载它的 wheel 文件`\\ （每个 zip 里也有一份）",
        "（**粗体**）与“*强调*”、``**kwargs``。",
        "* a bullet\n* another, with **strong** text",
        "the ``(L, S)`` scores, *running* maximum: **exact**.",
    ],
)
def test_markup_that_docutils_closes_passes(paragraph):
    assert unclosed_rest_markup(paragraph) == [], paragraph


# -- the sources -----------------------------------------------------------------------------------
def test_gallery_rest_closes_all_its_inline_markup():
    sources = _rest_sources()
    assert len([p for p in sources if p.name.startswith("plot_")]) >= 48
    problems = []
    for path in sources:
        text = _gallery_rest(path) if path.suffix == ".py" else path.read_text(encoding="utf-8")
        for paragraph in rest_prose(text):
            for where in unclosed_rest_markup(paragraph):
                problems.append(f"{path.relative_to(ROOT)}: {where!r}")
    assert not problems, (
        "inline markup docutils does not close (add `\\ ` after it):\n" + "\n".join(problems)
    )


def _myst_text(path: Path) -> str:
    """The text a reader sees of a MyST page, as MyST's Markdown parser reads it (code, math and
    roles left out)."""
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    config = MdParserConfig(enable_extensions={"dollarmath", "amsmath", "colon_fence", "deflist"})
    parser = create_md_parser(config, RendererHTML)
    texts = []
    for token in parser.parse(path.read_text(encoding="utf-8")):
        for child in token.children or ():
            if child.type == "text":
                texts.append(child.content)
    return "\n".join(texts)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_myst_pages_show_no_raw_emphasis_markers(lang):
    pages = sorted((ROOT / "docs" / lang).glob("*.md"))
    assert len(pages) >= 9
    problems = []
    for path in pages:
        for line in _myst_text(path).splitlines():
            if "*" in line:
                problems.append(f"{path.relative_to(ROOT)}: {line.strip()[:80]!r}")
    assert not problems, "raw * in the text of a page:\n" + "\n".join(problems)
