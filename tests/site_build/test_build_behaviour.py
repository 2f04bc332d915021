"""How the docs build behaves, on a small site made in a temporary folder from the real build files.

The site uses the project's real ``conf.py``, ``docs/_ext``, ``docs/_static``, ``docs/_templates``
and a copy of the real ``mha_ref`` package, with two tiny examples, so each build takes seconds.
Checked here:

- staleness: editing a function of ``mha_ref`` that an example prints re-runs the examples and
  the page shows the new output; an edit that changes only a figure replaces the figure in the
  built site; editing one example re-runs only that example; a rebuild with nothing changed
  runs none;
- failure is loud: an example that raises fails the build with a non-zero exit that names the
  example and shows the traceback; a Sphinx warning fails the build;
- reproducible: two clean builds write identical example pages.

These tests run sphinx-build in a subprocess (``pytest -m build``; ``nox -s tests`` runs them).
The folder is not called ``build``: pytest skips folders of that name when collecting.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx_gallery")

pytestmark = pytest.mark.build

ROOT = Path(__file__).resolve().parents[2]

EXAMPLE_SHAPES = '''"""
Shapes
======

Prints what ``mha_ref.split_heads`` returns.
"""

# %%
import torch

from mha_ref import split_heads

x = torch.zeros(2, 5, 8)  # (batch, seq_len, embed_dim)
print("split:", tuple(split_heads(x, 2).shape))
'''

EXAMPLE_OTHER = '''"""
Other
=====

An example that does not change.
"""

# %%
print("other example ran")
'''

INDEX = """# Mini site

```{toctree}
auto_examples/index
```

(running-the-examples)=
## Running the examples

```{mha-wheel-install}
```
"""


def _make_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    no_cache = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "mha_ref", site / "mha_ref", ignore=no_cache)
    shutil.copy(ROOT / "conf.py", site / "conf.py")
    # the build ships the package's wheel (docs/_ext/mha_ref_course.py): its metadata too
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, site / name)
    shutil.copytree(ROOT / "requirements", site / "requirements")
    for part in ("_ext", "_static", "_templates", "_locale"):
        shutil.copytree(ROOT / "docs" / part, site / "docs" / part)
    (site / "docs" / "en").mkdir(parents=True)
    (site / "docs" / "en" / "index.md").write_text(INDEX)
    gallery = site / "gallery" / "en"
    gallery.mkdir(parents=True)
    shutil.copy(ROOT / "gallery" / "en" / "GALLERY_HEADER.rst", gallery / "GALLERY_HEADER.rst")
    (gallery / "plot_a_shapes.py").write_text(EXAMPLE_SHAPES)
    (gallery / "plot_b_other.py").write_text(EXAMPLE_OTHER)
    return site


def _build(site: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}
    env["MHA_REF_CACHE_DIR"] = str(site / "build" / ".cache")
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-c", ".", "-D", "language=en"]
    command += ["-n", "-W", *extra, "docs/en", "build/html/en"]
    return subprocess.run(command, cwd=site, env=env, capture_output=True, text=True, timeout=600)


def _count_executed(result: subprocess.CompletedProcess) -> int:
    """How many examples sphinx-gallery says it executed in this build."""
    match = re.search(r"successfully executed (\d+) out of (\d+)", result.stdout + result.stderr)
    assert match, "sphinx-gallery printed no execution summary:\n" + result.stdout[-2000:]
    return int(match.group(1))


def _page(site: Path, name: str) -> str:
    return (site / "build" / "html" / "en" / "auto_examples" / f"{name}.html").read_text()


@pytest.fixture
def site(tmp_path):
    return _make_site(tmp_path)


def test_staleness_follows_the_package_and_the_examples(site):
    first = _build(site)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "split: (2, 2, 5, 4)" in _page(site, "plot_a_shapes")

    unchanged = _build(site)
    assert unchanged.returncode == 0, unchanged.stderr[-3000:]
    assert _count_executed(unchanged) == 0

    # an edit to the package that the example prints: every example runs again, new output shown
    functional = site / "mha_ref" / "functional.py"
    assert "def split_heads(" in functional.read_text()
    with functional.open("a") as module:  # the edit: split_heads now keeps only the first token
        module.write(
            "\n\n_split_heads_before_the_edit = split_heads\n\n\n"
            "def split_heads(x, num_heads):\n"
            "    return _split_heads_before_the_edit(x[:, :1], num_heads)\n"
        )
    after_edit = _build(site)
    assert after_edit.returncode == 0, after_edit.stderr[-3000:]
    assert _count_executed(after_edit) == 2
    assert "split: (2, 2, 1, 4)" in _page(site, "plot_a_shapes")

    # an edit to one example re-runs that example only
    example = site / "gallery" / "en" / "plot_b_other.py"
    example.write_text(EXAMPLE_OTHER.replace("other example ran", "other example ran again"))
    one_changed = _build(site)
    assert one_changed.returncode == 0, one_changed.stderr[-3000:]
    assert _count_executed(one_changed) == 1
    assert "other example ran again" in _page(site, "plot_b_other")


EXAMPLE_FIGURE = '''"""
Figure
======

