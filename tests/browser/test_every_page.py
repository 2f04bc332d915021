"""Every page of each language, visited once, with every check that reads a whole page.

One cold visit per page serves all of them (each used to load every page again on its own, six
times in all):

- **what a first visit costs**: a fresh browser context (nothing cached), the bytes of every
  response until the network is idle, as a reader arriving from a search engine; figures below
  the fold load as the reader scrolls (``loading="lazy"``) and are not counted. The budget is a
  median page of at most 1.2 MB over every page of the language, and over the pages a reader reads
  (the package's source listings, ``_modules/``, aside);
- **loads cleanly**: no console error, no request off the local host, every image loads (the lazy
  ones are made eager and awaited after the bytes are counted);
- **formulas**: on a page with math, MathJax renders every formula (a TeX error would show red
  text on the page instead of failing the build);
- **accessibility**: axe-core (WCAG 2.0/2.1, A and AA) on the light scheme, every rule on every
  element but colour contrast, which runs on one visible element per text style
  (``test_accessibility.py`` says why that keeps axe's verdict); then the page turns to the dark
  scheme (the system's scheme changes; the theme follows it), where only colours change, and
  the sampled contrast audit runs again;
- **tables on a phone**: at 390 px no table reaches past the screen or hides columns in a box
  that scrolls sideways;
- **the language switcher**: its link goes to the same page in the other language (the way back
  is the other language's link, which that language's test reads).

One load of the page serves every check; the first visit's bytes are counted until no request
has been in flight for 200 ms.

Each language is one test, so the two run side by side (``nox -s browser`` runs one worker per
core). The test prints each language's median and heaviest pages.
"""

from __future__ import annotations

import statistics
from time import perf_counter

import pytest
from conftest import SITE
from test_accessibility import _violations_sampling_contrast, every_page
from test_site import LANGUAGES, TABLE_FIT, other, site_pages

pytestmark = pytest.mark.browser

BUDGET_MB = 1.2
#: no request in flight for this long ends a first visit's byte count (milliseconds)
QUIET_MS = 200
STEP_MS = 25

#: makes the lazy figures eager and waits for them: the sources of those that did not load
BROKEN_IMAGES = """() => Promise.all(Array.from(document.images).map(img => {
    img.loading = "eager";
    return img.complete ? null : new Promise(done => {
        img.addEventListener("load", done); img.addEventListener("error", done);
    });
})).then(() => Array.from(document.images)
    .filter(img => img.naturalWidth === 0 && img.src).map(img => img.src))"""

#: no CSS transition is running (the theme's colours move to the scheme's over a transition,
#: seven of them still running 50 ms after a load: a colour sampled mid-way failed the contrast
#: audit on three pages of 168 although the page's colours pass)
SETTLED = (
    "() => document.getAnimations()"
    ".every(a => !(a instanceof CSSTransition) || a.playState !== 'running')"
)

#: TeX that MathJax could not render (shown as red text in the page)
MATH_ERRORS = (
    "() => MathJax.startup.document.getMathItemsWithin(document.body)"
    ".filter(m => m.root && m.root.toString().includes('merror')).map(m => m.math)"
)


def all_pages(lang: str) -> list[str]:
    """Every HTML page of the language that a reader can open, source listings included."""
    root = SITE / lang
    skip = {"_static", "_downloads", "_images", "_sources"}
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*.html")
        if not skip.intersection(path.relative_to(root).parts)
    )


#: runs before a page's own scripts: no theme or state stored by the page visited before
CLEAR_STORAGE = "try { localStorage.clear(); sessionStorage.clear(); } catch (e) {}"


