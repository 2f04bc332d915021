"""The course path, from one data file (``docs/_ext/course.toml``): each example's tier, the
examples it needs, its reading and run time. The build stops on an example without an entry or an
entry without an example (``config-inited``); each example's page gets a line under its title and
each card on the examples' index its tier (``source-read``); the ``mha-course-path`` directive draws
the whole path on the index pages.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

from mha_ref_build import ROOT
from mha_ref_build.provenance import insert_after_title

COURSE_FILE = Path(__file__).resolve().parent.parent / "course.toml"


TIERS = ("core", "advanced")
_EXAMPLE_NAME = re.compile(r"^plot_(\d+)_\w+$")


def load_course(path: Path = COURSE_FILE) -> dict[str, dict]:
    """The entries of ``course.toml``, by example name (``plot_01_shapes``), each checked.

    Raises:
        ValueError: an entry with a bad name, tier, ``needs``, ``read_min`` or ``run_s``.
    """
    import tomllib

    course = tomllib.loads(path.read_text(encoding="utf-8"))
    problems = []
    for name, entry in course.items():
        where = f"{path.name} [{name}]"
        if not _EXAMPLE_NAME.match(name):
            problems.append(f"{where}: not an example's name (expected plot_NN_<words>)")
            continue
        if entry.get("tier") not in TIERS:
            problems.append(f"{where}: tier = {entry.get('tier')!r}, expected one of {TIERS}")
        needs = entry.get("needs")
        if not isinstance(needs, list) or not all(isinstance(n, int) for n in needs):
            problems.append(f"{where}: needs = {needs!r}, expected a list of example numbers")
        for key in ("read_min", "run_s"):
            value = entry.get(key)
            if not isinstance(value, int) or value <= 0:
                problems.append(f"{where}: {key} = {value!r}, expected a positive whole number")
    if problems:
        raise ValueError("\n".join(problems))
    return course


def example_number(name: str) -> int:
    """``plot_01_shapes`` -> 1.

    Raises:
        ValueError: if ``name`` is not ``plot_NN_<words>`` (rename the example so).
    """
    match = _EXAMPLE_NAME.match(name)
    if match is None:
        raise ValueError(
            f"example {name!r}: expected a name plot_NN_<words> (its number first), got {name!r}; "
            f"rename the script"
        )
    return int(match.group(1))


def check_course(course: dict[str, dict], examples: list[str]) -> None:
    """Every example has an entry, every entry an example, and every prerequisite comes first.

    Raises:
        ValueError: listing each example without an entry, each entry without an example, and
            each prerequisite that names no example or one that does not come before it.
    """
    problems = [
        f"example {name} has no entry in {COURSE_FILE.name}: add a [{name}] table "
        f"(tier, needs, read_min, run_s)"
        for name in sorted(set(examples) - set(course))
    ]
    problems += [
        f"{COURSE_FILE.name} [{name}] names no example (no gallery/<lang>/{name}.py): "
        f"remove it or rename it"
        for name in sorted(set(course) - set(examples))
    ]
    numbers = {example_number(name) for name in examples}
    for name in sorted(set(course) & set(examples)):
        for need in course[name]["needs"]:
            if need not in numbers or need >= example_number(name):
                problems.append(
                    f"{COURSE_FILE.name} [{name}]: needs = {course[name]['needs']}, but {need} "
                    f"is not an example that comes before it"
                )
    if problems:
        raise ValueError("\n".join(problems))


def gallery_examples(lang: str) -> list[str]:
    """The example names of a language's gallery (``gallery/<lang>/plot_*.py``)."""
    return sorted(p.stem for p in (ROOT / "gallery" / lang).glob("plot_*.py"))


_WORDS = {
    "en": {
        "tier": {"core": "Core", "advanced": "Advanced"},
        "tier_long": {"core": "Core tier", "advanced": "Advanced tier"},
        "needs": "needs {refs}",
        "needs_none": "no prerequisite",
        "example": "example",
        "read": "about {n} min read",
        "run": {
            5: "runs in a few seconds on 2 CPU cores",
            30: "runs in under half a minute on 2 CPU cores",
            90: "runs in about a minute on 2 CPU cores",
            None: "runs for a few minutes on 2 CPU cores",
        },
        "sep": " · ",
        "table": ("Example", "Tier", "Needs", "Reading", "Run time (2 CPU cores)"),
        "min": "{n} min",
        "run_short": {5: "seconds", 30: "< 30 s", 90: "about 1 min", None: "minutes"},
    },
    "zh_CN": {
        "tier": {"core": "核心", "advanced": "进阶"},
        "tier_long": {"core": "核心部分", "advanced": "进阶部分"},
        # an escaped space (removed from the output) lets the role start after a Han character
        "needs": "先读\\ {refs}",
        "needs_none": "无需先读其他示例",
        "example": "示例",
        "read": "阅读约 {n} 分钟",
        "run": {
            5: "在 2 个 CPU 核心上运行几秒钟",
            30: "在 2 个 CPU 核心上运行不到半分钟",
            90: "在 2 个 CPU 核心上运行约一分钟",
            None: "在 2 个 CPU 核心上运行几分钟",
        },
        "sep": " · ",
        "table": ("示例", "层级", "先读", "阅读", "运行时间（2 个 CPU 核心）"),
        "min": "{n} 分钟",
        "run_short": {5: "几秒", 30: "< 30 秒", 90: "约 1 分钟", None: "几分钟"},
    },
}


