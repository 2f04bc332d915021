"""The interactive attention views on the built site, in headless Chromium (``nox -s browser``).

Each view is built by ``attention-view.js`` from the weights ``plot_heads`` drew; these tests read
the embedded data and check that what the reader sees and hears is those numbers.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT, SCREENSHOTS, SITE

pytestmark = pytest.mark.browser

LANGUAGES = ("en", "zh_CN")
#: example 01 draws 8 heads of random weights; example 04 draws weights with blocked cells
SHAPES = "auto_examples/plot_01_shapes.html"
MASKS = "auto_examples/plot_04_masks.html"
WORDS = {
    "en": {"all": "All heads", "query": "query", "blocked": "blocked", "table": "Show as table"},
    "zh_CN": {"all": "全部头", "query": "查询", "blocked": "屏蔽", "table": "以表格显示"},
}


def pages_with_views(lang: str) -> list[str]:
    root = SITE / lang
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.glob("auto_examples/*.html")
        if 'data-mha-attn="1"' in p.read_text(encoding="utf-8")
    )


def view_data(page, index: int = 0) -> dict:
    text = page.locator(".mha-attn script[type='application/json']").nth(index).text_content()
    return json.loads(text)


def first_view_where(page, wanted) -> int:
    """The index of the first view on the page whose embedded data satisfies ``wanted``."""
    return next(k for k in range(page.locator(".mha-attn").count()) if wanted(view_data(page, k)))


def readout_number(text: str) -> str:
    """The weight at the end of a readout line ("…: 0.317"), as shown."""
    match = re.search(r"[:：]\s*(<?-?[\d.]+)$", text)
    assert match, f"no number at the end of {text!r}"
    return match.group(1)


def shown(value: float) -> str:
    """A weight as the view shows it: 3 decimals, "<0.001" for a smaller positive one."""
    return "<0.001" if 0 < value < 0.0005 else f"{value:.3f}"


def exact_in_title(title: str | None, value: float) -> bool:
    """The title holds the exact weight, the shortest decimal of the float the build wrote."""
    return title is not None and re.search(r"[:：]\s*(\S+)$", title).group(1) == str(value)


def open_page(watched, site_url, lang, rel, scheme="light", width=1280):
    watch = watched(scheme)
    watch.page.set_viewport_size({"width": width, "height": 900})
    watch.page.goto(f"{site_url}/{lang}/{rel}", wait_until="load")
    watch.page.wait_for_selector(".mha-attn[data-mha-attn='2'] [role='grid']")
    # the page's fonts loaded: a Chinese font arriving late moves the layout under a click that
    # Playwright has already aimed (CI once failed to pin a query on the zh_CN page this way)
    watch.page.evaluate("document.fonts.ready.then(() => true)")
    return watch


def test_the_example_pages_that_draw_weights_have_views():
    for lang in LANGUAGES:
        pages = pages_with_views(lang)
        assert SHAPES in pages and MASKS in pages, f"{lang}: views on {pages}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_hovering_and_focusing_a_cell_reads_its_weight_and_tokens(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, SHAPES)
    page = watch.page
    data = view_data(page)
    view = page.locator(".mha-attn").first
    readout = view.locator(".mha-attn-readout")
    rows, cols = len(data["queries"]), len(data["keys"])
    for i, j in [(0, 0), (rows - 1, cols - 1), (1, cols // 2)]:
        view.locator(f"[data-cell='0,{i},{j}']").hover()
        text = readout.text_content()
        assert f"“{data['queries'][i]}”" in text and f"“{data['keys'][j]}”" in text, text
        assert readout_number(text) == shown(data["weights"][0][i][j]), text
        assert exact_in_title(readout.get_attribute("title"), data["weights"][0][i][j])
    # the keyboard: focus the grid's cell, then arrows move the focus and the readout
    cell = view.locator("[role='gridcell'][tabindex='0']")
    cell.focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    focused = page.evaluate("document.activeElement.getAttribute('data-cell')")
    assert focused == "0,1,1"
    text = readout.text_content()
    assert readout_number(text) == shown(data["weights"][0][1][1])
    label = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert label == text and WORDS[lang]["query"] in label
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("lang", LANGUAGES)
def test_switching_heads_and_the_keyboard_reaches_every_head(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, SHAPES)
    page = watch.page
    data = view_data(page)
    view = page.locator(".mha-attn").first
    num_heads = len(data["weights"])
    assert num_heads == 8
    colour_before = view.locator("[data-cell='0,0,0']").evaluate(
        "c => getComputedStyle(c).backgroundColor"
    )
    view.locator(".mha-attn-heads button", has_text=data["names"][3]).click()
    assert view.locator("[data-cell='3,0,0']").count() == 1
    assert view.locator("[data-cell='0,0,0']").count() == 0
    colour_after = view.locator("[data-cell='3,0,0']").evaluate(
        "c => getComputedStyle(c).backgroundColor"
    )
    assert (colour_before != colour_after) == (
        data["weights"][0][0][0] != data["weights"][3][0][0]
    )
    # Tab into the head picker, then the arrow keys visit every head and the "all" view
    view.locator(".mha-attn-heads button[aria-pressed='true']").focus()
    seen = set()
    for _ in range(num_heads + 1):
        page.keyboard.press("ArrowRight")
        seen.add(page.evaluate("document.activeElement.textContent"))
        pressed = view.locator(".mha-attn-heads button[aria-pressed='true']").text_content()
        assert pressed == page.evaluate("document.activeElement.textContent")
    assert seen == set(data["names"]) | {WORDS[lang]["all"]}
    # Page Down in the grid goes to the next head, keeping the cell
    view.locator(".mha-attn-heads button", has_text=data["names"][0]).click()
    view.locator("[role='gridcell'][tabindex='0']").focus()
    page.keyboard.press("PageDown")
    assert page.evaluate("document.activeElement.getAttribute('data-cell')") == "1,0,0"
    # all heads at once: one small multiple per head, each opens its head
    view.locator(".mha-attn-heads button", has_text=WORDS[lang]["all"]).click()
    assert view.locator(".mha-attn-multiple").count() == num_heads
    view.locator(".mha-attn-multiple-title").nth(5).click()
    assert view.locator("[data-cell='5,0,0']").count() == 1
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("lang", LANGUAGES)
def test_pinning_a_query_and_the_table(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, SHAPES)
    page = watch.page
    data = view_data(page)
    view = page.locator(".mha-attn").first
    view.locator(".mha-attn-query button").nth(2).click()
    assert view.locator(".mha-attn-query.mha-attn-pin").count() == 1
    row = data["weights"][0][2]
    best = max(range(len(row)), key=row.__getitem__)
    readout = view.locator(".mha-attn-readout")
    assert f"“{data['keys'][best]}” {shown(row[best])}" in readout.inner_text()
    assert f"“{data['keys'][best]}” {row[best]}" in readout.get_attribute("title")
    view.locator(".mha-attn-toggle").click()
    table = view.locator("table.mha-attn-numbers")
    assert table.count() == 1
    cells = table.locator("tbody tr").nth(2).locator("td")
    assert cells.all_text_contents() == [shown(v) for v in row]
    # the exact value on hover: each cell's title
    for j, value in enumerate(row):
        assert exact_in_title(cells.nth(j).get_attribute("title"), value)
    # Escape unpins (the focus is on the pinned query's button)
    view.locator(".mha-attn-query button").nth(2).focus()
    page.keyboard.press("Escape")
    assert view.locator(".mha-attn-query.mha-attn-pin").count() == 0
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("lang", LANGUAGES)
def test_blocked_cells_are_shown_blocked_not_zero(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, MASKS)
    page = watch.page
    index = first_view_where(page, lambda data: data["blocked"] is not None)
    data = view_data(page, index)
    view = page.locator(".mha-attn").nth(index)
    h, i, j = next(
        (h, i, j)
        for h, head in enumerate(data["blocked"])
        for i, r in enumerate(head)
        for j, c in enumerate(r)
        if c == "1"
    )
    assert data["weights"][h][i][j] == 0  # drawn from a zero, shown as blocked
    view.locator(".mha-attn-heads button", has_text=data["names"][h]).first.click()
    cell = view.locator(f"[data-cell='{h},{i},{j}']")
    assert "mha-attn-blocked" in cell.get_attribute("class")
    cell.hover()
    text = view.locator(".mha-attn-readout").text_content()
    assert text.endswith(data["blocked_label"] or "") or WORDS[lang]["blocked"] in text
    assert not re.search(r"[:：]\s*0(\.0*)?$", text), text
    view.locator(".mha-attn-toggle").click()
    row = view.locator("table.mha-attn-numbers tbody tr").nth(i).locator("td")
    assert row.nth(j).text_content() == "—"
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("lang", LANGUAGES)
def test_views_fit_a_phone_screen_and_scroll_inside(watched, site_url, lang):
    problems = []
    watch = watched()
    page = watch.page
    page.set_viewport_size({"width": 390, "height": 800})
    for rel in pages_with_views(lang):
        page.goto(f"{site_url}/{lang}/{rel}", wait_until="load")
        page.wait_for_selector(".mha-attn[data-mha-attn='2'] [role='grid']")
        page.locator(".mha-attn .mha-attn-toggle").first.click()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        if overflow > 0:
            problems.append(f"{lang}/{rel}: the page is {overflow} px wider than the screen")
        too_wide = page.evaluate(
            "Array.from(document.querySelectorAll('.mha-attn'))"
            ".filter(v => v.getBoundingClientRect().right > window.innerWidth + 0.5).length"
        )
        if too_wide:
            problems.append(f"{lang}/{rel}: {too_wide} views wider than the screen")
    assert not watch.errors, watch.errors
    assert not watch.external, watch.external
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_dark_mode_and_the_page_language(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, MASKS, scheme="dark")
    page = watch.page
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    view = page.locator(".mha-attn").first
    text = view.evaluate("v => getComputedStyle(v).color")
    brightness = sum(int(c) for c in re.findall(r"\d+", text)[:3])
    assert brightness > 3 * 150, f"text colour {text} is not light on the dark page"
    button = view.locator(".mha-attn-toggle")
    assert button.text_content() == WORDS[lang]["table"]
    assert view.get_attribute("lang") == ("zh-CN" if lang == "zh_CN" else "en")
    if lang == "zh_CN":  # the tokens of Chinese pages are Chinese
        assert any(re.search(r"[\u4e00-\u9fff]", q) for q in view_data(page)["queries"])
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_view_screenshots(watched, site_url, lang, scheme, width):
    """Screenshots to look at (build/screenshots/attention-*.png)."""
    watch = open_page(watched, site_url, lang, MASKS, scheme=scheme, width=width)
    page = watch.page
    count = page.locator(".mha-attn").count()
    index = next(k for k in range(count) if view_data(page, k)["kind"] == "weights")
    view = page.locator(".mha-attn").nth(index)
    view.locator(".mha-attn-heads button").last.click()  # causal & padding: blocked cells
    view.scroll_into_view_if_needed()
    view.locator(".mha-attn-query button").nth(3).click()  # a pinned row
    view.locator("[role='gridcell']").nth(9).hover()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    view.screenshot(path=str(SCREENSHOTS / f"attention-{lang}-{scheme}-{width}.png"))
    view.locator(".mha-attn-heads button").first.click()  # all heads
    view.screenshot(path=str(SCREENSHOTS / f"attention-{lang}-{scheme}-{width}-all.png"))
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("lang", LANGUAGES)
def test_token_view_draws_a_line_per_weight(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, SHAPES)
    page = watch.page
    data = view_data(page)
    view = page.locator(".mha-attn").first
    view.locator(".mha-attn-lines-toggle").click()
    lines = view.locator("svg.mha-attn-lines line")
    weights = data["weights"][0]
    assert lines.count() == sum(1 for row in weights for v in row if v and v > 0)
    opacity = float(view.locator("line[data-cell='0,1,2']").get_attribute("stroke-opacity"))
    assert opacity == pytest.approx(weights[1][2] / data["vmax"], abs=5e-4)
    view.locator(".mha-attn-line-query").nth(1).click()  # pins query 1: its lines alone
    assert view.locator("line.mha-attn-pin").count() == len(data["keys"])
    assert view.locator("line.mha-attn-faded").count() == lines.count() - len(data["keys"])
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    view.screenshot(path=str(SCREENSHOTS / f"attention-{lang}-lines.png"))
    assert not watch.errors, watch.errors


def test_layers_and_heads_on_a_page_of_its_own(browser):
    """The script alone, on a page of its own, with two layers of two heads (no example has
    layers yet): the layer picker shows that layer's heads, and the readout their weights."""
    static = ROOT / "mha_ref" / "tutorial" / "static"
    data = {
        "version": 1, "kind": "weights", "lang": "en", "title": "two layers",
        "queries": ["a", "b"], "keys": ["a", "b"], "names": ["L0H0", "L0H1", "L1H0", "L1H1"],
        "layers": ["layer 0", "layer 0", "layer 1", "layer 1"],
        "weights": [[[1.0, 0.0], [0.5, 0.5]], [[1.0, 0.0], [0.25, 0.75]],
                    [[1.0, 0.0], [0.125, 0.875]], [[1.0, 0.0], [0.375, 0.625]]],
        "blocked": [["01", "00"]] * 4, "vmax": 1.0, "colours": ["#000000", "#ffffff"],
        "colorbar_label": None, "xlabel": None, "ylabel": None, "blocked_label": "masked",
    }
    html = (
        "<!doctype html><html lang='en'><head><title>t</title><style>"
        + (static / "attention-view.css").read_text(encoding="utf-8")
        + "</style></head><body><main><div class='mha-attn' data-mha-attn='1'>"
        + "<script type='application/json'>" + json.dumps(data) + "</script></div><script>"
        + (static / "attention-view.js").read_text(encoding="utf-8")
        + "</script></main></body></html>"
    )
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_content(html)
    heads = page.locator(".mha-attn-heads button")
    assert heads.all_text_contents() == ["All heads", "L0H0", "L0H1"]
    page.select_option(".mha-attn-layer select", "layer 1")
    assert heads.all_text_contents() == ["All heads", "L1H0", "L1H1"]
    page.locator("[data-cell='2,1,1']").hover()
    assert page.locator(".mha-attn-readout").text_content() == "L1H0, query “b”, key “b”: 0.875"
    page.locator("[data-cell='2,0,1']").hover()
    assert page.locator(".mha-attn-readout").text_content().endswith(": masked")
    page.locator("[role='gridcell'][tabindex='0']").focus()
    page.keyboard.press("PageDown")  # the next head of this layer
    assert page.evaluate("document.activeElement.getAttribute('data-cell')") == "3,0,0"
    page.keyboard.press("PageDown")  # and round to the first
    assert page.evaluate("document.activeElement.getAttribute('data-cell')") == "2,0,0"
    page.close()
    assert not errors, errors


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_real_models_views_call_a_layer_a_block_as_the_page_does(watched, site_url, lang):
    """Example 16 says block where a toy model says layer: its views' menu, overview button,
    overview grid and keyboard hint say it too (``layer_word``), and a view of a few named
    heads does not claim to show every head; example 10's views still say layer."""
    words = {
        "en": ("Block", "Heads by block", "a row per block", "the block menu"),
        "zh_CN": ("块", "按块排列的头", "每块一行", "块的菜单"),
    }[lang]
    watch = open_page(watched, site_url, lang, "auto_examples/plot_16_real_model_heads.html")
    page = watch.page
    for index in range(page.locator(".mha-attn").count()):
        data = view_data(page, index)
        if not data.get("layers"):
            continue
        assert data["layer_word"] == ("block" if lang == "en" else "块"), index
        view = page.locator(".mha-attn").nth(index)
        menu_label = view.locator(".mha-attn-layer").evaluate("e => e.firstChild.textContent")
        assert menu_label.strip() == words[0], menu_label
        button = view.locator(".mha-attn-overview-toggle")
        assert button.text_content() == words[1]
        button.click()
        label = view.locator(".mha-attn-overview[role='grid']").get_attribute("aria-label")
        assert words[2] in label and "every" not in label and "每一" not in label, label
        hint = view.locator(".mha-attn-hint").text_content()
        assert words[3] in hint, hint
    watch.page.goto(f"{site_url}/{lang}/{INDUCTION}", wait_until="load")
    view = page.locator(".mha-attn", has=page.locator(".mha-attn-overview-toggle")).first
    expected = "Heads by layer" if lang == "en" else "按层排列的头"
    assert view.locator(".mha-attn-overview-toggle").text_content() == expected
    assert not watch.errors, watch.errors


