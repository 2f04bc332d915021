"""How the docs build behaves, on a small site made in a temporary folder from the real build files.

The site uses the project's real ``conf.py``, ``docs/_ext``, ``docs/_static``, ``docs/_templates``
and a copy of the real ``mha_ref`` package, with two tiny examples, so each build takes seconds.
Checked here:

- staleness: editing a function of ``mha_ref`` that an example prints re-runs the examples and
  the page shows the new output; an edit that changes only a figure replaces the figure in the
  built site; editing one example re-runs only that example; a rebuild with nothing changed
  runs none;
- selective, never stale: an edit to a module of the lab re-runs exactly the examples whose
  imports reach it (directly or through another module), an edit to ``conf.py`` or to the
  attention reference re-runs every example, a new module re-runs none, and an edit to a
  docstring or a comment re-runs none;
- failure is loud: an example that raises fails the build with a non-zero exit that names the
  example and shows the traceback; a Sphinx warning fails the build; an undeclared NaN in the
  printed output and an empty figure fail it too, on every build until fixed;
- a failed build publishes nothing: ``build/html`` is gone, and what the failed build wrote
  (its traceback page too) holds no path of the building machine;
- a damaged training-cache entry that still loads is noticed, and the page prints the right
  number;
- hostile labels (``</script>``, line and paragraph separators, reST directives, NUL) stay data
  on the page: no file of the machine is included, the view reads back the labels;
- a deleted or renamed example leaves no page behind, and the build passes;
- reproducible: two clean builds write identical example pages.

These tests run sphinx-build in a subprocess (``pytest -m build``; ``nox -s tests`` runs them).
The folder is not called ``build``: pytest skips folders of that name when collecting.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
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


def _write_course(site: Path) -> None:
    """The course path must name every example of the site (docs/_ext/mha_ref_build/course_path.py
    checks it): one core entry per example the gallery holds now, the tests add and rename some."""
    entries = [
        f'[{path.stem}]\ntier = "core"\nneeds = []\nread_min = 5\nrun_s = 1\n'
        for path in sorted((site / "gallery" / "en").glob("plot_*.py"))
    ]
    (site / "docs" / "_ext" / "course.toml").write_text("\n".join(entries))


def _make_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    no_cache = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "mha_ref", site / "mha_ref", ignore=no_cache)
    shutil.copy(ROOT / "conf.py", site / "conf.py")
    # the build ships the package's wheel (docs/_ext/mha_ref_build/wheel.py): its metadata too
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, site / name)
    shutil.copytree(ROOT / "requirements", site / "requirements")
    for part in ("_ext", "_static", "_templates", "_locale"):
        shutil.copytree(ROOT / "docs" / part, site / "docs" / part)
    (site / "docs" / "en").mkdir(parents=True)
    (site / "docs" / "en" / "index.md").write_text(INDEX)
    gallery = site / "gallery" / "en"
    gallery.mkdir(parents=True)
    shutil.copy(ROOT / "gallery" / "en" / "GALLERY_HEADER.rst", gallery / "GALLERY_HEADER.rst")
    (gallery / "plot_01_shapes.py").write_text(EXAMPLE_SHAPES)
    (gallery / "plot_02_other.py").write_text(EXAMPLE_OTHER)
    return site


#: the examples of these tiny sites run in the build's own process: two worker processes would
#: each import torch first, which takes longer than the examples (5.5 s of an 11 s build). The
#: tests of what the workers do (records written from a worker, a worker's failure) run two.
SERIAL = {"MHA_REF_EXAMPLE_WORKERS": "1"}
PARALLEL = {"MHA_REF_EXAMPLE_WORKERS": "2"}


def _build(site: Path, *extra: str, workers: dict = SERIAL) -> subprocess.CompletedProcess:
    _write_course(site)
    (site / "build" / "timings" / "examples.json").unlink(missing_ok=True)  # see _executed
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}
    env.update(workers)
    env["MHA_REF_CACHE_DIR"] = str(site / "build" / ".cache")
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-c", ".", "-D", "language=en"]
    command += ["-n", "-W", *extra, "docs/en", "build/html/en"]
    return subprocess.run(command, cwd=site, env=env, capture_output=True, text=True, timeout=600)


def _build_languages(site: Path, *extra: str) -> subprocess.CompletedProcess:
    """What ``nox -s docs`` runs (the staging folder, the publication), English only."""
    _write_course(site)
    (site / "build" / "timings" / "examples.json").unlink(missing_ok=True)  # see _executed
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}
    env.update(SERIAL)
    env["MHA_REF_CACHE_DIR"] = str(site / "build" / ".cache")
    command = [sys.executable, "docs/_ext/build_languages.py", "build/html", "--languages=en"]
    return subprocess.run(
        [*command, *extra], cwd=site, env=env, capture_output=True, text=True, timeout=600
    )


def _executed(site: Path) -> set[str]:
    """The examples that ran in the last build: each one that runs records its time."""
    times = site / "build" / "timings" / "examples.json"
    if not times.is_file():
        return set()
    return {name.split("/")[-1] for name in json.loads(times.read_text())}


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
    first = _build(site, workers=PARALLEL)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "split: (2, 2, 5, 4)" in _page(site, "plot_01_shapes")

    unchanged = _build(site, workers=PARALLEL)
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
    after_edit = _build(site, workers=PARALLEL)
    assert after_edit.returncode == 0, after_edit.stderr[-3000:]
    assert _count_executed(after_edit) == 2
    assert "split: (2, 2, 1, 4)" in _page(site, "plot_01_shapes")

    # an edit to one example re-runs that example only
    example = site / "gallery" / "en" / "plot_02_other.py"
    example.write_text(EXAMPLE_OTHER.replace("other example ran", "other example ran again"))
    one_changed = _build(site, workers=PARALLEL)
    assert one_changed.returncode == 0, one_changed.stderr[-3000:]
    assert _count_executed(one_changed) == 1
    assert "other example ran again" in _page(site, "plot_02_other")


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
    (site / "gallery" / "en" / "plot_03_figure.py").write_text(EXAMPLE_FIGURE)
    first = _build(site)
    assert first.returncode == 0, first.stderr[-3000:]
    built = site / "build" / "html" / "en" / "_images" / "sphx_glr_plot_03_figure_001_2_00x.png"
    generated = site / "docs" / "en" / "auto_examples" / "images" / built.name
    drawn = [built.read_bytes()]
    for colour in ("#ffdddd", "#ddffdd"):
        _give_heatmaps_a_background(site, colour)
        after_edit = _build(site)
        assert after_edit.returncode == 0, after_edit.stderr[-3000:]
        # only the example whose imports reach plotting.py runs again
        assert _executed(site) == {"plot_03_figure"}
        assert generated.read_bytes() not in drawn, f"{colour}: the figure did not change"
        assert built.read_bytes() == generated.read_bytes(), f"{colour}: the site kept the old one"
        drawn.append(generated.read_bytes())


def test_a_failing_example_fails_the_build_loudly(site):
    (site / "gallery" / "en" / "plot_02_other.py").write_text(
        EXAMPLE_OTHER + '\nraise RuntimeError("this example is broken")\n'
    )
    result = _build(site, workers=PARALLEL)
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "plot_02_other.py" in log
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


# -- selective reruns: exactly the examples an edit can change ------------------------------------
LAB_MODULES = {
    "_lab_shared.py": 'def greeting():\n    return "hello"\n',
    "_lab_c.py": (
        "from mha_ref.tutorial._lab_shared import greeting\n\n\n"
        'def c_value():\n    return greeting() + " from c, version 1"\n'
    ),
    "_lab_d.py": (
        "from mha_ref.tutorial import _lab_shared\n\n\n"
        'def d_value():\n    return _lab_shared.greeting() + " from d"\n'
    ),
}

EXAMPLE_USES = '''"""
Uses {module}
=============

