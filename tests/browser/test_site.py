"""The built site in a real browser (headless Chromium driven by Playwright): ``nox -s browser``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("MHA_REF_SITE", ROOT / "build" / "html"))
SCREENSHOTS = ROOT / "build" / "screenshots"

pytestmark = pytest.mark.browser

LANGUAGES = ("en", "zh_CN")
SKIP_PAGES = {"search.html", "genindex.html", "py-modindex.html"}


def site_pages(lang: str) -> list[str]:
    """Every HTML page of one language, relative to the language root."""
    root = SITE / lang
    pages = []
    for path in sorted(root.rglob("*.html")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("_static/", "_sources/", "_downloads/", "_images/", "_modules/")):
            continue
        if rel in SKIP_PAGES:
            continue
        pages.append(rel)
    return pages


def other(lang: str) -> str:
    return "zh_CN" if lang == "en" else "en"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_math_renders(watched, site_url, lang):
    watch = watched()
    watch.page.goto(f"{site_url}/{lang}/concepts.html")
    watch.page.wait_for_function("() => window.MathJax && MathJax.startup?.promise")
    watch.page.evaluate("() => MathJax.startup.promise")
    rendered = watch.page.locator("mjx-container").count()
    assert rendered >= 3, f"{lang}/concepts.html: {rendered} formulas rendered"
    errors = watch.page.locator("mjx-merror").count()
    assert errors == 0, f"{lang}/concepts.html: {errors} formulas failed to render"
    assert not watch.external, f"requests off the local host: {watch.external}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_formulas_fit_a_phone_screen(watched, site_url, lang):
    """On a 390 px wide screen the display formulas of the concepts page are scaled to fit
    (fit-math.js), so none is cut at the edge of the screen."""
    watch = watched()
    page = watch.page
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{site_url}/{lang}/concepts.html")
    page.wait_for_load_state("load")
    page.wait_for_function("() => window.MathJax && MathJax.startup?.promise")
    page.evaluate("() => MathJax.startup.promise")
    page.wait_for_timeout(200)
    boxes = page.evaluate(
        "() => Array.from(document.querySelectorAll('mjx-container[display=\"true\"]'),"
        " b => [b.scrollWidth, b.clientWidth, b.style.fontSize])"
    )
    assert len(boxes) >= 5, f"{lang}/concepts.html: {len(boxes)} display formulas"
    cut = [box for box in boxes if box[0] > box[1] + 1]
    assert not cut, f"{lang}/concepts.html: formulas wider than their box: {cut}"
    assert any(box[2] for box in boxes), "no formula needed scaling at 390 px: test the test"
    assert not watch.errors, "\n".join(watch.errors)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_tables_and_page_links_fit_a_phone_screen(watched, site_url, lang):
    """At 390 px the reference tables fit the screen (no column hidden off its edge), and the
    previous / next links at the foot of a page hold their titles."""
    watch = watched()
    page = watch.page
    page.set_viewport_size({"width": 390, "height": 800})
    for name in ["concepts", "masks", "errors", "glossary", "auto_examples/plot_08_common_errors"]:
        page.goto(f"{site_url}/{lang}/{name}.html")
        tables = page.evaluate(
            "() => Array.from(document.querySelectorAll('.pst-scrollable-table-container'),"
            " t => t.scrollWidth - t.clientWidth)"
        )
        assert all(extra <= 1 for extra in tables), f"{lang}/{name}: tables wider by {tables} px"
        links = page.evaluate(
            "() => Array.from(document.querySelectorAll('a.left-prev, a.right-next'),"
            " a => a.scrollWidth - a.clientWidth)"
        )
        assert links and all(extra <= 1 for extra in links), f"{lang}/{name}: links {links}"
    assert not watch.errors, "\n".join(watch.errors)


@pytest.mark.parametrize(("lang", "api_page"), [("en", "api.html"), ("zh_CN", "api_tutorial.html")])
def test_the_api_page_fits_a_phone_screen(watched, site_url, lang, api_page):
    """At 360 px an API page does not scroll sideways: a long type in a field list
    (list[mha_ref.tutorial.heads.HeadSummary]) breaks instead of widening the article. Each
    page in one language: the layout is the same in both (one stylesheet)."""
    watch = watched()
    page = watch.page
    page.set_viewport_size({"width": 360, "height": 740})
    page.goto(f"{site_url}/{lang}/{api_page}")
    wide = page.evaluate(
        """() => Array.from(document.querySelectorAll('article.bd-article dl.field-list > dd'))
            .filter(dd => dd.getBoundingClientRect().right
                > document.documentElement.clientWidth + 1)
            .slice(0, 3).map(dd => dd.textContent.trim().slice(0, 80))"""
    )
    assert not wide, f"{lang}/{api_page}: field lists past the screen's edge: {wide}"
    extra = page.evaluate(
        "() => { const a = document.querySelector('article.bd-article');"
        " return a.scrollWidth - a.clientWidth; }"
    )
    assert extra <= 1, f"{lang}/{api_page}: the article scrolls sideways by {extra} px"


# every table on the page: how far it reaches past the right edge of the screen, and how much of
# it is hidden in a box that scrolls sideways (the table itself or a container around it)
TABLE_FIT = """() => {
  const screen = document.documentElement.clientWidth;
  return Array.from(document.querySelectorAll('article table'), table => {
    let hidden = 0;
    for (let box = table; box && box !== document.body; box = box.parentElement) {
      const overflow = getComputedStyle(box).overflowX;
      if (overflow === 'auto' || overflow === 'scroll' || overflow === 'hidden') {
        hidden = Math.max(hidden, box.scrollWidth - box.clientWidth);
      }
    }
    return {past_edge: table.getBoundingClientRect().right - screen, hidden: hidden};
  });
}"""


SCROLL_CUES = """() => Array.from(document.querySelectorAll('article.bd-article pre'), pre => ({
  hidden_right: pre.scrollWidth - pre.clientWidth - pre.scrollLeft,
  right: pre.classList.contains('mha-more-right'),
  left: pre.classList.contains('mha-more-left'),
  shadow: getComputedStyle(pre).boxShadow,
}))"""


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_block_that_scrolls_sideways_shows_a_shadow_where_text_is_hidden(
    watched, site_url, lang
):
    """On a phone, printed tables and long code lines scroll inside their box: the box shows a
    shadow on its right edge while text is hidden there, and on its left edge once scrolled;
    a block that fits shows none (scroll-cue.js)."""
    watch = watched()
    page = watch.page
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{site_url}/{lang}/auto_examples/plot_04_masks.html", wait_until="load")
    blocks = page.evaluate(SCROLL_CUES)
    wide = [b for b in blocks if b["hidden_right"] > 1]
    fits = [b for b in blocks if b["hidden_right"] <= 1]
    assert len(wide) >= 3 and fits, (len(wide), len(fits))  # the page has both kinds
    assert all(b["right"] and not b["left"] and b["shadow"] != "none" for b in wide), wide
    assert not any(b["right"] or b["left"] for b in fits), fits
    # scrolled to its end, the first wide block hides text on the left only
    page.evaluate(
        """() => { const pre = Array.from(document.querySelectorAll('article.bd-article pre'))
            .find(p => p.scrollWidth > p.clientWidth + 1);
          pre.scrollLeft = pre.scrollWidth; pre.dispatchEvent(new Event('scroll')); }"""
    )
    after = [b for b in page.evaluate(SCROLL_CUES) if b["left"]]
    assert len(after) == 1 and not after[0]["right"], after
    assert not watch.errors, "\n".join(watch.errors)


def test_chinese_pages_emphasise_without_a_fake_slant(watched, site_url):
    """Chinese has no italics: emphasis on zh pages is upright and bold, on en pages italic."""
    watch = watched()
    page = watch.page
    style = "() => Array.from(document.querySelectorAll('article.bd-article p em'), " \
        "e => [getComputedStyle(e).fontStyle, getComputedStyle(e).fontWeight])"
    page.goto(f"{site_url}/zh_CN/errors.html", wait_until="load")
    zh = page.evaluate(style)
    page.goto(f"{site_url}/en/errors.html", wait_until="load")
    en = page.evaluate(style)
    assert zh and en, (zh, en)  # both pages emphasise something
    assert all(s == "normal" and int(w) >= 600 for s, w in zh), zh
    assert all(s == "italic" for s, _ in en), en
    assert not watch.errors, "\n".join(watch.errors)


@pytest.mark.parametrize(("lang", "api_page"), [("en", "api_tutorial.html"), ("zh_CN", "api.html")])
def test_no_inline_formula_runs_past_a_phone_screen(watched, site_url, lang, api_page):
    """At 390 px an API page's long inline formulas (the ``Math:`` lines) stay on the screen:
    one wider than its paragraph scrolls sideways inside a box (fit-math.js). Each page in one
    language: the formulas and the script are the same in both."""
    watch = watched()
    page = watch.page
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{site_url}/{lang}/{api_page}", wait_until="load")
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.evaluate("() => MathJax.startup.promise")
    page.evaluate("() => window.dispatchEvent(new Event('resize'))")
    found = page.evaluate(
        """() => { const w = document.documentElement.clientWidth;
          const all = Array.from(
            document.querySelectorAll('article mjx-container:not([display="true"])'));
          return {count: all.length,
                  boxed: all.filter(b => b.classList.contains('mha-wide-inline')).length,
                  past: all.filter(b => b.getBoundingClientRect().right > w + 1).length}; }"""
    )
    assert found["count"] > 20 and found["boxed"] >= 1, found  # long formulas were there
    assert found["past"] == 0, found
    assert not watch.errors, "\n".join(watch.errors)


SECTION_IDS = (
    "() => Array.from(document.querySelectorAll('article.bd-article section[id]'), s => s.id)"
)
HASH = "() => decodeURIComponent(location.hash.slice(1))"
HEADING_TOP = (
    "id => document.getElementById(id).querySelector('h1, h2, h3').getBoundingClientRect().top"
)

#: remembers, across the navigation, the address the switcher gave its link (this listener runs
#: after the switcher's own, registered earlier on the same node)
CLICKED_HREF = (
    "() => document.addEventListener('click', e => sessionStorage.setItem("
    "'mha-clicked-href', e.target.closest('a').getAttribute('href')), {once: true})"
)


def _switch(page, to_lang: str) -> None:
    """Click the switcher where it is on screen, as a reader does (Playwright's ``click()`` would
    first scroll the page to bring the link "into view", and so change the section in view)."""
    link = page.locator(f".mha-lang-switcher:visible a[hreflang='{to_lang.replace('_', '-')}']")
    box = link.bounding_box()
    with page.expect_navigation(wait_until="load"):
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("page_name", ["masks.html", "auto_examples/plot_04_masks.html"])
def test_switcher_keeps_the_section_in_view(watched, site_url, lang, page_name):
    """A reader scrolled to the fourth section lands on the same section of the other page: the
    switcher passes the section's id, which both languages share (its explicit label)."""
    watch = watched()
    page = watch.page
    page.goto(f"{site_url}/{lang}/{page_name}")
    here = page.evaluate(SECTION_IDS)
    assert len(here) > 4, f"{lang}/{page_name} has {len(here)} sections"
    page.evaluate("id => document.getElementById(id).scrollIntoView()", here[4])
    page.wait_for_timeout(100)
    page.evaluate(CLICKED_HREF)
    _switch(page, other(lang))
    there = page.evaluate(SECTION_IDS)
    assert page.url.split("#")[0] == f"{site_url}/{other(lang)}/{page_name}"
    assert there == here, f"{page_name}: the section ids differ between the languages"
    clicked = page.evaluate("() => sessionStorage.getItem('mha-clicked-href')")
    assert clicked.endswith(f"#{here[4]}"), f"the switcher's link was {clicked}, not the section"
    assert page.evaluate(HASH) == here[4], f"landed at #{page.evaluate(HASH)}, not #{here[4]}"
    top = page.evaluate(HEADING_TOP, there[4])
    assert 0 <= top < 300, f"the section's heading is {top:.0f} px from the top of the window"
    # and from the top of a page, the other page opens at its top
    page.goto(f"{site_url}/{lang}/{page_name}")
    _switch(page, other(lang))
    assert page.evaluate(HASH) == ""
    assert page.evaluate("() => window.scrollY") == 0
    assert not watch.errors, "\n".join(watch.errors)


