"""The Chinese API page in Chinese: the docstrings' prose is translated in
``docs/_locale/zh_CN/LC_MESSAGES/api.po`` (Sphinx's gettext catalogs), and the catalog keeps up.

- the catalog is complete: no empty and no fuzzy ``msgstr``;
- it covers the current docstrings: every paragraph the gettext builder extracts for the page
  (``docs/_ext/api_catalog.py`` says which need translation) has its translation, so a docstring
  changed without ``nox -s translations`` fails here;
- a translation keeps its markup: the same inline literals, formulas, roles and role targets as
  the English, read as Sphinx reads it (a msgstr is MyST Markdown, the page's syntax), so no
  translation breaks a link or a formula;
- the built page reads as Chinese: outside code, signatures and formulas, Chinese characters
  are at least as many as Latin letters; its field labels end with a full-width colon.

The tests of the built page are skipped when ``nox -s docs`` has not run
(``MHA_REF_REQUIRE_BUILT_SITE=1`` turns that into a failure, as in CI).
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import api_catalog  # noqa: E402  (docs/_ext is not a package)
from site_size import API_PAGES  # noqa: E402

HTML = ROOT / "build" / "html"
FIX = (
    f"run `{api_catalog.REFRESH_COMMAND}`, then translate the empty and fuzzy entries of "
    f"{api_catalog.CATALOG.relative_to(ROOT)} (and delete their `#, fuzzy` lines)"
)


def _catalog_messages() -> list:
    return [m for m in api_catalog.read_catalog(api_catalog.CATALOG) if m.id]


def _listing(messages, limit: int = 8) -> str:
    shown = "\n".join(f"  - {m if isinstance(m, str) else m.id}"[:160] for m in messages[:limit])
    more = f"\n  ... and {len(messages) - limit} more" if len(messages) > limit else ""
    return shown + more


# -- which messages need translation, and what markup they carry --------------------------------
MSGID = (
    "Returns ``x`` as :math:`QK^\\top` does, see :func:`the run <train_tiny>` and "
    ":class:`~m.KVCache`; ``x`` again."
)


def test_source_markup_keeps_literals_formulas_and_targets_not_titles():
    assert api_catalog.source_markup(MSGID) == Counter(
        {
            ("code", "x"): 2,
            ("math", "QK^\\top"): 1,
            ("func", "train_tiny"): 1,
            ("class", "~m.KVCache"): 1,
        }
    )


@pytest.mark.parametrize(
    ("msgstr", "problems"),
    [
        # MyST roles, a translated title, $...$ math and single-backtick code are all fine
        ("与 $QK^\\top$ 一样返回 `x`，见 {func}`这次运行 <train_tiny>` 和 {class}`~m.KVCache`；"
         "又是 ``x``。", []),
        ("与 {math}`QK^\\top` 一样返回 ``x``，见 {py:func}`train_tiny` 和 {class}`~m.KVCache`；"
         "又是 ``x``。", []),
        # a reST role in Markdown is text and code: the link and the formula are gone
        ("与 :math:`QK^\\top` 一样返回 ``x``，见 {func}`train_tiny` 和 {class}`~m.KVCache`；"
         "又是 ``x``。", ["a reST role left as text: :math:", "missing {math}`QK^\\top`",
                       "extra ``QK^\\top``"]),
        # a changed target, a lost literal
        ("与 {math}`QK^\\top` 一样返回 ``x``，见 {func}`train` 和 {class}`~m.KVCache`。",
         ["missing ``x``, {func}`train_tiny`", "extra {func}`train`"]),
        # "1." starts a list: Sphinx would leave the message untranslated
        ("1. 与 {math}`QK^\\top` 一样返回 ``x``，见 {func}`train_tiny` 和 {class}`~m.KVCache`；"
         "又是 ``x``。", ["not one paragraph in Markdown (list_item, ordered_list, paragraph)"]),
    ],
)  # fmt: skip
def test_markup_problems(msgstr, problems):
    assert api_catalog.markup_problems(MSGID, msgstr) == problems


def test_to_myst_gives_a_msgstr_with_the_same_markup():
    myst = api_catalog.to_myst(MSGID)
    assert myst == (
        "Returns ``x`` as {math}`QK^\\top` does, see {func}`the run <train_tiny>` and "
        "{class}`~m.KVCache`; ``x`` again."
    )
    assert api_catalog.markup_problems(MSGID, myst) == []


@pytest.mark.parametrize(
    ("msgid", "expected"),
    [
        ("Scaled dot-product attention, one named step per line.", True),
        ("``(H,)`` float64, each in ``(0, 1]``", True),  # "each in" is prose
        ("``plotting`` and ``fonts``", True),
        ("Number of heads ``h``.", True),
        ("函数式接口", False),  # the page's own Chinese
        ("`True` 表示*可以关注*", False),
        ("dict[tuple[int, int], float]", False),  # an :rtype:
        ("list[mha_ref.tutorial.heads.HeadSummary]", False),
        ("int | None", False),
        (":doc:`/auto_examples/plot_03_scaling`", False),  # markup alone
        ("``(H, L)``", False),
        ("``(H,)`` float64", False),  # an identifier is not prose
        ("\\mathrm{MultiHead}(X) = \\sum_h A^h X W_V^h W_O^h + b^O", False),  # a formula
        ("m' = \\max(m, \\max_{j \\in B} s_{ij}),\\quad l' = e^{m - m'} l", False),
        ("Scores are scaled by :math:`1/\\sqrt{d_k}` first.", True),  # prose with math
    ],
)
def test_needs_translation(msgid, expected):
    assert api_catalog.needs_translation(msgid) is expected


# -- the catalog --------------------------------------------------------------------------------
def test_catalog_has_no_empty_or_fuzzy_entries():
    messages = _catalog_messages()
    assert messages, f"{api_catalog.CATALOG} has no messages: {FIX}"
    fuzzy = [m for m in messages if m.fuzzy]
    empty = [m for m in messages if not m.string]
    assert not fuzzy and not empty, (
        f"{len(empty)} empty and {len(fuzzy)} fuzzy of {len(messages)} messages in "
        f"{api_catalog.CATALOG.relative_to(ROOT)}; {FIX}.\n"
        f"empty:\n{_listing(empty)}\nfuzzy:\n{_listing(fuzzy)}"
    )


def test_translations_keep_the_markup():
    """Every msgstr, parsed as Sphinx parses it (MyST), has the inline literals, formulas, roles
    and role targets of its msgid, and is one paragraph."""
    broken = {
        m.id: api_catalog.markup_problems(m.id, m.string)
        for m in _catalog_messages()
        if m.string and api_catalog.markup_problems(m.id, m.string)
    }
    assert not broken, (
        f"{len(broken)} translations lose or break markup: a msgstr is MyST Markdown, with the "
        "msgid's ``literals`` as they are and its roles written {func}`target`, {math}`formula` "
        "(api_catalog.to_myst converts a msgid):\n"
        + "\n".join(f"  - {i[:80]!r}: {'; '.join(p)}" for i, p in list(broken.items())[:20])
    )


def test_catalog_has_no_source_locations():
    """A ``#:`` line moves whenever a line is added above a docstring, so a one-sentence change
    would be a diff of every entry below it; the catalog keeps none (gettext_location=0)."""
    text = api_catalog.CATALOG.read_text(encoding="utf-8")
    located = [line for line in text.splitlines() if line.startswith("#:")]
    assert not located, f"{len(located)} source locations in the catalog, e.g. {located[:3]}"


def test_the_template_keeps_no_location_and_the_catalogs_creation_date(tmp_path):
    """What ``sphinx-intl update`` copies into the catalog: no locations, and the catalog's own
    creation date rather than the extraction's, which changes on every run."""
    from babel.messages.catalog import Catalog

    pot = Catalog(creation_date=api_catalog.read_catalog(api_catalog.CATALOG).creation_date)
    pot.creation_date = pot.creation_date.replace(year=2031)  # a later extraction
    pot.add("Splits the heads of ``x``.", locations=[("mha_ref.masks.causal_mask", 7)])
    pot.add("多头注意力", locations=[("api.md", 3)])  # already Chinese: left out
    pot_file, template = tmp_path / "api.pot", tmp_path / "template" / "api.pot"
    api_catalog.write_catalog(pot_file, pot)
    assert api_catalog.translation_template(pot_file, template) == 1
    written = api_catalog.read_catalog(template)
    assert [m.locations for m in written if m.id] == [[]]
    assert "#:" not in template.read_text(encoding="utf-8")
    kept = api_catalog.read_catalog(api_catalog.CATALOG).creation_date
    assert written.creation_date == kept and kept.year != 2031


