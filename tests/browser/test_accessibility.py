"""An axe-core audit of every page of both languages (WCAG 2.0 and 2.1, levels A and AA).

axe-core runs inside the page (``axe-playwright-python`` bundles its ``axe.min.js``; nothing is
downloaded). The interactive attention views are audited as built on load, and once more with
their table and "all heads" views open.
"""

from __future__ import annotations

import pytest
from test_site import LANGUAGES, SITE

pytestmark = pytest.mark.browser

WCAG_A_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
OPTIONS = {"runOnly": {"type": "tag", "values": WCAG_A_AA}, "resultTypes": ["violations"]}


def every_page(lang: str) -> list[str]:
    root = SITE / lang
    skip = ("_static/", "_sources/", "_downloads/", "_images/", "_modules/")
    return [
        p.relative_to(root).as_posix()
        for p in sorted(root.rglob("*.html"))
        if not p.relative_to(root).as_posix().startswith(skip)
    ]


@pytest.fixture(scope="module")
def axe():
    axe_playwright = pytest.importorskip("axe_playwright_python.sync_playwright")
    return axe_playwright.Axe()


def _violations(axe, page, where: str) -> list[str]:
    results = axe.run(page, options=OPTIONS).response
    found = []
    for violation in results["violations"]:
        targets = [" ".join(map(str, node["target"])) for node in violation["nodes"]]
        found.append(
            f"{where}: {violation['id']} ({violation['impact']}) x{len(targets)}: "
            f"{violation['help']}; e.g. {targets[:3]}"
        )
    return found


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_axe_violation_on_any_page(watched, site_url, axe, lang, scheme):
    pages = every_page(lang)
    assert len(pages) >= 10
    watch = watched(scheme)
    page = watch.page
    problems = []
    for rel in pages:
        page.goto(f"{site_url}/{lang}/{rel}", wait_until="load")
        if rel == "search.html":
            page.goto(f"{site_url}/{lang}/search.html?q=attention", wait_until="load")
            page.wait_for_function("document.querySelector('#search-results')?.innerText")
        page.wait_for_timeout(50)
        assert not watch.errors, f"{lang}/{rel}: {watch.errors}"
        problems += _violations(axe, page, f"{lang}/{rel} ({scheme})")
        # axe re-reads the style sheets and resolves the theme's `@import "../basic.css"`
        # against the page instead of the sheet: a 404 of the audit's own, not of the site
        watch.errors.clear()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_axe_violation_in_the_views_opened_up(watched, site_url, axe, lang, scheme):
    """Every state of the views: table open, a row pinned, all heads, the token view."""
    watch = watched(scheme)
    page = watch.page
    problems = []
    for example in ("plot_01_shapes", "plot_04_masks"):
        page.goto(f"{site_url}/{lang}/auto_examples/{example}.html", wait_until="load")
        page.wait_for_selector(".mha-attn [role='grid']")
        views = page.locator(".mha-attn")
        for k in range(views.count()):
            view = views.nth(k)
            view.locator(".mha-attn-toggle").click()  # the table
            view.locator(".mha-attn-query button").first.click()  # a pinned row
            if k == 0 and view.locator(".mha-attn-lines-toggle").count():
                view.locator(".mha-attn-lines-toggle").click()  # the token view
            elif view.locator(".mha-attn-heads button").count() > 1:
                view.locator(".mha-attn-heads button").first.click()  # all heads
        problems += _violations(axe, page, f"{lang}/{example}.html ({scheme}), views opened")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_axe_violation_in_the_live_model_and_the_overview(watched, site_url, axe, lang, scheme):
    """Example 10's views: the live model after an edit (and with a token it does not know),
    the predictions and the numbers' table, the all-layers overview, the token view."""
    watch = watched(scheme)
    page = watch.page
    page.goto(f"{site_url}/{lang}/auto_examples/plot_10_induction_heads.html", wait_until="load")
    page.wait_for_selector(".mha-attn-live-input")
    live = page.locator(".mha-attn", has=page.locator(".mha-attn-live-input")).first
    live.locator(".mha-attn-live-input").fill("QRSTQRST")
    live.locator(".mha-attn-toggle").click()  # the table
    live.locator(".mha-attn-query button").nth(5).click()  # a pinned row
    problems = _violations(axe, page, f"{lang} example 10 ({scheme}), live model edited")
    live.locator(".mha-attn-live-input").fill("QRSTZ")  # not a token: the box says so
    live.locator(".mha-attn-overview-toggle").click()  # every layer's heads
    problems += _violations(axe, page, f"{lang} example 10 ({scheme}), overview, bad input")
    live.locator(".mha-attn-overview-toggle").click()
    live.locator(".mha-attn-lines-toggle").click()  # the token view
    live.locator(".mha-attn-line-query").nth(2).click()
    problems += _violations(axe, page, f"{lang} example 10 ({scheme}), token view")
    assert not problems, "\n".join(problems)
