"""The site as an EPUB per language, for reading offline (set up by ``mha_ref_course``).

``docs/_ext/build_languages.py`` builds each language's EPUB right after its HTML, with Sphinx's
own ``epub`` builder on the same doctrees: nothing is read or executed again, only written. The
file is shipped with that language's site as ``mha-ref-<lang>.epub`` (:data:`EPUB_NAME`) and the
``mha-epub`` role links to it. The books are written only when asked (``nox -s docs -- --epub``)
or in CI; a build without them sets ``mha_epub = False`` and the role then links nothing.

What an EPUB cannot do, and what it gets instead:

- **No JavaScript.** Most readers run none, and a content file with scripts must be declared
  "scripted" in the package. The EPUB's pages load no script; the interactive attention views
  (raw HTML that a script fills) are left out, since the static figure each one belongs to is
  just above it on the page.
- **Math is its TeX source** (``\\(...\\)`` and ``\\[...\\]``), as MathJax writes it before it
  typesets: MathJax does not run in most readers, and images of formulas would need a TeX
  installation at build time (``sphinx.ext.imgmath``). The source uses the code's names and is
  short; ``mha-epub.css`` sets it apart in a monospace font.
- **No downloads.** The scripts, notebooks, zips and the wheel stay on the site. The book's first
  page names the site (its address when the build is told it, ``MHA_REF_SITE_URL``; otherwise
  the repository) and links the repository, the issue tracker and the licence; a download link
  points there (the file itself when the site's address is known); an example's "go to the end
  to download" note is left out and its download buttons become one sentence that says where
  the script and the notebook are. The index's "Reading offline" section, which offers this
  book, is left out of it.
- **No font.** The pages declare their language (``zh-CN`` for Chinese) and the reader's device
  draws the text with its own fonts, as for any EPUB; none is embedded.

Left out of the package: the search page (the builder writes none) and the 404 page; the general
index stays.
"""

from __future__ import annotations

import hashlib
import html
import posixpath
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util.docutils import SphinxRole

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "docs" / "_static"
#: the file name of a language's EPUB, in that language's site folder
EPUB_NAME = "mha-ref-{lang}.epub"
#: a raw HTML block holding this is an interactive attention view (mha_ref.tutorial.interactive)
VIEW_MARKER = "data-mha-attn"

#: static files that no page of the book uses: the site's print style sheet (the reader lays out
#: the pages), sphinx-gallery's Binder and JupyterLite badges (neither is configured; the
#: JupyterLite one declares external entities, which epubcheck rejects in EPUB 3)
PRINT_CSS = "mha-print.css"
UNUSED_STATIC = [
    f"_static/{name}" for name in (PRINT_CSS, "binder_badge_logo.svg", "jupyterlite_badge_logo.svg")
]

TITLES = {
    "en": "mha-ref: multi-head attention, computed in front of you",
    "zh_CN": "mha-ref：多头注意力，一步一步算给你看",
}
AUTHORS = {"en": "mha-ref contributors", "zh_CN": "mha-ref 贡献者"}
DESCRIPTIONS = {
    "en": "Multi-head attention taught from one head to the implementations used in practice, "
    "with every number on the pages produced by the examples' code when the site was built.",
    "zh_CN": "从单个注意力头讲到实际使用的各种实现的多头注意力教程；"
    "页面上的每个数字都由示例代码在构建本站时算出。",
}


def epub_name(lang: str) -> str:
    """The EPUB's file name for the language ``lang`` (``mha-ref-en.epub``)."""
    return EPUB_NAME.format(lang=lang)


def _is_epub(app: Sphinx) -> bool:
    return app.builder is not None and app.builder.name.startswith("epub")