# -- the keyboard ---------------------------------------------------------------------------------

INDUCTION = "auto_examples/plot_10_induction_heads.html"
HINT_PARTS = {
    "en": ["layer menu", "head buttons", "buttons,", "grid"],
    "zh_CN": ["层的菜单", "各个头的按钮", "视图的按钮", "网格"],
}


def _tab_stops(page, view, count: int) -> list[str]:
    """What Tab reaches, from the view's first focusable element on, named by its role."""
    view.locator("input, select, button:not([tabindex='-1']), [tabindex='0']").first.focus()
    stops = []
    for _ in range(count):
        stops.append(
            page.evaluate(
                "(() => { const e = document.activeElement;"
                " if (e.closest('.mha-attn-layer')) return 'layer';"
                " if (e.closest('.mha-attn-heads')) return 'heads';"
                " if (e.getAttribute('role') === 'gridcell') return 'grid';"
                " if (e.hasAttribute('data-query')) return 'query';"
                " if (e.tagName === 'BUTTON') return 'button';"
                " if (e.tagName === 'INPUT') return 'input';"
                " return e.tagName; })()"
            )
        )
        page.keyboard.press("Tab")
    return stops


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_hint_says_the_tab_order(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, SHAPES)
    page = watch.page
    view = page.locator(".mha-attn").first
    stops = _tab_stops(page, view, 4)
    assert stops == ["heads", "button", "button", "grid"], stops  # one stop for all the heads
    hint = view.locator(".mha-attn-hint").text_content()
    parts = HINT_PARTS[lang][1:]  # no layer menu on this page
    positions = [hint.find(p) for p in parts]
    assert -1 not in positions and positions == sorted(positions), (hint, parts)
    # with several layers (example 10): the layer menu comes first, and the hint says so
    watch = open_page(watched, site_url, lang, INDUCTION)
    page = watch.page
    index = first_view_where(page, lambda data: data["layers"])
    view = page.locator(".mha-attn").nth(index)
    stops = _tab_stops(page, view, 6)
    assert stops[:2] == ["layer", "heads"] and stops[-1] == "grid", stops
    hint = view.locator(".mha-attn-hint").text_content()
    positions = [hint.find(p) for p in HINT_PARTS[lang]]
    assert -1 not in positions and positions == sorted(positions), hint
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_token_view_works_from_the_keyboard(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, SHAPES)
    page = watch.page
    data = view_data(page)
    view = page.locator(".mha-attn").first
    toggle = view.locator(".mha-attn-lines-toggle")
    toggle.focus()
    page.keyboard.press("Enter")
    assert toggle.get_attribute("aria-pressed") == "true"
    page.keyboard.press("Tab")  # the table button, then the query tokens
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('data-query')") == "0"
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.getAttribute('data-query')") == "1"
    readout = view.locator(".mha-attn-readout").text_content()
    assert f"“{data['queries'][1]}”" in readout  # its largest weights, read out on focus
    row = data["weights"][0][1]
    best = max(range(len(row)), key=row.__getitem__)
    assert f"“{data['keys'][best]}” {shown(row[best])}" in readout, readout
    page.keyboard.press("Enter")  # pins query 1: its lines alone, and the token says so
    assert view.locator("line.mha-attn-pin").count() == len(data["keys"])
    label = view.locator("[data-query='1']")
    assert label.get_attribute("aria-pressed") == "true"
    assert page.evaluate("document.activeElement.getAttribute('data-query')") == "1"
    page.keyboard.press("Escape")  # unpins
    assert view.locator("line.mha-attn-pin").count() == 0
    assert view.locator("[data-query='1']").get_attribute("aria-pressed") == "false"
    toggle.focus()
    page.keyboard.press("Enter")
    assert toggle.get_attribute("aria-pressed") == "false"
    assert view.locator("[role='grid']").count() == 1
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("lang", LANGUAGES)
def test_escape_unpins_in_the_grid(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, SHAPES)
    page = watch.page
    view = page.locator(".mha-attn").first
    view.locator("[role='gridcell'][tabindex='0']").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    assert view.locator(".mha-attn-query.mha-attn-pin").count() == 1
    assert view.locator(".mha-attn-query button[aria-pressed='true']").count() == 1
    assert page.evaluate("document.activeElement.getAttribute('data-cell')") == "0,1,0"
    page.keyboard.press("Escape")
    assert view.locator(".mha-attn-query.mha-attn-pin").count() == 0
    assert view.locator(".mha-attn-query button[aria-pressed='true']").count() == 0
    assert page.evaluate("document.activeElement.getAttribute('data-cell')") == "0,1,0"
    assert not watch.errors, watch.errors