def run_band(seconds: int, bands: dict) -> str:
    """The coarse band a run time falls in (the pages never print the measured seconds)."""
    for limit, words in bands.items():
        if limit is not None and seconds <= limit:
            return words
    return bands[None]


def _example_ref(number: int, names: dict[int, str], lang: str) -> str:
    word = _WORDS[lang]["example"]
    return f":ref:`{word} {number} <sphx_glr_auto_examples_{names[number]}.py>`"


def _needs_rst(entry: dict, names: dict[int, str], lang: str) -> str:
    words = _WORDS[lang]
    refs = [_example_ref(n, names, lang) for n in entry["needs"]]
    if not refs:
        return words["needs_none"]
    if lang == "zh_CN":
        joined = "、".join(refs)
    else:
        joined = refs[0] if len(refs) == 1 else ", ".join(refs[:-1]) + " and " + refs[-1]
    return words["needs"].format(refs=joined)


def course_header(name: str, course: dict, lang: str) -> str:
    """The reST line under an example's title: tier, prerequisites, reading and run time."""
    entry, words = course[name], _WORDS[lang]
    names = {example_number(n): n for n in course}
    parts = [
        f"**{words['tier_long'][entry['tier']]}**",
        _needs_rst(entry, names, lang),
        words["read"].format(n=entry["read_min"]),
        run_band(entry["run_s"], words["run"]),
    ]
    return words["sep"].join(parts)


def card_meta(name: str, course: dict, lang: str) -> str:
    """The line of plain text a gallery card shows under its title."""
    entry, words = course[name], _WORDS[lang]
    needs = ", ".join(str(n) for n in entry["needs"])
    parts = [words["tier"][entry["tier"]], words["min"].format(n=entry["read_min"])]
    if needs:
        parts.append(("needs " + needs) if lang == "en" else ("先读 " + needs.replace(", ", "、")))
    return words["sep"].join(parts)


_CARD_TITLE = re.compile(
    r'^(?P<indent>[ ]*)<div class="sphx-glr-thumbnail-title">.*</div>\n', re.MULTILINE
)
_CARD_DOC = re.compile(r":doc:`/auto_examples/(?P<name>plot_\w+)`")


def add_card_meta(rst: str, course: dict, lang: str) -> str:
    """Under each gallery card's title, the example's tier, reading time and prerequisites."""
    out, cursor = [], 0
    for doc in _CARD_DOC.finditer(rst):
        title = _CARD_TITLE.search(rst, doc.end())
        if title is None or doc.group("name") not in course:
            continue
        out.append(rst[cursor : title.end()])
        meta = html_escape(card_meta(doc.group("name"), course, lang))
        out.append(f'{title.group("indent")}<div class="mha-card-meta">{meta}</div>\n')
        cursor = title.end()
    out.append(rst[cursor:])
    return "".join(out)


def html_escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)


#: what separates an example's link from its description in the directive's list
_DESCRIPTION_DASH = re.compile(r"^\s*(?:——|—|-)\s*")
_EXAMPLE_TARGET = re.compile(r"^sphx_glr_auto_examples_(?P<name>plot_\d+_\w+)\.py$")


def example_descriptions(items: nodes.Element) -> dict[str, list[nodes.Node]]:
    """Each example's one-line description, from the parsed content of ``mha-course-path``: a
    list whose items are ``{ref}`sphx_glr_auto_examples_plot_NN_x.py` — what it shows``. The
    nodes after the link, without the dash, by example name.

    Raises:
        ValueError: an item that does not start with a link to an example, or two for one.
    """
    found: dict[str, list[nodes.Node]] = {}
    for item in items.findall(nodes.list_item):
        para = item.next_node(nodes.paragraph)
        children = list(para.children) if para is not None else []
        first = children[0] if children else None
        is_link = isinstance(first, addnodes.pending_xref)
        match = _EXAMPLE_TARGET.match(first.get("reftarget", "")) if is_link else None
        if match is None:
            raise ValueError(
                f"an item of the course path's list does not start with a link to an example: "
                f"{item.astext()[:80]!r}"
            )
        rest = [child.deepcopy() for child in children[1:]]
        if rest and isinstance(rest[0], nodes.Text):
            text = _DESCRIPTION_DASH.sub("", str(rest[0]))
            rest[0] = nodes.Text(text)
        if match["name"] in found:
            raise ValueError(f"the course path's list describes {match['name']} twice")
        found[match["name"]] = rest
    return found