class Visit:
    """One browser page that visits page after page, each as a first visit: the HTTP cache is
    off (every file is fetched and counted, as in a fresh context; the same bytes, measured)
    and the page's storage is cleared before its scripts run. A fresh context per page cost
    0.3 s more a page, a sixth of the test."""

    def __init__(self, browser, site_url: str):
        self.site_url = site_url
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.add_init_script(CLEAR_STORAGE)
        self.page = self.context.new_page()
        devtools = self.context.new_cdp_session(self.page)
        devtools.send("Network.enable")
        devtools.send("Network.setCacheDisabled", {"cacheDisabled": True})
        self.start()
        self.page.on("request", self._request)
        self.page.on("requestfinished", self._finished)
        self.page.on("requestfailed", lambda r: self.in_flight.discard(r))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def start(self) -> None:
        """Before the next page: the light scheme, a desktop window, nothing counted yet."""
        self.page.emulate_media(color_scheme="light")
        self.page.set_viewport_size({"width": 1280, "height": 900})
        self.sizes: list[int] = []
        self.errors: list[str] = []
        self.external: list[str] = []
        self.in_flight: set = set()

    def _request(self, request) -> None:
        self.in_flight.add(request)
        url = request.url
        if not (url.startswith(self.site_url) or url.startswith(("data:", "blob:", "about:"))):
            self.external.append(url)

    def _finished(self, request) -> None:
        self.in_flight.discard(request)
        self.sizes.append(request.sizes()["responseBodySize"])

    def wait_until_quiet(self, quiet_ms: int = QUIET_MS, timeout_ms: int = 30_000) -> None:
        """Until no request has been in flight for ``quiet_ms`` (Playwright's "networkidle"
        waits a fixed 500 ms; the local server answers in a few)."""
        quiet = waited = 0
        while quiet < quiet_ms:
            assert waited < timeout_ms, f"requests still in flight: {self.in_flight}"
            self.page.wait_for_timeout(STEP_MS)
            waited += STEP_MS
            quiet = 0 if self.in_flight else quiet + STEP_MS

    def close(self) -> None:
        self.context.close()


def _check_page(visit: Visit, axe, lang: str, rel: str, checks: set[str]):
    """Visit ``lang/rel`` cold and run ``checks`` on it: its bytes and requests, and problems.

    One load serves every check: the dark scheme's audit after the system's scheme changes, the
    phone's tables after resizing the same page.
    """
    site_url = visit.site_url
    url = f"{site_url}/{lang}/{rel}"
    problems: list[str] = []
    visit.start()
    page = visit.page
    page.goto(url, wait_until="load")
    if "math" in checks:  # MathJax's fonts and extensions load as it typesets
        page.wait_for_function("() => window.MathJax && MathJax.startup?.promise")
        page.evaluate("() => MathJax.startup.promise")
    visit.wait_until_quiet()
    cost = (sum(visit.sizes), len(visit.sizes))
    if "clean" in checks:
        broken = page.evaluate(BROKEN_IMAGES)
        if broken:
            problems.append(f"{lang}/{rel}: images that did not load: {broken}")
    if "math" in checks:
        problems += [f"{lang}/{rel}: MathJax could not render {tex}" for tex in
                     page.evaluate(MATH_ERRORS)]
    problems += [f"{lang}/{rel}: console: {e}" for e in visit.errors]
    problems += [f"{lang}/{rel}: request off the local host: {u}" for u in visit.external]
    if "axe" in checks:
        if rel == "search.html":
            page.goto(f"{url}?q=attention", wait_until="load")
            page.wait_for_function("document.querySelector('#search-results')?.innerText")
        page.wait_for_timeout(50)
        page.wait_for_function(SETTLED)
        problems += _violations_sampling_contrast(axe, page, f"{lang}/{rel} (light)", "light")
        # the theme follows the scheme as it changes (a reader's system going dark), the
        # same code that sets it on a load: no reload, which doubled each page's time
        page.emulate_media(color_scheme="dark")
        page.wait_for_function("document.documentElement.dataset.theme === 'dark'")
        page.wait_for_timeout(50)
        page.wait_for_function(SETTLED)
        assert page.evaluate("document.documentElement.dataset.theme") == "dark", (
            f"{lang}/{rel}: the dark scheme did not take effect"
        )
        problems += _violations_sampling_contrast(axe, page, f"{lang}/{rel} (dark)", "dark")
        # axe re-reads the style sheets and resolves the theme's `@import "../basic.css"`
        # against the page instead of the sheet: a 404 of the audit's own, not of the site
        visit.errors.clear()
    if "tables" in checks:  # the layout at 390 px depends on the width alone
        page.set_viewport_size({"width": 390, "height": 800})
        tables = page.evaluate(TABLE_FIT)
        stacked = page.locator("article table.mha-stack").count()
        problems += [
            f"{lang}/{rel}: table {i} cut off on a phone: {t}"
            for i, t in enumerate(tables)
            if t["past_edge"] > 1 or t["hidden"] > 1
        ]
        page.set_viewport_size({"width": 1280, "height": 900})
    else:
        tables, stacked = [], 0
    if "switcher" in checks:
        problems += _switch(page, site_url, lang, rel)
    problems += [f"{lang}/{rel}: console: {e}" for e in visit.errors]
    return cost, problems, len(tables), stacked


