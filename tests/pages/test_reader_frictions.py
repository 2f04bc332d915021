"""A reader's frictions (ux-review-4, issue 31), checked on the sources and on the built site.

- A downloaded notebook's first cell says how to install everything its example needs (for an
  example that reads the real model: the three commands the example prints) and how to open a
  notebook at all (Jupyter).
- Every page links the repository, the issue tracker and the licence; the EPUB names where the
  site is and has no "download" sentence without a link.
- The index lists the examples once.

The tests of the built site are skipped, with the reason, when ``nox -s docs`` has not run
(``MHA_REF_REQUIRE_BUILT_SITE=1`` turns that into a failure, as in CI); those of the book, when
the build wrote no books (``nox -s docs -- --epub``).
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "build" / "html"
LANGUAGES = ("en", "zh_CN")
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from mha_ref_build import course_path as course_ext  # noqa: E402
from mha_ref_build import notebooks  # noqa: E402
from mha_ref_build.discovery import project_links, site_address  # noqa: E402
from mha_ref_build.install import uses_real_model  # noqa: E402

from mha_ref.tutorial.real_models.smollm2 import install_steps  # noqa: E402

REAL_MODEL_EXAMPLE = "plot_16_real_model_heads"


def _built(lang: str) -> Path:
    root = HTML / lang
    if not (root / "index.html").is_file():
        message = f"build/html/{lang} is missing: run `nox -s docs` first"
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)
    return root


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", markup)))


# -- 1. the notebooks' first cell -----------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_real_model_notebook_starts_with_the_three_commands_its_example_prints(lang):
    assert uses_real_model(lang, REAL_MODEL_EXAMPLE)
    cell = notebooks.first_notebook_cell(lang, REAL_MODEL_EXAMPLE)
    found = [cell.find(step) for step in install_steps()]
    assert -1 not in found and found == sorted(found), (found, cell)
    assert notebooks.JUPYTER_COMMAND in cell
    # a notebook of the tutorial alone names the tutorial extra, not the real model's
    plain = notebooks.first_notebook_cell(lang, "plot_01_shapes")
    assert install_steps()[2] not in plain and "real-model" not in plain
    assert notebooks.JUPYTER_COMMAND in plain


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_shipped_notebook_says_how_to_install_what_it_needs(lang):
    root = _built(lang)
    seen = set()
    for path in sorted((root / "_downloads").rglob("plot_*.ipynb")):
        first = "".join(json.loads(path.read_bytes())["cells"][0]["source"])
        assert notebooks.JUPYTER_COMMAND in first, path.name
        if uses_real_model(lang, path.stem):
            found = [first.find(step) for step in install_steps()]
            assert -1 not in found and found == sorted(found), (path.name, found)
        else:
            assert install_steps()[2] not in first, path.name
        seen.add(path.stem)
    assert len(seen) == len(course_ext.load_course()), sorted(seen)
    for archive in sorted((root / "_downloads").rglob("*.zip")):  # and the zip of them all
        with zipfile.ZipFile(archive) as zipped:
            for name in zipped.namelist():
                if name.endswith(".ipynb") and uses_real_model(lang, Path(name).stem):
                    first = "".join(json.loads(zipped.read(name))["cells"][0]["source"])
                    assert install_steps()[2] in first, f"{archive.name}:{name}"


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_index_says_how_to_open_a_notebook(lang):
    page = (_built(lang) / "index.html").read_text(encoding="utf-8")
    assert notebooks.JUPYTER_COMMAND in _text(page)


# -- 2. where the project lives -------------------------------------------------------------------
def test_the_project_links_come_from_pyproject():
    links = project_links()
    assert links["issues"].startswith(links["repository"])
    assert links["license"].startswith(links["repository"]) and links["license_name"] == "MIT"


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_page_links_the_repository_the_issues_and_the_licence(lang):
    root = _built(lang)
    links = project_links()
    pages = sorted(root.glob("*.html")) + sorted((root / "auto_examples").glob("*.html"))
    assert len(pages) > 30
    for page in pages:
        text = page.read_text(encoding="utf-8")
        footer = re.search(r'<p class="mha-project-links">(.*?)</p>', text, re.S)
        assert footer, f"{lang}/{page.name}: no project links in the footer"
        for key in ("repository", "issues", "license"):
            assert f'href="{links[key]}"' in footer.group(1), (page.name, key)
        assert links["license_name"] in _text(footer.group(1))


def _book_pages(lang: str) -> dict[str, str]:
    from mha_ref_epub import epub_name

    path = _built(lang) / epub_name(lang)
    if not path.is_file():
        message = f"{path.relative_to(ROOT)}: the last build wrote no books (-- --epub)"
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)
    with zipfile.ZipFile(path) as book:
        return {
            name: book.read(name).decode("utf-8")
            for name in book.namelist()
            if name.endswith(".xhtml")
        }


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_book_names_the_site_and_links_the_project(lang):
    pages = _book_pages(lang)
    index = next(text for name, text in pages.items()
                 if name.rsplit("/", 1)[-1] == "index.xhtml" and "auto_examples" not in name)
    where = site_address(lang)
    assert f'href="{where}"' in index, "the book's first page does not name the site"
    for key in ("repository", "issues", "license"):
        assert f'href="{project_links()[key]}"' in index, key
    # the section that offers the book is not in the book
    assert "home-reading-offline" not in index


#: sphinx-gallery's download sentences, which link nothing in a book
DOWNLOAD_WORDS = {
    "en": ("Go to the end", "Download Jupyter notebook", "Download Python source code"),
    "zh_CN": ("Go to the end", "Download Jupyter notebook", "Download Python source code",
              "跳到末尾", "下载 Jupyter 笔记本", "下载 Python 源代码"),
}


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_books_example_pages_say_where_their_downloads_are(lang):
    pages = _book_pages(lang)
    example = re.compile(r"auto_examples/plot_\d+_\w+\.xhtml$")
    examples = {n: t for n, t in pages.items() if example.search(n)}
    assert len(examples) == len(course_ext.load_course())
    where = site_address(lang)
    for name, text in examples.items():
        words = [w for w in DOWNLOAD_WORDS[lang] if w in _text(text)]
        assert not words, f"{name}: download sentences without a link: {words}"
        assert "sphx-glr-download-link-note" not in text and "sphx-glr-footer" not in text, name
        assert re.search(rf'class="[^"]*mha-book-downloads[^"]*".*?href="{re.escape(where)}',
                         text, re.S), f"{name}: no sentence saying where its downloads are"


# -- 3. the index lists the examples once ---------------------------------------------------------
@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_index_lists_each_example_once_with_what_it_shows(lang):
    page = (_built(lang) / "index.html").read_text(encoding="utf-8")
    article = re.search(r"<article\b.*?</article>", page, re.S).group(0)
    assert "sphx-glr-thumbcontainer" not in article, "the card grid is still on the index"
    course = course_ext.load_course()
    numbers = {course_ext.example_number(n): n for n in course}
    for name in course:
        # one link by its title, plus one in the "needs" cell of each example that needs it
        needed_by = sum(course_ext.example_number(name) in e["needs"] for e in course.values())
        links = article.count(f'href="auto_examples/{name}.html')
        assert links == 1 + needed_by, (name, links, needed_by)
    assert numbers
    table = re.search(r'<table class="[^"]*mha-course-path.*?</table>', article, re.S).group(0)
    descriptions = re.findall(r'<span class="mha-course-description">(.*?)</span>\s*</p>',
                              table, re.S)
    assert len(descriptions) == len(course)
    # each a phrase of its own, without the dash that separated it from the link in the source
    shown = [_text(d).strip() for d in descriptions]
    assert all(len(d) > 8 and not d.startswith(("—", "-")) for d in shown), shown
    # nothing outside the table links an example's page by its title
    outside = article.replace(table, "")
    assert not re.findall(r'href="auto_examples/plot_\d+', outside), "examples listed twice"
