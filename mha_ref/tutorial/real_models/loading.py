"""Loading a real model: its weights through the checksummed disk cache, and its threads.

Reading a GGUF file and dequantising its tensors costs seconds of CPU (SmolLM2 about 6 s,
Gemma 3 about 4 s). When the environment variable ``MHA_REF_CACHE_DIR`` names a folder (the
docs build and the tests set it), :func:`cached_weights` stores the float32 weights, the
config and the tokenizer there once, as one :data:`~mha_ref.tutorial.cache.TENSORS` entry of
the cache, keyed by the model file's SHA-256, the versions of torch, ``gguf`` and
``tokenizers`` and the source of the model's loading code. A later process maps that file into
memory, checks its key and its SHA-256 (about 0.35 s of CPU per 540 MB, see
:mod:`mha_ref.tutorial.cache`) and uses the tensors where they lie; a damaged file is reported
on standard error, read again from the GGUF file and replaced. Only the newest entry of each
model is kept. These files are the build's own: never published (the models' licences).

:func:`model_threads` fixes the torch threads of the real models' measurements.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import torch

from mha_ref.tutorial.cache import TENSORS, cached, compute_modules
from mha_ref.tutorial.real_models.packages import distribution_version, require_package

__all__ = ["MAX_THREADS_ENV_VAR", "MODEL_THREADS", "cached_weights", "model_threads"]


def cached_weights(name: str, model_file_sha256: str, read: Callable[[], dict]) -> dict:
    """``read()``, through the cache when ``MHA_REF_CACHE_DIR`` is set: one
    :data:`~mha_ref.tutorial.cache.TENSORS` entry, checked on every read, whose tensors are
    views of the file mapped into memory.

    Args:
        name: the entry's name (``"smollm2-weights"``), also its file name's start.
        model_file_sha256: the SHA-256 of the model file ``read`` reads (part of the key).
        read: reads the model file and returns nested dicts and lists of tensors and JSON
            values (the state dict, the config as a dict, the tokenizer's JSON). It must be
            defined in the model's own module: the key covers the source of that module's
            import closure (:func:`mha_ref.tutorial.cache.compute_modules`), so a change to
            the model's loading code is a new entry.

    Returns:
        dict: what ``read`` returned, or an equal value read from the cache.

    Raises:
        ValueError: if ``read`` is not defined in a module of ``mha_ref``.
        ModuleNotFoundError: if ``gguf`` or ``tokenizers`` is missing.
    """
    if compute_modules(read) is None:
        raise ValueError(
            f"cached_weights: read must be a function of the model's mha_ref module (its source "
            f"is part of the key), got {read!r}"
        )
    arguments = {
        "model_file_sha256": model_file_sha256,
        "gguf": distribution_version("gguf"),
        "tokenizers": require_package("tokenizers").__version__,
    }
    # each entry is hundreds of MB: keep the newest only
    return cached(name, arguments, read, codec=TENSORS, keep_latest=True)


#: How many threads the real model's measurements use. A 512-token forward pass of SmolLM2
#: takes 2.2 s on one thread and 1.2 s on two, on a quiet 2-core machine. The outputs were
#: checked bit for bit equal between one and two threads; a fixed count keeps every machine
#: with two or more cores on the same arithmetic, so cached results and a reader's rerun print
#: the same digits.
MODEL_THREADS = 2
#: the environment variable that caps :func:`model_threads` (the site's build sets it)
MAX_THREADS_ENV_VAR = "MHA_REF_MAX_THREADS"


def _cores() -> int:
    """The cores this process may use: ``MHA_REF_MAX_THREADS`` when set, else every core."""
    value = os.environ.get(MAX_THREADS_ENV_VAR, "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(
                f"{MAX_THREADS_ENV_VAR} must be a positive integer, got {value!r}; "
                f"unset it to use every core"
            )
        return int(value)
    return os.cpu_count() or 1


@contextlib.contextmanager
def model_threads(threads: int = MODEL_THREADS):
    """Run the block with ``min(threads, cores)`` torch threads, then restore the count.

    The build runs the toy trainings on one thread (``OMP_NUM_THREADS=1``: their tensors are too
    small to share), and the real model's measurements inside this block. ``cores`` is
    ``os.cpu_count()``, or the environment variable ``MHA_REF_MAX_THREADS`` where it is set: the
    site's build sets it when examples run side by side, so that two of them never ask for more
    threads than the machine has (oversubscribed, the real-model examples ran 2-5 times slower).

    Args:
        threads: the wanted number of intra-op threads, at least 1.

    Raises:
        ValueError: if ``threads`` is not a positive int.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"model_threads: threads must be a positive int, got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(min(threads, _cores()))
    try:
        yield
    finally:
        torch.set_num_threads(before)
