"""Which worker runs which download: shares of about equal time, so the workers finish together.

The build records each example's run time (``build/timings/examples.json``, written by
``nox -s docs`` in the checkout); where it is present, the runs are dealt out by it
(``tests/work_shares.py``: longest first, each to the share with the least time so far, one
share per worker, run as an ``xdist_group`` with ``--dist=loadgroup``); the other tests count
one second each. Without the record the order is the files' own and xdist deals as it likes.
Only the order and the workers change: every test still runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from work_shares import deal_to_workers

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

    def estimate(item) -> float:
        """The build's run time of the example a run executes; one second for the other tests."""
        found = re.search(r"(plot_\d+_\w+?)(?:\.py|\.ipynb)", item.nodeid)
        runs = "runs_and_prints" in item.nodeid
        return max(seconds.get(found.group(1), 0.0), 1.0) if runs and found else 1.0

    deal_to_workers(items, estimate)
