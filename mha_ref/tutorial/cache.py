"""An on-disk cache for deterministic results (trainings, sweeps).

If the environment variable ``MHA_REF_CACHE_DIR`` names a folder, cached functions store their
results there, keyed by a SHA-256 of the source of every ``mha_ref`` file (the attention
reference and the tutorial alike), the function name, all arguments and the torch version; any
change to one of these is a different key, so a cached result is never stale. Without the
variable nothing is cached. The docs build runs every example twice (once per language); the
second run is a cache hit.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

__all__ = ["CACHE_ENV_VAR", "cache_key", "cached"]

#: Environment variable naming the cache folder; unset = no cache.
CACHE_ENV_VAR = "MHA_REF_CACHE_DIR"

#: The package whose source is fingerprinted: ``mha_ref`` and all its sub-packages.
_PACKAGE_DIR = Path(__file__).resolve().parents[1]

T = TypeVar("T")


# ------------------------------------------------------------------------------------------------


def _source_fingerprint() -> str:
    """SHA-256 of every ``.py`` file of the ``mha_ref`` package (paths and contents), in order."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE_DIR.rglob("*.py")):
        digest.update(path.relative_to(_PACKAGE_DIR).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


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


def cache_key(function: str, arguments: dict[str, Any]) -> str:
    """The cache key: SHA-256 of (mha_ref source, function name, arguments, torch version)."""
    payload = {
        "source": _source_fingerprint(),
        "function": function,
        "arguments": _canonical(arguments),
        "torch": torch.__version__,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def cached(function: str, arguments: dict[str, Any], compute: Callable[[], T]) -> T:
    """Return ``compute()``, read from or written to the cache folder when one is set.

    Args:
        function: the name of the cached function (part of the key and of the file name).
        arguments: every argument the result depends on (part of the key).
        compute: computes the result when it is not cached.
    """
    directory = os.environ.get(CACHE_ENV_VAR)
    if not directory:
        return compute()
    folder = Path(directory)
    path = folder / f"{function}-{cache_key(function, arguments)}.pkl"
    if path.is_file():
        try:
            with path.open("rb") as f:
                return pickle.load(f)
        except Exception:  # a damaged file is recomputed and replaced
            pass
    result = compute()
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False) as f:
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(f.name, path)  # atomic: readers never see a half-written file
    return result


