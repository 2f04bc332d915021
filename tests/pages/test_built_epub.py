"""Each language's EPUB, as ``nox -s docs`` publishes it: ``build/html/<lang>/mha-ref-<lang>.epub``.

A structural check of the package, standing in for epubcheck where no Java runtime is installed
(``.ci/run`` also runs epubcheck itself when it can): the ``mimetype`` entry, the container, the
package document's manifest and spine, every page parsed as XML, every internal link and image
found in the book, the language declared, the examples' figures all there, and Chinese text in the
Chinese book; the book is not older than the pages published beside it, and the index links it
exactly when it is there. Skipped, with the reason, when no build is there or the build wrote no
books (``nox -s docs`` writes them with ``-- --epub``, and in CI; ``MHA_REF_REQUIRE_BUILT_SITE=1``
turns that into a failure, as in CI).
"""

from __future__ import annotations

import os
import posixpath
import re
import sys
import zipfile
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "build" / "html"
LANGUAGES = ("en", "zh_CN")
DC_LANGUAGE = {"en": "en", "zh_CN": "zh-CN"}
NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
    "x": "http://www.w3.org/1999/xhtml",
}
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
CJK = re.compile(r"[\u4e00-\u9fff]")

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from mha_ref_epub import epub_name  # noqa: E402


def epub_path(lang: str) -> Path:
    return HTML / lang / epub_name(lang)


def published_book(lang: str) -> Path:
    """The language's published EPUB; skips when the build wrote no books (``nox -s docs``
    writes them only with ``-- --epub`` or in CI), fails instead in CI."""
    path = epub_path(lang)
    if not path.is_file():
        message = (
            f"{path.relative_to(ROOT)} is not there: the last build wrote no books "
            "(nox -s docs -- --epub writes them)"
        )
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module", autouse=True)
def built_site():
    if not all((HTML / lang / "index.html").is_file() for lang in LANGUAGES):
        message = "build/html is missing: run `nox -s docs` first"
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)