def _configure_epub(app: Sphinx, config: Config) -> None:
    lang = config.language or "en"
    config.epub_basename = epub_name(lang).removesuffix(".epub")
    # dc:language and the pages' xml:lang: a BCP 47 tag, zh-CN, not Sphinx's zh_CN
    config.epub_language = lang.replace("_", "-")
    config.epub_title = TITLES.get(lang, TITLES["en"])
    config.epub_author = config.epub_publisher = AUTHORS.get(lang, AUTHORS["en"])
    config.epub_contributor = config.epub_author
    config.epub_description = DESCRIPTIONS.get(lang, DESCRIPTIONS["en"])
    config.epub_copyright = config.copyright
    # one identifier, in the package document and in the NCX (epubcheck compares them); also
    # the XML id of that identifier, so an XML name: letters, digits, "-", "_" and "."
    config.epub_identifier = config.epub_uid = f"mha-ref-{lang}-{config.release}"
    config.epub_scheme = "mha-ref"
    mathjax = STATIC / "mathjax"
    # the 404 page is served by the web server at any address: it means nothing in a book; the
    # site's MathJax (its scripts and fonts, 1.5 MB) does not run in the book (see above); Sphinx
    # keeps the previous build's record as .buildinfo.bak when the configuration changed; and
    # the static files that no page of the book uses
    config.epub_exclude_files = ["404.xhtml", ".buildinfo.bak", *UNUSED_STATIC] + sorted(
        f"_static/{path.relative_to(STATIC).as_posix()}"
        for path in mathjax.rglob("*")
        if path.is_file()
    )
    config.epub_css_files = [("mha-epub.css", {})]


#: the command that writes the books
EPUB_COMMAND = "nox -s docs -- --epub"
#: what follows the link's text in a build that wrote no book (``mha_epub = False``): the words
#: before and after :data:`EPUB_COMMAND`, shown as code (smart quotes would make its dashes one)
NO_BOOK_NOTE = {
    "en": (" (this build wrote no EPUB: ", " writes it)"),
    "zh_CN": ("（本次构建没有生成 EPUB：运行 ", " 即可生成）"),
}


class EpubRole(SphinxRole):
    """``{mha-epub}`read this site offline```: a link to this language's EPUB on the site.

    Inside the EPUB itself the link would point at the book from within the book: there it is
    its text alone (:func:`_epub_doctree`). In a build that writes no book (``-D mha_epub=0``,
    what ``build_languages.py`` passes without ``--epub``) no book is published, so there is
    nothing to link: the text is followed by a note that says how to write the book
    (:data:`NO_BOOK_NOTE`).
    """

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        lang = self.config.language or "en"
        docs = getattr(self.env, "mha_epub_docs", set())
        docs.add(self.env.docname)
        self.env.mha_epub_docs = docs
        if not self.config.mha_epub:
            before, after = NO_BOOK_NOTE.get(lang, NO_BOOK_NOTE["en"])
            node = nodes.inline(self.rawtext, "", classes=["mha-epub-missing"])
            node += nodes.Text(self.text + before)
            node += nodes.literal(EPUB_COMMAND, EPUB_COMMAND)
            node += nodes.Text(after)
            return [node], []
        uri = posixpath.relpath(epub_name(lang), posixpath.dirname(self.env.docname) or ".")
        node = nodes.reference(self.rawtext, self.text, refuri=uri, classes=["mha-epub"])
        return [node], []


def _link_state_changed(app: Sphinx, env, added, changed, removed) -> list[str]:
    """Read again the pages that link the book when the build starts or stops writing books.

    ``mha_epub`` does not make Sphinx read every page again when it changes (it is one link on
    the index pages): the pages that use the role are read again instead, so that their link is
    there exactly when the book is.
    """
    before = getattr(env, "mha_epub_built", None)
    env.mha_epub_built = app.config.mha_epub
    if before is None or before == app.config.mha_epub:
        return []
    return sorted(getattr(env, "mha_epub_docs", set()) & set(env.found_docs) - set(removed))


def _purge_doc(app: Sphinx, env, docname: str) -> None:
    getattr(env, "mha_epub_docs", set()).discard(docname)


def _merge_info(app: Sphinx, env, docnames, other) -> None:
    """Parallel reading: the pages read in a worker that use the role."""
    mine = getattr(env, "mha_epub_docs", set())
    mine |= getattr(other, "mha_epub_docs", set()) & set(docnames)
    env.mha_epub_docs = mine


def _xhtml(html_text: str) -> str:
    """Raw HTML as EPUB's XHTML wants it. sphinx-design's icons (the folded answers' chevrons,
    decorative, ``aria-hidden``) are inline ``<svg>``, which each page would have to declare in
    the package (epubcheck OPF-014) and which lack the SVG namespace: they are left out.
    sphinx-gallery's thumbnails carry a ``tooltip`` attribute that XHTML does not have
    (``data-tooltip`` it does)."""
    html_text = re.sub(r"<svg\b.*?</svg>", "", html_text, flags=re.S)
    return re.sub(r"(<[^>]*\s)tooltip=", r"\1data-tooltip=", html_text)