# -- all layers x all heads -----------------------------------------------------------------------


#: each overview heatmap: its head, its size and its last row's colours
_PIXELS = """maps => maps.map(m => {
  const row = m.getContext('2d').getImageData(0, m.height - 1, m.width, 1).data;
  const rgb = [];
  for (let k = 0; k < row.length; k += 4) rgb.push([row[k], row[k + 1], row[k + 2]]);
  return {head: Number(m.dataset.head), size: [m.width, m.height], rgb: rgb};
})"""


def overview_rows(overview) -> list[str]:
    """The overview's row headers as layer names: a number under a corner that holds the word
    ("block \\ head" over "0", "1", ...), or the names themselves."""
    corner = overview.locator(".mha-attn-corner").text_content()
    rows = overview.locator(".mha-attn-overview-layer").all_text_contents()
    return [f"{corner.split(' ')[0]} {row}" if corner else row for row in rows]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_overview_shows_every_head_of_every_layer(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, INDUCTION)
    page = watch.page
    index = first_view_where(page, lambda data: data["layers"])
    data = view_data(page, index)
    view = page.locator(".mha-attn").nth(index)
    button = view.locator(".mha-attn-overview-toggle")
    assert button.get_attribute("aria-pressed") == "false"
    button.click()
    assert button.get_attribute("aria-pressed") == "true"
    overview = view.locator(".mha-attn-overview")
    layers = sorted(set(data["layers"]), key=data["layers"].index)
    assert overview_rows(overview) == layers
    assert overview.locator("[data-overview]").count() == len(data["weights"]) == 4
    # each heatmap is its own head's weights, a pixel each, in the colours of the head's grid
    pixels = overview.locator("canvas[data-head]").evaluate_all(_PIXELS)
    assert [p["head"] for p in pixels] == [0, 1, 2, 3]
    assert all(p["size"] == [len(data["keys"]), len(data["queries"])] for p in pixels)
    assert len({str(p["rgb"]) for p in pixels}) == 4, "four heads drawn alike"
    overview.locator("[data-overview='1,1']").click()  # the second layer's head 1
    assert button.get_attribute("aria-pressed") == "false"
    assert view.locator(".mha-attn-layer select").input_value() == data["layers"][3]
    assert view.locator("[data-cell='3,0,0']").count() == 1
    last = len(data["queries"]) - 1  # the last query: every key is open to it
    for j in range(len(data["keys"])):
        shown_colour = view.locator(f"[data-cell='3,{last},{j}']").evaluate(
            "c => getComputedStyle(c).backgroundColor")
        assert shown_colour == "rgb({}, {}, {})".format(*pixels[3]["rgb"][j]), (j, shown_colour)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    button.click()
    view.screenshot(path=str(SCREENSHOTS / f"attention-{lang}-overview.png"))
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_real_models_overview_holds_all_270_heads_and_reads_their_weights(
    watched, site_url, lang
):
    """Example 16's every-head view: its weights travel as integers (thousandths, -1 for a
    positive weight below half a thousandth); the page shows each one as the number it stands
    for, says in the title that it is rounded, and the overview has every head of every block."""
    watch = open_page(watched, site_url, lang, "auto_examples/plot_16_real_model_heads.html")
    page = watch.page
    index = first_view_where(page, lambda data: len(data["weights"]) == 270)
    data = view_data(page, index)
    assert data["weights_scale"] == 1000 and isinstance(data["weights"][5][3][1], int)
    view = page.locator(".mha-attn").nth(index)
    # block 0, head 5: the view opens on block 0; choose head 5 and read query 3, key 1
    view.locator(".mha-attn-heads button", has_text=data["names"][5].split(" ", 2)[-1]).click()
    view.locator("[data-cell='5,3,1']").hover()
    text = view.locator(".mha-attn-readout").text_content()
    sent = data["weights"][5][3][1]
    assert readout_number(text) == ("<0.001" if sent == -1 else shown(sent / 1000)), text
    title = view.locator(".mha-attn-readout").get_attribute("title")
    rounded = "四舍五入到 3 位小数" if lang == "zh_CN" else "rounded to 3 decimals"
    assert title is not None and title.startswith(rounded), title
    # no weight is negative: -1 marks a positive one below half a thousandth, never a zero
    assert min(v for head in data["weights"] for row in head for v in row if v is not None) >= -1
    # a 0 is exact (a key the causal mask hides): its title does not call it rounded
    view.locator("[data-cell='5,3,7']").hover()
    assert data["weights"][5][3][7] == 0
    exact = "精确值" if lang == "zh_CN" else "exact value"
    title = view.locator(".mha-attn-readout").get_attribute("title")
    assert title is not None and title.startswith(exact), title
    button = view.locator(".mha-attn-overview-toggle")
    button.click()
    overview = view.locator(".mha-attn-overview")
    assert overview_rows(overview) == sorted(set(data["layers"]), key=data["layers"].index)
    assert overview.locator("[data-overview]").count() == 270
    # the pointer on a heatmap reads the weight under it: block 17, head 4, the last query's
    # first key (the heatmap's bottom-left corner)
    h, last = 9 * 17 + 4, len(data["queries"]) - 1
    heatmap = overview.locator(f"canvas[data-head='{h}']")
    size = heatmap.bounding_box()
    heatmap.hover(position={"x": 1, "y": size["height"] - 1})
    text = view.locator(".mha-attn-readout").text_content()
    assert text.startswith(data["names"][h]) and f"“{data['keys'][0]}”" in text, text
    sent = data["weights"][h][last][0]
    assert readout_number(text) == ("<0.001" if sent == -1 else shown(sent / 1000)), text
    _the_overview_fits_and_is_one_tab_stop(page, view, overview, data, lang)
    overview.locator("[data-overview='17,4']").click()  # block 17, head 4
    assert view.locator(".mha-attn-layer select").input_value() == data["layers"][9 * 17 + 4]
    assert view.locator(f"[data-cell='{9 * 17 + 4},0,0']").count() == 1
    assert not watch.errors, watch.errors


