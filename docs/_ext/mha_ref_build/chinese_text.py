"""Chinese text as Chinese readers expect it. A line break in the source becomes a space in HTML;
between two Chinese characters, or beside Chinese punctuation, that space does not belong: a
post-transform (:func:`join_chinese_text_transform`, after cross-references are resolved) removes it
from the doctree of every Chinese page, outside code. Field labels end with a full-width colon
(``html-page-context``). The search index keeps one-character words
(:func:`chinese_search_language`, ``add_search_language``): "键", "值" or "头" found nothing. The
patterns are also used without Sphinx (the notebooks' Markdown, the pages' descriptions): Sphinx is
imported only by the two functions that make its classes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphinx.application import Sphinx


# -- doctree-read: no stray spaces inside Chinese sentences -------------------------------------
# A line break in the source becomes a space in HTML. Between two Chinese characters (or Chinese
# punctuation) that space does not belong: join such lines. Text next to Latin letters keeps it.
# Han characters, CJK and full-width punctuation, and the dash, ellipsis and quotes Chinese text
# uses (——, ……, “ ”): a line break between two of them is not a space
_CJK = r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u2014\u2026\u201c\u201d]"
_CJK_LINE_BREAK = re.compile(rf"(?<={_CJK})[ \t]*\n[ \t]*(?={_CJK})")
# full-width punctuation (。，；：（） …) carries its own spacing: no space beside it, ever
_FULL_WIDTH = r"[\u3000-\u303f\uff00-\uffef]"
_SPACE_BY_FULL_WIDTH = re.compile(rf"(?<={_FULL_WIDTH})\s+|\s+(?={_FULL_WIDTH})")


def _join_cjk_lines(doctree) -> None:
    """Remove the spaces a browser would show between Chinese characters and beside Chinese
    punctuation: at source line breaks, and around inline markup (a link, ``code``), which reST
    and Markdown need spaces around."""
    from docutils import nodes

    cjk_char, full_width = re.compile(_CJK), re.compile(_FULL_WIDTH)
    # sphinx-gallery shows an example's code as its own node, code_links_block (highlighted
    # tokens with links to the API), not as a literal_block; the built-site test
    # test_the_code_shown_is_the_code_that_ran fails if code is ever touched here again
    from sphinx_gallery._doctree_links import code_links_block

    verbatim = (
        nodes.literal_block,
        code_links_block,
        nodes.literal,
        nodes.raw,
        nodes.comment,
        nodes.math,
    )
    for text in list(doctree.findall(nodes.Text)):
        parent = text.parent
        if parent is None or _inside(text, verbatim):
            continue
        content = text.astext()
        previous_char = _neighbour_text(text, -1)[-1:] or " "
        next_char = _neighbour_text(text, +1)[:1] or " "
        chinese_before, chinese_after = cjk_char.match(previous_char), cjk_char.match(next_char)
        punctuation_beside = full_width.match(previous_char) or full_width.match(next_char)
        if content.strip() == "" and content:
            # a space of its own (MyST makes each soft line break a Text node): drop it between
            # two Chinese characters, or beside Chinese punctuation
            if (chinese_before and chinese_after) or punctuation_beside:
                _replace(text, nodes.Text(""))
            continue
        joined = _SPACE_BY_FULL_WIDTH.sub("", _CJK_LINE_BREAK.sub("", content))
        last, first = joined.rstrip()[-1:] or " ", joined.lstrip()[:1] or " "
        if (chinese_after and cjk_char.match(last)) or full_width.match(next_char):
            joined = joined.rstrip()
        if (chinese_before and cjk_char.match(first)) or full_width.match(previous_char):
            joined = joined.lstrip()
        if joined != content:
            _replace(text, nodes.Text(joined))


def _inside(node, kinds: tuple) -> bool:
    """Whether ``node`` lies anywhere inside a node of one of ``kinds``: code is split into
    ``inline`` nodes by the time post-transforms run, so its text's parent is not the block."""
    ancestor = node.parent
    while ancestor is not None:
        if isinstance(ancestor, kinds):
            return True
        ancestor = ancestor.parent
    return False


def join_chinese_text_transform() -> type:
    """The post-transform that runs :func:`_join_cjk_lines` on zh pages once cross-references
    are resolved (Sphinx's resolver has priority 10), so that the text of a link, such as an
    example's title, is known."""
    from sphinx.transforms.post_transforms import SphinxPostTransform

    class JoinChineseText(SphinxPostTransform):
        default_priority = 900

        def run(self, **kwargs) -> None:
            if (self.config.language or "").startswith("zh"):
                _join_cjk_lines(self.document)

    return JoinChineseText


def _position(node) -> int:
    """Where ``node`` is among its parent's children. By identity: Text nodes are strings, and
    ``list.index()`` (which docutils' ``Element.replace`` uses) finds the first *equal* one,
    often an earlier line break of the same paragraph."""
    return next(i for i, sibling in enumerate(node.parent.children) if sibling is node)


def _replace(text, new_text) -> None:
    """Put ``new_text`` where ``text`` is, in its parent."""
    text.parent[_position(text)] = new_text


def _neighbour_text(node, step: int) -> str:
    """The text of the sibling before (step -1) or after (step +1) ``node``, or ``""``."""
    siblings = node.parent.children
    index = _position(node) + step
    if 0 <= index < len(siblings):
        return siblings[index].astext()
    return ""


# -- html-page-context: full-width colons after Chinese field labels -------------------------------
#: docutils' HTML writer ends every field label with an ASCII colon (``参数:``); Chinese
#: punctuation is full-width (``参数：``)
_FIELD_COLON = '<span class="colon">:</span>'


def _full_width_field_colons(app: Sphinx, pagename, templatename, context: dict, doctree) -> None:
    if (app.config.language or "").startswith("zh") and "body" in context:
        context["body"] = context["body"].replace(_FIELD_COLON, '<span class="colon">：</span>')


# -- Chinese search: one-character words too -------------------------------------------------------
#: Chinese function words left out of the index even though single characters are kept
_ZH_STOPWORDS = frozenset("的了和与及或是在把被也就都而之其这那个着吗呢吧啊")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def chinese_search_language() -> type:
    """Sphinx's Chinese search language, keeping the one-character words it drops.

    Sphinx indexes only words of two or more characters, so queries such as "键" (key), "值"
    (value) or "头" (head), which jieba cuts as words of their own, found nothing. This keeps a
    single Han character unless it is a function word (:data:`_ZH_STOPWORDS`).
    """
    from sphinx.search.zh import SearchChinese

    class SearchChineseWithCharacters(SearchChinese):
        def word_filter(self, stemmed_word: str) -> bool:
            if len(stemmed_word) == 1 and _HAN.fullmatch(stemmed_word):
                return stemmed_word not in _ZH_STOPWORDS
            return super().word_filter(stemmed_word)

    return SearchChineseWithCharacters
