"""Every download the site offers runs on its own: ``nox -s downloads`` (after ``nox -s docs``).

The session installs the package (not editable) and a notebook client into a fresh virtualenv;
each ``.py`` runs with ``python`` and each ``.ipynb`` is executed with nbclient, both from an
empty temporary folder, so nothing of the source tree is importable.

The common-errors example shows real errors with a context manager that catches and prints them
(sphinx-gallery 0.22 has no expected-error marker), so every download runs to its end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.downloads

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "build" / "html"


def downloads(suffix: str) -> list[Path]:
    return sorted((HTML).glob(f"*/_downloads/*/plot_*{suffix}"))


def _ids(paths: list[Path]) -> list[str]:
    return [f"{p.relative_to(HTML).parts[0]}/{p.name}" for p in paths]


SCRIPTS = downloads(".py")
NOTEBOOKS = downloads(".ipynb")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MHA_REF_CACHE_DIR"}}
    env.update(MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    return env


def test_there_is_something_to_run():
    if not HTML.is_dir():
        pytest.fail("build/html is missing: run `nox -s docs` first")
    assert len(SCRIPTS) >= 2 and len(NOTEBOOKS) == len(SCRIPTS), (SCRIPTS, NOTEBOOKS)


def test_package_comes_from_site_packages(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import mha_ref; print(mha_ref.__file__)"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    location = Path(done.stdout.strip()).resolve()
    assert "site-packages" in location.parts, f"mha_ref is not an installed copy: {location}"
    assert (ROOT / "mha_ref") not in location.parents, (
        f"mha_ref imported from the checkout: {location}"
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_script_runs(script, tmp_path):
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{script.name} failed:\n{done.stderr[-4000:]}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs(notebook, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    document = nbformat.read(notebook, as_version=4)
    first = document.cells[0] if document.cells else None
    assert first is not None and "pip install" in first.source and "mha_ref" in first.source, (
        "the first cell must check for the package and say how to install it"
    )
    client = nbclient.NotebookClient(
        document,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    os.environ.pop("PYTHONPATH", None)
    client.execute()
