"""What runs around every example, in the process that runs it: sphinx-gallery calls
:func:`reset_example_state` before and after each example (``reset_modules`` in ``conf.py``).
Before, it seeds every generator, sets one thread and the fonts, records the example's provenance
(:mod:`.provenance`) and what it depends on (:mod:`.staleness`); after, it records the example's
wall time in ``build/timings/examples.json``. So what an example prints does not depend on the
order, the worker or the machine's fonts. After the build (``build-finished``), the worker processes
that ran the examples side by side are stopped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from mha_ref_build import ROOT
from mha_ref_build.provenance import write_provenance
from mha_ref_build.staleness import record_running

if TYPE_CHECKING:
    from sphinx.application import Sphinx

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None


_started: dict[str, float] = {}


#: matplotlib's warning for a character its fonts lack: "Glyph 22836 (...) missing from font(s)"
_MISSING_GLYPH_WARNING = r"Glyph \d+ .*missing from"


def reset_example_state(gallery_conf: dict, fname: str, when: str) -> None:
    """Seed every generator, use one thread, set a CJK-capable font, record provenance.

    sphinx-gallery calls this before and after each example (``reset_modules`` in conf.py).
    After an example it records the example's wall time in ``build/timings/examples.json``.
    """
    import random
    import time
    import warnings

    import matplotlib as mpl
    import numpy as np
    import torch

    stem = Path(fname).stem if fname is not None else None
    key = f"{Path(gallery_conf['src_dir']).name}/{stem}"
    if stem is None:
        pass
    elif when == "after":
        _record_time(key, time.perf_counter() - _started.pop(key, time.perf_counter()))
    else:
        _freeze_survivors()
        record_running(gallery_conf, fname)
        _started[key] = time.perf_counter()

    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    # matplotlib's own fonts: Chinese labels get the font file bundled with the tutorial's
    # dependencies (mha_ref.tutorial.fonts), never whatever the building machine has installed
    mpl.rcParams["font.family"] = mpl.rcParamsDefault["font.family"]
    mpl.rcParams["font.sans-serif"] = mpl.rcParamsDefault["font.sans-serif"]
    mpl.rcParams["axes.unicode_minus"] = False
    # a character no font can draw (an empty box on the page) fails the example, naming it
    warnings.filterwarnings("error", message=_MISSING_GLYPH_WARNING, category=UserWarning)
    mpl.rcParams["svg.hashsalt"] = "mha-ref"

    if stem is None:
        return
    write_provenance(gallery_conf, stem)


def _freeze_survivors() -> None:
    """Collect garbage once, then exempt what survives from every later collection.

    sphinx-gallery runs a full garbage collection before each example. In a process holding
    torch, Sphinx and a built environment that walk takes about 0.2 s and finds nothing to free
    among those long-lived objects; frozen (:func:`gc.freeze`), they are skipped, so each
    collection walks only what the previous example left behind.
    """
    import gc

    gc.collect()
    gc.freeze()


def _record_time(key: str, seconds: float) -> None:
    """Add one example's wall time to the report; examples running side by side take turns."""
    path = ROOT / "build" / "timings" / "examples.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        if fcntl is not None:  # POSIX; elsewhere the build runs the examples one by one
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        times = json.loads(path.read_text()) if path.is_file() else {}
        times[key] = round(seconds, 2)
        path.write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")


def _stop_example_workers(app: Sphinx, exception: Exception | None) -> None:
    """Stop the worker processes that ran the examples (``parallel`` in conf.py).

    joblib keeps them for reuse; left running to the end of the process, they leave its
    resource tracker warning about semaphores it had to clean up.
    """
    import sys

    reusable = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(reusable, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True)
