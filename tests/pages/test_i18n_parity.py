"""The English and Chinese trees stay in step (checked on the sources, no build needed).

- the same example scripts and the same pages exist in both languages (the language switcher maps
  a page to the page of the same name);
- the example code is identical: the ASTs of the code blocks are equal once string constants are
  blanked (labels and figure titles may be translated; comments are not in the AST);
- the Chinese text is Chinese: every text block of every zh_CN example, every heading and
  paragraph of every zh_CN page, and every prose comment in zh_CN code holds Chinese characters.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

sphinx_gallery = pytest.importorskip("sphinx_gallery.py_source_parser")

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "gallery"
DOCS = ROOT / "docs"
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def example_names(lang: str) -> list[str]:
    return sorted(p.name for p in (GALLERY / lang).glob("*.py"))


def page_names(lang: str) -> list[str]:
    root = DOCS / lang
    generated = {"auto_examples", "gen_modules"}
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.suffix in {".md", ".rst"} and not (set(p.relative_to(root).parts) & generated)
    )


def code_blocks(path: Path) -> list[str]:
    _, blocks = sphinx_gallery.split_code_and_text_blocks(str(path))[:2]
    return [block.content for block in blocks if block.type == "code"]


def text_blocks(path: Path) -> list[str]:
    _, blocks = sphinx_gallery.split_code_and_text_blocks(str(path))[:2]
    return [block.content for block in blocks if block.type == "text"]


class _BlankStrings(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str):
            return ast.copy_location(ast.Constant(value=""), node)
        return node


def normalised_code(path: Path) -> list[str]:
    dumps = []
    for block in code_blocks(path):
        tree = _BlankStrings().visit(ast.parse(block))
        dumps.append(ast.dump(tree, include_attributes=False))
    return dumps


def test_both_languages_have_examples():
    assert example_names("en"), "gallery/en holds no example"
    assert len(example_names("en")) >= 2


def test_same_example_files():
    assert example_names("en") == example_names("zh_CN")


def test_same_page_set():
    assert page_names("en"), "docs/en holds no page"
    assert page_names("en") == page_names("zh_CN")


@pytest.mark.parametrize("name", example_names("en"))
def test_example_code_identical(name):
    en, zh = GALLERY / "en" / name, GALLERY / "zh_CN" / name
    if not zh.is_file():
        pytest.fail(f"gallery/zh_CN/{name} is missing")
    en_code, zh_code = normalised_code(en), normalised_code(zh)
    assert len(en_code) == len(zh_code), f"{name}: {len(en_code)} vs {len(zh_code)} code blocks"
    for i, (a, b) in enumerate(zip(en_code, zh_code, strict=True)):
        assert a == b, f"{name}: code block {i} differs between en and zh_CN (beyond strings)"


def _prose(rst: str) -> list[str]:
    """Paragraphs of a reST text block, without directives, literal blocks and math."""
    paragraphs = []
    for para in re.split(r"\n\s*\n", rst):
        stripped = para.strip()
        if not stripped or stripped.startswith(".. ") or stripped.startswith(":"):
            continue
        if para.startswith("    ") or para.startswith("\t"):  # indented: directive body/literal
            continue
        if re.fullmatch(r"[=\-~^\"'`#*+]{3,}", stripped):
            continue
        # a paragraph of only code/math/roles carries no prose
        text = re.sub(r"``.*?``|:\w+:`[^`]*`|\$[^$]*\$|`[^`]*`_?", "", stripped)
        if len(re.findall(r"[A-Za-z]{2,}", text)) < 3:
            continue
        paragraphs.append(stripped)
    return paragraphs


#: examples that time code but run beside another example (conf.py's ``parallel``), and why
TIMED_BESIDE_ANOTHER = {
    # a page whose cost is its trainings (the longest of the build); its one timing table
    # compares head counts measured in one loop, one thread each, and its prose draws nothing
    # from the absolute times
    "plot_06_how_many_heads.py",
}


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_examples_that_time_code_run_alone(lang):
    """The build runs examples side by side, one per core; an example that times code opts
    out (``# sphinx_gallery_parallel = False``), so that sphinx-gallery runs it while nothing
    else runs: its pages tell the reader to time on an otherwise idle machine."""
    texts = {n: (GALLERY / lang / n).read_text(encoding="utf-8") for n in example_names(lang)}
    timed = {
        name
        for name, text in texts.items()
        if "[timing]" in text or "time_fn(" in text or "time_interleaved" in text
    }
    alone = {name for name, text in texts.items() if "# sphinx_gallery_parallel = False" in text}
    assert "plot_09_implementations_compared.py" in timed, timed  # the detector sees timings
    assert timed - TIMED_BESIDE_ANOTHER <= alone, sorted(timed - TIMED_BESIDE_ANOTHER - alone)
    assert alone <= timed, f"opted out without timing anything: {sorted(alone - timed)}"


@pytest.mark.parametrize("name", example_names("zh_CN"))
def test_zh_examples_prose_is_chinese(name):
    path = GALLERY / "zh_CN" / name
    for block in text_blocks(path):
        for para in _prose(block):
            assert HAN.search(para), f"zh_CN/{name}: a paragraph without Chinese: {para[:120]!r}"


def _comments(code: str) -> list[str]:
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    return [tok.string for tok in tokens if tok.type == tokenize.COMMENT]


@pytest.mark.parametrize("name", example_names("zh_CN"))
def test_zh_examples_comments_are_chinese(name):
    for block in code_blocks(GALLERY / "zh_CN" / name):
        for comment in _comments(block):
            text = comment.lstrip("#").strip()
            if text.startswith("sphinx_gallery") or text.startswith("noqa"):
                continue
            # shape comments use the code's dim names; what follows the shapes is prose
            text = re.sub(r"^(\([^()]*\)[,，:：\s]*)+", "", text)
            if len(re.findall(r"[A-Za-z]{2,}", text)) >= 3:
                assert HAN.search(text), f"zh_CN/{name}: an English comment: {comment!r}"


def _markdown_prose(md: str) -> tuple[list[str], list[str]]:
    """(headings, paragraphs) of a MyST page, leaving out code, directives, tables and math."""
    headings, paragraphs = [], []
    in_fence = False
    fence = ""
    for para in re.split(r"\n\s*\n", md):
        lines = para.strip().splitlines()
        while lines and re.fullmatch(r"\([\w-]+\)=", lines[0].strip()):
            lines = lines[1:]  # a section's label: the heading it names follows
        if not lines:
            continue
        first = lines[0].strip()
        if in_fence:
            if any(line.strip().startswith(fence) for line in lines):
                in_fence = False
            continue
        match = re.match(r"^(```+|:::+)", first)
        if match:
            fence = match.group(1)
            closes = [line for line in lines[1:] if line.strip().startswith(fence)]
            in_fence = not closes
            continue
        if first.startswith("#"):
            headings.append(first.lstrip("#").strip())
            lines = lines[1:]
            if not lines:
                continue
        body = "\n".join(lines).strip()
        skip_starts = ("|", "$$", "(", "%", "<!--", "```", ":::")
        if body.startswith(skip_starts) or re.match(r"^\(.*\)=", body):
            continue
        text = re.sub(r"`[^`]*`|\$[^$]*\$|\{[a-z:-]+\}|\[[^\]]*\]\([^)]*\)", "", body)
        if len(re.findall(r"[A-Za-z]{2,}", text)) >= 3:
            paragraphs.append(body)
    return headings, paragraphs


@pytest.mark.parametrize("page", [p for p in page_names("zh_CN") if p.endswith(".md")])
def test_zh_pages_are_chinese(page):
    headings, paragraphs = _markdown_prose((DOCS / "zh_CN" / page).read_text(encoding="utf-8"))
    for heading in headings:
        if re.search(r"[A-Za-z]", heading) and not re.fullmatch(r"[`\w.()\s-]*", heading):
            assert HAN.search(heading), f"zh_CN/{page}: an English heading: {heading!r}"
    for para in paragraphs:
        assert HAN.search(para), f"zh_CN/{page}: a paragraph without Chinese: {para[:120]!r}"
