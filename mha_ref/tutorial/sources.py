"""Which source files of ``mha_ref`` a piece of code can run, read from its import statements.

Two things need to know when a result is out of date: the training cache
(:mod:`mha_ref.tutorial.cache` keys a result by the source of the code that computed it) and the
docs build (it runs an example again when a file the example depends on changed). Both ask this
module for the **import closure** of a module or a script: the ``mha_ref`` modules it imports,
the modules those import, and so on, and then for a fingerprint of their files.

The closure is read from the source, never from what happens to be imported in this process,
and it errs on the side of too much, never too little (a result that is kept although its code
changed would be a wrong number on a page):

* every ``import`` and ``from ... import`` counts, wherever it is (inside a function, under an
  ``if``), whether or not it runs;
* importing ``mha_ref.tutorial.plotting`` runs ``mha_ref/__init__.py`` and
  ``mha_ref/tutorial/__init__.py`` first, so those count, with everything they import: every
  module of the tutorial therefore depends on the whole attention reference, which
  ``mha_ref/__init__.py`` imports;
* ``from mha_ref.tutorial import plotting`` counts the package and, since ``plotting`` is one of
  its modules, ``mha_ref.tutorial.plotting``; relative imports are resolved against the package;
* only modules of ``mha_ref`` are followed. Other packages (torch, numpy, matplotlib) are not
  fingerprinted: their versions are pinned (the cache key holds torch's version, and the docs
  build reruns everything when the pinned versions change);
* ``importlib.import_module`` or ``__import__`` with a literal name counts like an import; with
  any other argument the closure cannot be known, and :func:`imported_names` raises
  ``ValueError`` (the tests check that ``mha_ref`` has no such call);
* every file of the package that is neither Python nor served to a browser (``static/``) is
  data a module might read, and is in every fingerprint.

A fingerprint is of what a file does, not of its bytes (:func:`file_hash`): a Python file is
hashed as its syntax tree without docstrings (comments are not in the tree, nor are line
numbers), so an edit to a docstring or a comment neither re-runs an example nor discards a
cached training; any other file is hashed byte for byte.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "PACKAGE",
    "file_hash",
    "fingerprint",
    "import_closure",
    "imported_names",
    "module_file",
]

#: the package whose modules are followed
PACKAGE = "mha_ref"

#: the folder of the ``mha_ref`` package (``.../mha_ref``)
_PACKAGE_DIR = Path(__file__).resolve().parents[1]

#: what the package holds that no module reads: compiled files, the browser's files, a marker
_NOT_DATA = {"__pycache__", "static"}


def module_file(name: str) -> Path | None:
    """The source file of the ``mha_ref`` module ``name``, or ``None`` if there is none.

    Args:
        name: a dotted module name, e.g. ``"mha_ref.tutorial.plotting"``.

    Returns:
        Path | None: ``mha_ref/tutorial/plotting.py`` (``__init__.py`` for a package), or
        ``None`` for a name outside ``mha_ref`` or one that names no file (an attribute, such
        as ``mha_ref.MultiHeadAttention``).
    """
    parts = name.split(".")
    if parts[0] != PACKAGE or not all(part.isidentifier() for part in parts):
        return None
    base = _PACKAGE_DIR.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if len(parts) > 1 and base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def imported_names(path: Path | str, module: str | None = None) -> set[str]:
    """The absolute names of the modules that the import statements of a file name.

    Parents are included (``import a.b.c`` names ``a``, ``a.b`` and ``a.b.c``), and for
    ``from a.b import c`` both ``a.b`` and ``a.b.c`` (which may be an attribute rather than a
    module: :func:`module_file` tells).

    Args:
        path: a Python source file.
        module: the file's module name, needed to resolve relative imports (``from . import
            x``); ``None`` for a script.

    Returns:
        set[str]: module names, of any package.

    Raises:
        ValueError: If the file imports a module whose name is computed at run time
            (``importlib.import_module(name)`` with anything but a string literal), or a
            relative import has no package to be relative to.
        SyntaxError: If the file is not valid Python.
    """
    path = Path(path)
    stat = path.stat()
    return set(_imported_names(str(path), stat.st_mtime_ns, stat.st_size, module))


@functools.lru_cache(maxsize=512)
def _imported_names(
    path: str, mtime_ns: int, size: int, module: str | None
) -> frozenset[str]:
    """:func:`imported_names`, parsed once per version of the file (its time and size)."""
    source = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(source, filename=path)
    is_package = Path(path).name == "__init__.py"
    package = module if is_package else (module.rpartition(".")[0] if module else None)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names |= _with_parents(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package, path, node.lineno)
            names |= _with_parents(base)
            names |= {f"{base}.{alias.name}" for alias in node.names if alias.name != "*"}
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func):
            argument = node.args[0] if node.args else None
            if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                raise ValueError(
                    f"{path}, line {node.lineno}: a module imported by a name computed at run "
                    f"time cannot be followed; import it by its literal name"
                )
            names |= _with_parents(argument.value)
    return frozenset(names)


def _with_parents(name: str) -> set[str]:
    """``"a.b.c"`` -> ``{"a", "a.b", "a.b.c"}``: importing a module runs its parents first."""
    parts = name.split(".")
    return {".".join(parts[: i + 1]) for i in range(len(parts))}


def _absolute(
    name: str | None, level: int, package: str | None, path: str, lineno: int
) -> str:
    """The absolute module name of ``from <level dots><name> import ...``."""
    if level == 0:
        return name or ""
    if not package:
        raise ValueError(f"{path}, line {lineno}: a relative import outside a package")
    parts = package.split(".")
    if level - 1 >= len(parts):
        raise ValueError(f"{path}, line {lineno}: a relative import above the top package")
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{name}" if name else base


def _is_dynamic_import(func: ast.expr) -> bool:
    """Whether a call is ``importlib.import_module(...)``, ``import_module(...)`` or
    ``__import__(...)``."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


