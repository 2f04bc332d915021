"""The Chinese API pages' message catalog: the docstrings' prose, translated through Sphinx's own
internationalisation (``docs/_locale/zh_CN/LC_MESSAGES/api.po``).

``docs/zh_CN/api.md`` (the reference package) and ``docs/zh_CN/api_tutorial.md`` (the
tutorial's helpers) are Chinese prose around autodoc directives, so Sphinx's gettext builder
extracts the docstrings' paragraphs (and the pages' Chinese paragraphs) as messages of the
domain ``api`` (``gettext_compact = "api"`` in conf.py: one catalog for every page). The
Chinese build then shows each paragraph's ``msgstr`` in place of its English ``msgid``; the
docstrings themselves stay English, once, in the code.

    python docs/_ext/api_catalog.py pot OUTDIR   # OUTDIR/template/api.pot: what to translate
    python docs/_ext/api_catalog.py stat         # how much of api.po is translated

``nox -s translations`` runs ``pot`` and then ``sphinx-intl update`` on that template; the tests
(``tests/pages/test_api_translation.py``) use the functions here to check the catalog.

A msgid is the docstring's reST; a msgstr is MyST Markdown, because Sphinx parses a translation
with the parser of the page it belongs to (``api.md``): ``code`` stays as it is, :func:`x` is
written {func}`x` and :math:`x` {math}`x` (:func:`to_myst` converts a msgid). A reST role in a
msgstr would show as plain text; :func:`markup_problems` catches that, and any role, target,
formula or inline literal lost or changed.

Which messages are in the catalog: only those with prose to translate
(:func:`needs_translation`). Left out are the page's own Chinese paragraphs and headings, type
expressions such as ``dict[str, float]`` (the ``:rtype:`` fields) and messages that are nothing
but markup (``:doc:`...```, ````(H, L)````): the page shows them as they are, which is right,
and a translator never sees them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGUAGE = "zh_CN"
DOMAIN = "api"  # the one catalog's name (gettext_compact = "api" in conf.py)
#: the API pages, whose docstrings the catalog translates
PAGES = ("api.md", "api_tutorial.md")
CATALOG = ROOT / "docs" / "_locale" / LANGUAGE / "LC_MESSAGES" / f"{DOMAIN}.po"
REFRESH_COMMAND = "nox -s translations"
#: the width ``sphinx-intl update`` wraps lines at (its default); the other writers use it too
LINE_WIDTH = 76

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")

# -- markup that a translation keeps ------------------------------------------------------------
# A msgid is reST: the docstring's own text. Sphinx parses a msgstr with the parser of the page
# it belongs to, and the API page is MyST Markdown (api.md), so a msgstr is MyST: ``code`` stays
# as it is, a role :func:`x` becomes {func}`x`, :math:`x` becomes {math}`x`. A reST role left in a
# msgstr shows as plain text (Sphinx warns: "inconsistent term references").
#: reST inline markup whose text is code, a formula or a link target, in the order they are
#: recognised: ``literal``, :role:`content`, `link <target>`_, `interpreted`, [footnote]_, a URL
_MARKUP = re.compile(
    r"(?P<literal>``.+?``)"
    r"|(?P<role>(?::[A-Za-z][\w.+-]*)+:)`(?P<role_body>[^`]+)`"
    r"|`(?P<link_body>[^`]+)`(?P<link_end>__?)"
    r"|(?P<interpreted>`[^`]+`)"
    r"|(?P<footnote>\[[^\]\s]+\]_)"
    r"|(?P<url>https?://[^\s<>`]+)"
)
#: the ``title <target>`` form of a cross-reference: the title is prose, the target is not
_TITLED = re.compile(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>\s*", re.S)
#: names a type expression is made of, besides dotted names (``torch.Tensor``)
_TYPE_NAMES = frozenset(
    "bool int float complex str bytes memoryview None Any object type dict list tuple set "
    "frozenset Callable Sequence Iterable Iterator Mapping Optional Union Tensor".split()
)
_TYPE_EXPRESSION = re.compile(r"[\w.\[\]|, ]+")
#: words that stay as they are in any language: identifiers with a digit or an underscore
#: (``float64``, ``d_model``)
_IDENTIFIER = re.compile(r"\b\w*[\d_]\w*\b")


def _role_token(name: str, body: str) -> tuple[str, str]:
    """("func", "train") for :func:`train`, :py:func:`the run <train>` or {func}`train`: the role
    without its domain, and its target (a titled reference's title is prose)."""
    name = name.strip(":").removeprefix("py:")
    titled = _TITLED.fullmatch(body)
    if name != "math" and titled and titled["title"]:
        body = titled["target"]
    return name, body.strip()


def source_markup(msgid: str) -> Counter:
    """The markup of a msgid (reST) that its translation must keep, each token as often as it
    occurs: ("code", text) for ``text``, ("math", formula), (role, target) for every other role,
    ("link", target), ("footnote", label), ("url", url)."""
    tokens: Counter = Counter()
    for match in _MARKUP.finditer(msgid):
        if match["literal"]:
            tokens["code", match["literal"][2:-2].strip()] += 1
        elif match["role"]:
            tokens[_role_token(match["role"], match["role_body"])] += 1
        elif match["link_body"] is not None:
            titled = _TITLED.fullmatch(match["link_body"])
            tokens["link", titled["target"] if titled else match["link_body"]] += 1
        elif match["interpreted"]:
            tokens["code", match["interpreted"][1:-1].strip()] += 1
        elif match["footnote"]:
            tokens["footnote", match["footnote"][1:-2]] += 1
        else:
            tokens["url", match["url"]] += 1
    return tokens


def _myst_parser():
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    # the extensions of conf.py (myst_enable_extensions)
    extensions = {"dollarmath", "amsmath", "colon_fence", "deflist"}
    return create_md_parser(MdParserConfig(enable_extensions=extensions), RendererHTML)


def translation_markup(msgstr: str) -> tuple[Counter, list[str]]:
    """The markup of a msgstr, parsed by MyST's own Markdown parser as Sphinx parses it, as
    tokens comparable with :func:`source_markup`; and what is wrong with it as a paragraph (Sphinx
    leaves a message untranslated when its msgstr is not one paragraph: "1. ..." is a list)."""
    global _PARSER
    if _PARSER is None:
        _PARSER = _myst_parser()
    blocks = _PARSER.parse(msgstr)
    problems = []
    if [b.type for b in blocks] != ["paragraph_open", "inline", "paragraph_close"]:
        kinds = sorted({b.type.removesuffix("_open") for b in blocks if b.type.endswith("_open")})
        problems.append(f"not one paragraph in Markdown ({', '.join(kinds)})")
    tokens: Counter = Counter()
    pending = [child for block in blocks for child in (block.children or [])]
    while pending:
        token = pending.pop(0)
        if token.type == "code_inline":
            tokens["code", token.content.strip()] += 1
        elif token.type == "myst_role":
            tokens[_role_token(token.meta["name"], token.content)] += 1
        elif token.type in ("math_inline", "math_single"):
            tokens["math", token.content.strip()] += 1
        elif token.type == "link_open":
            tokens["link", token.attrs.get("href", "")] += 1
        elif token.type == "text" and (leftover := _REST_ROLE_NAME.search(token.content)):
            problems.append(f"a reST role left as text: {leftover.group(0)}")
        pending[:0] = token.children or []
    return tokens, problems


_PARSER = None
#: ":func:" in a text token of a msgstr: a reST role whose `target` Markdown read as code
_REST_ROLE_NAME = re.compile(r":(?:py:)?[a-z]+:(?=`|$)")


def markup_problems(msgid: str, msgstr: str) -> list[str]:
    """What a translation loses, adds or breaks of its msgid's markup; empty when it is right."""
    expected = source_markup(msgid)
    found, problems = translation_markup(msgstr)
    if missing := expected - found:
        problems.append("missing " + ", ".join(_show(t) for t in sorted(missing.elements())))
    if extra := found - expected:
        problems.append("extra " + ", ".join(_show(t) for t in sorted(extra.elements())))
    return problems


def _show(token: tuple[str, str]) -> str:
    kind, value = token
    if kind == "code":
        return f"``{value}``"
    return f"{{{kind}}}`{value}`" if kind not in ("link", "footnote", "url") else f"{kind} {value}"


def to_myst(msgid: str) -> str:
    """The msgid with its reST roles written as MyST roles: the starting point of a msgstr."""

    def myst_role(match: re.Match) -> str:
        if not match["role"]:
            return match.group(0)
        return "{" + match["role"].strip(":") + "}`" + match["role_body"] + "`"

    return _MARKUP.sub(myst_role, msgid)


def prose(text: str) -> str:
    """``text`` without its markup tokens and identifiers: what a reader reads as words."""
    return _IDENTIFIER.sub(" ", _MARKUP.sub(" ", text))


def is_chinese(text: str) -> bool:
    """Whether ``text`` holds Chinese characters (the page's own paragraphs and headings)."""
    return bool(_HAN.search(text))


def is_type_expression(text: str) -> bool:
    """``dict[str, float]``, ``int | None``, ``list[mha_ref.tutorial.heads.HeadSummary]``."""
    if not _TYPE_EXPRESSION.fullmatch(text) or text.endswith("."):
        return False
    names = re.findall(r"[A-Za-z_][\w.]*", text)
    return all(name in _TYPE_NAMES or "." in name for name in names)


#: a LaTeX command with its first argument (``\\max``, ``\\mathrm{MultiHead}``)
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+(?:\{[^{}]*\})?")


def is_formula(text: str) -> bool:
    """A display formula (a docstring's ``.. math::`` block): LaTeX, with no word of three or
    more letters once its commands are taken out. The page shows it as it is."""
    return "\\" in text and not re.search(r"[A-Za-z]{3,}", _LATEX_COMMAND.sub(" ", text))


def needs_translation(msgid: str) -> bool:
    """Whether a message has English prose to translate: no Chinese in it, not a type
    expression or a formula, and Latin letters left once its markup and identifiers are taken
    out."""
    if not msgid or is_chinese(msgid) or is_type_expression(msgid) or is_formula(msgid):
        return False
    return bool(_LATIN.search(prose(msgid)))


# -- extraction ----------------------------------------------------------------------------------
def extract_pot(outdir: Path) -> Path:
    """Run Sphinx's gettext builder on the Chinese sources and return the API page's template.

    The examples are not executed: ``-D plot_gallery=0`` is sphinx-gallery's switch for that.
    sphinx-gallery still writes the page of an example whose source changed since it last ran
    (without outputs, and without recording it as run, so the next HTML build runs it); an
    example that is up to date is left as it is. The doctrees go under ``outdir``, apart from the
    HTML build's. Only the API pages (:data:`PAGES`) are written; the other pages are read, as
    Sphinx reads the whole project for cross-references.
    """
    outdir = Path(outdir)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    srcdir = ROOT / "docs" / LANGUAGE
    # no catalogs: what is extracted must not depend on what is translated (nor warn about it)
    no_catalogs = outdir / "no-catalogs"
    no_catalogs.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "sphinx", "-b", "gettext", "-c", str(ROOT), "-q",
        "-D", f"language={LANGUAGE}", "-D", "plot_gallery=0", "-D", f"locale_dirs={no_catalogs}",
        # no "#:" source locations: they move with every line added above a docstring, and
        # would turn a one-sentence change into a diff of every entry below it
        "-D", "gettext_location=0",
        "-d", str(outdir / ".doctrees"),
        str(srcdir), str(outdir), *[str(srcdir / page) for page in PAGES],
    ]  # fmt: skip
    subprocess.run(command, check=True, env=env, cwd=ROOT)
    return outdir / f"{DOMAIN}.pot"


