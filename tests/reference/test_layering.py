"""The attention reference installs and imports with torch alone; the tutorial is apart."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import mha_ref

ROOT = Path(__file__).resolve().parents[2]
CORE_FILES = sorted((ROOT / "mha_ref").glob("*.py"))


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_core_modules_import_only_torch_and_the_standard_library():
    allowed_roots = {"torch", "mha_ref", "__future__"} | set(sys.stdlib_module_names)
    assert CORE_FILES
    for path in CORE_FILES:
        for module in _imported_modules(path):
            root = module.split(".")[0]
            assert root in allowed_roots, f"{path.name} imports {module}"
            assert not module.startswith("mha_ref.tutorial"), f"{path.name} imports {module}"


def test_core_imports_with_numpy_and_matplotlib_unavailable():
    code = (
        "import sys\n"
        "for name in ('numpy', 'matplotlib', 'noto_cjk_sans_otc'):\n"
        "    sys.modules[name] = None  # any import of them now fails\n"
        "import torch, mha_ref\n"
        "from mha_ref import *\n"
        "m = mha_ref.MultiHeadAttention(8, 2, batch_first=True)\n"
        "x = torch.ones(1, 3, 8)\n"
        "print(tuple(m(x, x, x)[0].shape))\n"
        "print(sorted(n for n in sys.modules if n.startswith('mha_ref')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    shape, modules = done.stdout.splitlines()
    assert shape == "(1, 3, 8)"
    assert "mha_ref.tutorial" not in modules


def test_declared_dependencies_are_torch_alone_and_the_tutorial_is_an_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert [d.split(">")[0].split("=")[0] for d in project["dependencies"]] == ["torch"]
    tutorial = project["optional-dependencies"]["tutorial"]
    assert {d.split(">")[0] for d in tutorial} == {"numpy", "matplotlib", "noto-cjk-sans-otc"}


def test_version_and_typing_marker():
    assert mha_ref.__version__ == "0.1.0"
    assert (ROOT / "mha_ref" / "py.typed").is_file()
    import importlib.metadata

    assert importlib.metadata.version("mha-ref") == mha_ref.__version__