def import_closure(modules: Iterable[str]) -> list[str]:
    """Every ``mha_ref`` module that importing ``modules`` can run, the modules included.

    Importing a module runs its parent packages first, so they and their imports are in it.

    Args:
        modules: dotted module names; names outside ``mha_ref`` are ignored.

    Returns:
        list[str]: the closure, sorted.

    Raises:
        ValueError: If a module of the closure imports by a computed name (see
            :func:`imported_names`).
    """
    named = set().union(*(_with_parents(name) for name in modules))  # parents run first
    todo = [name for name in sorted(named) if module_file(name) is not None]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for imported in imported_names(module_file(name), name):
            if imported not in seen and module_file(imported) is not None:
                todo.append(imported)
    return sorted(seen)


def fingerprint(modules: Iterable[str] | None = None) -> dict[str, str]:
    """The hash (:func:`file_hash`) of every file in the import closure of ``modules``, and of
    the package's data.

    Args:
        modules: module names (see :func:`import_closure`); ``None`` for every module of
            ``mha_ref``.

    Returns:
        dict[str, str]: ``{"mha_ref/tutorial/plotting.py": "<hex digest>", ...}``, paths
        relative to the folder that holds ``mha_ref``, sorted.
    """
    if modules is None:
        files = sorted(_PACKAGE_DIR.rglob("*.py"))
    else:
        files = [module_file(name) for name in import_closure(modules)]
    files += _data_files()
    root = _PACKAGE_DIR.parent
    return {
        path.relative_to(root).as_posix(): file_hash(path) for path in sorted(set(files))
    }


def file_hash(path: Path | str) -> str:
    """SHA-256 of what a file does: for Python, its code; for any other file, its bytes.

    A Python file is hashed as ``ast.dump`` of its syntax tree with every docstring removed (of
    the module, of each class and function). Comments and line numbers are not in that dump, so
    an edit to a docstring or a comment, or a line moved down by one, gives the same hash, and
    any edit to the code gives another one. A Python file that does not parse is hashed by its
    bytes: an edit to it still changes the hash. The dump's format is Python's own, so another
    version of Python may hash the same file differently (everything is then out of date once).

    Args:
        path: the file.

    Returns:
        str: 64 hexadecimal digits.

    Raises:
        OSError: If the file cannot be read (``FileNotFoundError`` when it does not exist).
    """
    data = Path(path).read_bytes()
    if Path(path).suffix == ".py":
        try:
            tree = ast.parse(data, filename=str(path))
        except (SyntaxError, ValueError):  # ValueError: a NUL byte in the source
            pass
        else:
            data = b"python-ast\0" + ast.dump(_without_docstrings(tree)).encode()
    return hashlib.sha256(data).hexdigest()


def _without_docstrings(tree: ast.Module) -> ast.Module:
    """``tree`` with the docstring of the module and of each class and function removed, in
    place; a body left empty gets a ``pass``, which the docstring stood for."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
            continue
        first = node.body[0] if node.body else None
        if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            node.body = node.body[1:] or [ast.Pass()]
    return tree


def _data_files() -> list[Path]:
    """Files of the package that a module could read: not Python, not for the browser."""
    return [
        path
        for path in sorted(_PACKAGE_DIR.rglob("*"))
        if path.is_file()
        and path.suffix not in (".py", ".pyc", ".typed")
        and not _NOT_DATA & set(path.relative_to(_PACKAGE_DIR).parts)
    ]