Prints what the lab module returns.
"""

# %%
from mha_ref.tutorial.{module} import {function}

print("{function}:", {function}())
'''


def _lab_site(tmp_path: Path) -> Path:
    """The small site with three lab modules only the test knows, and two examples using them:
    c imports _lab_c (which imports _lab_shared), d imports _lab_d (which imports it too)."""
    site = _make_site(tmp_path)
    for name, text in LAB_MODULES.items():
        (site / "mha_ref" / "tutorial" / name).write_text(text)
    gallery = site / "gallery" / "en"
    for stem, module, function in (("plot_03_uses_c", "_lab_c", "c_value"),
                                   ("plot_04_uses_d", "_lab_d", "d_value")):
        (gallery / f"{stem}.py").write_text(EXAMPLE_USES.format(module=module, function=function))
    return site


def _edit(path: Path, old: str, new: str, count: int = -1) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, count))


def test_an_edit_reruns_exactly_the_examples_it_can_change(tmp_path):
    site = _lab_site(tmp_path)
    lab = site / "mha_ref" / "tutorial"
    everything = {"plot_01_shapes", "plot_02_other", "plot_03_uses_c", "plot_04_uses_d"}

    def build() -> set[str]:
        result = _build(site)
        assert result.returncode == 0, result.stderr[-3000:]
        return _executed(site)

    assert build() == everything
    assert build() == set()  # nothing changed
    assert "c_value: hello from c, version 1" in _page(site, "plot_03_uses_c")

    # a function one example uses: that example, and no other
    _edit(lab / "_lab_c.py", "version 1", "version 2")
    assert build() == {"plot_03_uses_c"}
    assert "c_value: hello from c, version 2" in _page(site, "plot_03_uses_c")

    # a function both use, imported by each through another module: both, no other
    _edit(lab / "_lab_shared.py", '"hello"', '"good morning"')
    assert build() == {"plot_03_uses_c", "plot_04_uses_d"}
    assert "c_value: good morning from c, version 2" in _page(site, "plot_03_uses_c")
    assert "d_value: good morning from d" in _page(site, "plot_04_uses_d")

    # a new module that nothing imports yet: none
    (lab / "_lab_new.py").write_text("X = 1\n")
    assert build() == set()

    # the attention reference runs around every example (the figure scraper imports the lab,
    # which imports mha_ref/__init__.py). An edit to a docstring and a comment there: none
    masks = site / "mha_ref" / "masks.py"
    _edit(masks, '"""', '"""An edited first line of the docstring.\n\n', count=1)
    with masks.open("a") as module:
        module.write("\n# an edit to a comment of the reference\n")
    assert build() == set()
    # an edit to a line of its code: every example, as does an edit to the code of conf.py
    with masks.open("a") as module:
        module.write("\n_AN_EDIT_TO_THE_CODE = 1\n")
    assert build() == everything
    with (site / "conf.py").open("a") as conf:
        conf.write("\n_an_edit_to_the_configuration = 1\n")
    assert build() == everything


# -- a damaged cache entry ------------------------------------------------------------------------
CACHED_MODULE = '''from mha_ref.tutorial.cache import cached


def mean_square(n):
    return cached("mean_square", {"n": n}, lambda: {"value": sum(i * i for i in range(n)) / n})
'''

EXAMPLE_CACHED = '''"""
Cached
======