def _switch(page, site_url: str, lang: str, rel: str) -> list[str]:
    """The switcher's link goes to the same page in the other language.

    The link as the browser resolves it, not a click: a click loaded the other page in full,
    a tenth of the test's time, to read its address; that the other page loads cleanly is its
    own language's visit, and what the switcher's script adds on a click (the section in view)
    is ``test_site.py``'s ``test_switcher_keeps_the_section_in_view``. The way back is the other
    language's own switcher, which that language's test reads.
    """
    there = other(lang).replace("_", "-")
    switch = page.locator(f".mha-lang-switcher:visible a[hreflang='{there}']")
    if switch.count() == 0:
        return [f"{lang}/{rel}: no visible link to the other language"]
    target = switch.first.evaluate("a => a.href").split("#")[0]
    expected = f"{site_url}/{other(lang)}/{rel}"
    if target != expected:
        return [f"{lang}/{rel}: the switcher goes to {target}, not {expected}"]
    if not (SITE / other(lang) / rel).is_file():
        return [f"{lang}/{rel}: the switcher's page {other(lang)}/{rel} was not built"]
    return []


def checks_for(lang: str) -> dict[str, set[str]]:
    """Which checks each page gets: the sets of pages the checks were written for."""
    readable = set(site_pages(lang))  # not the search page, the indexes or source listings
    audited = set(every_page(lang))  # the search page and the indexes too
    root = SITE / lang
    with_math = {
        rel for rel in readable if 'class="math' in (root / rel).read_text(encoding="utf-8")
    }
    plan = {}
    for rel in all_pages(lang):
        checks = {"clean"}
        if rel in readable:
            checks |= {"tables", "switcher"}
        if rel in with_math:
            checks.add("math")
        if rel in audited:
            checks.add("axe")
        plan[rel] = checks
    return plan


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_page_once_cold(browser, site_url, axe, lang):
    plan = checks_for(lang)
    counts = {check: sum(check in c for c in plan.values()) for check in
              ("clean", "tables", "switcher", "math", "axe")}
    # the test saw the site: pages of each kind (a selection gone empty would pass vacuously)
    assert len(plan) >= 30 and counts["switcher"] >= 5 and counts["math"] >= 5, counts
    assert counts["axe"] >= 10, counts
    cost, problems, tables_seen, stacked, seconds = {}, [], 0, 0, {}
    visit = Visit(browser, site_url)
    try:
        for rel, checks in plan.items():
            start = perf_counter()
            cost[rel], found, tables, stacks = _check_page(visit, axe, lang, rel, checks)
            seconds[rel] = perf_counter() - start
            problems += found
            tables_seen += tables
            stacked += stacks
    finally:
        visit.close()
    assert tables_seen >= 10 and stacked >= 5, (tables_seen, stacked)  # it saw real tables
    everything = statistics.median(size for size, _ in cost.values()) / 1e6
    read = statistics.median(
        size for rel, (size, _) in cost.items() if not rel.startswith("_modules/")
    ) / 1e6
    requests = statistics.median(count for _, count in cost.values())
    heaviest = sorted(cost.items(), key=lambda item: -item[1][0])[:3]
    print(
        f"{lang}: {len(cost)} pages, median first visit {everything:.2f} MB "
        f"({read:.2f} MB without the source listings), {requests:.0f} requests; heaviest: "
        + ", ".join(f"{rel} {size / 1e6:.2f} MB" for rel, (size, _) in heaviest)
    )
    slowest = sorted(seconds.items(), key=lambda item: -item[1])[:5]
    print(
        f"{lang}: checked in {sum(seconds.values()):.0f} s; slowest: "
        + ", ".join(f"{rel} {s:.1f} s" for rel, s in slowest)
        + "; by kind: "
        + ", ".join(
            f"{kind} {sum(s for rel, s in seconds.items() if rel.startswith(kind)):.0f} s"
            for kind in ("auto_examples/", "_modules/", "api")
        )
    )
    assert not problems, "\n".join(problems)
    assert everything <= BUDGET_MB, f"{lang}: median first visit {everything:.2f} MB"
    assert read <= BUDGET_MB, f"{lang}: median first visit of a page to read {read:.2f} MB"