#: the book's first page: where the site is, and where the project lives
BOOK_NOTE = {
    "en": ("This book is the offline edition of the mha-ref site: {where}. ",
           "Source repository", "Report an error or suggest a change", "Licence",
           "This book is the offline edition of the mha-ref site, built from the project's "
           "repository, {where}, where the examples' scripts are too. "),
    "zh_CN": ("本书是 mha-ref 网站的离线版：{where}。",
              "源代码仓库", "报告错误或提建议", "许可证",
              "本书是 mha-ref 网站的离线版，由项目仓库 {where} 构建，示例脚本也在那里。"),
}
#: the sentence that replaces an example's download buttons in the book: where the site is known
#: (``MHA_REF_SITE_URL``), its page there; otherwise the script's place in the repository
EXAMPLE_DOWNLOADS = {
    "en": ("This example's script ({script}) and notebook ({notebook}) are not in the book: "
           "download them from its page on the site, ",
           "This example's script and notebook are not in the book: the script is {source} in "
           "the project's repository, "),
    "zh_CN": ("本书不含这个示例的脚本（{script}）和笔记本（{notebook}），请从网站上它的页面下载：",
              "本书不含这个示例的脚本和笔记本：脚本是项目仓库中的 {source}，仓库地址："),
}
#: the same on the examples' index, whose buttons download every example in two zips
GALLERY_DOWNLOADS = {
    "en": ("The scripts and notebooks of all the examples, in two zips, are not in the book: "
           "they are on the site, ",
           "The scripts of all the examples are not in the book: they are in the folder gallery/"
           "{lang} of the project's repository, "),
    "zh_CN": ("本书不含全部示例的脚本和笔记本（两个 zip 文件），它们在网站上：",
              "本书不含全部示例的脚本：它们在项目仓库的 gallery/{lang} 目录中，仓库地址："),
}
#: what the index's section that offers this book is labelled (a page's section ids)
READING_OFFLINE = "home-reading-offline"


def _site(lang: str) -> tuple[str, bool]:
    """The address the book sends a reader to, and whether it is the site (not the repository)."""
    import os

    from mha_ref_build.discovery import SITE_URL_VARIABLE, site_address

    return site_address(lang), bool(os.environ.get(SITE_URL_VARIABLE, "").strip())


def _offsite(lang: str, path: str) -> str:
    """The absolute address of ``path`` (relative to the language's root) on the site, when the
    build is told where the site is; otherwise the repository's."""
    where, is_site = _site(lang)
    return posixpath.join(where, path) if is_site else where


def _link(text: str, uri: str) -> nodes.reference:
    return nodes.reference(text, text, refuri=uri, classes=["mha-offsite"])


def _book_note(lang: str) -> nodes.paragraph:
    from mha_ref_build.discovery import project_links

    links = project_links()
    where, is_site = _site(lang)
    on_site, repository, issues, licence, from_repository = BOOK_NOTE.get(lang, BOOK_NOTE["en"])
    intro = on_site if is_site else from_repository
    before, after = intro.split("{where}")
    para = nodes.paragraph(classes=["mha-book-note"])
    para += [nodes.Text(before), _link(where, where), nodes.Text(after)]
    para += [_link(repository, links["repository"]), nodes.Text(" · "),
             _link(issues, links["issues"]), nodes.Text(" · "),
             nodes.Text(licence + ("：" if lang == "zh_CN" else ": ")),
             _link(links["license_name"], links["license"])]
    return para


def _example_downloads(lang: str, docname: str) -> nodes.paragraph:
    name = docname.rsplit("/", 1)[-1]
    _, is_site = _site(lang)
    which = 0 if is_site else 1
    if name.startswith("plot_"):
        text = EXAMPLE_DOWNLOADS.get(lang, EXAMPLE_DOWNLOADS["en"])[which].format(
            script=f"{name}.py", notebook=f"{name}.ipynb", source=f"gallery/{lang}/{name}.py"
        )
    else:
        text = GALLERY_DOWNLOADS.get(lang, GALLERY_DOWNLOADS["en"])[which].format(lang=lang)
    uri = _offsite(lang, f"{docname}.html")
    para = nodes.paragraph(classes=["mha-book-downloads"])
    para += [nodes.Text(text), _link(uri, uri), nodes.Text("。" if lang == "zh_CN" else ".")]
    return para


