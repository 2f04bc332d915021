"""Small timing and memory helpers shared by the benchmark example and ``nox -s bench``.

Three rules make a timing honest, and each one is a line below:

* **warm up** first (the first calls pay for lazy initialisation, allocator growth, kernel
  selection);
* **synchronise** the device before reading the clock: CUDA launches are asynchronous, so without
  ``torch.cuda.synchronize()`` you time the launch, not the work;
* report the **median** of several repeats, which a single slow outlier cannot move.

Nothing here asserts or prints a time: the numbers depend on the machine, so callers print them on
lines that are clearly marked as timings.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "MemoryReport",
    "environment",
    "measure_times",
    "peak_memory",
    "plot_benchmark",
    "tensor_bytes",
    "time_fn",
    "time_interleaved",
    "time_interleaved_spread",
    "torch_compile_status",
]


def _sync(device: torch.device | str | None) -> None:
    """Wait for all queued work on ``device`` (a no-op on CPU)."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def measure_times(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    repeats: int = 10,
    device: torch.device | str | None = "cpu",
    clock: Callable[[], float] = time.perf_counter,
) -> list[float]:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times timed.

    Args:
        fn: a callable with no arguments (wrap yours in a ``lambda``).
        warmup: untimed calls made first.
        repeats: timed calls; each is timed on its own.
        device: where ``fn`` runs; on CUDA the device is synchronised before each clock read.
        clock: a function returning seconds; tests pass a fake one.

    Returns:
        the ``repeats`` durations in seconds, in call order.
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 to compute a median, got {repeats}")
    for _ in range(warmup):
        fn()
    _sync(device)
    durations = []
    for _ in range(repeats):
        start = clock()
        fn()
        _sync(device)
        durations.append(clock() - start)
    return durations


