"""Printing: the cheat sheet fits the one page it says it is, and code and output lines wrap at
the page's edge instead of being cut there."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.browser

LANGUAGES = ("en", "zh_CN")


def _pdf_pages(pdf: bytes) -> int:
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_cheat_sheet_prints_on_one_page(browser, site_url, lang):
    page = browser.new_page()
    try:
        page.goto(f"{site_url}/{lang}/cheatsheet.html", wait_until="networkidle")
        page.wait_for_function("!window.MathJax || !MathJax.startup || MathJax.startup.promise")
        page.evaluate("window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
        pdf = page.pdf(prefer_css_page_size=True, print_background=False)
    finally:
        page.close()
    assert _pdf_pages(pdf) == 1, f"{lang}/cheatsheet.html prints on {_pdf_pages(pdf)} pages"


def test_printed_pages_count_pages_as_the_check_expects(browser, site_url):
    """The page counter sees more than one page where there is more (a long example page)."""
    page = browser.new_page()
    try:
        page.goto(f"{site_url}/en/auto_examples/plot_04_masks.html", wait_until="networkidle")
        assert _pdf_pages(page.pdf(prefer_css_page_size=True)) > 1
    finally:
        page.close()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_printed_code_and_output_wrap(browser, site_url, lang):
    page = browser.new_page(viewport={"width": 800, "height": 900})
    try:
        page.goto(f"{site_url}/{lang}/auto_examples/plot_09_implementations_compared.html")
        page.emulate_media(media="print")
        styles = page.evaluate(
            """() => [...document.querySelectorAll('.bd-article pre')].map(
                pre => [getComputedStyle(pre).whiteSpace, pre.scrollWidth - pre.clientWidth])"""
        )
    finally:
        page.close()
    assert styles, "no code or output block"
    assert all(space == "pre-wrap" for space, _ in styles), {s for s, _ in styles}
    assert max(overflow for _, overflow in styles) <= 1, "a printed line is cut at the edge"
