"""An example page is text of this build, safe and anonymous (``source-read``, before any other
handler): the characters that would end a block of the page's reST (a line or paragraph separator, a
control character in printed output or a figure's label) are escaped, and the building machine's
folders are taken out of every example page, tracebacks included. The functions are plain text rules
(no Sphinx), which the figure scraper uses too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from mha_ref_build import GALLERY_DIR, ROOT

if TYPE_CHECKING:
    from sphinx.application import Sphinx


#: what docutils takes as the end of a line besides "\n" (``str.splitlines``), and the other
#: control characters: on a page, each would end the block it is in (a raw-HTML block, a line of
#: printed output) and let what follows be read as reST
_LINE_ENDS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def escape_line_ends(text: str) -> str:
    """Write each character of :data:`_LINE_ENDS` as its escape, e.g. ``\\u2028``."""
    return _LINE_ENDS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def machine_paths() -> list[str]:
    """The building machine's folders that a traceback or a warning may print, longest first:
    the checkout, the Python installation and its packages, the home folder."""
    import site
    import sys

    folders = {str(ROOT), sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path.home())}
    folders |= set(site.getsitepackages()) | {site.getusersitepackages()}
    return sorted((f for f in folders if len(f) > 1), key=len, reverse=True)


def anonymize_paths(text: str) -> str:
    """Take the building machine's folders out of ``text``: a path inside the checkout or an
    installed package becomes relative (``gallery/en/plot_01_shapes.py``,
    ``torch/nn/functional.py``), one in the home folder starts with ``~``."""
    home = str(Path.home())
    for folder in machine_paths():
        inside, itself = ("~/", "~") if folder == home else ("", ".")
        text = text.replace(folder + "/", inside)
        text = re.sub(re.escape(folder) + r"(?![\w-]|\.\w)", itself, text)  # the folder alone
    return text


def _clean_example_page(app: Sphinx, docname: str, source: list[str]) -> None:
    if docname.startswith(f"{GALLERY_DIR}/"):
        source[0] = anonymize_paths(escape_line_ends(source[0]))
