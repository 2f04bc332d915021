"""The section headings of the site's sources and the label in front of each.

Every section of every page (``docs/<lang>/*.md``, MyST: ``(label)=`` on the line before the
heading) and of every example (``gallery/<lang>/plot_*.py``, reST in the text blocks: a
``.. _label:`` line and a blank line before the heading) has an explicit label, the same in both
languages. The label is the section's HTML id (``LabelledSectionIds`` in
docs/_ext/mha_ref_build/section_ids.py), so a link to a section names what it points to,
survives a section added above it, and is the same in both languages (the language switcher
passes it on).

An example's title needs no label in the source: sphinx-gallery writes
``.. _sphx_glr_auto_examples_<name>.py:`` in front of it, the target every page links to.

Shared by tests/pages/test_section_labels.py (the sources) and tests/pages/test_built_site.py
(the HTML).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LANGUAGES = ("en", "zh_CN")
_FENCE = re.compile(r"^(`{3,}|:{3,})")
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_MD_LABEL = re.compile(r"^\(([^()\s]+)\)=\s*$")
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")
_RST_LABEL = re.compile(r"^\.\. _([^:`]+):\s*$")


@dataclass(frozen=True)
class Heading:
    level: int  # 1 for the page's title
    text: str
    label: str | None  # None: the heading has no explicit label in front of it


def source_files(lang: str) -> list[Path]:
    """Every page and example of one language (the gallery's header page included)."""
    pages = sorted((ROOT / "docs" / lang).glob("*.md"))
    gallery = ROOT / "gallery" / lang
    return [*pages, gallery / "GALLERY_HEADER.rst", *sorted(gallery.glob("plot_*.py"))]


def markdown_headings(text: str) -> list[Heading]:
    """The headings of a MyST page, outside code fences and directives, with their labels."""
    lines = text.splitlines()
    headings, fence = [], None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            continue
        opening = _FENCE.match(stripped)
        if opening:
            fence = opening.group(1)
            continue
        match = _MD_HEADING.match(line)
        if match:
            label = _MD_LABEL.match(lines[i - 1]) if i else None
            headings.append(
                Heading(len(match.group(1)), match.group(2), label.group(1) if label else None)
            )
    return headings


def rst_headings(blocks: list[str]) -> list[Heading]:
    """The section headings of reST text, given as consecutive blocks (one document: the
    heading levels follow the order in which the underline characters first appear). A
    heading's label is a ``.. _label:`` line, then a blank line, just before it."""
    headings, underlines = [], []
    for block in blocks:
        lines = block.splitlines()
        for i in range(len(lines) - 1):
            title, under = lines[i].strip(), lines[i + 1].strip()
            if not title or not _RST_UNDERLINE.match(under) or _RST_UNDERLINE.match(title):
                continue
            if i and lines[i - 1].strip():
                continue  # not a heading: the line continues a paragraph
            if under[0] not in underlines:
                underlines.append(under[0])
            label = None
            if i >= 2 and not lines[i - 1].strip():
                match = _RST_LABEL.match(lines[i - 2].strip())
                label = match.group(1) if match else None
            headings.append(Heading(underlines.index(under[0]) + 1, title, label))
    return headings


def example_text_blocks(path: Path) -> list[str]:
    """The reST text blocks of an example script, as sphinx-gallery splits it."""
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks

    _, blocks = split_code_and_text_blocks(str(path))[:2]
    return [block.content for block in blocks if block.type == "text"]


def headings(path: Path) -> list[Heading]:
    """The headings of a page or example, each with its label. An example's title gets the
    label sphinx-gallery gives it."""
    if path.suffix == ".md":
        return markdown_headings(path.read_text(encoding="utf-8"))
    if path.suffix == ".rst":
        return rst_headings([path.read_text(encoding="utf-8")])
    found = rst_headings(example_text_blocks(path))
    if found and found[0].level == 1 and found[0].label is None:
        title = found[0]
        found[0] = Heading(1, title.text, f"sphx_glr_auto_examples_{path.stem}.py")
    return found


def label_id(label: str) -> str:
    """The HTML id docutils makes of a label (``sphx_glr_x.py`` -> ``sphx-glr-x-py``)."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
