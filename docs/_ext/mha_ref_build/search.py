"""Search: the scorer that ranks headings holding the whole query (or a synonym of it) first, then
object names, then full-text matches, pages holding every word of the query before the others
and the pages that mention every topic (references, home page, glossary) last
(``search_scorer.js``, set at ``config-inited``: in ``conf.py`` a change to it would run every
example again; here it runs none). The Chinese index's one-character words are
:mod:`.chinese_text`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.config import Config


#: the scorer that replaces Sphinx's default ``Scorer`` (what it changes, and why, is in the file)
SEARCH_SCORER = Path(__file__).resolve().parent.parent / "search_scorer.js"


def _set_search_scorer(app: Sphinx, config: Config) -> None:
    """``html_search_scorer`` is set here, not in ``conf.py``: a change of ``conf.py`` runs every
    example again (``mha_ref_build.staleness.dependency_files``), and the scorer changes no
    printed line. Sphinx opens the path as given, so it is absolute."""
    config.html_search_scorer = str(SEARCH_SCORER)
