"""One Chinese term per concept, as the glossary gives it.

Each rule names the glossary's term and the variants that must not appear in any Chinese page,
example, or the API page's catalog (the Chinese review found each of them next to the
glossary's term for the same thing). The glossary must hold each term, so a rule cannot drift
from it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "zh_CN" / "glossary.md"
ZH_FILES = (
    sorted((ROOT / "docs" / "zh_CN").glob("*.md"))
    + sorted((ROOT / "gallery" / "zh_CN").glob("plot_*.py"))
    + [ROOT / "docs" / "_locale" / "zh_CN" / "LC_MESSAGES" / "api.po"]
)

#: concept -> (the glossary's term, a pattern of the variants it replaces, why)
RULES = {
    "wrapper class (MultiHeadAttentionWrapper)": ("封装类", r"包装类", "the term example 2 uses"),
    "top-left alignment": ("左上角对齐", r"左上对齐", "the glossary's and the masks page's"),
    "bottom-right alignment": ("右下角对齐", r"右下对齐", "the glossary's and the masks page's"),
    # a repeated segment is a 副本; 拷贝 is colloquial, and as a noun reads as slang
    "copy of a segment (a noun)": ("副本", r"拷贝", "拷贝 is colloquial"),
    # 填充 is padding with <pad> (填充掩码); the random tokens around a repeated segment are not
    # 填充词元 stays right for padding (example 4); it is wrong in a paragraph about the
    # repeated segment (examples 10 and 20, the induction lab's docstrings): see IN_CONTEXT
    "tokens that are not the repeated segment": ("无关词元", r"填充词元", "填充 means padding"),
    # parameters are 参数; 权重 alone means the attention weights (the softmax's output)
    "the module's parameters": (
        "参数",
        r"(复制|迁移|搬运|载入|加载|拷贝)(同一组)?权重|连同权重|权重随机|权重(可以)?在两者之间",
        "权重 is the attention weights",
    ),
}

#: rules that apply only in a paragraph that matches this pattern
IN_CONTEXT = {"tokens that are not the repeated segment": r"片段|副本|拷贝|空当|重复"}
_PARAGRAPH = re.compile(r"\n[ \t]*#?[ \t]*\n")


def violations(text: str) -> list[str]:
    """Each variant in ``text`` that a rule forbids, with its line, the concept and the fix."""
    problems = []
    for concept, (term, variants, why) in RULES.items():
        context = IN_CONTEXT.get(concept)
        for match in re.finditer(variants, text):
            if context:
                before = _PARAGRAPH.finditer(text, 0, match.start())
                start = max((m.end() for m in before), default=0)
                following = _PARAGRAPH.search(text, match.end())
                paragraph = text[start : following.start() if following else len(text)]
                if not re.search(context, paragraph):
                    continue
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"line {line}: {match.group(0)!r} for {concept}: write {term} ({why})")
    return problems


def test_every_rule_uses_the_glossarys_term():
    glossary = GLOSSARY.read_text(encoding="utf-8")
    for concept, (term, _, _) in RULES.items():
        if term == "参数":  # a common word: the glossary uses it in its definitions
            assert term in glossary, concept
            continue
        assert re.search(rf"^\|[^|\n]*{re.escape(term)}", glossary, re.MULTILINE), (
            f"the glossary has no row for {term} ({concept})"
        )


@pytest.mark.parametrize("path", ZH_FILES, ids=[p.name for p in ZH_FILES])
def test_one_term_per_concept(path):
    problems = violations(path.read_text(encoding="utf-8"))
    assert not problems, f"zh_CN/{path.name}:\n" + "\n".join(problems)


def test_the_rules_see_what_they_forbid():
    samples = [
        "到一组头的包装类", "因果掩码（左上对齐）", "右下对齐的掩码", "第二份拷贝的准确率",
        "每个序列先是若干填充词元，然后是一段随机片段", "把模块连同权重复制过去",
    ]  # fmt: skip
    for concept, sample in zip(RULES, samples, strict=True):
        assert violations(sample), (concept, sample)
    clean = "封装类、左上角对齐、右下角对齐、第二份副本、复制注意力权重的形状"
    assert not violations(clean)
    # padding keeps its word where no repeated segment is in the paragraph
    assert not violations("谁都不能看那些为了对齐批次而补上的填充词元\n#\n# 片段在下一段")


def test_the_glossary_says_rows_of_w_o():
    for path, word in ((GLOSSARY, "行"), (ROOT / "docs" / "en" / "glossary.md", "rows")):
        lines = path.read_text(encoding="utf-8").splitlines()
        row = next(line for line in lines if "OV" in line and "W^O" in line)
        assert word in row, row