Draws a heatmap with ``mha_ref.tutorial.plotting.plot_heads`` and prints nothing.
"""

# %%
import matplotlib.pyplot as plt
import torch

from mha_ref.tutorial.plotting import plot_heads

fig = plot_heads(torch.full((1, 2, 2), 0.5))
plt.show()
'''


def _give_heatmaps_a_background(site: Path, colour: str) -> None:
    """Edit the package so that every heatmap figure gets a background colour (and the
    example's printed text stays the same)."""
    with (site / "mha_ref" / "tutorial" / "plotting.py").open("a") as module:
        module.write(
            f"\n\n_plot_heads_before_{colour[1:]} = plot_heads\n\n\n"
            "def plot_heads(*args, **kwargs):\n"
            f"    fig = _plot_heads_before_{colour[1:]}(*args, **kwargs)\n"
            f"    fig.set_facecolor('{colour}')\n"
            "    return fig\n"
        )


def test_a_figure_that_changes_reaches_the_built_site(site):
    """Package edits that change only a picture (the printed text stays the same) replace the
    picture in the built site, not only in the generated gallery folder. Two edits in a row:
    the second build after a package change is the one Sphinx would not rewrite on its own."""
    (site / "gallery" / "en" / "plot_c_figure.py").write_text(EXAMPLE_FIGURE)
    first = _build(site)
    assert first.returncode == 0, first.stderr[-3000:]
    built = site / "build" / "html" / "en" / "_images" / "sphx_glr_plot_c_figure_001_2_00x.png"
    generated = site / "docs" / "en" / "auto_examples" / "images" / built.name
    drawn = [built.read_bytes()]
    for colour in ("#ffdddd", "#ddffdd"):
        _give_heatmaps_a_background(site, colour)
        after_edit = _build(site)
        assert after_edit.returncode == 0, after_edit.stderr[-3000:]
        assert _count_executed(after_edit) == 3
        assert generated.read_bytes() not in drawn, f"{colour}: the figure did not change"
        assert built.read_bytes() == generated.read_bytes(), f"{colour}: the site kept the old one"
        drawn.append(generated.read_bytes())


def test_a_failing_example_fails_the_build_loudly(site):
    (site / "gallery" / "en" / "plot_b_other.py").write_text(
        EXAMPLE_OTHER + '\nraise RuntimeError("this example is broken")\n'
    )
    result = _build(site)
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "plot_b_other.py" in log
    assert "Traceback" in log and "this example is broken" in log


def test_a_sphinx_warning_fails_the_build(site):
    index = site / "docs" / "en" / "index.md"
    index.write_text(INDEX + "\nSee {ref}`a-label-that-does-not-exist`.\n")
    result = _build(site)
    assert result.returncode != 0
    assert "a-label-that-does-not-exist" in result.stdout + result.stderr


def test_two_clean_builds_write_identical_pages(tmp_path):
    pages = []
    for run in ("one", "two"):
        site = _make_site(tmp_path / run)
        result = _build(site)
        assert result.returncode == 0, result.stderr[-3000:]
        generated = site / "docs" / "en" / "auto_examples"
        pages.append({p.name: p.read_text() for p in sorted(generated.glob("plot_*.rst"))})
    assert pages[0].keys() == pages[1].keys() and pages[0]
    for name in pages[0]:
        assert pages[0][name] == pages[1][name], f"{name} differs between two clean builds"
