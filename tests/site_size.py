"""Size of the built site: in all, and per page with the images it shows.

Used by ``nox -s bench`` (``python tests/site_size.py build/html``) and by the built-site tests.
A page's weight counts its HTML and, for each image, the largest file a browser may pick
(``src`` or any ``srcset`` candidate).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# The limit grows with the examples, since each brings its figures (1x and 2x), its page, its
# script, notebook and zip, in both languages: measured at 17 examples, about 0.6 MB per example
# and language, on top of about 7 MB per language that does not depend on them (the vendored
# MathJax and fonts, the package's source pages, the API page, the wheel in the downloads and in
# the two zips of all examples). An example's own zip carries no wheel (it would add 0.19 MB per
# example and language); a figure-heavy example still fits, a site that doubles its images does not.
# 7.5 since the API page documents the real-model lab, the window, sink and importance modules
# (measured: the API page +0.3 MB and the package's source pages +0.7 MB per language; at 7.0 the
# site was 47.657 MB against 47.6).
# 8.0 since example 16 shows every head of the real model: its view of 270 heatmaps of 23 x 23
# weights (as integers, 0.36 MB of page) and the mosaic's figure (0.40 MB at 1x and 2x), per
# language; at 7.5 the site was 49.44 MB against 48.6.
# 8.5 since example 18 measures what the sink heads write (a new figure, 0.16 MB at 1x and 2x)
# and example 24 checks compiled FlexAttention, and the API page and the package's source pages
# document the checked cache layer, the sink-value split and the block-mask check (measured:
# +0.49 MB per language at 24 examples; at 8.0 the site was 50.394 MB against 49.6).
# 8.8 since example 18 counts the sink heads on all five shipped texts (a new figure, 0.16 MB at
# 1x and 2x), examples 18-20 and 24 print their controls (the null over 280 groupings, 20
# windows, 5 seeds, a second learning rate), and the API page and source listings document them
# (measured: +0.48 MB in en, +0.47 MB in zh_CN; at 8.5 the site was 51.099 MB against 50.6).
# 9.4 since the glossary defines the real-model terms and examples 16-24 print more of what
# they measure (about +0.1 MB a language, with run-to-run growth of the timing figures of
# examples 6, 15 and 22, redrawn on every run), example 16 draws one block of the model (a new
# figure, 0.15 MB at 1x and 2x), example 17 prints its path patching on three seeds, and the API
# page and the package's source pages document the two lab modules behind them (+0.46 MB in en,
# +0.47 MB in zh_CN; at 8.8 the site was 51.298 MB with the first, 52.017 MB with the second,
# against 51.2).
# 10.0 since the package holds a second real model (mha_ref.tutorial.real_models: the shared GGUF
# reading and tokenizer, Gemma 3 270M): its source pages are 0.37 MB a language and its API
# entries about 0.06 MB (at 9.4 the site was 53.305 MB against 52.4; 10.0 leaves room for the
# run-to-run growth of the timing figures, 0.11 MB once).
# 10.2 since the review's fixes print more tables in examples 18-20 and the real models' shared
# stages (DecoderStack) are documented under each model (at 10.0 the site was 53.623 MB against
# 53.6).
# 10.3 since example 25's module (mha_ref.tutorial.real_models.local_global) has a source page
# and API entries in each language beside the example's own pages (at 10.2 the site was 55.447 MB
# against 55.4).
# 10.4 since Gemma 3 decodes with its window caches (ring buffers, the cache checks, the decode
# shared by both models on DecoderStack) and example 25 prints the whole-model comparison: the
# source pages and API entries of real_models grew (at 10.3 the site was 57.00 MB against 57.0,
# 56.99 in the CI run before the shared decode).
# 10.6 since the API reference is two pages (the second page's own header, navigation and search
# entries: the site went from 57.00 to 57.14 MB) and example 26 measures shared key/value heads
# (mha_ref.tutorial.real_models.shared_keys: its source page, its API entries and two more tables
# on the example's pages, 57.49 MB against 57.2 at 10.4).
# 10.7 since greedy generation, matched controls and the fast-reader's source moved into the shared
# real-model modules and examples 25-26 print their review's fixes (57.6 MB against 57.6 at 10.6).
BASE_LIMIT_MB_PER_LANGUAGE = 10.7
EXAMPLE_LIMIT_MB_PER_LANGUAGE = 0.7
_GALLERY = Path(__file__).resolve().parents[1] / "gallery" / "en"


def total_limit_mb(num_examples: int | None = None) -> float:
    """The whole site's limit in MB, both languages, for ``num_examples`` examples (default:
    those in ``gallery/en``)."""
    if num_examples is None:
        num_examples = len(sorted(_GALLERY.glob("plot_*.py")))
    return round(2 * (BASE_LIMIT_MB_PER_LANGUAGE + EXAMPLE_LIMIT_MB_PER_LANGUAGE * num_examples), 1)


TOTAL_LIMIT_MB = total_limit_mb()
PAGE_LIMIT_MB = 1.5
#: the API pages document every public object: the reference package on one page (0.47 MB), the
#: tutorial's helpers, the real models among them, on another (1.55 MB). They were one page, 2.60
#: MB with the shared decoder config, when they were split; each has this limit
API_PAGE_LIMIT_MB = 2.0
#: the API pages (docs/_ext/api_catalog.py's PAGES): the reference package, the tutorial's helpers
API_PAGES = ("api.html", "api_tutorial.html")


#: The EPUB of each language (``<lang>/mha-ref-<lang>.epub``, docs/_ext/mha_ref_epub.py) is a
#: download, read offline, never part of a page view: it is counted apart from the site. It holds
#: the language's figures (PNG, stored as they are: 7.8 MB of the 8.4 MB of images in English)
#: and its pages' text, compressed (0.52 MB in English, 0.56 MB in Chinese, at 24 examples), so
#: its limit is the language's images plus this.
BOOK_TEXT_LIMIT_MB = 1.0


def is_book(path: Path) -> bool:
    return path.suffix == ".epub"


def book_limit_mb(html_root: Path, lang: str) -> float:
    """The limit for the language's EPUB: its site's images and :data:`BOOK_TEXT_LIMIT_MB`."""
    images = sum(p.stat().st_size for p in (html_root / lang / "_images").rglob("*") if p.is_file())
    return round(images / 1e6 + BOOK_TEXT_LIMIT_MB, 3)


def page_limit_mb(name: str) -> float:
    """The limit for the page ``name`` (``en/api.html``...), in MB with its images."""
    return API_PAGE_LIMIT_MB if name.endswith(tuple(f"/{page}" for page in API_PAGES)) else (
        PAGE_LIMIT_MB
    )


_IMG = re.compile(r"<img\b[^>]*>", re.I)
_SRC = re.compile(r'\bsrc="([^"]+)"')
_SRCSET = re.compile(r'\bsrcset="([^"]+)"')


def _image_files(tag: str) -> list[str]:
    files = _SRC.findall(tag)
    for srcset in _SRCSET.findall(tag):
        files += [candidate.strip().split()[0] for candidate in srcset.split(",") if candidate]
    return files


def page_weight(page: Path) -> int:
    """Bytes of the page's HTML plus, per image, its largest candidate file."""
    html = page.read_text(encoding="utf-8")
    weight = page.stat().st_size
    for tag in set(_IMG.findall(html)):
        sizes = []
        for src in _image_files(tag):
            image = (page.parent / src.split("?")[0]).resolve()
            if image.is_file():
                sizes.append(image.stat().st_size)
        weight += max(sizes, default=0)
    return weight


def site_size_report(html_root: Path) -> dict:
    files = [p for p in html_root.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files if not is_book(p))
    pages = {p.relative_to(html_root).as_posix(): page_weight(p) for p in html_root.rglob("*.html")}
    heaviest = max(pages, key=pages.get)
    return {
        "total_mb": round(total / 1e6, 3),
        "total_limit_mb": TOTAL_LIMIT_MB,
        "heaviest_page": heaviest,
        "heaviest_page_mb": round(pages[heaviest] / 1e6, 3),
        "page_limit_mb": PAGE_LIMIT_MB,
        "pages_mb": {name: round(size / 1e6, 3) for name, size in sorted(pages.items())},
        "books_mb": {
            p.relative_to(html_root).as_posix(): round(p.stat().st_size / 1e6, 3)
            for p in sorted(files)
            if is_book(p)
        },
    }


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "build/html")
    report = site_size_report(root)
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"built site: {report['total_mb']:.2f} MB in all (limit {TOTAL_LIMIT_MB} MB); heaviest "
        f"page with its images: {report['heaviest_page']} {report['heaviest_page_mb']:.2f} MB "
        f"(limit {page_limit_mb(report['heaviest_page'])} MB)"
    )
