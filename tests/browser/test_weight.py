"""What a first visit costs, and the examples in the phone drawer.

Each page is opened in a fresh browser context (nothing cached), as a reader arriving from a
search engine would, and the bytes of every response it loads until the network is idle are
added up: the page, its styles, scripts, fonts, MathJax and the figures in view (the others load
as the reader scrolls, ``loading="lazy"``). The budget is a median page of at most 1.2 MB, over
every page of each language, and over the pages a reader reads (the package's source listings
aside) on their own. The test prints each language's median and heaviest pages.
"""

from __future__ import annotations

import statistics

import pytest
from conftest import SITE

LANGUAGES = ("en", "zh_CN")
BUDGET_MB = 1.2


def every_page(lang: str) -> list[str]:
    root = SITE / lang
    skip = {"_static", "_downloads", "_images", "_sources"}
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.html")
        if not skip.intersection(path.relative_to(root).parts)
    )


def cold_visit_bytes(browser, url: str) -> tuple[int, int]:
    """Bytes and requests of a first visit of ``url``, until the network is idle."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        sizes: list[int] = []
        page.on("requestfinished", lambda req: sizes.append(req.sizes()["responseBodySize"]))
        page.goto(url, wait_until="load")
        page.wait_for_load_state("networkidle")
        return sum(sizes), len(sizes)
    finally:
        context.close()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_first_visit_costs_a_median_of_at_most_1_2_mb(browser, site_url, lang):
    pages = every_page(lang)
    assert len(pages) >= 30, f"only {len(pages)} pages in {lang}"
    cost = {rel: cold_visit_bytes(browser, f"{site_url}/{lang}/{rel}") for rel in pages}
    everything = statistics.median(size for size, _ in cost.values()) / 1e6
    read = statistics.median(
        size for rel, (size, _) in cost.items() if not rel.startswith("_modules/")
    ) / 1e6
    requests = statistics.median(count for _, count in cost.values())
    heaviest = sorted(cost.items(), key=lambda item: -item[1][0])[:3]
    print(
        f"{lang}: {len(pages)} pages, median first visit {everything:.2f} MB "
        f"({read:.2f} MB without the source listings), {requests:.0f} requests; heaviest: "
        + ", ".join(f"{rel} {size / 1e6:.2f} MB" for rel, (size, _) in heaviest)
    )
    assert everything <= BUDGET_MB, f"{lang}: median first visit {everything:.2f} MB"
    assert read <= BUDGET_MB, f"{lang}: median first visit of a page to read {read:.2f} MB"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_phone_drawer_lists_the_examples(browser, site_url, lang):
    examples = sorted(path.stem for path in (SITE / lang / "auto_examples").glob("plot_*.html"))
    here = examples[4]
    phone = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True)
    try:
        page = phone.new_page()
        page.goto(f"{site_url}/{lang}/auto_examples/{here}.html")
        links = page.locator(".mha-examples-nav a")
        assert links.first.is_hidden(), "the drawer's list shows before the drawer is opened"
        page.locator("button.primary-toggle").first.click()
        visible = page.locator(".mha-examples-nav a:visible")
        visible.first.wait_for(state="visible")
        hrefs = [link.get_attribute("href").removesuffix(".html") for link in visible.all()]
        assert hrefs == examples, hrefs
        current = page.locator('.mha-examples-nav a:visible[aria-current="page"]')
        assert current.count() == 1 and current.get_attribute("href") == f"{here}.html"
        visible.nth(0).click()
        page.wait_for_load_state("load")
        assert page.url.endswith(f"/{lang}/auto_examples/{examples[0]}.html"), page.url
    finally:
        phone.close()
    wide = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = wide.new_page()
        page.goto(f"{site_url}/{lang}/auto_examples/{here}.html")
        assert page.locator(".mha-examples-nav a").first.is_hidden(), "the list shows when wide"
        article = page.locator("article.bd-article").bounding_box()
        assert article["width"] > 700, f"the article is {article['width']:.0f} px wide at 1280 px"
    finally:
        wide.close()