#: the overview's layout: its box, its scroll box's, each row's heads' tops (one line: one top)
_OVERVIEW_BOXES = """o => {
  const scroll = o.closest('.mha-attn-scroll');
  const top = c => c.getBoundingClientRect().top;
  const rows = [...o.querySelectorAll('[role=row]')].slice(1).map(row =>
    new Set([...row.querySelectorAll('[data-overview]')].map(top)).size);
  return {right: o.getBoundingClientRect().right, scrollRight: scroll.getBoundingClientRect().right,
          scrollWidth: scroll.scrollWidth, clientWidth: scroll.clientWidth, rows: rows};
}"""


def _the_overview_fits_and_is_one_tab_stop(page, view, overview, data, lang):
    """Example 16's 30 blocks x 9 heads: each block's heads on one line inside the page's column,
    at 1280 px and on a phone (no sideways scroll), and the grid is one tab stop: the arrow keys
    move between heads, Enter opens one, Tab leaves the view at once. It was 1,302 px wide in an
    896 px column, and 270 tab stops."""
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        boxes = overview.evaluate(_OVERVIEW_BOXES)
        assert boxes["rows"] == [1] * 30, (width, boxes["rows"])
        assert boxes["right"] <= boxes["scrollRight"] + 0.5, (width, boxes)
        assert boxes["scrollWidth"] <= boxes["clientWidth"], (width, boxes)  # nothing hidden
    page.set_viewport_size({"width": 1280, "height": 900})
    cells = overview.locator("[data-overview]")
    assert cells.evaluate_all("cs => cs.filter(c => c.tabIndex === 0).length") == 1
    view.locator(".mha-attn-overview-toggle").focus()
    for _ in range(3):  # the token view's button, the table's, then the grid
        page.keyboard.press("Tab")
    where = "document.activeElement.getAttribute('data-overview')"
    assert page.evaluate(where) == "0,5"  # block 0, head 5: the head the view showed
    for key, expected in [("ArrowRight", "0,6"), ("ArrowDown", "1,6"), ("End", "1,8"),
                          ("ArrowRight", "1,8"), ("Home", "1,0"), ("ArrowUp", "0,0"),
                          ("ArrowLeft", "0,0"), ("ArrowDown", "1,0"), ("ArrowDown", "2,0")]:
        page.keyboard.press(key)
        assert page.evaluate(where) == expected, (key, page.evaluate(where), expected)
    label = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert label.startswith(data["names"][9 * 2]), label  # block 2, head 0
    assert cells.evaluate_all("cs => cs.filter(c => c.tabIndex === 0).length") == 1
    page.keyboard.press("Tab")  # out of the grid, and out of the view, in one press
    assert not view.evaluate("v => v.contains(document.activeElement)")
    page.keyboard.press("Shift+Tab")  # back to the head it left
    assert page.evaluate(where) == "2,0"
    page.keyboard.press("Enter")  # block 2, head 0, alone
    assert view.locator(".mha-attn-layer select").input_value() == data["layers"][9 * 2]
    assert view.locator(f"[data-cell='{9 * 2},0,0']").count() == 1
    assert view.locator(".mha-attn-heads button[aria-pressed='true']").text_content() == (
        data["names"][9 * 2])
    view.locator(".mha-attn-overview-toggle").click()


