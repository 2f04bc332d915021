"""Example pages (``source-read``): an exercise's answer, a ``dropdown`` with ``:class-container:
mha-answer`` that ends a text cell, takes the code cell after it, with that cell's output, inside
the fold; and the page ends, above its download buttons, with how to install what the example
imports (:func:`mha_ref_build.install.install_note`).
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

from mha_ref_build.install import install_note, model_install_commands

_FOOTER = re.compile(
    r"^(?P<indent>[ ]*)\.\. container:: sphx-glr-footer sphx-glr-footer-example\n", re.MULTILINE
)
_GENERATED = re.compile(r"^\.\. GENERATED FROM PYTHON SOURCE LINES .*$", re.MULTILINE)
ANSWER_CLASS = "mha-answer"


def _example_page(app: Sphinx, docname: str, source: list[str]) -> None:
    if not docname.startswith("auto_examples/plot_"):
        return
    source[0] = fold_answers(source[0], docname)
    lang = app.config.language or "en"
    note = install_note(lang, model_install_commands(lang, docname.split("/")[-1]))
    match = _FOOTER.search(source[0])
    if match is None:
        raise ExtensionError(f"{docname}: no sphinx-gallery download footer to add the wheel to")
    indent = match.group("indent")
    block = f"{indent}.. rst-class:: mha-install\n\n{indent}{note}\n\n"
    source[0] = source[0][: match.start()] + block + source[0][match.start() :]


def fold_answers(rst: str, docname: str = "") -> str:
    """Move the code cell (and its output) that follows an answer dropdown into the dropdown.

    An answer is a ``.. dropdown::`` with ``:class-container: mha-answer`` that ends a text
    cell. sphinx-gallery writes each cell after a ``.. GENERATED FROM PYTHON SOURCE LINES``
    comment; the cell after the answer's is indented into the dropdown's body.
    """
    marks = list(_GENERATED.finditer(rst))
    pieces, cursor = [], 0
    skip_until = -1
    for i, mark in enumerate(marks):
        if mark.start() < skip_until:
            continue
        end = marks[i + 1].start() if i + 1 < len(marks) else len(rst)
        cell = rst[mark.start() : end]
        if ANSWER_CLASS not in cell or f":class-container: {ANSWER_CLASS}" not in cell:
            continue
        if i + 1 >= len(marks):
            raise ExtensionError(f"{docname}: an answer dropdown ends the page with no code")
        nxt_end = marks[i + 2].start() if i + 2 < len(marks) else _footer_start(rst)
        code = rst[marks[i + 1].start() : nxt_end]
        if ".. code-block:: Python" not in code:
            raise ExtensionError(f"{docname}: the cell after an answer dropdown holds no code")
        pieces.append(rst[cursor:end].rstrip("\n") + "\n\n")
        indented = [f"   {line}" if line.strip() else line for line in code.splitlines(True)]
        pieces.append("".join(indented).rstrip("\n") + "\n\n")
        cursor = nxt_end
        skip_until = nxt_end
    pieces.append(rst[cursor:])
    return "".join(pieces)


def _footer_start(rst: str) -> int:
    match = re.search(r"^\.\. _sphx_glr_download_", rst, re.MULTILINE)
    return match.start() if match else len(rst)
