"""Chinese text in matplotlib figures, with a font file that ships with the package index.

A figure's Chinese labels need a font that has CJK glyphs. Relying on the fonts a machine happens
to have installed gives empty boxes ("tofu") on a fresh machine, so the tutorial depends on the
package ``noto-cjk-sans-otc`` (the SIL Open Font License Noto Sans CJK collection) and registers
that exact file with matplotlib's font manager: the figures come out the same everywhere.

:func:`use_cjk_font_for` is what the plotting helpers call with their labels; an English figure
keeps matplotlib's default font. :func:`raise_on_missing_glyphs` turns matplotlib's "Glyph ...
missing from font(s)" warning into an error that names the character, so a figure that would
still show a box fails instead of passing unnoticed.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import matplotlib as mpl
from matplotlib import font_manager

__all__ = [
    "CJK_FONT_FAMILY",
    "MissingGlyphError",
    "cjk_font_path",
    "has_cjk",
    "raise_on_missing_glyphs",
    "use_cjk_font",
    "use_cjk_font_for",
]

#: The face of the collection that matplotlib is asked for (Simplified Chinese glyph forms).
CJK_FONT_FAMILY = "Noto Sans CJK SC"

# CJK ideographs, CJK punctuation, full-width forms, kana and hangul.
_CJK_RE = re.compile(
    "[\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3200-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]"
)

# matplotlib's warning: "Glyph 22836 (\N{CJK UNIFIED IDEOGRAPH-5934}) missing from font(s) ..."
_MISSING_GLYPH_RE = re.compile(r"Glyph (\d+) .*missing from (?:current )?font")


class MissingGlyphError(RuntimeError):
    """A figure asked for a character that none of its fonts can draw (it would show a box)."""

    def __init__(self, character: str, message: str) -> None:
        self.character = character
        super().__init__(
            f"the figure draws {character!r} (U+{ord(character):04X}), which its font cannot "
            f"show: it would appear as an empty box. matplotlib said: {message}. Pass text "
            f"with Chinese characters through mha_ref.tutorial.fonts.use_cjk_font_for (the "
            f"plotting helpers do), or call use_cjk_font() before drawing."
        )


def cjk_font_path() -> Path:
    """The Noto Sans CJK collection (``.ttc``) installed with ``noto-cjk-sans-otc``.

    Raises:
        ModuleNotFoundError: If that package is not installed; the message gives the command.
    """
    try:
        import noto_cjk_sans_otc
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "Chinese figure labels need the font package noto-cjk-sans-otc, which is not "
            "installed. Install the tutorial's extras: python -m pip install 'mha-ref[tutorial]' "
            "(or python -m pip install noto-cjk-sans-otc)."
        ) from error
    return Path(str(noto_cjk_sans_otc.FONT_PATH))


def _register_cjk_font() -> None:
    """Add the bundled collection to matplotlib's font manager once (every face of it).

    A system may have a font of the same family name (Debian's fonts-noto-cjk does): matplotlib
    would then take whichever file it met first. The family name is made to mean the bundled
    file alone, so a figure looks the same with or without system fonts.
    """
    manager = font_manager.fontManager
    path = str(cjk_font_path())
    if not any(entry.fname == path for entry in manager.ttflist):
        manager.addfont(path)  # also empties the manager's findfont cache
    others = [e for e in manager.ttflist if e.name == CJK_FONT_FAMILY and e.fname != path]
    if others:
        manager.ttflist = [e for e in manager.ttflist if e not in others]
        manager._findfont_cached.cache_clear()  # the cache may hold the system file


def use_cjk_font() -> str:
    """Register the bundled CJK font and put it first in ``rcParams["font.sans-serif"]``.

    Returns:
        The family name, :data:`CJK_FONT_FAMILY`.

    Raises:
        ModuleNotFoundError: If the font package is not installed (see :func:`cjk_font_path`).
    """
    _register_cjk_font()
    others = [name for name in mpl.rcParams["font.sans-serif"] if name != CJK_FONT_FAMILY]
    mpl.rcParams["font.sans-serif"] = [CJK_FONT_FAMILY, *others]
    mpl.rcParams["font.family"] = "sans-serif"
    mpl.rcParams["axes.unicode_minus"] = False  # the CJK fonts have no U+2212 minus sign
    return CJK_FONT_FAMILY


def has_cjk(text: object) -> bool:
    """True when ``text`` (or any string inside a sequence) contains a CJK character."""
    if text is None:
        return False
    if isinstance(text, str):
        return _CJK_RE.search(text) is not None
    if isinstance(text, Sequence):
        return any(has_cjk(t) for t in text)
    return False


def use_cjk_font_for(*texts: object) -> str | None:
    """Call :func:`use_cjk_font` only when one of ``texts`` contains CJK characters.

    Scripts that draw their own matplotlib figures call this with their titles and axis labels,
    so an English page keeps matplotlib's default font and a Chinese page gets the CJK one.

    Returns:
        The CJK family name when it was put first, else ``None``.
    """
    if any(has_cjk(t) for t in texts):
        return use_cjk_font()
    return None


@contextlib.contextmanager
def raise_on_missing_glyphs() -> Iterator[None]:
    """Within the block, a glyph that matplotlib cannot draw raises :class:`MissingGlyphError`.

    Use it around ``savefig``: matplotlib only warns (``UserWarning: Glyph ... missing from
    font(s)``) and draws an empty box.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        message = str(warning.message)
        found = _MISSING_GLYPH_RE.search(message)
        if found:
            raise MissingGlyphError(chr(int(found.group(1))), message)
    for warning in caught:  # the other warnings, as they would have been shown
        warnings.warn_explicit(
            warning.message, warning.category, warning.filename, warning.lineno
        )