# -- the live model -------------------------------------------------------------------------------

TOKEN_NAMES = list("ABCDEFGHIJKLMNOPQRSTUVWX")
#: sequences a reader may type: a repeat, a short one, no repeat, a repeat at another distance,
#: lower case with spaces, one token
LIVE_SEQUENCES = [
    "ABCDEFABCDEF",
    "QRSQRS",
    "XWVUTSRQPONMLKJIHGFE",
    "MHEARTXWHEARTX",
    "k l m k l",
    "K",
]


@pytest.fixture(scope="module")
def induction_model():
    """Example 10's model, as the build trained it (from the build's cache when it holds it)."""
    import os

    from mha_ref.tutorial.cache import CACHE_ENV_VAR
    from mha_ref.tutorial.induction_training import train_induction

    os.environ.setdefault(CACHE_ENV_VAR, str(ROOT / "build" / ".cache" / "experiments"))
    return train_induction(seed=0).model()


def _live_view(page):
    page.wait_for_selector(".mha-attn-live-input")
    return page.locator(".mha-attn", has=page.locator(".mha-attn-live-input")).first


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_live_model_computes_the_builds_numbers(watched, site_url, lang, induction_model):
    import numpy as np
    import torch

    from mha_ref.tutorial.live_views import export_model

    watch = open_page(watched, site_url, lang, INDUCTION)
    page = watch.page
    view = _live_view(page)
    data = view.evaluate("v => JSON.parse(v.querySelector('script').textContent)")
    # the page carries the model's own parameters, bit for bit
    assert data["live"]["data"] == export_model(induction_model)["data"]
    box = view.locator(".mha-attn-live-input")
    for text in LIVE_SEQUENCES:
        box.fill(text)
        ids = [TOKEN_NAMES.index(c) for c in text.upper() if c != " "]
        result = view.evaluate("v => v.mhaAttn.live.result")
        with torch.no_grad():
            logits, weights = induction_model(torch.tensor([ids]))  # float32, the build's pass
        np.testing.assert_allclose(result["logits"], logits[0].numpy(), rtol=1e-5, atol=1e-4)
        for layer in range(2):
            np.testing.assert_allclose(
                result["weights"][layer], weights[layer][0].numpy(), atol=1e-5
            )
        # what the view draws and says is that result
        drawn = view.evaluate("v => v.mhaAttn.data")
        assert drawn["queries"] == [TOKEN_NAMES[i] for i in ids]
        np.testing.assert_allclose(drawn["weights"][2], weights[1][0, 0].numpy(), atol=1e-5)
        probabilities = torch.softmax(logits[0, -1].double(), dim=-1)
        best = int(probabilities.argmax())
        message = view.locator(".mha-attn-live-message").text_content()
        assert f"“{TOKEN_NAMES[best]}”" in message and shown(float(probabilities[best])) in message
        # one row per position; its third cell is the predicted next token
        predicted = view.locator(".mha-attn-live-predictions tbody tr td:nth-child(3)")
        expected = logits[0].argmax(dim=-1).tolist()
        assert [c.split(" ")[0] for c in predicted.all_text_contents()] == [
            TOKEN_NAMES[i] for i in expected
        ]
    assert not watch.errors, watch.errors
    assert not watch.external, watch.external


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_live_model_by_keyboard_and_its_messages(watched, site_url, lang):
    watch = open_page(watched, site_url, lang, INDUCTION)
    page = watch.page
    view = _live_view(page)
    data = view.evaluate("v => JSON.parse(v.querySelector('script').textContent)")
    box = view.locator(".mha-attn-live-input")
    # the text box has a label and says what it takes; the view opens on layer 2
    assert box.evaluate("b => b.labels.length") == 1
    described = box.get_attribute("aria-describedby").split()
    assert all(page.locator(f"#{i}").count() == 1 for i in described)
    assert view.locator(".mha-attn-layer select").input_value() == data["live"]["initial_layer"]
    box.focus()
    page.keyboard.press("End")
    page.keyboard.type("Z")  # not a token: the box says so and the heads stay as they were
    assert box.get_attribute("aria-invalid") == "true"
    assert "Z" in view.locator(".mha-attn-live-message").text_content()
    page.keyboard.press("Backspace")
    assert box.get_attribute("aria-invalid") is None
    box.fill("ABCDEFGHIJKLMNOPQRSTU")  # 21 tokens: one too many
    assert "21" in view.locator(".mha-attn-live-message").text_content()
    box.fill("ABCDABCD")
    # Tab from the box reaches the predictions, then the view's controls, then the grid
    stops = _tab_stops(page, view, 8)
    assert stops == ["input", "DIV", "layer", "heads", "button", "button", "button", "grid"], stops
    hint = view.locator(".mha-attn-hint").text_content()
    live_first = {"en": "text box", "zh_CN": "文本框"}[lang]
    assert -1 < hint.find(live_first) < hint.find(HINT_PARTS[lang][0]), hint
    # the keyboard reads the induction head's weight at the repeat: a query of the second copy
    # looks at the token after its earlier occurrence
    view.locator("[role='gridcell'][tabindex='0']").focus()
    for _ in range(5):
        page.keyboard.press("ArrowDown")  # query 5: the second "B"
    for _ in range(2):
        page.keyboard.press("ArrowRight")  # key 2: "C", after the first "B"
    text = view.locator(".mha-attn-readout").text_content()
    assert "“B”" in text and "“C”" in text, text
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    view.screenshot(path=str(SCREENSHOTS / f"attention-{lang}-live.png"))
    assert not watch.errors, watch.errors
