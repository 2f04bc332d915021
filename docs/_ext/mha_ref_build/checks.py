"""Checks that fail the build (as Sphinx warnings, which ``-W`` makes errors) rather than publish a
wrong page: a printed NaN that the example's cell does not declare (``env-before-read-docs``, on
every example page of every build, also those whose example did not run again), and a formula that
MathJax cannot read (``doctree-read``). The empty-figure check is the figure scraper's
(:mod:`.figures`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from docutils import nodes
from sphinx.util import logging

from mha_ref_build import GALLERY_DIR, ROOT
from mha_ref_build.settings import runs_examples

if TYPE_CHECKING:
    from sphinx.application import Sphinx

logger = logging.getLogger(__name__)


#: a code cell holding this line may print NaN (the line is not shown: sphinx-gallery removes
#: ``# sphinx_gallery_...`` comments from the code on the page)
EXPECTED_NAN_FLAG = "# sphinx_gallery_mha_ref_expected_nan"


#: a NaN as Python, NumPy and torch print it ("nan", "-nan"; "NAN" from an upper-case format),
#: not inside a word ("nanoGPT"), and not "NaN", the word prose uses ("rows with NaN: [4]")
_NAN = re.compile(r"(?<![A-Za-z0-9_])(nan|NAN)(?![A-Za-z0-9_])")
_CELL = re.compile(r"^\.\. GENERATED FROM PYTHON SOURCE LINES (\d+)-(\d+)$", re.MULTILINE)
_OUTPUT = re.compile(
    r"^\.\. rst-class:: sphx-glr-script-out\n\n \.\. code-block:: none\n\n(.*?)(?=\n\S|\Z)",
    re.MULTILINE | re.DOTALL,
)


def undeclared_nan(rst: str, script: str) -> list[tuple[int, int, str]]:
    """The printed lines holding NaN in cells that do not declare it, as (first, last, line).

    ``rst`` is a page sphinx-gallery generated from ``script`` (the example's source): each
    cell follows a ``.. GENERATED FROM PYTHON SOURCE LINES a-b`` comment, its printed output
    in a ``sphx-glr-script-out`` block. A cell whose source lines hold
    :data:`EXPECTED_NAN_FLAG` may print NaN.
    """
    lines = script.splitlines()
    marks = list(_CELL.finditer(rst))
    found = []
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        first, last = int(mark.group(1)), int(mark.group(2))
        cell = rst[mark.end() : following.start() if following else len(rst)]
        if any(line.strip() == EXPECTED_NAN_FLAG for line in lines[first - 1 : last]):
            continue
        for output in _OUTPUT.finditer(cell):
            found += [(first, last, line.strip()) for line in output.group(1).splitlines()
                      if _NAN.search(line)]
    return found


def _check_printed_nan(app: Sphinx, env, docnames: list[str]) -> None:
    """Warn (a failure with ``-W``) for every undeclared NaN on every example page.

    Every build checks every page, also those whose example did not run again, so that the
    failure does not vanish on the next build.
    """
    if not runs_examples(app.config):
        return  # the pages are not this build's output (-D plot_gallery=0)
    lang = app.config.language or "en"
    for page in sorted((Path(app.srcdir) / GALLERY_DIR).glob("plot_*.rst")):
        script = ROOT / "gallery" / lang / f"{page.stem}.py"
        if not script.is_file():
            continue
        for first, last, line in undeclared_nan(page.read_text(encoding="utf-8"),
                                                script.read_text(encoding="utf-8")):
            logger.warning(
                f"{script.relative_to(ROOT).as_posix()}, lines {first}-{last}, printed NaN: "
                f"{line[:120]!r}. Fix the computation; if the NaN is what the cell shows, add "
                f"the line {EXPECTED_NAN_FLAG!r} to that cell",
                type="mha_ref",
                subtype="nan",
            )


# -- formulas: a doubled backslash is a formula MathJax cannot read -------------------------------
# A ``:math:`` role in a gallery comment is not a Python string: ``\\mathrm`` there stays doubled,
# and MathJax draws "mathrmKL(P, |, ...)". Any formula that holds a literal ``\\`` (inline, or in a
# display before a letter, where it cannot be a line break) or ``mathrm`` without its backslash
# fails the build (a warning, which the build treats as an error), naming the page and the formula.
_DOUBLED = re.compile(r"\\\\")
_DOUBLED_COMMAND = re.compile(r"\\\\[A-Za-z]")
_BARE_COMMAND = re.compile(r"(?<!\\)\b(?:mathrm|mathbf|frac|sqrt|operatorname)\b")


def formula_problem(latex: str, display: bool) -> str | None:
    """What is wrong with a formula's LaTeX source, or ``None``."""
    if (_DOUBLED_COMMAND if display else _DOUBLED).search(latex):
        return (
            "a doubled backslash: write one (a gallery text cell is a Python comment, not a "
            "string, so a backslash there escapes nothing)"
        )
    bare = _BARE_COMMAND.search(latex)
    if bare:
        return f"{bare.group(0)!r} without its backslash"
    return None


def _check_formulas(app: Sphinx, doctree) -> None:
    for node in doctree.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block))):
        latex = node.astext()
        problem = formula_problem(latex, isinstance(node, nodes.math_block))
        if problem:
            logger.warning(f"formula {latex!r}: {problem}", location=node)