@pytest.mark.parametrize(
    ("target", "named_in_address"),
    [("mha_ref.GroupedQueryAttention", True), ("mha_ref.MultiHeadAttention.forward", False)],
)
def test_switcher_keeps_the_api_object(watched, site_url, target, named_in_address):
    """API ids are the same in both languages, so the switcher carries the object over: the one
    named in the address, or else the one under the header (a reader scrolled into a method's
    description lands on that method in the other language)."""
    watch = watched()
    page = watch.page
    if named_in_address:
        page.goto(f"{site_url}/en/api.html#{target}")
    else:
        page.goto(f"{site_url}/en/api.html")
        # the object's signature just under the header, its description below it
        page.evaluate(
            "id => window.scrollBy(0, document.getElementById(id).getBoundingClientRect().top"
            " - document.querySelector('.bd-header').getBoundingClientRect().bottom)",
            target,
        )
        page.wait_for_timeout(100)
    _switch(page, "zh_CN")
    assert page.evaluate(HASH) == target
    top = page.evaluate("id => document.getElementById(id).getBoundingClientRect().top", target)
    assert 0 <= top < 300, f"{target} is {top:.0f} px from the top of the window"
    assert not watch.errors, "\n".join(watch.errors)


def test_chinese_output_tables_line_up(watched, site_url):
    """In printed output on zh_CN pages a Chinese character is two columns wide, as
    mha_ref.tutorial.plotting.text_table counts it, so its tables line up (needs a CJK
    monospace font such as Noto Sans Mono CJK SC, from fonts-noto-cjk)."""
    watch = watched()
    page = watch.page
    page.goto(f"{site_url}/zh_CN/auto_examples/plot_04_masks.html")
    widths = page.evaluate(
        """() => {
            const pre = document.querySelector('div.sphx-glr-script-out pre');
            const measure = text => {
                const span = document.createElement('span');
                span.textContent = text;
                pre.appendChild(span);
                const width = span.getBoundingClientRect().width;
                span.remove();
                return width;
            };
            return [measure('可以关注'), measure('abcdefgh')];
        }"""
    )
    chinese, latin = widths
    assert abs(chinese - latin) < 0.5, f"4 Chinese characters {chinese:.1f} px, 8 columns {latin}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_figures_open_at_full_size(watched, site_url, lang):
    """Every example figure links to its 2x image, which loads (figure-links.js)."""
    watch = watched()
    page = watch.page
    page.goto(f"{site_url}/{lang}/auto_examples/plot_02_one_head_to_many.html")
    links = page.eval_on_selector_all(
        "img.sphx-glr-single-img, img.sphx-glr-multi-img",
        "imgs => imgs.map(img => img.closest('a') && img.closest('a').getAttribute('href'))",
    )
    assert len(links) >= 2, f"{len(links)} figures on the page"
    assert all(href and href.endswith("_2_00x.png") for href in links), links
    response = page.goto(f"{site_url}/{lang}/auto_examples/{links[0]}")
    assert response.status == 200 and response.headers["content-type"] == "image/png"


