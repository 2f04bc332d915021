"""Dealing timed tests to pytest-xdist's workers so that the workers finish together.

xdist's default ``load`` mode hands each worker its first tests as a block of consecutive ones
(a quarter of its share: 12 of 100 browser tests, 10 of 83 downloads). Sorted longest first,
one worker got both every-page audits of the browser suite (five minutes each) and the ten
longest downloads, and the other idled for minutes at the end. Instead, the tests are dealt to
one share per worker, longest first, each to the share with the least time so far (the
"longest processing time first" rule); each share is an ``xdist_group``, which
``--dist=loadgroup`` runs on one worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest


def equal_shares(weights: list[float], shares: int) -> list[int]:
    """The share (``0 .. shares - 1``) of each job, ``weights`` sorted longest first: each job goes
    to the share with the least time so far, the first such share on a tie."""
    loads = [0.0] * shares
    chosen = []
    for weight in weights:
        share = loads.index(min(loads))
        loads[share] += weight
        chosen.append(share)
    return chosen


def deal_to_workers(items: list, seconds: Callable[[object], float]) -> None:
    """Sort ``items`` longest first by ``seconds(item)`` and mark each with the
    ``xdist_group`` of its share, one share per xdist worker; nothing is marked outside xdist
    (``PYTEST_XDIST_WORKER_COUNT`` is set on its workers). Call it from a
    ``pytest_collection_modifyitems`` hook that runs before xdist's own (``tryfirst=True``)."""
    items.sort(key=seconds, reverse=True)  # stable: equal estimates keep their order
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2:
        return
    for item, share in zip(items, equal_shares([seconds(i) for i in items], workers), strict=True):
        item.add_marker(pytest.mark.xdist_group(f"share{share}"))
