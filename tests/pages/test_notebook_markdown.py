"""The notebooks' Markdown: headings stay whole, and no internal page label shows.

``clean_markdown`` (``docs/_ext/mha_ref_build/notebooks.py``) turns a notebook cell's reST into
Markdown and, in Chinese, joins the line breaks between two Chinese characters, as the HTML page
does. A Markdown heading is one line, so a heading joined to the line after it swallows the first
sentence of its section (``## 投影矩阵（参数）我们直接借用…``). The first tests feed it Markdown,
without Sphinx; the last ones read the built notebooks (skipped, with the reason, when
``nox -s docs`` has not run; ``MHA_REF_REQUIRE_BUILT_SITE=1`` makes that a failure).
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "build" / "html"
LANGUAGES = ("en", "zh_CN")
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from mha_ref_build import notebooks as course_ext  # noqa: E402

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")


def _headings(markdown: str) -> list[str]:
    """The ATX headings of a Markdown text, outside code fences."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := _ATX.match(line)):
            found.append(match.group(2))
    return found


# -- clean_markdown, without Sphinx ----------------------------------------------------------------
def test_a_heading_keeps_its_line_in_chinese():
    # what sphinx-gallery writes for a text block that starts with a section title
    cell = (
        "## 投影矩阵（参数）\n我们直接借用一个 ``mha_ref.MultiHeadAttention`` 的参数，这样最后\n"
        "就能把手写的步骤和模块\n对比。\n\n### 第 1 步：投影出查询、键和值\n"
        "每个投影只需一次\n矩阵乘法。"
    )
    md = course_ext.clean_markdown(cell, "zh_CN")
    assert _headings(md) == ["投影矩阵（参数）", "第 1 步：投影出查询、键和值"]
    assert md == (
        "## 投影矩阵（参数）\n我们直接借用一个 ``mha_ref.MultiHeadAttention`` 的参数，这样最后"
        "就能把手写的步骤和模块对比。\n\n### 第 1 步：投影出查询、键和值\n"
        "每个投影只需一次矩阵乘法。"
    )
    assert course_ext.clean_markdown(md, "zh_CN") == md  # idempotent


def test_a_setext_heading_is_not_joined_to_its_neighbours():
    md = course_ext.clean_markdown("前一段\n小结\n----\n损失在最初\n几十个词元里下降。", "zh_CN")
    assert md == "前一段\n小结\n----\n损失在最初几十个词元里下降。"
    md = course_ext.clean_markdown("示例 19：上下文学习\n==========\n如果一个\n语言模型", "zh_CN")
    assert md == "示例 19：上下文学习\n==========\n如果一个语言模型"


def test_a_heading_that_starts_with_full_width_punctuation_keeps_its_marker():
    md = course_ext.clean_markdown("## （选读） 计时\n正文", "zh_CN")
    assert md == "## （选读）计时\n正文"  # the space after "##" stays: it makes the heading


def test_lines_inside_a_paragraph_are_still_joined():
    md = course_ext.clean_markdown(
        "注意力权重\n之和为 1 （每一行）。\n\n## 小结\n- 每行\n  之和为 1", "zh_CN"
    )
    assert md == "注意力权重之和为 1（每一行）。\n\n## 小结\n- 每行之和为 1"


@pytest.mark.parametrize(
    ("lang", "cell", "expected"),
    [
        (
            "zh_CN",
            "分组查询注意力（`sphx_glr_auto_examples_plot_15_grouped_heads_decode.py`）让",
            "分组查询注意力（示例 15）让",
        ),
        (
            "en",
            "Grouped-query attention (`sphx_glr_auto_examples_plot_15_grouped_heads_decode.py`)",
            "Grouped-query attention (Example 15)",
        ),
        (  # the reST role, as clean_markdown may also see it
            "en",
            "see :ref:`sphx_glr_auto_examples_plot_03_scaling.py`).",
            "see Example 3).",
        ),
        (  # a reference with its own text keeps the text
            "zh_CN",
            "先读 `示例 10 <sphx_glr_auto_examples_plot_10_induction_heads.py>`。",
            "先读 示例 10。",
        ),
    ],
)
def test_a_reference_to_an_example_reads_as_its_name(lang, cell, expected):
    md = course_ext.clean_markdown(cell, lang)
    assert md == expected
    assert "sphx_glr" not in md


def test_a_reST_escaped_space_leaves_no_backslash():
    md = course_ext.clean_markdown(
        "DeepSeek-V2 的 *多头潜在注意力*\\ （MLA）与 ``c``\\ （向量）", "zh_CN"
    )
    assert md == "DeepSeek-V2 的 *多头潜在注意力*（MLA）与 ``c``（向量）"
    assert course_ext.clean_markdown("$a\\ b$ and ``x``\\ s", "en") == "$a\\ b$ and ``x``s"


# -- the built notebooks ---------------------------------------------------------------------------
def _built(lang: str) -> None:
    if not (HTML / lang / "index.html").is_file():
        message = "build/html is missing: run `nox -s docs` first"
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)


def _notebooks(lang: str) -> dict[str, dict]:
    paths = sorted((HTML / lang / "_downloads").rglob("plot_*.ipynb"))
    return {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in paths}


def _markdown(notebook: dict) -> str:
    cells = notebook["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _plain(text: str) -> str:
    """A title as a reader reads it: no markup, math delimiters or spacing differences."""
    text = re.sub(r"<[^>]+>", "", html.unescape(text))
    text = re.sub(r"\\\(|\\\)|\$|`|\*", "", text)
    # the page shows Sphinx's smart quotes
    text = text.translate(str.maketrans("‘’“”", "''\"\""))
    return re.sub(r"\s+", "", text)


def _page_titles(page: Path) -> list[str]:
    """The section titles of an example's page (h1-h6 of the article), in order."""
    source = page.read_text(encoding="utf-8")
    article = source[source.find('<article class="bd-article"') :] or source
    titles = re.findall(r"<h([1-6])[^>]*>(.*?)</h\1>", article, re.DOTALL)
    return [_plain(re.sub(r'<a class="headerlink".*?</a>', "", body)) for _, body in titles]


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_notebook_heading_is_a_section_title_of_its_page(lang):
    _built(lang)
    notebooks = _notebooks(lang)
    assert len(notebooks) >= 24
    checked, problems = 0, []
    for stem, notebook in notebooks.items():
        page = HTML / lang / "auto_examples" / f"{stem}.html"
        titles = _page_titles(page)
        headings = [_plain(h) for h in _headings(_markdown(notebook))]
        assert headings, f"{lang}/{stem}.ipynb has no heading"
        for heading in headings:
            checked += 1
            if heading not in titles:
                problems.append(f"{lang}/{stem}.ipynb: {heading!r}")
    assert checked >= 150
    assert not problems, (
        f"{len(problems)} of {checked} notebook headings are no section title of the page:\n"
        + "\n".join(problems)
    )


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_internal_page_label_in_a_notebook(lang):
    _built(lang)
    notebooks = _notebooks(lang)
    assert len(notebooks) >= 24
    leaks = [
        f"{lang}/{stem}.ipynb: ...{match.group(0)}..."
        for stem, notebook in notebooks.items()
        for match in re.finditer(r".{0,30}sphx_glr_\w+.{0,10}", _markdown(notebook))
    ]
    assert not leaks, "\n".join(leaks)
