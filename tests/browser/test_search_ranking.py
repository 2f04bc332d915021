"""The site's search puts the page that teaches a topic first (``docs/_ext/search_scorer.js``).

Each query is typed into the search box of its language's search page and submitted, as a reader
does; the first result must be the page that teaches the topic, and the pages that mention every
topic (the references, the home page, the glossary) must not be among the first three. The
queries are a reader's words, not always the page's: 潜在注意力 (the page says 多头潜在注意力),
旋转位置嵌入 (the site says 旋转位置编码 and RoPE), MLA. With Sphinx's own ranking the reviews
found example 22 twelfth for 潜在注意力 and the references first for 归纳头 and 前一词元头.

注意力汇聚 is d2l-zh's word for attention pooling, the attention-weighted average of the values,
not an attention sink (注意力汇点): it, and English "attention pooling", lead to the section on
scaled dot-product attention of the concepts page, which computes that average. The glossary
may come among the first three for it: its entry on 注意力汇点 is where the site says that
d2l-zh's 注意力汇聚 means attention pooling, the one place that answers a reader who confuses them.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

EX = "auto_examples/"
#: (query, the first result: a page, or a page#section)
QUERIES = {
    "en": [
        ("latent attention", EX + "plot_22_latent_attention.html"),
        ("MLA", EX + "plot_22_latent_attention.html"),
        ("rotary position embedding", EX + "plot_21_rope_in_a_real_model.html"),
        ("RoPE", EX + "plot_21_rope_in_a_real_model.html"),
        ("induction head", EX + "plot_10_induction_heads.html"),
        ("previous-token head", EX + "plot_10_induction_heads.html"),
        ("attention sink", EX + "plot_18_grouped_heads_and_sinks.html"),
        ("KV cache", EX + "plot_14_kv_cache.html"),
        ("attention pooling", "concepts.html#concepts-sdpa"),
    ],
    "zh_CN": [
        ("潜在注意力", EX + "plot_22_latent_attention.html"),
        ("MLA", EX + "plot_22_latent_attention.html"),
        ("旋转位置编码", EX + "plot_21_rope_in_a_real_model.html"),
        ("旋转位置嵌入", EX + "plot_21_rope_in_a_real_model.html"),
        ("归纳头", EX + "plot_10_induction_heads.html"),
        ("前一词元头", EX + "plot_10_induction_heads.html"),
        ("注意力汇点", EX + "plot_18_grouped_heads_and_sinks.html"),
        ("注意力汇聚", "concepts.html#concepts-sdpa"),
        ("KV 缓存", EX + "plot_14_kv_cache.html"),
    ],
}
#: the pages that mention every topic
BROAD = {"references.html", "index.html", "glossary.html"}
#: a broad page that answers the query itself (see the module's docstring)
ALLOWED_BROAD = {"注意力汇聚": {"glossary.html"}}


#: after the first search, the search box runs the page's own search where it is, instead of
#: loading the page again with "?q=" (half a second to a second and a half a query, most of it
#: reading the index again), and without the text under each result (each one fetches and reads
#: its whole page, the API page too): the ranking is the same. The results must be gone first,
#: as searchtools.js only appends
_SEARCH_IN_PLACE = """() => {
  DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
  const results = document.getElementById("search-results");
  const form = results.parentElement.querySelector("form.bd-search");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    results.replaceChildren();
    Search.performSearch(form.querySelector("input").value);
  });
}"""


def search(page, query: str, reload: bool) -> list[str]:
    """Type ``query`` into the search page's box and press Enter; the result links, best first,
    as "page.html" or "page.html#section"."""
    box = page.locator("#search-results").locator("xpath=preceding-sibling::form//input")
    box.fill("")
    box.type(query)
    if reload:
        with page.expect_navigation():
            box.press("Enter")
    else:
        box.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('#search-results .search-summary')?.textContent.trim()",
        timeout=20000,
    )
    links = page.eval_on_selector_all(
        "#search-results ul.search li > a", "els => els.map(e => e.getAttribute('href'))"
    )
    # without the "?highlight=" part
    return [link.split("#")[0].split("?")[0] + ("#" + link.split("#")[1] if "#" in link else "")
            for link in links]


@pytest.mark.parametrize("lang", sorted(QUERIES))
def test_the_teaching_page_comes_first(watched, site_url, lang):
    watch = watched()
    page = watch.page
    page.goto(f"{site_url}/{lang}/search.html")
    wrong = []
    for k, (query, expected) in enumerate(QUERIES[lang]):
        found = search(page, query, reload=k == 0)
        if k == 0:
            page.evaluate(_SEARCH_IN_PLACE)
        first = found[0] if found else ""
        # a page is expected: any of its sections will do
        if (first if "#" in expected else first.split("#")[0]) != expected:
            wrong.append(f"{query!r}: first {first}, expected {expected}; top 3 {found[:3]}")
        broad = [f for f in found[:3] if f.split("#")[0] in BROAD - ALLOWED_BROAD.get(query, set())]
        if broad:
            wrong.append(f"{query!r}: {broad} among the top 3 {found[:3]}")
    assert not wrong, f"{lang} search:\n" + "\n".join(wrong)
    assert not watch.errors, "\n".join(watch.errors)
