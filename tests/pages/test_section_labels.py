"""Every section of every page and example has an explicit label, the same in both languages
(checked on the sources, no build needed; tests/section_labels.py says why).

The label is the section's address: ``masks.html#masks-padding`` in both languages, where the
id made from a Chinese heading was a bare number (``#id7``) that changed when a section was
added above it. A new section therefore needs a label, made from its English heading and
prefixed by its page (``masks-``, ``ex04-``), on the same section of both languages.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from section_labels import LANGUAGES, ROOT, headings, source_files

pytest.importorskip("sphinx_gallery.py_source_parser")

#: the prefix of a page's section labels (a page's title label is the prefix alone)
PAGE_PREFIX = {"index": "home", "api_tutorial": "api-tutorial"}
#: labels older than the prefix rule, kept as they are because pages link to them
UNPREFIXED = {"running-the-examples", "examples"}
READABLE = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


def relative(path) -> str:
    return path.relative_to(ROOT).as_posix()


def counterpart(path, lang: str):
    """The same page or example in the other language."""
    parts = list(path.relative_to(ROOT).parts)
    parts[1] = lang
    return ROOT.joinpath(*parts)


EN_FILES = source_files("en")


def test_the_sources_are_found():
    assert len(EN_FILES) >= 30, [relative(p) for p in EN_FILES]
    counts = [len(headings(path)) for path in EN_FILES]
    found = dict(zip(map(relative, EN_FILES), counts, strict=True))
    assert sum(counts) >= 250 and all(counts), found


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_heading_has_a_label(lang):
    missing = [
        f"{relative(path)}: {heading.text!r}"
        for path in source_files(lang)
        for heading in headings(path)
        if heading.label is None
    ]
    assert not missing, "headings without a label in front of them:\n" + "\n".join(missing)


@pytest.mark.parametrize("path", EN_FILES, ids=relative)
def test_both_languages_have_the_same_labels_in_the_same_order(path):
    zh = counterpart(path, "zh_CN")
    assert zh.is_file(), f"{relative(zh)} is missing"
    en_labels = [(h.level, h.label) for h in headings(path)]
    zh_labels = [(h.level, h.label) for h in headings(zh)]
    assert en_labels == zh_labels, f"{relative(path)} and {relative(zh)}: (level, label) differ"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_labels_are_unique_readable_and_prefixed(lang):
    labels, problems = [], []
    for path in source_files(lang):
        if path.name.startswith("plot_"):
            prefix = "ex" + re.match(r"plot_(\d+)_", path.name).group(1)
        else:
            prefix = PAGE_PREFIX.get(path.stem, path.stem)
        for heading in headings(path):
            label = heading.label
            if label is None:
                continue  # test_every_heading_has_a_label
            labels.append(label)
            if label.startswith("sphx_glr_auto_examples_") and heading.level == 1:
                continue  # an example's title: sphinx-gallery's label
            if not READABLE.fullmatch(label) or re.fullmatch(r"id\d+", label):
                problems.append(f"{relative(path)}: {label!r} is not a readable label")
            elif label not in UNPREFIXED and label != prefix and not label.startswith(prefix + "-"):
                problems.append(f"{relative(path)}: {label!r} does not start with {prefix!r}-")
    duplicates = sorted(label for label, count in Counter(labels).items() if count > 1)
    assert not duplicates, f"labels used by more than one section: {duplicates}"
    assert not problems, "\n".join(problems)