SEARCHES = [
    ("en", "multi-head attention", "concepts.html"),
    ("en", "padding mask", "masks.html"),
    ("en", "MultiheadAttention", "auto_examples/plot_07_torch_mha_in_practice.html"),
    ("zh_CN", "多头注意力", "concepts.html"),
    ("zh_CN", "张量形状", "auto_examples/plot_01_shapes.html"),
    ("zh_CN", "张量 形状", "auto_examples/plot_01_shapes.html"),
    ("zh_CN", "填充掩码", "masks.html"),
    ("zh_CN", "因果掩码", "masks.html"),
    # one-character words: Sphinx's own Chinese index drops them
    # (docs/_ext/mha_ref_build/chinese_text.py)
    ("zh_CN", "键", "glossary.html"),
    ("zh_CN", "值", "glossary.html"),
]


@pytest.mark.parametrize(("lang", "query", "expected"), SEARCHES)
def test_search_finds_the_page(watched, site_url, lang, query, expected):
    watch = watched()
    page = watch.page
    page.goto(f"{site_url}/{lang}/search.html?q={query}")
    page.wait_for_function(
        "() => { const s = document.querySelector('#search-results .search-summary');"
        " return s && s.textContent.trim().length > 0; }",
        timeout=20000,
    )
    links = page.eval_on_selector_all(
        "#search-results ul.search li > a", "els => els.map(e => e.getAttribute('href'))"
    )
    targets = [link.split("?")[0].split("#")[0] for link in links]
    assert expected in targets, f"{lang} search {query!r}: {expected} not among {targets}"
    assert not watch.errors, "\n".join(watch.errors)


