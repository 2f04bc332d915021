"""pytest-xdist keeps an ``xdist_group`` on one worker, and the shares are dealt evenly.

The browser and download suites deal their tests to the workers as ``xdist_group`` shares
(``tests/work_shares.py``), and the real model's tests share one group so that the model and
transformers' copy of it are loaded once. pytest 9.2 with pytest-xdist 3.8 silently ignored every
group (xdist renames ``item._nodeid``, which pytest 9.2 no longer reads): the first test below
fails there, which is why the toolchain pins pytest 9.1.
"""

from __future__ import annotations

import subprocess
import sys

from work_shares import equal_shares

GROUPED = '''
import os
import pytest

@pytest.mark.parametrize("i", range(4))
@pytest.mark.xdist_group("first")
def test_first(i):
    open(f"first-{os.environ['PYTEST_XDIST_WORKER']}", "a").close()

@pytest.mark.parametrize("i", range(4))
@pytest.mark.xdist_group("second")
def test_second(i):
    open(f"second-{os.environ['PYTEST_XDIST_WORKER']}", "a").close()
'''


def test_loadgroup_runs_each_group_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         "--dist=loadgroup", "-q", "test_grouped.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    workers: dict[str, set[str]] = {}  # each test leaves a file named group-worker
    for group, worker in (path.name.split("-") for path in tmp_path.glob("*-gw*")):
        workers.setdefault(group, set()).add(worker)
    assert set(workers) == {"first", "second"}, run.stdout
    assert all(len(seen) == 1 for seen in workers.values()), workers  # one worker per group
    assert workers["first"] != workers["second"], workers  # and the two groups side by side


def test_the_jobs_are_dealt_to_shares_of_about_equal_time():
    """Longest first, each job to the share with the least time so far: 5, 4, 3, 3, 3 over two
    workers is 5 + 3 = 8 and 4 + 3 + 3 = 10 (by hand), where consecutive blocks, as xdist's
    ``load`` mode first hands them out, would be 5 + 4 + 3 = 12 against 6."""
    assert equal_shares([5, 4, 3, 3, 3], 2) == [0, 1, 1, 0, 1]
    assert equal_shares([5, 4, 3], 1) == [0, 0, 0]
    assert equal_shares([], 3) == []
