"""Every download the site offers runs on its own: ``nox -s downloads`` (after ``nox -s docs``).

The session copies the built site to a temporary folder (``MHA_REF_SITE``) and installs the
package from the wheel found there (``MHA_REF_WHEEL``), with the command the site prints; each
``.py`` runs with ``python`` and each ``.ipynb`` is executed with nbclient, both from an empty
temporary folder, so nothing of the source tree is importable.

The common-errors example shows real errors with a context manager that catches and prints them
(sphinx-gallery 0.22 has no expected-error marker), so every download runs to its end.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

pytestmark = pytest.mark.downloads

ROOT = Path(__file__).resolve().parents[2]
HTML = Path(os.environ.get("MHA_REF_SITE", ROOT / "build" / "html"))
LANGUAGES = ("en", "zh_CN")


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


def _wheels() -> list[Path]:
    return sorted(HTML.glob("*/_downloads/mha_ref-*-py3-none-any.whl"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_each_language_ships_the_same_wheel():
    wheels = _wheels()
    assert [w.relative_to(HTML).parts[0] for w in wheels] == list(LANGUAGES), wheels
    assert len({w.name for w in wheels}) == 1 and len({_sha(w) for w in wheels}) == 1, wheels


def test_the_installed_package_is_the_sites_wheel():
    """The session installed the site's wheel (not the checkout): pip recorded where from."""
    if "MHA_REF_WHEEL" not in os.environ:
        pytest.skip("run by `nox -s downloads`, which installs the wheel from a copy of the site")
    direct_url = json.loads(metadata.distribution("mha-ref").read_text("direct_url.json"))
    installed_from = Path(unquote(urlparse(direct_url["url"]).path)).resolve()
    assert installed_from == Path(os.environ["MHA_REF_WHEEL"]).resolve()
    assert HTML.resolve() in installed_from.parents, (installed_from, HTML)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_zip_holds_the_wheel_and_the_downloads(lang):
    """The zips of all examples carry the wheel; every zip holds the very same files as the
    page's downloads, and an example's own zip no wheel (its page links to the one copy)."""
    (wheel,) = (w for w in _wheels() if w.relative_to(HTML).parts[0] == lang)
    files = {p.name: p for p in HTML.glob(f"{lang}/_downloads/*/plot_*") if p.suffix != ".zip"}
    zips = sorted(HTML.glob(f"{lang}/_downloads/*/*.zip"))
    names = {z.name for z in zips}
    assert {"auto_examples_python.zip", "auto_examples_jupyter.zip"} <= names, names
    for archive in zips:
        with zipfile.ZipFile(archive) as zipped:
            if archive.name.startswith("auto_examples_"):
                assert zipped.read(wheel.name) == wheel.read_bytes(), f"{archive.name}: no wheel"
            else:
                assert wheel.name not in zipped.namelist(), f"{archive.name}: a wheel per example"
            for name in zipped.namelist():
                if name != wheel.name:
                    assert zipped.read(name) == files[Path(name).name].read_bytes(), name
    for suffix in ("python", "jupyter"):
        with zipfile.ZipFile(
            HTML
            / lang
            / "_downloads"
            / next(
                z.relative_to(HTML / lang / "_downloads")
                for z in zips
                if z.name == f"auto_examples_{suffix}.zip"
            )
        ) as zipped:
            wanted = ".py" if suffix == "python" else ".ipynb"
            listed = {Path(n).name for n in zipped.namelist() if n.endswith(wanted)}
            assert listed == {n for n in files if n.endswith(wanted)}, suffix


@pytest.mark.parametrize("lang", LANGUAGES)
def test_pages_say_how_to_install_the_wheel(lang):
    """The index, the gallery's index and every example page link to the wheel and print the
    command that installs it."""
    (wheel,) = (w for w in _wheels() if w.relative_to(HTML).parts[0] == lang)
    command = f'python -m pip install "{wheel.name}[tutorial]"'
    pages = [HTML / lang / "index.html", HTML / lang / "auto_examples" / "index.html"]
    pages += sorted((HTML / lang / "auto_examples").glob("plot_*.html"))
    assert len(pages) >= 4
    for page in pages:
        html = page.read_text(encoding="utf-8")
        links = re.findall(r'href="([^"]*' + re.escape(wheel.name) + ')"', html)
        assert links, f"{page.relative_to(HTML)}: no link to {wheel.name}"
        for link in links:
            assert (page.parent / link).resolve() == wheel.resolve(), (page, link)
        if page.name != "index.html" or page.parent.name == lang:
            text = html.replace("&quot;", '"').replace("&#34;", '"')
            assert command in re.sub(r"<[^>]+>", "", text), f"{page.relative_to(HTML)}: no command"


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
    wheel = _wheels()[0].name
    assert first is not None and f'pip install "{wheel}[tutorial]"' in first.source, (
        f"the first cell must check for the package and say how to install {wheel}"
    )
    client = nbclient.NotebookClient(
        document,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    os.environ.pop("PYTHONPATH", None)
    client.execute()
