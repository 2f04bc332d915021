"""Each page loads what it uses, and the phone drawer lists the examples.

A first visit to a page costs what its ``<head>`` loads. Sphinx and the theme give every page the
same scripts, whether it uses them or not; this extension keeps, page by page, only those it uses
(the HTML build only: the EPUB loads no script at all, ``mha_ref_epub.py``):

- **Search** (``searchtools.js``, ``language_data.js``, the whole ``searchindex.js``: 0.2 MB in
  English, more in Chinese) only on the search page. pydata-sphinx-theme loads them on every page
  for its search-as-you-type, which this site leaves off (``search_as_you_type``: its search field
  sends the reader to the search page); the template drops them (``docs/_templates/layout.html``),
  and ``zh-search-fix.js``, which patches the search page's script, goes with them.
- **The interactive views' script and style** (``attention-view.js``/``.css``) only on pages that
  hold a view (an element ``data-mha-attn``).
- **fit-math.js** (it fits formulas to a phone's width) only on pages that load MathJax; Sphinx
  already adds MathJax only to pages with a formula.
- **sphinx-design's tab script** (``design-tabs.js``, 7.5 KB) only on pages with a tab set, and
  **sphinx-gallery's tag filter** (``sg-tags.js``, 4.7 KB) only where its tag list is.
- **Images load lazily** (``loading="lazy"``): a figure is fetched when the reader scrolls near
  it, so a long example page costs its first screens on arrival, not its twenty figures.

The budget (a median page of at most 1.2 MB on a cold visit, over every page of both languages) is
measured by ``tests/browser/test_weight.py``.

**The examples in the phone drawer.** On a phone the theme's drawer (the menu button at the top
left) shows the navbar's links; ``examples-nav.html`` adds the list of every example, in order,
with the current one marked. On a wide screen the list is not shown (``mha-ref.css``): the
navbar, the gallery's index and the previous/next links lead from example to example there, and
the wide figures and shape-commented code lines keep the width.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx

#: a page holds an interactive view when its body has this attribute (tutorial/interactive.py)
VIEW_MARKER = "data-mha-attn"
VIEW_FILES = ("attention-view.js", "attention-view.css")
SEARCH_ONLY = ("zh-search-fix.js",)
MATH_ONLY = ("fit-math.js",)
#: sphinx-design's tab script, only where a tab set is (dropdowns need no script), and
#: sphinx-gallery's tag filter, only where its tag list is (the galleries' index)
TABS_FILES, TABS_MARKER = ("design-tabs.js",), "sd-tab-set"
TAGS_FILES, TAGS_MARKER = ("sg-tags.js",), "sphx-glr-tag"
#: an <img> tag without a loading attribute; the attribute goes last, after src and srcset
_IMG_WITHOUT_LOADING = re.compile(r"<img\b(?![^>]*\bloading=)([^>]*?)(\s*/?)>")


def _name(asset) -> str:
    """The file name of a script or style sheet entry of the page's context."""
    return str(getattr(asset, "filename", asset) or "").split("?")[0].rsplit("/", 1)[-1]


def _keeps(
    asset, *, search: bool, view: bool, math: bool, tabs: bool = True, tags: bool = True
) -> bool:
    """Whether the page keeps ``asset``."""
    name = _name(asset)
    if name in TABS_FILES:
        return tabs
    if name in TAGS_FILES:
        return tags
    if name in SEARCH_ONLY:
        return search
    if name in VIEW_FILES:
        return view
    if name in MATH_ONLY:
        return math
    return True


def _only_what_the_page_uses(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree
) -> None:
    """Drop the scripts and styles the page does not use, and let its images load lazily."""
    if app.builder.name != "html":
        return
    body = context.get("body", "")
    scripts = context.get("script_files", [])
    math = any("mathjax" in str(getattr(script, "filename", script)) for script in scripts)
    flags = {"search": pagename == "search", "view": VIEW_MARKER in body, "math": math,
             "tabs": TABS_MARKER in body, "tags": TAGS_MARKER in body}
    context["script_files"] = [script for script in scripts if _keeps(script, **flags)]
    context["css_files"] = [css for css in context.get("css_files", []) if _keeps(css, **flags)]
    if body:
        context["body"] = _IMG_WITHOUT_LOADING.sub(r'<img\1 loading="lazy"\2>', body)


def _examples_for_the_drawer(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree
) -> None:
    """``mha_examples``: each example page's document name and title, in the gallery's order."""
    env = app.env
    examples = sorted(
        docname for docname in env.found_docs if docname.startswith("auto_examples/plot_")
    )
    context["mha_examples"] = [
        (docname, env.titles[docname].astext()) for docname in examples if docname in env.titles
    ]


def setup(app: Sphinx) -> dict:
    # after Sphinx's MathJax (500), sphinx-gallery's and the theme's own handlers; before the
    # EPUB's (999), which drops every script from the book
    app.connect("html-page-context", _only_what_the_page_uses, priority=950)
    app.connect("html-page-context", _examples_for_the_drawer)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