class CoursePath(SphinxDirective):
    """``{mha-course-path}``: a table of every example with its one-line description, tier,
    prerequisites, reading time and run time, core tier first; the one list of the examples on
    the index pages. Its content is a list, one item per example:
    ``{ref}`sphx_glr_auto_examples_plot_01_shapes.py` — what it shows`` (parsed as the page's
    own markup). Built as nodes, so that it reads the same from a MyST page and from a reST one.
    """

    has_content = True

    def _ref(self, name: str, text: str | None = None):

        node = addnodes.pending_xref(
            "",
            refdomain="std",
            reftype="ref",
            reftarget=f"sphx_glr_auto_examples_{name}.py",
            refexplicit=text is not None,
            refwarn=True,
            refdoc=self.env.docname,
        )
        node += nodes.inline(text or name, text or name, classes=["xref", "std", "std-ref"])
        return node

    def run(self):
        lang = self.config.language or "en"
        course, words = load_course(), _WORDS[lang]
        self.env.note_dependency(str(COURSE_FILE))
        names = {example_number(n): n for n in course}
        parsed = nodes.container()
        self.state.nested_parse(self.content, self.content_offset, parsed)
        try:
            descriptions = example_descriptions(parsed)
        except ValueError as error:
            raise self.error(str(error)) from None
        missing = sorted(set(course) - set(descriptions))
        unknown = sorted(set(descriptions) - set(course))
        if missing or unknown:
            raise self.error(
                f"mha-course-path: every example needs one description in the directive's list; "
                f"missing: {missing or 'none'}, not an example: {unknown or 'none'}"
            )
        widths = (52, 10, 14, 10, 14)
        table = nodes.table(classes=["mha-course-path"])
        group = nodes.tgroup(cols=len(widths))
        table += group
        group += [nodes.colspec(colwidth=w) for w in widths]

        def row(cells):
            tr = nodes.row()
            for cell in cells:
                entry = nodes.entry()
                para = nodes.paragraph()
                para += cell if isinstance(cell, list) else [nodes.Text(cell)]
                entry += para
                tr += entry
            return tr

        head = nodes.thead()
        head += row(list(words["table"]))
        body = nodes.tbody()
        for tier in TIERS:
            for name in sorted(n for n in course if course[n]["tier"] == tier):
                entry = course[name]
                needs: list = []
                for i, need in enumerate(entry["needs"]):
                    if i:
                        needs.append(nodes.Text(", " if lang == "en" else "、"))
                    needs.append(self._ref(names[need], str(need)))
                title = nodes.strong()
                title += self._ref(name)
                description = nodes.inline(classes=["mha-course-description"])
                shown = list(descriptions[name])
                if lang == "en" and shown and isinstance(shown[0], nodes.Text):  # a sentence
                    shown[0] = nodes.Text(str(shown[0])[:1].upper() + str(shown[0])[1:])
                description += shown
                body += row(
                    [
                        [title, nodes.Text(" "), description],
                        words["tier"][tier],
                        needs or "—",
                        words["min"].format(n=entry["read_min"]),
                        run_band(entry["run_s"], words["run_short"]),
                    ]
                )
        group += [head, body]
        return [table]


def _check_course(app: Sphinx, config: Config) -> None:
    try:
        check_course(load_course(), gallery_examples(config.language or "en"))
    except ValueError as error:
        raise ExtensionError(f"the course path (docs/_ext/{COURSE_FILE.name}):\n{error}") from None


def _course_pages(app: Sphinx, docname: str, source: list[str]) -> None:
    """The course path on the examples' index (each card) and each example's page (its header)."""
    lang = app.config.language or "en"
    if docname == "auto_examples/index":
        app.env.note_dependency(str(COURSE_FILE))
        source[0] = add_card_meta(source[0], load_course(), lang)
    elif docname.startswith("auto_examples/plot_"):
        app.env.note_dependency(str(COURSE_FILE))
        name = docname.split("/", 1)[1]
        line = course_header(name, load_course(), lang)
        note = f"\n\n.. rst-class:: mha-course-meta\n\n{line}\n\n"
        source[0] = insert_after_title(source[0], note)