def search_results(page, site_url: str, lang: str, query: str) -> list[str]:
    """The result links of the site's search page for ``query``, best first, once it is done."""
    page.goto(f"{site_url}/{lang}/search.html?q={query}")
    page.wait_for_function(
        "() => { const s = document.querySelector('#search-results .search-summary');"
        " return s && s.textContent.trim().length > 0; }",
        timeout=20000,
    )
    return page.eval_on_selector_all(
        "#search-results ul.search li > a", "els => els.map(e => e.getAttribute('href'))"
    )


# the words of the mask page's own section titles ("Building a causal mask", "Padding masks";
# 构造因果掩码, 填充掩码): with Sphinx's default scorer, English put the page 12th and 7th, behind
# every page with "mask" in some heading, the API page first (docs/_ext/search_scorer.js)
MASK_QUERIES = [
    ("en", "causal mask"),
    ("en", "padding mask"),
    ("zh_CN", "因果掩码"),
    ("zh_CN", "填充掩码"),
]


@pytest.mark.parametrize(("lang", "query"), MASK_QUERIES)
def test_search_ranks_the_mask_page_in_the_top_three(watched, site_url, lang, query):
    watch = watched()
    links = search_results(watch.page, site_url, lang, query)
    pages = [link.split("?")[0].split("#")[0] for link in links]
    assert "masks.html" in pages[:3], f"{lang} search {query!r}: the top three are {links[:3]}"
    # the page comes in by the section title that holds the query, not by its text alone
    assert links[0].split("?")[0].startswith("masks.html#"), links[:3]
    assert not watch.errors, "\n".join(watch.errors)


