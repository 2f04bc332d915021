"""Which checkout's ``mha_ref`` a build or a test run uses: this one, or it says so and stops.

A nox session's environment holds an editable install of the checkout that created it. Copy that
environment to another checkout (or run the other checkout's build with it), and ``import
mha_ref`` quietly reads the first checkout's package: the site and the tests then show code that
is not the code beside them. So every build and test session of ``noxfile.py`` puts the checkout
first on ``sys.path`` (``PYTHONPATH``) and runs this check, and ``build_languages.py`` does the
same before it imports anything:

    python docs/_ext/checkout_guard.py   # exit status 0, or 1 and what is wrong and the fix

The check finds where ``import mha_ref`` would load the package from (``importlib.util.find_spec``:
nothing is imported, so it takes milliseconds) and fails unless that is inside the checkout.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

#: the checkout this file belongs to
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "mha_ref"


class WrongCheckoutError(RuntimeError):
    """``mha_ref`` would be imported from outside the checkout being built or tested."""


def put_checkout_first(root: Path = ROOT) -> None:
    """Put ``root`` first on ``sys.path``, and first on ``PYTHONPATH`` for child processes.

    Args:
        root: the checkout whose package must be imported (default: the one holding this file).

    Returns:
        None. ``sys.path`` and ``os.environ["PYTHONPATH"]`` start with ``root`` afterwards (an
        entry already there is moved to the front, not repeated).

    Source: this project (``docs/_ext/checkout_guard.py``).
    """
    entry = str(Path(root).resolve())
    sys.path[:] = [entry, *(p for p in sys.path if p != entry)]
    others = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != entry]
    os.environ["PYTHONPATH"] = os.pathsep.join([entry, *others])


def package_file(name: str = PACKAGE) -> Path | None:
    """The file ``import name`` loads (its ``__init__.py``), without importing it.

    Args:
        name: a top-level package name (default ``"mha_ref"``).

    Returns:
        The resolved path of the module that is already imported, or that ``import name`` would
        load; None when the package cannot be found at all.

    Source: this project; ``importlib.util.find_spec`` from Python's standard library.
    """
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None) if module is not None else None
    if origin is None:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
    return Path(origin).resolve() if origin else None


def require_checkout(root: Path = ROOT, name: str = PACKAGE) -> Path:
    """Check that ``import name`` loads the package of the checkout ``root``.

    Args:
        root: the checkout being built or tested (default: the one holding this file).
        name: the package to check (default ``"mha_ref"``).

    Returns:
        The path of the package's ``__init__.py``, inside ``root``.

    Raises:
        WrongCheckoutError: the package is missing, or would be loaded from outside ``root``
            (an environment made by, or copied from, another checkout); the message names both
            folders and the fix.

    Source: this project (``docs/_ext/checkout_guard.py``).
    """
    root = Path(root).resolve()
    found = package_file(name)
    if found is not None and found.is_relative_to(root):
        return found
    given = "not found at all" if found is None else f"loaded from {found}"
    raise WrongCheckoutError(
        f"{name}: expected the package of this checkout ({root / name}), but it is {given} "
        f"(this Python: {sys.executable}). The environment holds another checkout's package: "
        "an editable install made by another checkout, or a virtual environment copied from "
        f"one. Fix: put this checkout first on the path (PYTHONPATH={root}), or let nox make "
        "this checkout's own environment (nox -s <session> --reuse-venv=no)."
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: check, print the problem and return 1 if the package is another checkout's."""
    parser = argparse.ArgumentParser(
        prog="python docs/_ext/checkout_guard.py",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the checkout (default: the one of this script)"
    )
    args = parser.parse_args(argv)
    try:
        require_checkout(args.root)
    except WrongCheckoutError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