def read_catalog(path: Path):
    """A ``.po`` or ``.pot`` file as a babel ``Catalog``."""
    from babel.messages.pofile import read_po

    with open(path, "rb") as f:
        return read_po(f)


def write_catalog(path: Path, catalog) -> None:
    """Write a catalog as ``sphinx-intl update`` does (same width, no obsolete entries)."""
    from babel.messages.pofile import write_po

    with open(path, "wb") as f:
        write_po(f, catalog, width=LINE_WIDTH, ignore_obsolete=True)


def stable_form(catalog, creation_date=None):
    """Give a catalog the form ``api.po`` is kept in, so that a changed sentence is a one-entry
    diff: no source locations (``#:`` lines, which move whenever a line is added above a
    docstring) and, when given, the creation date of the catalog it updates (the extraction's
    date changes on every run; ``sphinx-intl update`` copies the template's into the catalog).

    Args:
        catalog: a babel ``Catalog``; changed in place.
        creation_date: the ``POT-Creation-Date`` to keep (a datetime), or None to leave it.

    Returns:
        The same catalog.

    Source: this project; babel's ``Catalog`` (``babel.messages.catalog``).
    """
    for message in catalog:
        message.locations = []
    if creation_date is not None:
        catalog.creation_date = creation_date
    return catalog


