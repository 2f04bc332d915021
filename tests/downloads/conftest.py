"""Order of the download runs: the longest first, so that two workers finish together.

pytest-xdist hands the tests to its workers in collection order; a 50-second example handed
out last keeps one core busy while the other idles. The build records each example's run time
(``build/timings/examples.json``, written by ``nox -s docs`` in the checkout); where it is
present, the runs are sorted by it, longest first, and the other tests (seconds each) follow.
Without it the order is the files' own. Only the order changes: every test still runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

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


def pytest_collection_modifyitems(config, items):
    seconds = _seconds_by_example()
    if not seconds:
        return

    def weight(item) -> float:
        found = re.search(r"(plot_\d+_\w+?)(?:\.py|\.ipynb)", item.nodeid)
        runs = "runs_and_prints" in item.nodeid
        return seconds.get(found.group(1), 0.0) if runs and found else -1.0

    items.sort(key=weight, reverse=True)  # stable: the others keep their order