Prints a cached result.
"""

# %%
from mha_ref.tutorial._lab_cached import mean_square

print(f"mean square: {mean_square(10)['value']:.3f}")
'''


def test_a_damaged_cache_entry_that_still_loads_is_noticed(site):
    """One float of the cached result changed, so that the entry still unpickles (to 0.0): the
    next build that runs the example reports the entry, recomputes it and prints 28.500."""
    (site / "mha_ref" / "tutorial" / "_lab_cached.py").write_text(CACHED_MODULE)
    (site / "gallery" / "en" / "plot_03_cached.py").write_text(EXAMPLE_CACHED)
    first = _build(site)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "mean square: 28.500" in _page(site, "plot_03_cached")
    (entry,) = (site / "build" / ".cache").glob("mean_square-*.pkl")
    right, wrong = (b"G" + struct.pack(">d", value) for value in (28.5, 0.0))
    assert entry.read_bytes().count(right) == 1
    entry.write_bytes(entry.read_bytes().replace(right, wrong))
    # the example runs again (as after `--fresh`, or in the second language)
    shutil.rmtree(site / "docs" / "en" / "auto_examples")
    second = _build(site)
    assert second.returncode == 0, second.stderr[-3000:]  # recomputed: a report, not an error
    assert "its content does not match its checksum" in second.stderr
    assert "mean square: 28.500" in _page(site, "plot_03_cached")
    assert "mean square: 0.000" not in _page(site, "plot_03_cached")
    assert right in entry.read_bytes()  # the entry was replaced


# -- hostile labels -------------------------------------------------------------------------------
EXAMPLE_HOSTILE = '''"""
Hostile labels
==============

