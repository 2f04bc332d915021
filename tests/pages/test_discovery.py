"""What a search engine, a link preview and a printer see: one description and one viewport per
page, OpenGraph tags, each page's alternate in the other language, a 404 page and a changelog per
language, the licence in the repository and the wheel, MathJax only where there is math, each
page's scripts only where it uses them, the examples in the phone drawer.

Skipped, with the reason, when ``nox -s docs`` has not run (``MHA_REF_REQUIRE_BUILT_SITE=1`` turns
that into a failure, as in CI).
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "build" / "html"
LANGUAGES = ("en", "zh_CN")


def _built() -> None:
    if not all((HTML / lang / "index.html").is_file() for lang in LANGUAGES):
        message = "build/html is missing: run `nox -s docs` first"
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)


def _pages(lang: str) -> list[Path]:
    _built()
    skip = {"search.html", "genindex.html", "py-modindex.html"}
    pages = [p for p in sorted((HTML / lang).rglob("*.html")) if "_modules" not in p.parts]
    return [p for p in pages if p.name not in skip and "_static" not in p.parts]


def _head(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    return text[: text.index("</head>")]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_page_has_one_viewport_and_one_description(lang):
    pages = _pages(lang)
    assert len(pages) > 20
    for page in pages:
        head = _head(page)
        where = page.relative_to(HTML)
        assert len(re.findall(r'<meta name="viewport"', head)) == 1, where
        # no attribute HTML lacks (Sphinx's translation step marks meta nodes ``translated``)
        assert "translated=" not in head, where
        descriptions = re.findall(
            r'<meta (?:content="([^"]*)" name="description"|name="description" content="([^"]*)")',
            head,
        )
        assert len(descriptions) == 1, (where, descriptions)
        text = "".join(descriptions[0])
        assert len(text) > 40, (where, text)
        if lang == "zh_CN" and page.name != "404.html":
            assert re.search(r"[\u4e00-\u9fff]", text), (where, text)
            assert not re.search(r"[\u4e00-\u9fff] [\u4e00-\u9fff]", text), (where, text)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_page_has_opengraph_tags(lang):
    for page in _pages(lang):
        if page.name == "404.html":  # no page of its own to preview
            continue
        head = _head(page)
        for prop in ("og:title", "og:type", "og:site_name", "og:description"):
            assert f'property="{prop}"' in head, (page.relative_to(HTML), prop)
        if not os.environ.get("MHA_REF_SITE_URL"):  # a relative og:url would be read wrongly
            assert 'property="og:url"' not in head, page.relative_to(HTML)


def test_an_example_pages_description_is_its_introduction():
    _built()
    head = _head(HTML / "en" / "auto_examples" / "plot_03_scaling.html")
    (description,) = re.findall(r'<meta content="([^"]*)" name="description"', head)
    assert description.startswith("Attention scores are dot products"), description


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_page_names_its_alternates_in_both_languages(lang):
    for page in _pages(lang):
        head = _head(page)
        links = dict(re.findall(r'<link rel="alternate" hreflang="([^"]+)" href="([^"]+)"', head))
        assert set(links) == {"en", "zh-CN", "x-default"}, (page.relative_to(HTML), links)
        for code, href in links.items():
            # the 404 page's links are absolute: from the site's root, build/html
            target = HTML / href.lstrip("/") if href.startswith("/") else page.parent / href
            target = target.resolve()
            assert target.is_file(), (page.relative_to(HTML), code, href)
        own = links[lang.replace("_", "-")]
        own = HTML / own.lstrip("/") if own.startswith("/") else page.parent / own
        assert own.resolve() == page.resolve(), (page.relative_to(HTML), links)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_404_page_and_a_changelog_per_language(lang):
    _built()
    missing = (HTML / lang / "404.html").read_text(encoding="utf-8")
    assert f'href="/{lang}/index.html"' in missing  # absolute: a 404 is served at any depth
    assert f'<html lang="{lang.replace("_", "-")}"' in missing
    index = (HTML / lang / "index.html").read_text(encoding="utf-8")
    assert 'href="changelog.html"' in index
    changelog = (HTML / lang / "changelog.html").read_text(encoding="utf-8")
    import mha_ref

    assert mha_ref.__version__ in changelog


@pytest.mark.parametrize("lang", LANGUAGES)
def test_mathjax_only_on_pages_with_math(lang):
    with_math = 0
    for page in _pages(lang):
        text = page.read_text(encoding="utf-8")
        loads = "mathjax/startup.js" in text
        has_math = bool(re.search(r'class="math(?: notranslate nohighlight)?"', text))
        assert loads == has_math, (page.relative_to(HTML), loads, has_math)
        with_math += has_math
    assert with_math >= 5
    assert "mathjax" not in _head(HTML / lang / "index.html")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_each_page_loads_only_the_scripts_it_uses(lang):
    """The search's scripts and index only on the search page, the views' script and style only
    where a view is, fit-math.js only with MathJax, sphinx-design's tabs and sphinx-gallery's tag
    filter only where a tab set or the tag list is, every image lazily
    (docs/_ext/mha_ref_weight.py)."""
    search_files = ("searchtools.js", "language_data.js", "searchindex.js", "zh-search-fix.js")
    views = 0
    for page in _pages(lang):
        head, text = _head(page), page.read_text(encoding="utf-8")
        where = page.relative_to(HTML)
        assert not [name for name in search_files if name in head], where
        has_view = "data-mha-attn" in text[len(head) :]
        assert ("attention-view.js" in head) == has_view, (where, has_view)
        assert ("attention-view.css" in head) == has_view, (where, has_view)
        assert ("fit-math.js" in head) == ("mathjax/startup.js" in head), where
        body = text[len(head) :]
        assert ("design-tabs.js" in head) == ("sd-tab-set" in body), where
        assert ("sg-tags.js" in head) == ("sphx-glr-tag" in body), where
        eager = re.findall(r"<img (?![^>]*loading=\"lazy\")[^>]*>", text)
        assert not eager, (where, eager[:2])
        views += has_view
    assert views >= 5, f"only {views} pages with a view in {lang}"
    for page in (HTML / lang / "_modules").rglob("*.html"):  # the package's source listings
        head = _head(page)
        assert not [name for name in search_files if name in head], page.relative_to(HTML)
    search = _head(HTML / lang / "search.html")
    for name in ("searchtools.js", "searchindex.js", "zh-search-fix.js"):
        assert name in search + (HTML / lang / "search.html").read_text(encoding="utf-8"), name


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_phone_drawer_lists_every_example_in_order(lang):
    examples = sorted(p.stem for p in (ROOT / "gallery" / "en").glob("plot_*.py"))
    for page in (HTML / lang / "index.html", HTML / lang / "auto_examples" / f"{examples[3]}.html"):
        text = page.read_text(encoding="utf-8")
        nav = text[text.index('class="mha-examples-nav"') :]
        nav = nav[: nav.index("</nav>")]
        links = re.findall(r'href="(?:auto_examples/)?(plot_[^".]+)\.html"', nav)
        assert links == examples, (page.relative_to(HTML), links)
        if "auto_examples" in page.parts:
            assert re.search(rf'href="{examples[3]}\.html" aria-current="page"', nav)


def test_printed_code_and_output_lines_wrap():
    _built()
    css = (HTML / "en" / "_static" / "mha-print.css").read_text(encoding="utf-8")
    assert re.search(r"@media print\s*{[^}]*pre[^{]*{[^}]*white-space:\s*pre-wrap", css, re.S)
    page = (HTML / "en" / "auto_examples" / "plot_01_shapes.html").read_text(encoding="utf-8")
    assert "mha-print.css" in page


def test_the_licence_is_in_the_repository_and_the_wheel():
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License")
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    _built()
    (wheel,) = (HTML / "en" / "_downloads").glob("mha_ref-*.whl")
    with zipfile.ZipFile(wheel) as zipped:
        names = [n for n in zipped.namelist() if n.endswith("/LICENSE")]
        assert names, zipped.namelist()
        assert zipped.read(names[0]).decode() == licence
