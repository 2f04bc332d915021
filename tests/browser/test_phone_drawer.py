"""The examples in the phone drawer (what a first visit costs is measured in test_every_page.py)."""

from __future__ import annotations

import pytest
from conftest import SITE

LANGUAGES = ("en", "zh_CN")


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