@pytest.mark.build
def test_catalog_covers_the_current_docstrings(tmp_path):
    """Extract the page's messages as the docs build sees them (the gettext builder on
    docs/zh_CN, examples not executed: about 15 s) and look each one up in the catalog."""
    pytest.importorskip("sphinx_gallery")
    pot = api_catalog.extract_pot(tmp_path / "gettext")
    extracted = [m.id for m in api_catalog.read_catalog(pot) if m.id]
    assert len(extracted) > 100, f"the gettext builder extracted {len(extracted)} messages"
    needed = [i for i in extracted if api_catalog.needs_translation(i)]
    catalog = {m.id: m for m in _catalog_messages()}
    missing = [i for i in needed if i not in catalog]
    untranslated = [
        i for i in needed if i in catalog and (catalog[i].fuzzy or not catalog[i].string)
    ]
    stale = sorted(set(catalog) - set(needed))
    assert not missing and not untranslated and not stale, (
        f"the catalog does not match the docstrings: {len(missing)} paragraphs of the API page "
        f"are not in it, {len(untranslated)} are empty or fuzzy, {len(stale)} entries are no "
        f"longer on the page; {FIX}.\nmissing:\n{_listing(missing)}\n"
        f"empty or fuzzy:\n{_listing(untranslated)}\nno longer on the page:\n{_listing(stale)}"
    )


