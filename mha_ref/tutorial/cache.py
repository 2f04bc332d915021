"""One on-disk cache for every cached artefact: trainings, sweeps, analyses, a model's weights.

If the environment variable ``MHA_REF_CACHE_DIR`` names a folder, cached functions store their
results there, keyed by a SHA-256 of the function name, all arguments, the torch version and
the source of the code that computes the result: the ``mha_ref`` modules in the import closure
of the module that defines ``compute`` (:mod:`mha_ref.tutorial.sources`). A change to any file
the computation can run is a different key, so a cached result is never stale; a change to a
file it cannot run (a plot, another example's lab module) keeps it. Without the variable
nothing is cached. The docs build runs every example twice (once per language); the second run
is a cache hit.

Every entry is one file of one layout, whatever it holds: a format line, a JSON header (the key
it was stored under, its codec, the payload's size and SHA-256), then the payload. A codec says
how a value becomes a payload and back: :data:`PICKLE` for any picklable result (the default),
:data:`TENSORS` for tensors that should be read without a copy (the real model's weights:
:func:`mha_ref.tutorial.real_models.smollm2.load_smollm2`). Every read checks the format, the
key, the size and the checksum before the codec sees a byte, and the codec reads the very memory
that was checked (the file is mapped once; the tensors are views of that mapping). An entry that
fails (a file damaged on disk, truncated, edited, or copied under another name) is not used: a
line on the process's standard error says which file and why, the result is computed again
and the file replaced. A damaged entry therefore costs time, never a wrong number.

What the check costs, measured on the 2-core build machine with the file in the page cache:
the weights entry (540 MB) hashes in 0.35 s of CPU time (SHA-256 at about 1.5 GB/s; reading
the entry went from 0.23 s to 0.58 s of CPU), 1.0 to 1.4 s of wall time while other work kept
the machine's load average at 8 to 10. A process pays it once, at its first
:func:`~mha_ref.tutorial.real_models.smollm2.load_smollm2` (the model is then kept in the process),
against about 8 s of CPU to read the model file again. Cheaper designs were not honest: a
check remembered from an earlier process (by size and modification time) misses bytes changed
since, and a check of some tensors only leaves others unchecked. Checking each tensor as it is
first used would save nothing: every forward pass uses them all.
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import mmap
import os
import pickle
import re
import struct
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

from mha_ref.tutorial.sources import PACKAGE, fingerprint

__all__ = ["CACHE_ENV_VAR", "PICKLE", "TENSORS", "Codec", "cache_key", "cached", "compute_modules"]

#: Environment variable naming the cache folder; unset = no cache.
CACHE_ENV_VAR = "MHA_REF_CACHE_DIR"

#: The first line of every entry: the format, so that another layout is never misread.
_MAGIC = b"mha_ref cache entry, format 2\n"

T = TypeVar("T")

#: Payloads start at, and tensors inside them are padded to, multiples of this many bytes.
_ALIGN = 64


# ------------------------------------------------------------------------------------------------
# codecs: how a payload is written and read
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Codec:
    """How an entry's payload is written and read; the checks around it are the cache's own.

    A codec never sees a file: :func:`cached` hashes the chunks ``encode`` returns and writes
    them after the entry's header, and hands ``decode`` the payload only after its size and
    checksum matched. Two exist, :data:`PICKLE` and :data:`TENSORS`; a new kind of artefact
    needs a new codec only if neither stores it.

    Attributes:
        name: recorded in each entry's header; an entry of another codec is not read.
        suffix: the entry's file name ending (``".pkl"``).
        encode: the value -> the payload, as a list of bytes-like chunks in order.
        decode: the payload (a ``memoryview`` of the checked bytes) -> an equal value.
    """

    name: str
    suffix: str
    encode: Callable[[Any], list]
    decode: Callable[[memoryview], Any]


def _encode_pickle(value: Any) -> list:
    return [pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)]


def _decode_pickle(payload: memoryview) -> Any:
    return pickle.loads(payload)


#: Any picklable result (trainings, sweeps, analyses), read back as a copy.
PICKLE = Codec("pickle", ".pkl", _encode_pickle, _decode_pickle)

#: The key of the JSON object that stands for a tensor in a :data:`TENSORS` payload.
_TENSOR_TAG = "__tensor__"


def _padding(size: int) -> int:
    return -size % _ALIGN


def _encode_tensors(value: Any) -> list:
    """The payload: the skeleton's length (8 bytes), the skeleton (JSON), then each tensor's
    bytes, every part starting at a multiple of :data:`_ALIGN`."""
    tensors: list[torch.Tensor] = []

    def skeleton(node: Any) -> Any:
        if isinstance(node, torch.Tensor):
            tensors.append(node.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8))
            return {_TENSOR_TAG: [str(node.dtype).removeprefix("torch."), list(node.shape)]}
        if isinstance(node, dict):
            for k in node:
                if not isinstance(k, str) or k == _TENSOR_TAG:
                    raise TypeError(
                        f"TENSORS stores dicts with str keys other than {_TENSOR_TAG!r}, got "
                        f"the key {k!r}; make the keys strings, or store the result with the "
                        f"PICKLE codec"
                    )
            return {k: skeleton(v) for k, v in node.items()}
        if isinstance(node, list):
            return [skeleton(v) for v in node]
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        raise TypeError(  # a tuple too: it would come back as a list
            f"TENSORS stores tensors, dicts, lists and JSON values, not {type(node).__name__}; "
            f"store such a result with the PICKLE codec"
        )

    text = json.dumps(skeleton(value)).encode()
    head = struct.pack("<Q", len(text)) + text
    chunks: list = [head + bytes(_padding(len(head)))]
    for data in tensors:
        chunks.append(memoryview(data.numpy()))
        chunks.append(bytes(_padding(data.numel())))
    return chunks


def _decode_tensors(payload: memoryview) -> Any:
    """The value, each tensor a view of ``payload`` (no copy)."""
    (length,) = struct.unpack_from("<Q", payload)
    offset = 8 + length
    offset += _padding(offset)

    def build(node: Any) -> Any:
        nonlocal offset
        if isinstance(node, dict) and _TENSOR_TAG in node:
            dtype_name, shape = node[_TENSOR_TAG]
            dtype = getattr(torch, dtype_name)
            count = math.prod(shape)
            if count == 0:
                return torch.empty(shape, dtype=dtype)
            tensor = torch.frombuffer(payload, dtype=dtype, count=count, offset=offset)
            offset += tensor.nbytes + _padding(tensor.nbytes)
            return tensor.reshape(shape)
        if isinstance(node, dict):
            return {k: build(v) for k, v in node.items()}
        if isinstance(node, list):
            return [build(v) for v in node]
        return node

    value = build(json.loads(bytes(payload[8 : 8 + length])))
    if offset != payload.nbytes:
        raise ValueError(f"the tensors end at byte {offset} of {payload.nbytes}")
    return value


#: Nested dicts (str keys) and lists of tensors and JSON values (a model's weights, its
#: config, its tokenizer as JSON), read back with every tensor a view of the file mapped into
#: memory, on the CPU: no copy. Anything else (a tuple too) is a ``TypeError``.
TENSORS = Codec("tensors", ".tensors", _encode_tensors, _decode_tensors)


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


def cached(
    function: str,
    arguments: dict[str, Any],
    compute: Callable[[], T],
    *,
    codec: Codec | None = None,
    keep_latest: bool = False,
) -> T:
    """Return ``compute()``, read from or written to the cache folder when one is set.

    The key (:func:`cache_key`) covers the source of the import closure of the module that
    defines ``compute`` (:func:`compute_modules`). So ``compute`` must get everything else it
    depends on from ``arguments``, or from objects that code built. Every read checks the
    entry's key, size and checksum before its payload is used; an entry that fails is reported
    on standard error, computed again and replaced.

    Args:
        function: the name of the cached function (part of the key and of the file name).
        arguments: every argument the result depends on (part of the key).
        compute: computes the result when it is not cached.
        codec: how the result is stored: :data:`PICKLE` (default: any picklable result) or
            :data:`TENSORS` (nested dicts and lists of tensors and JSON values, read back as
            views of the file mapped into memory, without a copy).
        keep_latest: when storing, delete the other entries of ``function`` first (for large
            entries, such as a model's weights, of which only the newest is worth keeping).

    Returns:
        The result of ``compute()``, or an equal copy read from the cache.

    Raises:
        TypeError: If an argument is not JSON-able (see :func:`cache_key`), or the result is
            not one that ``codec`` can store.
    """
    codec = PICKLE if codec is None else codec
    directory = os.environ.get(CACHE_ENV_VAR)
    if not directory:
        return compute()
    modules = compute_modules(compute)
    key = cache_key(function, arguments, modules)
    if modules is None and (own := _defining_file(compute)) is not None:
        key = hashlib.sha256(f"{key}\0{own}".encode()).hexdigest()
    folder = Path(directory)
    path = folder / f"{function}-{key}{codec.suffix}"
    if path.is_file():
        try:
            return _read_entry(path, key, codec)
        except _DamagedEntry as damage:
            _report(f"{path}: {damage}; computing it again and replacing the file")
    result = compute()
    if keep_latest:
        _remove_other_entries(folder, function, path)
    _write_entry(path, key, function, arguments, result, codec)
    return result


# ------------------------------------------------------------------------------------------------
# one entry: the format line, a JSON header, the payload
# ------------------------------------------------------------------------------------------------


class _DamagedEntry(Exception):
    """A cache file that is not a sound entry for its key (the message says what is wrong)."""


def _read_entry(path: Path, key: str, codec: Codec) -> Any:
    """The result stored in ``path``, after checking its format, key, size and checksum.

    The file is mapped into memory (copy-on-write: nothing written through it reaches the
    file), the checksum is computed over the mapped payload, and the codec decodes that same
    memory: the bytes that were checked are the bytes that are used.
    """
    with path.open("rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            raise _DamagedEntry("it is empty")
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
    if mapped[: len(_MAGIC)] != _MAGIC:
        raise _DamagedEntry("not a cache entry of this format")
    end = mapped.find(b"\n", len(_MAGIC))
    try:
        header = json.loads(mapped[len(_MAGIC) : end]) if end >= 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise _DamagedEntry("its header is not readable")
    if header.get("key") != key:
        raise _DamagedEntry(f"it was stored under another key ({header.get('key')!r})")
    stored_codec = header.get("codec", PICKLE.name)  # format 2 entries without one are pickles
    if stored_codec != codec.name:
        raise _DamagedEntry(f"it holds a {stored_codec!r} payload, not {codec.name!r}")
    payload = memoryview(mapped)[end + 1 :]
    size = header.get("size", payload.nbytes)
    if not isinstance(size, int) or isinstance(size, bool):
        raise _DamagedEntry("its header is not readable")
    if payload.nbytes < size:
        raise _DamagedEntry(f"it is truncated ({payload.nbytes} of {size} payload bytes)")
    if payload.nbytes > size:
        raise _DamagedEntry(f"it has {payload.nbytes - size} bytes more than its header says")
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise _DamagedEntry("its content does not match its checksum")
    try:
        return codec.decode(payload)
    except Exception as error:  # the checksum matched, but the payload does not load here
        raise _DamagedEntry(f"its content does not load ({type(error).__name__})") from None


def _write_entry(
    path: Path, key: str, function: str, arguments: dict, result: Any, codec: Codec
) -> None:
    """Store ``result`` under ``key``: the format line, a JSON header, the codec's payload.

    The header line is padded with spaces so that the payload starts at a multiple of
    :data:`_ALIGN` bytes (a mapped tensor's data is then aligned in memory).
    """
    chunks = codec.encode(result)
    digest, size = hashlib.sha256(), 0
    for chunk in chunks:
        digest.update(chunk)
        size += memoryview(chunk).nbytes
    header = {
        "key": key,
        "function": function,
        "arguments": _canonical(arguments),
        "torch": torch.__version__,
        "codec": codec.name,
        "size": size,
        "sha256": digest.hexdigest(),
    }
    line = _MAGIC + json.dumps(header, sort_keys=True).encode()
    line += b" " * (-(len(line) + 1) % _ALIGN) + b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
        f.write(line)
        for chunk in chunks:
            f.write(chunk)
    os.replace(f.name, path)  # atomic: readers never see a half-written file


def _remove_other_entries(folder: Path, function: str, keep: Path) -> None:
    """Delete ``function``'s entries in ``folder`` other than ``keep`` (any codec's suffix)."""
    name = re.compile(rf"{re.escape(function)}-[0-9a-f]{{16,64}}\.[a-z]+")
    for old in folder.glob(f"{glob.escape(function)}-*"):
        if old != keep and name.fullmatch(old.name):
            old.unlink(missing_ok=True)


def _report(message: str) -> None:
    """Write one line to the process's own standard error.

    Not to ``sys.stderr``: while sphinx-gallery runs an example it captures both streams into
    the page, and this line belongs in the build's log, not in the published output.
    """
    stream = sys.__stderr__ or sys.stderr
    print(f"mha_ref.tutorial.cache: {message}", file=stream, flush=True)
