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
    # a head's previous-token, induction, first-token score (examples 16 to 21); 还得分清 and
    # 值得分摊 are other words
    "a head's score": ("分数", r"(?<![还值])得分(?![清摊开])", "as 归纳分数, 首词元分数"),
    # a softmax that saturates: 崩溃 reads as "crashed"
    "attention collapse": ("塌缩", r"崩溃", "崩溃 reads as a crash"),
    "the token an attention sink rests on": ("汇点词元", r"汇词元", "as 注意力汇点"),
    # example 17's intervention on one input of the later heads (the glossary's 路径修补)
    "path patching": ("路径修补", r"路径(打)?补丁|路径修复", "as 归因修补"),
    # the real-model examples use one file, the instruct model's: a bare SmolLM2-135M reads as
    # the base model (the API catalog translates docstrings that name the architecture)
    "the real model": ("SmolLM2-135M-Instruct", r"SmolLM2-135M(?!-Instruct)", "or SmolLM2"),
    # a transformer block of SmolLM2 is a 块, numbered from 0 as in the code; 层 stays for an
    # attention layer, the toy models' layers, the quoted word and the view's label
    "a block of the real model": (
        "块",
        r"(?<!注意力)(?<!“)(?<!全部)(?<!两)(?<!读出)层(?!”)|第\s*\d+\s*个?块",
        "a block is 块, numbered from 0 (块 0 is the first)",
    ),
}

#: rules that apply only in a paragraph that matches this pattern
IN_CONTEXT = {"tokens that are not the repeated segment": r"片段|副本|拷贝|空当|重复"}
#: rules that apply only to the files whose name matches this pattern
IN_FILES = {
    "the real model": r"\.(py|md)$",
    # the examples on SmolLM2's blocks (20 is a two-layer toy, 23 counts Mistral's layers)
    "a block of the real model": r"^plot_(16|17|18|19|21)_",
}
_PARAGRAPH = re.compile(r"\n[ \t]*#?[ \t]*\n")


def violations(text: str, name: str = "") -> list[str]:
    """Each variant in ``text`` (of the file ``name``) that a rule forbids, with its line, the
    concept and the fix."""
    problems = []
    for concept, (term, variants, why) in RULES.items():
        if concept in IN_FILES and not re.search(IN_FILES[concept], name):
            continue
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
    problems = violations(path.read_text(encoding="utf-8"), path.name)
    assert not problems, f"zh_CN/{path.name}:\n" + "\n".join(problems)


def test_the_rules_see_what_they_forbid():
    samples = [
        "到一组头的包装类", "因果掩码（左上对齐）", "右下对齐的掩码", "第二份拷贝的准确率",
        "每个序列先是若干填充词元，然后是一段随机片段", "把模块连同权重复制过去",
        "前一词元得分最高的头", "QK-norm 与崩溃的单头模型", "带可学习汇词元的模型",
        "对归纳头的键做路径补丁", "SmolLM2-135M 是用完整因果注意力训练的",
        "归纳头需要更早一层里的前一词元头",
    ]  # fmt: skip
    for concept, sample in zip(RULES, samples, strict=True):
        assert violations(sample, "plot_17_heads.py"), (concept, sample)
    clean = (
        "封装类、左上角对齐、右下角对齐、第二份副本、复制注意力权重的形状、前一词元分数、"
        "模型还得分清哪个是哪个、塌缩、汇点词元、SmolLM2-135M-Instruct、块 0 的注意力层、"
        "视图的标签写的“层”、全部层 × 头、两层的玩具模型、路径修补"
    )
    assert not violations(clean, "plot_17_heads.py")
    # a block is numbered from 0: an ordinal block number reads as counting from 1
    assert violations("第 1 块里的头", "plot_16_real_model_heads.py")
    # the toy models count their layers, and other files may say 层
    assert not violations("第 1 层的前一词元头", "plot_20_positions.py")
    # the API catalog translates docstrings that name the architecture, SmolLM2-135M
    assert not violations("SmolLM2-135M：LLaMA 式解码器", "api.po")
    # padding keeps its word where no repeated segment is in the paragraph
    assert not violations("谁都不能看那些为了对齐批次而补上的填充词元\n#\n# 片段在下一段")


def test_the_glossary_says_rows_of_w_o():
    for path, word in ((GLOSSARY, "行"), (ROOT / "docs" / "en" / "glossary.md", "rows")):
        lines = path.read_text(encoding="utf-8").splitlines()
        row = next(line for line in lines if "OV" in line and "W^O" in line)
        assert word in row, row
