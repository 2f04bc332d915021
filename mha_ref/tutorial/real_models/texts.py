"""The real texts the real-model pages and tests use, shipped inside the package.

They are extracts of the Python Language Reference (CPython 3.11.7's ``pydoc_data.topics``,
PSF License Version 2); ``texts/README.md`` beside this file gives the source of each, what was
changed and the licence, whose text is ``texts/LICENSE-PSF.txt``.
"""

from __future__ import annotations

import hashlib
from importlib import resources

__all__ = ["LONG_TEXTS", "TEXT_NAMES", "real_text", "text_sha256"]

#: every shipped text, by name
TEXT_NAMES = (
    "statements",
    "execution_model",
    "import_statement",
    "try_statement",
    "assignment_statements",
)
#: the texts of about 2,000 tokens or more (for the loss against the position in the context)
LONG_TEXTS = ("execution_model", "import_statement", "try_statement", "assignment_statements")


def real_text(name: str) -> str:
    """One shipped text.

    Args:
        name: one of :data:`TEXT_NAMES` (``"statements"``: three paragraphs, about 230 tokens;
            the others: a whole section of the Language Reference, 2,000 to 2,600 tokens).

    Returns:
        str: the text, UTF-8 decoded, ending with one newline.

    Raises:
        ValueError: if ``name`` is not a shipped text (the message lists them).
    """
    if name not in TEXT_NAMES:
        raise ValueError(f"no text named {name!r}; the shipped texts are {TEXT_NAMES}.")
    return resources.files(__package__).joinpath("texts", f"{name}.txt").read_text("utf-8")


def text_sha256(name: str) -> str:
    """SHA-256 of a shipped text's UTF-8 bytes (part of the cache keys of the analyses).

    Args:
        name: one of :data:`TEXT_NAMES`.

    Returns:
        str: 64 hex digits.
    """
    return hashlib.sha256(real_text(name).encode("utf-8")).hexdigest()
