"""The import closure that the cache key and the docs build's reruns rely on: never too small.

A file left out of a closure would let an out-of-date result through (a cached training, an
example page), so the main check compares the closure read from the source with what Python
really imports, for every module of the package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mha_ref.tutorial import sources

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for path in (ROOT / "mha_ref").rglob("*.py")
)

_RUNTIME_IMPORTS = """
import json, sys
import torch, numpy, matplotlib  # loaded once, outside the measurement
result = {}
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "mha_ref" or m.startswith("mha_ref.")]:
        del sys.modules[loaded]
    __import__(name)
    result[name] = sorted(m for m in sys.modules if m == "mha_ref" or m.startswith("mha_ref."))
print(json.dumps(result))
"""


def test_the_static_closure_holds_every_module_python_imports():
    """Import each module in a clean ``sys.modules`` (one process) and compare."""
    done = subprocess.run(
        [sys.executable, "-c", _RUNTIME_IMPORTS, *MODULES],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=300,
        env={"PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"},
    )
    runtime = json.loads(done.stdout.splitlines()[-1])
    assert set(runtime) == set(MODULES) and len(MODULES) > 20
    for name, imported in runtime.items():
        missing = set(imported) - set(sources.import_closure([name]))
        assert not missing, f"importing {name} runs {sorted(missing)}, not in its closure"


def test_the_package_has_no_import_by_a_computed_name():
    for name in MODULES:
        sources.imported_names(sources.module_file(name), name)  # raises ValueError if any


def test_imports_anywhere_in_a_file_count(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "import torch\n"
        "from mha_ref.tutorial import plotting, cache as c\n"
        "def later():\n"
        "    from mha_ref.masks import causal_mask\n"
        "    import importlib\n"
        "    importlib.import_module('mha_ref.tiled')\n"
        "if False:\n"
        "    import mha_ref.rope\n"
    )
    names = sources.imported_names(script)
    assert {"torch", "mha_ref", "mha_ref.tutorial", "mha_ref.tutorial.plotting",
            "mha_ref.tutorial.cache", "mha_ref.masks", "mha_ref.tiled", "mha_ref.rope"} <= names
    closure = sources.import_closure(names)
    assert "torch" not in closure and "mha_ref.tutorial.plotting" in closure
    assert "mha_ref.masks.causal_mask" not in closure  # an attribute, not a module
    # importing a tutorial module runs mha_ref/__init__.py, which imports the whole reference
    assert {"mha_ref.functional", "mha_ref.multihead", "mha_ref.grouped"} <= set(closure)


def test_relative_imports_resolve_against_the_package(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("from . import fonts\nfrom ..masks import causal_mask\n")
    names = sources.imported_names(module, "mha_ref.tutorial.module")
    assert {"mha_ref.tutorial.fonts", "mha_ref.masks", "mha_ref.masks.causal_mask"} <= names
    with pytest.raises(ValueError, match="relative import outside a package"):
        sources.imported_names(module)


def test_an_import_by_a_computed_name_cannot_be_followed(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import importlib\nname = 'mha_ref.tiled'\nimportlib.import_module(name)\n")
    with pytest.raises(ValueError, match="line 3: a module imported by a name computed"):
        sources.imported_names(script)


def test_a_fingerprint_changes_with_its_closure_and_nothing_else(tmp_path, monkeypatch):
    """On a copy of the package: an edit to the training's model changes the training's
    fingerprint; an edit to the plots does not; a new data file changes every fingerprint."""
    package = tmp_path / "mha_ref"
    shutil.copytree(ROOT / "mha_ref", package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(sources, "_PACKAGE_DIR", package)
    training = ["mha_ref.tutorial.training"]
    before = sources.fingerprint(training)
    assert "mha_ref/tutorial/tasks.py" in before and "mha_ref/tutorial/plotting.py" not in before
    with (package / "tutorial" / "plotting.py").open("a") as f:
        f.write("\n_AN_EDIT_TO_THE_FIGURES = 1\n")  # code: a comment is no edit
    assert sources.fingerprint(training) == before
    with (package / "tutorial" / "tasks.py").open("a") as f:
        f.write("\n_AN_EDIT_TO_THE_MODEL = 1\n")
    after = sources.fingerprint(training)
    assert after.keys() == before.keys()
    assert {k for k in after if after[k] != before[k]} == {"mha_ref/tutorial/tasks.py"}
    (package / "tutorial" / "table.csv").write_text("1,2\n")
    assert "mha_ref/tutorial/table.csv" in sources.fingerprint(training)
    assert "mha_ref/tutorial/table.csv" in sources.fingerprint(None)
    (package / "tutorial" / "static" / "extra.js").write_text("// for the browser\n")
    assert "mha_ref/tutorial/static/extra.js" not in sources.fingerprint(None)
