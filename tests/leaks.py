"""What a published file must never hold: a path, or the user name, of the machine that built it.

Shared by the built-site test (``test_built_site.py``, the site ``nox -s docs`` published) and
the build-behaviour tests (a failed build on a small temporary site). Text files are read as
they are; zip files (the downloadable examples, the package's wheel) member by member.
"""

from __future__ import annotations

import getpass
import re
import site
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the kinds of file a reader's browser or editor shows as text
PUBLISHED_TEXT = {".html", ".js", ".json", ".txt", ".py", ".ipynb", ".css", ".svg", ".rst", ".md"}
ARCHIVES = {".zip", ".whl"}
_SITE_PACKAGES = re.compile(r"[\w./-]*site-packages/")


def machine_paths(extra: Iterable[Path | str] = ()) -> list[str]:
    """The building machine's folders (and ``extra`` ones), and its user's home folders."""
    user = getpass.getuser()
    paths = {str(ROOT), str(Path.home()), sys.prefix, sys.base_prefix, *site.getsitepackages()}
    paths |= {f"/home/{user}/", f"/Users/{user}/", f"\\Users\\{user}\\"}
    paths |= {str(p) for p in extra}
    return sorted(p for p in paths if len(p) > 1)


def leaks_in(text: str, paths: list[str]) -> list[str]:
    """The machine paths and ``site-packages/`` paths found in ``text``."""
    return [p for p in paths if p in text] + _SITE_PACKAGES.findall(text)


def leaks(folder: Path, paths: list[str]) -> list[str]:
    """``"file: leak"`` for every published file under ``folder`` that holds a machine path."""
    found = []
    for file in sorted(folder.rglob("*")):
        if not file.is_file():
            continue
        where = file.relative_to(folder).as_posix()
        if file.suffix in PUBLISHED_TEXT:
            text = file.read_text(encoding="utf-8", errors="replace")
            found += [f"{where}: {leak}" for leak in leaks_in(text, paths)]
        elif file.suffix in ARCHIVES:
            with zipfile.ZipFile(file) as archive:
                for member in archive.namelist():
                    if Path(member).suffix in PUBLISHED_TEXT | {".dist-info", ""}:
                        text = archive.read(member).decode("utf-8", errors="replace")
                        found += [f"{where}!{member}: {leak}" for leak in leaks_in(text, paths)]
    return found
