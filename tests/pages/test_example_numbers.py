"""Examples are numbered, and the prose names them by those numbers.

- every gallery title starts with its file's number ("Example 6: ...", "示例 6：...") and its
  underline is as wide as the heading (docutils counts a CJK character as two columns);
- every "Example N" / "示例 N" in the pages, the gallery headers and the examples names an
  example that exists;
- a link or a mention that gives a number and a title ("示例 6《用多少个头？》", or
  {ref}`Example 6 <sphx_glr_auto_examples_plot_06_...py>`) gives the right ones.

Checked on the sources, no build needed.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = ("en", "zh_CN")
TITLE = {"en": re.compile(r"^Example (\d+): (.+)$"), "zh_CN": re.compile(r"^示例 (\d+)：(.+)$")}
#: "Example 6", "examples 6 and 9", "Examples 2–9"; "示例 6"、"示例 6 和示例 9"
MENTION = {
    "en": re.compile(r"\b[Ee]xamples?\s+(\d+(?:\s*(?:,|and|or|to|–|-)\s*\d+)*)"),
    "zh_CN": re.compile(r"示例\s*(\d+(?:\s*(?:、|和|或|至|到|–|-)\s*(?:示例\s*)?\d+)*)"),
}
#: a number with a title: 示例 6《用多少个头？》, Example 6 ("How many heads?") / Example 6, “...”
TITLED_MENTION = {
    "en": re.compile(r"\b[Ee]xample (\d+)(?:,| \()?\s*[“\"]([^”\"]+)[”\"]"),
    "zh_CN": re.compile(r"示例\s*(\d+)\s*《([^》]+)》"),
}
#: a cross-reference to an example with its own link text, in MyST or reST
EXPLICIT_REF = re.compile(
    r"(?:\{ref\}|:ref:)`([^`<]+?)\s*<sphx_glr_auto_examples_(plot_\d\d_\w+)\.py>`"
)
ANY_REF = re.compile(r"sphx_glr_auto_examples_(plot_\w+?)\.py\b")


def width(text: str) -> int:
    """Columns docutils gives ``text``: two for each wide (CJK) character."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def examples(lang: str) -> dict[int, Path]:
    paths = sorted((ROOT / "gallery" / lang).glob("plot_[0-9][0-9]_*.py"))
    return {int(p.name[5:7]): p for p in paths}


def title_of(path: Path) -> tuple[str, str]:
    """The title line of an example's docstring and the underline below it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == '"""', f"{path.name}: the docstring does not open on the first line"
    return lines[1], lines[2]


def bare_title(lang: str, path: Path) -> str:
    """The title without its number and without reST literal markup."""
    match = TITLE[lang].match(title_of(path)[0])
    assert match, f"{lang}/{path.name}: unnumbered title"
    return match.group(2).replace("``", "")


def prose_files(lang: str) -> list[Path]:
    docs = sorted((ROOT / "docs" / lang).glob("*.md"))
    gallery = ROOT / "gallery" / lang
    return docs + [gallery / "GALLERY_HEADER.rst"] + sorted(gallery.glob("plot_*.py"))


def problems_in(lang: str, text: str, titles: dict[int, str], stems: dict[int, str]) -> list[str]:
    """What is wrong in ``text`` with the examples ``titles`` (number -> bare title) and their
    file stems (number -> ``plot_NN_name``)."""
    problems = []
    for match in MENTION[lang].finditer(text):
        for number in map(int, re.findall(r"\d+", match.group(1))):
            if number not in titles:
                problems.append(f"{match.group(0)!r}: there is no example {number}")
    for match in TITLED_MENTION[lang].finditer(text):
        number, given = int(match.group(1)), match.group(2)
        if titles.get(number) != given:
            actual = titles.get(number)
            problems.append(f"{match.group(0)!r}: example {number} is titled {actual!r}")
    for match in EXPLICIT_REF.finditer(text):
        link_text, stem = match.group(1), match.group(2)
        number = int(stem[5:7])
        for named in MENTION[lang].finditer(link_text):
            if [int(n) for n in re.findall(r"\d+", named.group(1))] != [number]:
                problems.append(f"{match.group(0)!r}: the link text names another example")
    known = set(stems.values())
    for match in ANY_REF.finditer(text):
        if match.group(1) not in known:
            problems.append(f"{match.group(0)!r}: no such example")
    return problems


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_title_carries_its_file_number(lang):
    found = examples(lang)
    assert len(found) >= 2
    for number, path in found.items():
        title, underline = title_of(path)
        match = TITLE[lang].match(title)
        assert match, f"{lang}/{path.name}: title {title!r} does not start with its number"
        assert int(match.group(1)) == number, f"{lang}/{path.name}: title says {match.group(1)}"
        assert set(underline) == {"="} and len(underline) >= width(title), (
            f"{lang}/{path.name}: the underline is narrower than the title"
        )


def test_both_languages_number_the_same_examples():
    assert examples("en").keys() == examples("zh_CN").keys()
    assert sorted(examples("en")) == list(range(1, len(examples("en")) + 1)), "numbers have gaps"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_prose_names_examples_that_exist_with_their_titles(lang):
    found = examples(lang)
    titles = {n: bare_title(lang, p) for n, p in found.items()}
    stems = {n: p.stem for n, p in found.items()}
    problems = []
    for path in prose_files(lang):
        text = path.read_text(encoding="utf-8")
        problems += [f"{lang}/{path.name}: {p}" for p in problems_in(lang, text, titles, stems)]
    assert not problems, "\n".join(problems)


def test_the_prose_check_sees_what_it_forbids():
    titles = {5: "What heads learn", 6: "How many heads?"}
    stems = {5: "plot_05_what_heads_learn", 6: "plot_06_how_many_heads"}
    ref6 = "<sphx_glr_auto_examples_plot_06_how_many_heads.py>`"
    ok = f'See Example 6 ("How many heads?") and examples 5 and 6; {{ref}}`Example 6 {ref6}.'
    assert problems_in("en", ok, titles, stems) == []
    assert problems_in("en", "examples 5 and 7", titles, stems)
    assert problems_in("en", 'Example 5 ("How many heads?")', titles, stems)
    assert problems_in("en", f":ref:`Example 5 {ref6}", titles, stems)
    assert problems_in("en", "{ref}`sphx_glr_auto_examples_plot_07_torch.py`", titles, stems)
    zh_titles = {5: "各个头学到了什么", 6: "用多少个头？"}
    assert problems_in("zh_CN", "示例 6《用多少个头？》、示例 5", zh_titles, stems) == []
    assert problems_in("zh_CN", "示例 5《用多少个头？》", zh_titles, stems)
    assert problems_in("zh_CN", "示例 6 和示例 16", zh_titles, stems)
    assert problems_in("zh_CN", f"{{ref}}`示例 5 {ref6}", zh_titles, stems)
    assert width("示例 6：用多少个头？") == 20  # 4 + 1 + 1 + 2 + 10 + 2
