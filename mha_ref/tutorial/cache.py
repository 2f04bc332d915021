"""An on-disk cache for deterministic results (trainings, sweeps).

If the environment variable ``MHA_REF_CACHE_DIR`` names a folder, cached functions store their
results there, keyed by a SHA-256 of the function name, all arguments, the torch version and
the source of the code that computes the result: the ``mha_ref`` modules in the import closure
of the module that defines ``compute`` (:mod:`mha_ref.tutorial.sources`). A change to any file
the computation can run is a different key, so a cached result is never stale; a change to a
file it cannot run (a plot, another example's lab module) keeps it. Without the variable
nothing is cached. The docs build runs every example twice (once per language); the second run
is a cache hit.

Each entry is checked when it is read: the file holds, before the pickled result, the key it
was stored under and a SHA-256 of the pickled bytes. An entry whose checksum or key does not
match (a file damaged on disk, edited, or copied under another name) is not used: a line on the
process's standard error says which file and why, the result is computed again and the file
replaced. A damaged entry therefore costs time, never a wrong number.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch

from mha_ref.tutorial.sources import PACKAGE, fingerprint

__all__ = ["CACHE_ENV_VAR", "cache_key", "cached", "compute_modules"]

#: Environment variable naming the cache folder; unset = no cache.
CACHE_ENV_VAR = "MHA_REF_CACHE_DIR"

#: The first line of every entry: the format, so that another layout is never misread.
_MAGIC = b"mha_ref cache entry, format 2\n"

T = TypeVar("T")


# ------------------------------------------------------------------------------------------------


def _canonical(value: Any) -> Any:
    """Arguments as JSON-able data; tuples and lists alike, floats by ``repr``."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float):
        return {"float": repr(value)}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"cannot build a cache key from an argument of type {type(value).__name__}")


def compute_modules(compute: Callable[[], Any]) -> list[str] | None:
    """The ``mha_ref`` modules whose import closure ``compute`` can run, or ``None``.

    A function (or lambda) defined in an ``mha_ref`` module can run that module's import
    closure, and the objects it holds were built by that code (``ablation_report`` holds a
    training result: ``mha_ref.tutorial.ablation`` imports the training). A function defined
    anywhere else (a test, a script) gives ``None``: every module of ``mha_ref``, and
    :func:`cache_key` adds that function's own file.

    Args:
        compute: what :func:`cached` calls.

    Returns:
        list[str] | None: ``[module name]``, or ``None``.
    """
    while hasattr(compute, "func"):  # functools.partial
        compute = compute.func
    module = getattr(compute, "__module__", None) or ""
    if module == PACKAGE or module.startswith(f"{PACKAGE}."):
        return [module]
    return None


def _defining_file(compute: Callable[[], Any]) -> str | None:
    """SHA-256 of the file that defines ``compute`` when it is outside ``mha_ref``."""
    while hasattr(compute, "func"):
        compute = compute.func
    code = getattr(compute, "__code__", None)
    if code is None or not Path(code.co_filename).is_file():
        return None
    return hashlib.sha256(Path(code.co_filename).read_bytes()).hexdigest()


def cache_key(
    function: str, arguments: dict[str, Any], modules: Sequence[str] | None = None
) -> str:
    """The cache key: SHA-256 of (function name, arguments, torch version, source files).

    Args:
        function: the name of the cached function.
        arguments: every argument the result depends on (JSON-able values: numbers, strings,
            lists, dicts).
        modules: the ``mha_ref`` modules the computation runs; their import closure's files
            are hashed (:func:`mha_ref.tutorial.sources.fingerprint`). ``None``: every file of
            ``mha_ref``.

    Returns:
        str: 64 hexadecimal digits.

    Raises:
        TypeError: If an argument is not JSON-able.
    """
    payload = {
        "sources": fingerprint(modules),
        "function": function,
        "arguments": _canonical(arguments),
        "torch": torch.__version__,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def cached(function: str, arguments: dict[str, Any], compute: Callable[[], T]) -> T:
    """Return ``compute()``, read from or written to the cache folder when one is set.

    The key (:func:`cache_key`) covers the source of the import closure of the module that
    defines ``compute`` (:func:`compute_modules`). So ``compute`` must get everything else it
    depends on from ``arguments``, or from objects that code built. An entry that fails its
    checks is reported on standard error, computed again and replaced.

    Args:
        function: the name of the cached function (part of the key and of the file name).
        arguments: every argument the result depends on (part of the key).
        compute: computes the result when it is not cached.

    Returns:
        The result of ``compute()``, or an equal copy read from the cache.

    Raises:
        TypeError: If an argument is not JSON-able (see :func:`cache_key`).
    """
    directory = os.environ.get(CACHE_ENV_VAR)
    if not directory:
        return compute()
    modules = compute_modules(compute)
    key = cache_key(function, arguments, modules)
    if modules is None and (own := _defining_file(compute)) is not None:
        key = hashlib.sha256(f"{key}\0{own}".encode()).hexdigest()
    folder = Path(directory)
    path = folder / f"{function}-{key}.pkl"
    if path.is_file():
        try:
            return _read_entry(path, key)
        except _DamagedEntry as damage:
            _report(f"{path}: {damage}; computing it again and replacing the file")
    result = compute()
    _write_entry(path, key, function, arguments, result)
    return result


class _DamagedEntry(Exception):
    """A cache file that is not a sound entry for its key (the message says what is wrong)."""


def _read_entry(path: Path, key: str) -> Any:
    """The result stored in ``path``, after checking its format, key and checksum."""
    data = path.read_bytes()
    if not data.startswith(_MAGIC):
        raise _DamagedEntry("not a cache entry of this format")
    header_line, newline, payload = data[len(_MAGIC) :].partition(b"\n")
    try:
        header = json.loads(header_line)
    except ValueError:
        raise _DamagedEntry("its header is not readable") from None
    if not newline or not isinstance(header, dict):
        raise _DamagedEntry("its header is not readable")
    if header.get("key") != key:
        raise _DamagedEntry(f"it was stored under another key ({header.get('key')!r})")
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise _DamagedEntry("its content does not match its checksum")
    try:
        return pickle.loads(payload)
    except Exception as error:  # the checksum matched, but the pickle does not load here
        raise _DamagedEntry(f"its content does not load ({type(error).__name__})") from None


def _write_entry(path: Path, key: str, function: str, arguments: dict, result: Any) -> None:
    """Store ``result`` under ``key``: the format line, a JSON header, the pickled result."""
    payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    header = {
        "key": key,
        "function": function,
        "arguments": _canonical(arguments),
        "torch": torch.__version__,
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
        f.write(_MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload)
    os.replace(f.name, path)  # atomic: readers never see a half-written file


def _report(message: str) -> None:
    """Write one line to the process's own standard error.

    Not to ``sys.stderr``: while sphinx-gallery runs an example it captures both streams into
    the page, and this line belongs in the build's log, not in the published output.
    """
    stream = sys.__stderr__ or sys.stderr
    print(f"mha_ref.tutorial.cache: {message}", file=stream, flush=True)