Labels that try to leave the page's data.
"""

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
import torch

from mha_ref.tutorial.interactive import attach_view_data
from mha_ref.tutorial.plotting import plot_heads

labels = json.loads({labels_json!r})
n = len(labels)
# drawn: labels the fonts can draw (an HTML end tag, a reST directive on a line of its own)
fig = plot_heads(torch.full((1, 3, 3), 1 / 3), drawn := json.loads({drawn_json!r}))
plt.show()
# not drawn (no font has a glyph for a line separator or NUL), but in the view's data
fig, ax = plt.subplots()
ax.plot([0, 1], [0, 1])
attach_view_data(fig, np.full((1, n, n), 1 / n), labels, labels, vmax=1.0,
                 cmap=plt.get_cmap("viridis"), title=labels[1])
plt.show()
print("printed:", labels[1])
'''


def test_hostile_labels_stay_data_on_the_page(site, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("THE-CONTENT-OF-A-FILE-OF-THE-BUILDING-MACHINE\n")
    include = f".. include:: {secret}"
    labels = [
        "</script><script>alert(1)</script>",
        f"a\u2028{include}\u2028",
        f"b\u2029{include}",
        f"c\x85{include}",
        "nul\x00",
        f"cr\r{include}\r",
        f"\n\n{include}\n\n",
    ]
    drawn = ["</script><b>bold</b>", f"\n\n{include}\n\n", "<!--"]
    example = EXAMPLE_HOSTILE.format(labels_json=json.dumps(labels), drawn_json=json.dumps(drawn))
    (site / "gallery" / "en" / "plot_03_hostile.py").write_text(example)
    result = _build(site)
    assert result.returncode == 0, result.stderr[-3000:]
    built = site / "build" / "html" / "en"
    for page in built.rglob("*.html"):
        assert "THE-CONTENT-OF-A-FILE" not in page.read_text(), f"{page} included the file"
    html = _page(site, "plot_03_hostile")
    views = re.findall(r'<script type="application/json">(.*?)</script>', html)
    assert [json.loads(v)["queries"] for v in views] == [drawn, labels]
    assert "<b>bold</b>" not in html and "<script>alert(1)" not in html
    assert "printed: a\\u2028" in html  # the printed label, its separator shown escaped
    notebook = next((built / "_downloads").glob("*/plot_03_hostile.ipynb"))
    cells = json.loads(notebook.read_text())["cells"]  # valid JSON, the code as it is
    assert any("attach_view_data(" in "".join(cell["source"]) for cell in cells)


# -- NaN and empty figures ------------------------------------------------------------------------
EXAMPLE_NAN = '''"""
NaN
===

Prints a NaN.
"""

# %%
import torch

print("mean of nothing:", torch.tensor([]).mean().item())
'''


def test_an_undeclared_nan_fails_every_build_until_declared(site):
    example = site / "gallery" / "en" / "plot_03_nan.py"
    example.write_text(EXAMPLE_NAN)
    for attempt in ("first", "again, nothing rerun"):
        result = _build(site)
        log = result.stdout + result.stderr
        assert result.returncode != 0, f"{attempt}: a NaN was published"
        assert re.search(r"gallery/en/plot_03_nan.py, lines \d+-\d+, printed NaN", log), log
        assert "# sphinx_gallery_mha_ref_expected_nan" in log
    assert _executed(site) == set()  # the second build failed on the page, not by running it
    example.write_text(EXAMPLE_NAN.replace("import torch\n", "import torch\n\n"
                                           "# sphinx_gallery_mha_ref_expected_nan\n"))
    result = _build(site)
    assert result.returncode == 0, result.stderr[-3000:]
    html = _page(site, "plot_03_nan")
    assert "mean of nothing: nan" in html and "sphinx_gallery_mha_ref" not in html


EXAMPLE_EMPTY = '''"""
Empty
=====