def time_fn(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    repeats: int = 10,
    device: torch.device | str | None = "cpu",
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Median wall-clock seconds of one call of ``fn`` (see :func:`measure_times`)."""
    return statistics.median(
        measure_times(fn, warmup=warmup, repeats=repeats, device=device, clock=clock)
    )


def time_interleaved_spread(
    fns: Mapping[str, Callable[[], object]],
    *,
    warmup: int = 2,
    repeats: int = 9,
    device: torch.device | str | None = "cpu",
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, tuple[float, float, float]]:
    """Median, minimum and maximum seconds of each callable, timed in rounds: A, B, C, A, B, C, ...

    On a shared machine the load changes while a benchmark runs; timing the callables one after
    the other would give the first ones a different machine than the last. In rounds, a change
    of load hits every callable alike, so their ratios stay meaningful.

    Args:
        fns: a mapping ``{name: callable}``; each callable takes no arguments.
        warmup: untimed rounds first.
        repeats: timed rounds; each callable is timed once per round.
        device: where the callables run; on CUDA the device is synchronised around each call.
        clock: a function returning seconds; tests pass a fake one.

    Returns:
        ``{name: (median, min, max) seconds}``, in the order of ``fns``.
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 to compute a median, got {repeats}")
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    durations: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            _sync(device)
            start = clock()
            fn()
            _sync(device)
            durations[name].append(clock() - start)
    return {
        name: (statistics.median(values), min(values), max(values))
        for name, values in durations.items()
    }


def time_interleaved(
    fns: Mapping[str, Callable[[], object]],
    *,
    warmup: int = 2,
    repeats: int = 9,
    device: torch.device | str | None = "cpu",
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Median seconds of each callable, timed in rounds (:func:`time_interleaved_spread`).

    Returns:
        ``{name: median seconds}``, in the order of ``fns``.
    """
    spread = time_interleaved_spread(
        fns, warmup=warmup, repeats=repeats, device=device, clock=clock
    )
    return {name: median for name, (median, _, _) in spread.items()}


@dataclass(frozen=True)
class MemoryReport:
    """Peak memory that one call allocated, and how it was measured.

    Attributes:
        peak_bytes: the highest amount of tensor memory alive at once during the call, above what
            was allocated before it.
        method: the PyTorch API that measured ``peak_bytes``, to print beside the number (an API
            name, so that it reads the same in every language).
    """

    peak_bytes: int
    method: str

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / 2**20


@contextlib.contextmanager
def _quiet_stderr_fd() -> Iterator[None]:
    """Silence file descriptor 2 (C++ log lines such as kineto's ``profiler_start``)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _cpu_peak_from_profiler(fn: Callable[[], object]) -> int:
    """Peak live CPU tensor memory of ``fn``, rebuilt from the profiler's allocation events.

    ``tracemalloc`` cannot see torch's allocations (they come from C++), so we run ``fn`` under
    ``torch.profiler`` with ``profile_memory=True``. The profiler records one event per CPU
    allocation (positive bytes) and per free (negative bytes), with a timestamp, including the
    temporaries an operator allocates and frees inside itself. Summing them in time order gives
    the live-memory curve above what existed before; its maximum is the peak. (If the raw event
    list is unavailable, the per-operator net allocations are used instead, which miss
    operator-internal temporaries.)
    """
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr_fd():  # kineto logs a line on start and on stop
        prof.start()
    try:
        fn()
    finally:
        with _quiet_stderr_fd():
            prof.stop()
    try:
        raw = prof.profiler.kineto_results.events()
        changes = sorted(
            (event.start_ns(), event.nbytes())
            for event in raw
            if event.name() == "[memory]" and event.device_type().name == "CPU"
        )
    except AttributeError:  # no raw events: fall back to per-operator net allocations
        changes = sorted(
            (event.time_range.start, event.self_cpu_memory_usage) for event in prof.events()
        )
    live = peak = 0
    for _, nbytes in changes:
        live += nbytes
        peak = max(peak, live)
    return peak


def peak_memory(fn: Callable[[], object], device: torch.device | str = "cpu") -> MemoryReport:
    """Peak tensor memory allocated while ``fn`` runs once.

    * CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus what
      was allocated before the call.
    * CPU: the allocation events of ``torch.profiler`` (``profile_memory=True``), summed in time
      order (see ``_cpu_peak_from_profiler``). Every allocation made through PyTorch's CPU
      allocator is an event, including the temporaries an operator allocates and frees inside
      itself (e.g. the ``(L, S)`` scores of the math path of
      ``F.scaled_dot_product_attention``). Not seen: memory that a library allocates with its own
      ``malloc`` (some BLAS or oneDNN scratch space), and, if this torch build exposes no raw
      event list, operator-internal temporaries too (the fallback sums each operator's net
      allocation).

    Call ``fn`` once beforehand if it has one-off allocations you do not want counted.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        return MemoryReport(int(peak), "torch.cuda.max_memory_allocated")
    if device.type == "cpu":
        return MemoryReport(_cpu_peak_from_profiler(fn), "torch.profiler(profile_memory=True)")
    raise ValueError(f"device must be 'cpu' or 'cuda', got {device.type!r}")


def torch_compile_status(device: torch.device | str | None = "cpu") -> tuple[bool, str]:
    """Whether ``torch.compile`` (default backend, inductor) can run on ``device``, and why.

    On a CPU, inductor writes C++ and compiles it, so it needs a C++ compiler: the one named by
    the ``CXX`` environment variable, else ``c++``, ``g++`` or ``clang++`` on the ``PATH``. On
    CUDA it generates Triton kernels, which ship with PyTorch's CUDA builds. The reason is a
    short English phrase without paths, so that it prints the same on every machine.

    Returns:
        ``(available, reason)``, e.g. ``(False, "no C++ compiler found (inductor needs one on
        CPU)")``.
    """
    import shutil

    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda":
        return True, "CUDA device (inductor generates Triton kernels)"
    candidates = [os.environ.get("CXX"), "c++", "g++", "clang++"]
    if any(name and shutil.which(name) for name in candidates):
        return True, "C++ compiler found (inductor generates C++ on CPU)"
    return False, "no C++ compiler found (inductor needs one on CPU)"


def tensor_bytes(shape: Sequence[int], dtype: torch.dtype = torch.float32) -> int:
    """Analytic size in bytes of a dense tensor of ``shape`` and ``dtype``.

    >>> tensor_bytes((2, 4, 5, 5))  # batch x heads x L x S attention weights, float32
    800
    """
    count = 1
    for size in shape:
        count *= int(size)
    return count * torch.empty((), dtype=dtype).element_size()


def environment(device: torch.device | str | None = None) -> dict[str, str | int]:
    """What a timing depends on: torch version, device name, thread count, Python, CPU arch."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda":
        device_name = torch.cuda.get_device_name(device)
    else:
        device_name = f"cpu ({platform.machine() or 'unknown arch'})"
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device_name,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count() or 0,
    }


def plot_benchmark(
    names: Sequence[str],
    seconds: Sequence[float],
    peak_bytes: Sequence[int],
    *,
    title: str = "Implementations compared on this device",
    time_label: str = "median time per call (ms)",
    memory_label: str = "peak memory (MiB)",
    memory_reference_bytes: int | None = None,
    memory_reference_label: str = "reference size",
) -> Figure:
    """Two horizontal bar charts side by side: median time and peak memory per implementation.

    ``memory_reference_bytes`` (e.g. the analytic size of the attention-weight tensor, from
    :func:`tensor_bytes`) is drawn as a dashed vertical line in the memory panel, labelled
    ``memory_reference_label`` in a legend below the panels: bars that reach it materialised at
    least that much.
    """
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for

    use_cjk_font_for(list(names), title, time_label, memory_label, memory_reference_label)
    fig, (ax_time, ax_memory) = plt.subplots(
        1, 2, figsize=(10, 1.1 + 0.42 * len(names)), sharey=True, layout="constrained"
    )
    positions = range(len(names))
    millis = [s * 1e3 for s in seconds]
    mib = [b / 2**20 for b in peak_bytes]
    ax_time.barh(positions, millis, color="#2b6ca3")
    ax_memory.barh(positions, mib, color="#e07b39")
    for ax, values, fmt in ((ax_time, millis, "{:.2f}"), (ax_memory, mib, "{:.2f}")):
        for y, value in zip(positions, values, strict=True):
            ax.text(value, y, " " + fmt.format(value), va="center", fontsize=8)
    ax_time.set_xlim(0, max(millis) * 1.25 if max(millis) > 0 else 1)
    top = max(mib)
    if memory_reference_bytes is not None:
        reference = memory_reference_bytes / 2**20
        top = max(top, reference)
        line = ax_memory.axvline(
            reference, color="#444444", linestyle="--", linewidth=1.2, label=memory_reference_label
        )
        # below the panels, where it cannot cover a bar or its value
        fig.legend(handles=[line], fontsize=8, loc="outside lower right", frameon=False)
    ax_memory.set_xlim(0, top * 1.25 if top > 0 else 1)
    ax_time.set_yticks(list(positions), labels=list(names))
    ax_time.invert_yaxis()
    ax_time.set_xlabel(time_label)
    ax_memory.set_xlabel(memory_label)
    fig.suptitle(title)
    return fig