def translation_template(pot_file: Path, out_file: Path) -> int:
    """Copy the template keeping only the messages that need translation; return how many.

    The copy is in :func:`stable_form`, with the creation date of ``api.po`` when there is one.
    """
    catalog = read_catalog(pot_file)
    for message in list(catalog):
        if message.id and not needs_translation(message.id):
            catalog.delete(message.id, context=message.context)
    kept_date = read_catalog(CATALOG).creation_date if CATALOG.is_file() else None
    stable_form(catalog, kept_date)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    write_catalog(out_file, catalog)
    return sum(1 for message in catalog if message.id)


def _main(argv: list[str]) -> int:
    if argv[:1] == ["pot"] and len(argv) == 2:
        outdir = Path(argv[1]).resolve()
        pot = extract_pot(outdir / "sphinx")
        # a folder of its own: sphinx-intl updates a catalog for every .pot under its --pot-dir
        template = outdir / "template" / f"{DOMAIN}.pot"
        count = translation_template(pot, template)
        print(f"{template}: {count} messages to translate")
        return 0
    if argv == ["stat"]:
        messages = [m for m in read_catalog(CATALOG) if m.id]
        fuzzy = sum(1 for m in messages if m.fuzzy)
        empty = sum(1 for m in messages if not m.string)
        done = len(messages) - fuzzy - empty
        print(f"{CATALOG.relative_to(ROOT)}: {done} translated, {fuzzy} fuzzy, {empty} empty")
        return 0
    print(__doc__.split("\n\n")[2], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