@cache
def book(lang: str) -> dict[str, bytes]:
    """Every entry of the language's EPUB, by name, in the zip's order (asserts it exists)."""
    with zipfile.ZipFile(published_book(lang)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def package_path(lang: str) -> str:
    """The package document's (OPF) name in the zip, from META-INF/container.xml."""
    container = ElementTree.fromstring(book(lang)["META-INF/container.xml"])
    rootfiles = container.findall("c:rootfiles/c:rootfile", NS)
    assert len(rootfiles) == 1, "the container must name one package document"
    assert rootfiles[0].get("media-type") == "application/oebps-package+xml"
    return rootfiles[0].get("full-path")


def package(lang: str) -> ElementTree.Element:
    return ElementTree.fromstring(book(lang)[package_path(lang)])


def pages(lang: str) -> dict[str, bytes]:
    return {name: data for name, data in book(lang).items() if name.endswith(".xhtml")}


def resolve(base: str, ref: str) -> str | None:
    """The zip entry that ``ref``, written in the entry ``base``, points to (None: external)."""
    parts = urlsplit(ref)
    if parts.scheme or parts.netloc or not parts.path:  # http:, mailto:, or #fragment alone
        return None
    return posixpath.normpath(posixpath.join(posixpath.dirname(base), unquote(parts.path)))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_mimetype_is_the_first_entry_stored_uncompressed(lang):
    path = published_book(lang)
    with zipfile.ZipFile(path) as archive:
        first = archive.infolist()[0]
        assert first.filename == "mimetype"
        assert first.compress_type == zipfile.ZIP_STORED
        assert not first.extra, "the mimetype entry must have no extra field"
        assert archive.read(first) == b"application/epub+zip"
    # readers find it at a fixed offset: the local header (30 bytes) and the name (8 bytes)
    assert path.read_bytes()[30:38] == b"mimetype"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_container_points_to_a_package_document_that_exists(lang):
    assert package_path(lang) in book(lang)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_manifest_and_spine(lang):
    opf, entries = package(lang), book(lang)
    base = package_path(lang)
    items = {item.get("id"): item for item in opf.findall("opf:manifest/opf:item", NS)}
    assert items
    missing = [i.get("href") for i in items.values() if resolve(base, i.get("href")) not in entries]
    assert not missing, f"manifest items not in the zip: {missing}"
    # every content file is declared (epubcheck: "file not declared in the OPF manifest")
    declared = {resolve(base, i.get("href")) for i in items.values()}
    undeclared = set(entries) - declared - {"mimetype", "META-INF/container.xml", base}
    assert not undeclared, f"zip entries not in the manifest: {sorted(undeclared)}"
    spine = opf.findall("opf:spine/opf:itemref", NS)
    assert spine
    assert all(ref.get("idref") in items for ref in spine), "a spine itemref is not in the manifest"
    assert any("nav" in (i.get("properties") or "").split() for i in items.values()), "no nav"
    for item in items.values():
        if item.get("media-type") == "application/xhtml+xml":
            page = entries[resolve(base, item.get("href"))]
            # the package declares no page "scripted" or "svg" (epubcheck OPF-014)
            assert b"<script" not in page, f"{item.get('href')} has a script"
            assert b"<svg" not in page, f"{item.get('href')} has an inline SVG"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_language_is_declared(lang):
    opf = package(lang)
    assert [e.text for e in opf.findall("opf:metadata/dc:language", NS)] == [DC_LANGUAGE[lang]]
    for name, data in pages(lang).items():
        if name == "nav.xhtml":
            continue
        root = ElementTree.fromstring(data)
        assert root.get(XML_LANG) == DC_LANGUAGE[lang], f"{name}: xml:lang is {root.get(XML_LANG)}"
        assert root.get("lang") == DC_LANGUAGE[lang], f"{name}: lang is {root.get('lang')}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_page_is_xml_and_every_internal_link_resolves(lang):
    entries = book(lang)
    broken = []
    ids: dict[str, set[str]] = {}
    parsed = {}
    for name, data in pages(lang).items():
        try:
            parsed[name] = ElementTree.fromstring(data)
        except ElementTree.ParseError as error:
            pytest.fail(f"{lang}: {name} is not well-formed XML: {error}")
        ids[name] = {e.get("id") for e in parsed[name].iter() if e.get("id")}
    for name, root in parsed.items():
        for element in root.iter():
            refs = [element.get("href"), element.get("src")]
            refs += [c.split()[0] for c in (element.get("srcset") or "").split(",") if c.strip()]
            for ref in filter(None, refs):
                target = resolve(name, ref)
                fragment = urlsplit(ref).fragment
                if target is None and not ref.startswith("#"):
                    continue  # another site
                target = target or name
                if target not in entries:
                    broken.append(f"{name}: {ref}")
                elif fragment and target in ids and unquote(fragment) not in ids[target]:
                    broken.append(f"{name}: {ref} (no such id)")
    assert not broken, f"{lang}: {len(broken)} internal links do not resolve: {broken[:20]}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_example_figure_is_in_the_book(lang):
    """Each image that a published example page shows (1x and 2x) is in the EPUB."""
    entries = book(lang)
    image = re.compile(r'<img\b[^>]*\bsrc="(?:\.\./)?(_images/[^"]+\.png)"')
    missing = []
    example_pages = sorted((HTML / lang / "auto_examples").glob("plot_*.html"))
    assert example_pages
    shown = 0
    for page in example_pages:
        for src in image.findall(page.read_text(encoding="utf-8")):
            shown += 1
            two_x = src.removesuffix(".png") + "_2_00x.png"
            missing += [name for name in (src, two_x) if name not in entries]
    assert shown > len(example_pages), "the example pages show almost no figures: wrong pattern?"
    assert not missing, f"{lang}: figures of the example pages not in the EPUB: {missing[:20]}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_book_has_no_interactive_views_or_downloads(lang):
    """The views need a script (their static figure is in the book), the downloads the site."""
    for name, data in pages(lang).items():
        text = data.decode("utf-8")
        assert "data-mha-attn" not in text, f"{name}: an interactive view was kept"
        assert "_downloads/" not in text, f"{name}: links to a download the book does not hold"


def test_the_chinese_book_is_in_chinese():
    texts = {}
    for name, data in pages("zh_CN").items():
        root = ElementTree.fromstring(data)
        body = root.find("x:body", NS)
        texts[name] = "".join(body.itertext()) if body is not None else ""
    example = texts["auto_examples/plot_05_what_heads_learn.xhtml"]
    assert len(CJK.findall(example)) > 1000, "example 5's page in the Chinese EPUB is not Chinese"
    assert "多头注意力" in texts["index.xhtml"]
    without = [
        n for n, t in texts.items() if n.startswith("auto_examples/plot_") and not CJK.search(t)
    ]
    assert not without, f"example pages without Chinese text: {without}"
    # and the English book is not
    en = pages("en")["auto_examples/plot_05_what_heads_learn.xhtml"].decode("utf-8")
    assert not CJK.search(en.split("<body", 1)[1][:20000])


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_index_page_links_its_epub_exactly_when_it_is_there(lang):
    """A build with books links each language's book from its index page; a build without
    books publishes none, and the index says so instead of linking a missing file."""
    html = (HTML / lang / "index.html").read_text(encoding="utf-8")
    linked = f'href="{epub_name(lang)}"' in html
    if epub_path(lang).is_file():
        assert linked, f"{lang}/index.html does not link its EPUB"
        assert "mha-epub-missing" not in html
    else:
        assert not linked, f"{lang}/index.html links {epub_name(lang)}, which is not published"
        assert "mha-epub-missing" in html and "--epub" in html, "no note that the book is absent"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_book_is_not_older_than_its_pages(lang):
    """The published book comes from the build that wrote the pages beside it: a book is copied
    into the site after its language's pages are written, so a page newer than the book means
    the book is an older build's (a build without books must remove it, not publish it)."""
    book_time = published_book(lang).stat().st_mtime
    newer = [
        page.relative_to(HTML).as_posix()
        for page in (HTML / lang).rglob("*.html")
        if page.stat().st_mtime > book_time
    ]
    assert not newer, (
        f"{epub_name(lang)} is older than {len(newer)} of its site's pages ({newer[:5]}): a stale "
        "book from an earlier build; nox -s docs -- --epub writes it again"
    )


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_book_stays_small(lang):
    """The book is the language's figures and its text (tests/site_size.py counts it apart)."""
    from site_size import book_limit_mb

    size_mb = published_book(lang).stat().st_size / 1e6
    limit = book_limit_mb(HTML, lang)
    assert size_mb < limit, f"{epub_name(lang)} is {size_mb:.2f} MB, over its {limit} MB"
