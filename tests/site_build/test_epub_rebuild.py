"""A no-op rebuild keeps the books: ``build_languages.epub_is_current`` writes a language's EPUB
again only when something it is made from is newer than the book."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "_ext"))

import build_languages  # noqa: E402
from mha_ref_epub import epub_name  # noqa: E402


def _touch(path: Path, when: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    os.utime(path, (when, when))


def test_a_book_is_kept_only_while_it_is_newer_than_its_doctrees(tmp_path):
    staging = tmp_path / "html-staging"
    book = build_languages.epub_dir(staging) / "en" / epub_name("en")
    doctree = tmp_path / "doctrees" / "en" / "index.doctree"
    now = time.time() + 3600  # later than any file of the repository
    _touch(doctree, now)
    assert not build_languages.epub_is_current("en", staging), "no book yet"
    _touch(book, now + 10)
    assert build_languages.epub_is_current("en", staging)
    _touch(doctree, now + 20)  # the HTML build read a page again
    assert not build_languages.epub_is_current("en", staging)
    _touch(book, now + 30)
    _touch(tmp_path / "doctrees" / "en" / "auto_examples" / "plot_01.doctree", now + 40)
    assert not build_languages.epub_is_current("en", staging), "a page in a subfolder changed"


def test_a_changed_template_or_extension_rewrites_the_book(tmp_path):
    staging = tmp_path / "html-staging"
    book = build_languages.epub_dir(staging) / "en" / epub_name("en")
    _touch(tmp_path / "doctrees" / "en" / "index.doctree", 0)
    os.utime(tmp_path / "doctrees" / "en", (0, 0))  # the folder too: its time is its last change
    newest_input = max(
        path.stat().st_mtime
        for source in build_languages.EPUB_INPUTS
        for path in [source, *source.rglob("*")]
    )
    _touch(book, newest_input - 1)
    assert not build_languages.epub_is_current("en", staging)
    _touch(book, newest_input + 1)
    assert build_languages.epub_is_current("en", staging)