Draws {what}.
"""

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots()
{code}
ax.set_title("a title over nothing")
plt.show()
'''


def test_an_empty_figure_fails_the_build(site):
    """Two examples, one build: a figure with nothing drawn, and one whose line is all NaN."""
    for stem, what, code in (("plot_03_empty", "nothing", "pass"),
                             ("plot_04_nan_line", "a line of NaN",
                              "ax.plot([0, 1], [float('nan')] * 2)")):
        (site / "gallery" / "en" / f"{stem}.py").write_text(
            EXAMPLE_EMPTY.format(what=what, code=code)
        )
    result = _build(site)
    log = result.stdout + result.stderr
    assert result.returncode != 0
    for stem in ("plot_03_empty", "plot_04_nan_line"):
        assert f"gallery/en/{stem}.py, figure 1: the figure is empty" in log, log[-3000:]


# -- a failed build -------------------------------------------------------------------------------
def test_a_failed_build_publishes_nothing_and_its_pages_hold_no_machine_path(site):
    from leaks import leaks, machine_paths

    published, staging = site / "build" / "html", site / "build" / "html-staging"
    good = _build_languages(site)
    assert good.returncode == 0, good.stderr[-3000:]
    assert (published / "en" / "index.html").is_file()
    assert not (staging / "BUILD-FAILED.txt").exists()

    (site / "gallery" / "en" / "plot_02_other.py").write_text(
        EXAMPLE_OTHER + '\nraise RuntimeError("this example is broken")\n'
    )
    failed = _build_languages(site)
    log = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "plot_02_other.py" in log
    assert "nothing was published" in log
    assert not published.exists(), "a failed build left a complete-looking build/html"
    assert "never publish them" in (staging / "BUILD-FAILED.txt").read_text()
    page = (staging / "en" / "auto_examples" / "plot_02_other.html").read_text()
    assert "this example is broken" in page and "Traceback" in page  # the traceback, shown
    assert "gallery/en/plot_02_other.py" in page  # its file named, relative to the checkout
    paths = machine_paths(extra=[site, tmp_dir := site.parent])
    assert str(tmp_dir) in paths
    found = leaks(staging, paths)
    assert not found, "\n".join(found[:20])

    (site / "gallery" / "en" / "plot_02_other.py").write_text(EXAMPLE_OTHER)
    fixed = _build_languages(site)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert (published / "en" / "auto_examples" / "plot_02_other.html").is_file()
    assert not (staging / "BUILD-FAILED.txt").exists()
    found = leaks(published, paths)
    assert not found, "\n".join(found[:20])


# -- deleted and renamed examples -----------------------------------------------------------------
def test_a_deleted_or_renamed_example_leaves_nothing_behind(site):
    first = _build(site)
    assert first.returncode == 0, first.stderr[-3000:]
    gallery, generated = site / "gallery" / "en", site / "docs" / "en" / "auto_examples"
    built = site / "build" / "html" / "en"
    (gallery / "plot_02_other.py").rename(gallery / "plot_03_renamed.py")
    renamed = _build(site)
    assert renamed.returncode == 0, renamed.stderr[-3000:]
    assert not list(generated.glob("plot_02_other*")), "the old example's files are left"
    assert not (built / "auto_examples" / "plot_02_other.html").exists()
    assert not list(built.glob("_downloads/*/plot_02_other.*"))
    assert "other example ran" in _page(site, "plot_03_renamed")
    assert (generated / "plot_03_renamed.rst").is_file()  # a deletion is the first half of this


def test_a_site_address_turns_on_the_sitemap_and_absolute_opengraph_urls(site, monkeypatch):
    """Without an address (the default: the project has no public one) there is no sitemap and
    no og:url, since both need absolute addresses; ``MHA_REF_SITE_URL`` turns both on."""
    plain = _build(site)
    assert plain.returncode == 0, plain.stderr[-3000:]
    html = site / "build" / "html" / "en"
    assert not (html / "sitemap.xml").exists()
    assert 'property="og:url"' not in (html / "index.html").read_text()

    monkeypatch.setenv("MHA_REF_SITE_URL", "https://example.org/mha-ref/")
    shutil.rmtree(site / "build" / "html")
    addressed = _build(site, "-E")
    assert addressed.returncode == 0, addressed.stderr[-3000:]
    sitemap = (html / "sitemap.xml").read_text()
    urls = re.findall(r"<loc>([^<]+)</loc>", sitemap)
    assert "https://example.org/mha-ref/en/index.html" in urls
    assert "https://example.org/mha-ref/en/auto_examples/plot_01_shapes.html" in urls
    assert all(url.startswith("https://example.org/mha-ref/en/") for url in urls), urls
    index = (html / "index.html").read_text()
    assert '<meta property="og:url" content="https://example.org/mha-ref/en/index.html" />' in index
