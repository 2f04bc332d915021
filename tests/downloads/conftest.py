"""Which worker runs which download: shares of about equal time, so the workers finish together.

pytest-xdist's ``load`` mode hands each worker its first tests as a block of consecutive ones
(ten of 83 here): sorted longest first, one worker got the ten longest runs, about 600 of the
660 seconds, and the other idled for minutes at the end. The build records each example's run
time (``build/timings/examples.json``, written by ``nox -s docs`` in the checkout); where it is
present, the runs are sorted by it, longest first, and dealt out to as many shares as there are
workers, each run to the share with the least time so far (longest processing time first, the
textbook greedy rule); the other tests (seconds each) count one second. Each share is an
``xdist_group``, so ``--dist=loadgroup`` (``nox -s downloads``) runs it on one worker. Without
the record, or without workers, the order is the files' own. Only the order and the workers
change: every test still runs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from work_shares import equal_shares

TIMINGS = Path(__file__).resolve().parents[2] / "build" / "timings" / "examples.json"


def _seconds_by_example() -> dict[str, float]:
    """The longest recorded run of each example (``plot_NN_name`` -> seconds), either language."""
    try:
        recorded = json.loads(TIMINGS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    seconds: dict[str, float] = {}
    for key, value in recorded.items():  # "en/plot_17_heads_by_intervention": 50.1
        name = key.split("/")[-1]
        seconds[name] = max(seconds.get(name, 0.0), float(value))
    return seconds


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (it appends them to node ids)
def pytest_collection_modifyitems(config, items):
    seconds = _seconds_by_example()
    if not seconds:
        return

    def weight(item) -> float:
        found = re.search(r"(plot_\d+_\w+?)(?:\.py|\.ipynb)", item.nodeid)
        runs = "runs_and_prints" in item.nodeid
        return seconds.get(found.group(1), 0.0) if runs and found else -1.0

    items.sort(key=weight, reverse=True)  # stable: the others keep their order
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # set on xdist's workers
    if workers > 1:
        shares = equal_shares([max(weight(item), 1.0) for item in items], workers)
        for item, share in zip(items, shares, strict=True):
            item.add_marker(pytest.mark.xdist_group(f"share{share}"))