def _epub_doctree(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """In the EPUB build only: leave out what needs a script or points at the site's files."""
    if not _is_epub(app):
        return
    lang = app.config.language or "en"
    if docname == app.config.root_doc:
        # the first page names the site and links the project; the section that offers the
        # book is not in it
        for section in list(doctree.findall(nodes.section)):
            if READING_OFFLINE in section["ids"] or READING_OFFLINE in section["names"]:
                section.parent.remove(section)
        title = next(iter(doctree.findall(nodes.title)), None)
        if title is not None:
            title.parent.insert(title.parent.index(title) + 1, _book_note(lang))
    # sphinx-gallery's "go to the end to download" note has nothing to go to in the book
    for note in list(doctree.findall(nodes.Element)):
        if "sphx-glr-download-link-note" in note.get("classes", []):
            note.parent.remove(note)
    # the download buttons: one sentence that says where the script and notebook are
    for footer in list(doctree.findall(nodes.container)):
        if "sphx-glr-footer" in footer.get("classes", []):
            # not replace_self: it would give the sentence the buttons' classes
            footer.parent.replace(footer, _example_downloads(lang, docname))
    for raw in list(doctree.findall(nodes.raw)):
        if "html" not in raw.get("format", "").split():
            continue
        text = raw.astext()
        if VIEW_MARKER in text:
            raw.parent.remove(raw)
        elif (fixed := _xhtml(text)) != text:
            raw.replace_self(nodes.raw(fixed, fixed, format="html"))
    for link in list(doctree.findall(nodes.reference)):
        if "mha-epub" in link.get("classes", []):
            link.replace_self(nodes.inline(link.astext(), link.astext()))
    # downloads (scripts, notebooks, zips, the wheel) are not in the book: their link goes to
    # the file on the site when its address is known, else to the repository
    for download in list(doctree.findall(addnodes.download_reference)):
        target = f"_downloads/{download['filename']}" if download.get("filename") else docname
        download.replace_self(_link(download.astext(), _offsite(lang, target)))
    # the package's wheel, linked by the mha-wheel role (mha_ref_course)
    for link in list(doctree.findall(nodes.reference)):
        if "mha-wheel" in link.get("classes", []):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(docname), link["refuri"]))
            link.replace_self(_link(link.astext(), _offsite(lang, target)))
    # sphinx-gallery writes a figure's alt text into its <img> as it is ("causal & padding"):
    # an HTML parser forgives that, the XML parser of an EPUB reader does not
    from sphinx_gallery.directives import imgsgnode

    for image in doctree.findall(imgsgnode):
        image["alt"] = html.escape(image["alt"] or "", quote=True)


def _epub_page(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """In the EPUB build only: pages load no script (MathJax, the views, the theme's) and
    declare their language."""
    if _is_epub(app):
        context["script_files"] = []
        context["css_files"] = [
            css
            for css in context.get("css_files", [])
            if not str(getattr(css, "filename", css)).endswith(PRINT_CSS)
        ]
        # the builder's own <html> tag names no language: the reader picks the fonts (for
        # Chinese, the device's CJK font) and the hyphenation from it
        tag = app.config.epub_language
        context["html_tag"] = (
            '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
            f'lang="{tag}" xml:lang="{tag}">'
        )


def setup(app: Sphinx) -> dict:
    # whether this build publishes the books (build_languages.py passes -D mha_epub=0 when not);
    # no rebuild of every page when it changes: _link_state_changed reads the pages that link it
    app.add_config_value("mha_epub", True, "", types=frozenset({bool}))
    app.connect("config-inited", _configure_epub, priority=880)
    app.add_role("mha-epub", EpubRole())
    app.connect("env-get-outdated", _link_state_changed)
    app.connect("env-purge-doc", _purge_doc)
    app.connect("env-merge-info", _merge_info)
    app.connect("doctree-resolved", _epub_doctree)
    app.connect("html-page-context", _epub_page, priority=999)
    return {
        "parallel_read_safe": True,
        "parallel_write_safe": True,
        "version": "1",
        # a change to this file changes what the book's pages hold, though no page changed: as
        # for the site's other extensions, every page is then read and written again
        "env_version": int(hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12], 16),
    }