# -- the built page -----------------------------------------------------------------------------
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
#: what is not prose: code, signatures, formulas, the parameter names that start field items,
#: and the links to the source
_NOT_PROSE = (
    "pre, code, kbd, script, style, .sig, .math, .headerlink, .viewcode-link, "
    "dl.field-list p > strong:first-child"
)


def prose_letters(html: str) -> tuple[int, int]:
    """(Chinese characters, Latin letters) in the prose of a page's article."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    article = soup.select_one("article") or soup
    for element in article.select(_NOT_PROSE):
        element.decompose()
    text = article.get_text(" ")
    return len(_HAN.findall(text)), len(_LATIN.findall(text))


def mostly_chinese(han: int, latin: int) -> bool:
    """"Mostly Chinese": at least as many Chinese characters as Latin letters, each character
    counted as one. A Chinese sentence has about a third as many characters as its English has
    letters, so this holds once most of the prose is Chinese, with English names (PyTorch,
    softmax) left in it."""
    return han >= latin


def test_prose_measure_ignores_code_and_signatures():
    html = (
        "<article><p>把 <code>query</code> 拆成多头 (heads)</p>"
        '<dl class="field-list"><dd><p><strong>query</strong> – 查询</p></dd></dl>'
        '<dt class="sig">split_heads(x, num_heads)</dt><span class="math">\\(QK^T\\)</span>'
        "<pre>x = torch.zeros(2)</pre></article>"
    )
    assert prose_letters(html) == (7, 5)  # 把拆成多头 and 查询; "heads"
    assert mostly_chinese(*prose_letters(html))
    assert not mostly_chinese(*prose_letters("<article><p>Splits the heads 拆分</p></article>"))


def _built_page(lang: str, name: str) -> str:
    if not all((HTML / lang / "index.html").is_file() for lang in ("en", "zh_CN")):
        message = "build/html is missing: run `nox -s docs` first"
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)
    return (HTML / lang / name).read_text(encoding="utf-8")


def test_the_catalog_is_extracted_from_every_api_page():
    """The pages whose docstrings the catalog translates are the API pages the site builds and
    measures (a page added to one list and not the other would show English docstrings, or be
    measured against the wrong limit)."""
    assert [page.replace(".md", ".html") for page in api_catalog.PAGES] == list(API_PAGES)
    for page in api_catalog.PAGES:
        for lang in ("en", "zh_CN"):
            assert (ROOT / "docs" / lang / page).is_file(), f"docs/{lang}/{page} is missing"


@pytest.mark.built_site
@pytest.mark.parametrize("page", API_PAGES)
def test_zh_api_page_prose_is_mostly_chinese(page):
    han, latin = prose_letters(_built_page("zh_CN", page))
    assert mostly_chinese(han, latin), (
        f"build/html/zh_CN/{page}: {han} Chinese characters and {latin} Latin letters in its "
        f"prose ({han / max(han + latin, 1):.0%} Chinese); the docstrings are translated in "
        f"{api_catalog.CATALOG.relative_to(ROOT)}: {FIX}"
    )


@pytest.mark.built_site
@pytest.mark.parametrize("page", API_PAGES)
def test_zh_field_labels_end_with_a_full_width_colon(page):
    zh, en = _built_page("zh_CN", page), _built_page("en", page)
    assert '<span class="colon">:</span>' not in zh
    assert zh.count('<span class="colon">：</span>') > 100  # 参数：, 返回：, 形状： ...
    assert '<span class="colon">:</span>' in en and "：" not in en
