"""How the site is found and shared: OpenGraph tags and ``<meta name="description">``
(``sphinxext-opengraph``), a 404 page per language (``sphinx-notfound-page``), and, when the build
is told the site's address (``MHA_REF_SITE_URL``), absolute addresses and a sitemap
(``config-inited``). An example page's description is its introduction (``source-read``); the head
is tidied after OpenGraph wrote its tags (``html-page-context``).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from mha_ref_build import ROOT
from mha_ref_build.chinese_text import _CJK, _CJK_LINE_BREAK, _FULL_WIDTH
from mha_ref_build.course_path import html_escape
from mha_ref_build.notebooks import RST_ROLE, role_to_code

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.config import Config


#: where the site is published, when the build is told (``MHA_REF_SITE_URL``): absolute OpenGraph
#: addresses and a sitemap then; without it, relative addresses and no sitemap (a sitemap needs
#: absolute ones)
SITE_URL_VARIABLE = "MHA_REF_SITE_URL"
_NOT_FOUND = {
    "en": (
        "Page not found",
        "<h1>Page not found</h1>\n\n<p>There is no page at this address. The "
        '<a href="/en/index.html">start page</a> lists every page of the site, and the search '
        "box above finds a word in all of them.</p>",
    ),
    "zh_CN": (
        "找不到页面",
        "<h1>找不到页面</h1>\n\n<p>这个地址上没有页面。<a href=\"/zh_CN/index.html\">首页</a>"
        "列出了本站的全部页面，上方的搜索框可以在所有页面里查找一个词。</p>",
    ),
}


#: the keys of ``[project.urls]`` in ``pyproject.toml`` that the site and the book link
PROJECT_URL_KEYS = ("Repository", "Issues", "License")


def project_links() -> dict[str, str]:
    """Where the project lives, from one place, ``[project.urls]`` in ``pyproject.toml``: its
    ``Repository``, its ``Issues`` tracker and its ``License`` file (lower-case keys), and the
    licence's name (``project.license``, ``MIT``) as ``license_name``.

    Raises:
        ValueError: a key of :data:`PROJECT_URL_KEYS` is missing or not an ``https://`` address.
    """
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    urls = project.get("urls", {})
    bad = [k for k in PROJECT_URL_KEYS if not str(urls.get(k, "")).startswith("https://")]
    if bad:
        raise ValueError(
            f"pyproject.toml [project.urls]: {', '.join(bad)} missing or not an https:// address; "
            f"the site's footer and the EPUB link {', '.join(PROJECT_URL_KEYS)}"
        )
    return {**{k.lower(): urls[k] for k in PROJECT_URL_KEYS}, "license_name": project["license"]}


def site_address(lang: str) -> str:
    """The address a reader of the book is sent to: the site's language folder when the build
    is told where the site is published (``MHA_REF_SITE_URL``), else the repository."""
    site_url = os.environ.get(SITE_URL_VARIABLE, "").rstrip("/")
    return f"{site_url}/{lang}/" if site_url else project_links()["repository"]


def _configure_discovery(app: Sphinx, config: Config) -> None:
    lang = config.language or "en"
    # the footer's links to the repository, the issue tracker and the licence
    # (docs/_templates/build-provenance.html)
    config.html_context = {**config.html_context, "project_links": project_links()}
    site_url = os.environ.get(SITE_URL_VARIABLE, "").rstrip("/")
    config.ogp_site_name = config.project
    config.ogp_type = "website"
    config.ogp_enable_meta_description = True  # <meta name="description">, from the page's text
    config.ogp_social_cards = {"enable": False}  # no generated images
    config.ogp_site_url = f"{site_url}/{lang}/" if site_url else ""
    title, body = _NOT_FOUND[lang]
    config.notfound_context = {"title": title, "body": body}
    config.notfound_urls_prefix = f"/{lang}/"
    if site_url:
        app.setup_extension("sphinx_sitemap")
        config.html_baseurl = f"{site_url}/{lang}/"
        config.sitemap_url_scheme = "{link}"


_FIRST_PARAGRAPH = re.compile(r"^=+\n\n(?P<text>(?:.+\n)+)", re.MULTILINE)


def page_description(rst: str, lang: str) -> str | None:
    """The first paragraph under an example page's title, as plain text on one line."""
    match = _FIRST_PARAGRAPH.search(rst)
    if match is None:
        return None
    text = match.group("text")
    text = RST_ROLE.sub(lambda m: role_to_code(m).strip("`"), text)
    text = text.replace("``", "").replace("\\ ", "").replace("**", "").replace("*", "")
    if lang == "zh_CN":
        text = _CJK_LINE_BREAK.sub("", text)
    return " ".join(text.split())


def _describe_example(app: Sphinx, docname: str, source: list[str]) -> None:
    """An example page's description (meta description and og:description) is its
    introduction, not the notes the build puts under its title."""
    if not docname.startswith("auto_examples/plot_"):
        return
    text = page_description(source[0], app.config.language or "en")
    if text:
        source[0] = f".. meta::\n   :description: {text}\n\n" + source[0]
        source[0] = f":og:description: {text}\n\n" + source[0]


_OG_URL = re.compile(r'<meta property="og:url" content="[^"]*" />\n?')
_DESCRIPTION = re.compile(
    r'(<meta (?:name="description"|property="og:description") content=")([^"]*)(")'
)
_CONTENT_DESCRIPTION = re.compile(r'(<meta content=")([^"]*)(" name="description" />)')
_TRANSLATED_ATTRIBUTE = re.compile(r'(?<=<meta )([^>]*?) translated="(?:True|False)"')


def _tidy_head(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """After OpenGraph's tags: no og:url without the site's address (a relative one would be
    read against the page's own address), and Chinese descriptions without the spaces the
    text extraction puts between Chinese words (as the page itself shows them)."""
    tags = context.get("metatags", "")
    if pagename == "404" and 'name="description"' not in tags:  # no doctree: no OpenGraph tags
        title, body = _NOT_FOUND[app.config.language or "en"]
        text = re.sub(r"<[^>]+>", "", body.split("</h1>")[1]).strip()
        text = html_escape(f"{title}: {text}")
        tags += f'<meta name="description" content="{text}" />\n'
    if not os.environ.get(SITE_URL_VARIABLE):
        tags = _OG_URL.sub("", tags)
    # Sphinx's translation step marks a meta node it looked up in a catalog (every Chinese page
    # has one: gettext_compact in conf.py) with ``translated``, which docutils writes out as an
    # attribute that HTML does not have
    tags = _TRANSLATED_ATTRIBUTE.sub(r"\1", tags)
    if (app.config.language or "en") == "zh_CN":
        spaces = re.compile(rf"(?<={_CJK})\s+(?={_CJK})|(?<={_FULL_WIDTH})\s+|\s+(?={_FULL_WIDTH})")

        def join(match: re.Match) -> str:
            return match.group(1) + spaces.sub("", match.group(2)) + match.group(3)

        tags = _CONTENT_DESCRIPTION.sub(join, _DESCRIPTION.sub(join, tags))
    context["metatags"] = tags