@pytest.mark.parametrize(("lang", "query"), [("en", "causal mask"), ("zh_CN", "因果 掩码")])
def test_search_gives_the_api_page_no_edge_in_full_text_ties(watched, site_url, lang, query):
    """Among full-text matches, most pages have a query word in some section title and score
    alike; the API page, first by its title in every such tie by default, is not first: its
    objects are results of their own."""
    watch = watched()
    search_results(watch.page, site_url, lang, query)
    text_links = watch.page.eval_on_selector_all(
        "#search-results ul.search li.kind-text > a", "els => els.map(e => e.getAttribute('href'))"
    )
    assert len(text_links) >= 5, text_links
    assert "api.html" in text_links, text_links  # the page is still found
    assert text_links[0] != "api.html", text_links[:3]
    assert not watch.errors, "\n".join(watch.errors)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_root_index_picks_the_browser_language(browser, site_url, lang):
    locale = "zh-CN" if lang == "zh_CN" else "en-US"
    context = browser.new_context(locale=locale)
    page = context.new_page()
    page.goto(f"{site_url}/index.html")
    page.wait_for_url(f"{site_url}/{lang}/index.html")
    context.close()


SCREENSHOT_PAGES = [
    "index.html",
    "auto_examples/plot_02_one_head_to_many.html",
    "auto_examples/plot_05_what_heads_learn.html",
]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_screenshots(watched, site_url, lang, scheme):
    """Light and dark screenshots of the landing page and two examples, for people to look at."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    watch = watched(color_scheme=scheme)
    for rel in SCREENSHOT_PAGES:
        if not (SITE / lang / rel).is_file():
            pytest.fail(f"{lang}/{rel} was not built")
        watch.page.goto(f"{site_url}/{lang}/{rel}")
        watch.page.wait_for_load_state("networkidle")
        theme = watch.page.evaluate("() => document.documentElement.dataset.theme")
        assert theme == scheme, f"{lang}/{rel}: theme {theme!r} under a {scheme} browser"
        name = f"{lang}-{Path(rel).stem}-{scheme}.png"
        watch.page.screenshot(path=str(SCREENSHOTS / name), full_page=True)
        assert (SCREENSHOTS / name).stat().st_size > 10_000
    assert not watch.errors, "\n".join(watch.errors)
