"""When an example runs again, without building a site: hashing by meaning, crash-safe records.

- A module is hashed by its code (``mha_ref.tutorial.sources.file_hash``): an edit to a docstring
  or a comment, or a line moved, keeps the hash; an edit to the code changes it. The docs build
  (which example runs again) and the training cache (which result is computed again) both use it.
- The records of what each example ran with are written only after it succeeded, and a build that
  marks examples outdated and is then stopped leaves them as they were: undo the edit, and nothing
  runs again (docs/_ext staleness rules).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from mha_ref.tutorial import cache, sources

ROOT = Path(__file__).resolve().parents[2]

MODULE = '''"""A module of the package."""

import math  # the square root


class Scaler:
    """Scales by a constant."""

    factor = 2.0

    def scale(self, x):
        """Return ``x`` times the factor."""
        return x * self.factor  # the scaling


async def later(x):
    """Awaitable."""
    return math.sqrt(x)


def only_a_docstring():
    """Does nothing."""


LABEL = "a string, not a docstring"
'''

#: edits that change what the module says about itself, never what it does
SAME_CODE = {
    "module docstring": ('"""A module of the package."""', '"""Another text entirely."""'),
    "class docstring": ('"""Scales by a constant."""', '"""Multiplies.\n\n    Two lines."""'),
    "method docstring": ('"""Return ``x`` times the factor."""', "'''Returns x * factor.'''"),
    "async docstring": ('"""Awaitable."""', '"""Awaitable, and the square root."""'),
    "docstring of a body that is only one": ('"""Does nothing."""', '"""Nothing at all."""'),
    "comment": ("# the scaling", "# a new comment, longer than the old one"),
    "comment added": ("    factor = 2.0\n", "    # the default\n    factor = 2.0\n"),
    "blank lines (every line number moves)": ("import math", "\n\n\nimport math"),
}

#: edits to the code, each of which may change what an example prints
OTHER_CODE = {
    "a constant": ("factor = 2.0", "factor = 3.0"),
    "an operator": ("x * self.factor", "x / self.factor"),
    "a string that is not a docstring": ('"a string, not a docstring"', '"another string"'),
    "a statement": ("    factor = 2.0\n", "    factor = 2.0\n    offset = 0\n"),
    "a docstring made code": ('"""Does nothing."""', "return 1"),
}


def _hash_of(tmp_path: Path, text: str, name: str = "module.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return sources.file_hash(path)


@pytest.mark.parametrize("edit", sorted(SAME_CODE))
def test_a_docstring_or_comment_edit_keeps_the_hash(tmp_path, edit):
    old, new = SAME_CODE[edit]
    assert old in MODULE
    edited = MODULE.replace(old, new)
    assert hashlib.sha256(edited.encode()).digest() != hashlib.sha256(MODULE.encode()).digest()
    assert _hash_of(tmp_path, edited) == _hash_of(tmp_path, MODULE)


@pytest.mark.parametrize("edit", sorted(OTHER_CODE))
def test_a_code_edit_changes_the_hash(tmp_path, edit):
    old, new = OTHER_CODE[edit]
    assert old in MODULE
    assert _hash_of(tmp_path, MODULE.replace(old, new)) != _hash_of(tmp_path, MODULE)


def test_files_that_are_not_parsed_python_are_hashed_byte_for_byte(tmp_path):
    """Data files (any comment in them may be read), and Python that does not parse."""
    for name, text in (("data.txt", "# a line\nvalue\n"), ("broken.py", "def f(:\n  # c\n")):
        expected = hashlib.sha256(text.encode()).hexdigest()
        assert _hash_of(tmp_path, text, name) == expected
        assert _hash_of(tmp_path, text.replace("# ", "#  "), name) != expected


@pytest.fixture
def small_package(tmp_path, monkeypatch):
    """A package standing in for ``mha_ref``: ``__init__`` imports ``a``; ``b`` stands alone."""
    package = tmp_path / sources.PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text('"""The package."""\nfrom mha_ref.a import value\n')
    (package / "a.py").write_text('"""Module a."""\n\n\ndef value():\n    return 1  # one\n')
    (package / "b.py").write_text("X = 1\n")
    monkeypatch.setattr(sources, "_PACKAGE_DIR", package)
    return package


def test_a_docstring_edit_keeps_the_cached_training_and_a_code_edit_does_not(small_package):
    """The training cache's key holds the fingerprint of the code the training runs: an edit
    to a docstring or comment there keeps the cached result, an edit to its code does not."""
    def key() -> str:
        return cache.cache_key("train", {"steps": 3}, ["mha_ref.a"])

    before = (sources.fingerprint(["mha_ref.a"]), key())
    a = small_package / "a.py"
    a.write_text(a.read_text().replace('"""Module a."""', '"""Module a, explained.\n\nMore."""')
                 .replace("# one", "# the number one"))
    assert (sources.fingerprint(["mha_ref.a"]), key()) == before
    a.write_text(a.read_text().replace("return 1", "return 2"))
    fingerprint = sources.fingerprint(["mha_ref.a"])
    assert fingerprint.keys() == before[0].keys() == {"mha_ref/__init__.py", "mha_ref/a.py"}
    assert fingerprint["mha_ref/a.py"] != before[0]["mha_ref/a.py"]
    assert key() != before[1]


# -- the records of what each example ran with -------------------------------------------------
def _staleness():
    """docs/_ext/mha_ref_build/staleness.py, imported without Sphinx."""
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        from mha_ref_build import staleness
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))
    return staleness


SCRIPT = '"""\nTitle\n=====\n"""\n\nprint("hello")\n'
DEPS = {"mha_ref/masks.py": "1" * 64, "conf.py": "2" * 64}
EDITED = {**DEPS, "mha_ref/masks.py": "3" * 64}


def _ran(generated: Path, stem: str, deps: dict, passed: bool = True, page: str = "page\n"):
    """What a run of example ``stem`` leaves, as sphinx-gallery and the build write it: the
    record of what it started with, its page and image, and (if it passed) its ``.md5``."""
    staleness = _staleness()
    staleness._write_json(generated / f"{stem}{staleness.RUNNING_SUFFIX}", {"files": deps})
    (generated / f"{stem}.rst").write_text(page)
    (generated / "images").mkdir(exist_ok=True)
    (generated / "images" / f"sphx_glr_{stem}_001.png").write_bytes(page.encode())
    if passed:
        md5 = staleness.script_md5(generated / f"{stem}.py")
        (generated / f"{stem}.py.md5").write_text(md5)


@pytest.fixture
def gallery(tmp_path):
    """A gallery of one example that ran once, with :data:`DEPS`: (scripts, generated pages)."""
    staleness = _staleness()
    scripts, generated = tmp_path / "gallery", tmp_path / "auto_examples"
    scripts.mkdir()
    generated.mkdir()
    (scripts / "plot_01_a.py").write_text(SCRIPT)
    (generated / "plot_01_a.py").write_text(SCRIPT)  # sphinx-gallery's copy
    _ran(generated, "plot_01_a", DEPS)
    assert staleness.commit_records(generated) == {"plot_01_a"}
    return scripts, generated


def test_the_script_hash_is_sphinx_gallerys(tmp_path):
    utils = pytest.importorskip("sphinx_gallery.utils")
    script = tmp_path / "plot_x.py"
    script.write_bytes('"""Ünïcode\r\n"""\r\nprint(1)\n'.encode())
    assert _staleness().script_md5(script) == utils.get_md5sum(script, mode="t")


def test_an_interrupted_build_leaves_the_records_as_they_were(gallery):
    staleness = _staleness()
    scripts, generated = gallery
    record, md5 = generated / "plot_01_a.deps.json", generated / "plot_01_a.py.md5"
    kept = record.read_bytes()
    assert json.loads(kept)["files"] == DEPS

    assert staleness.outdated_examples(scripts, generated, lambda script: DEPS) == {}
    assert md5.is_file()

    # an edit: the example is outdated, and sphinx-gallery is told by its .md5 going
    outdated = staleness.outdated_examples(scripts, generated, lambda script: EDITED)
    assert outdated == {"plot_01_a.py": ["mha_ref/masks.py"]}
    assert not md5.exists() and record.read_bytes() == kept
    # ... the build is stopped before the example ran; the edit is undone: nothing runs again
    assert staleness.outdated_examples(scripts, generated, lambda script: DEPS) == {}
    assert md5.read_text() == staleness.script_md5(scripts / "plot_01_a.py")
    assert record.read_bytes() == kept


def test_a_run_that_did_not_finish_or_failed_keeps_the_old_record(gallery):
    staleness = _staleness()
    scripts, generated = gallery
    record = generated / "plot_01_a.deps.json"
    kept = record.read_bytes()
    staleness.outdated_examples(scripts, generated, lambda script: EDITED)

    # stopped while it ran: its page was written again, nothing recorded it
    _ran(generated, "plot_01_a", EDITED, passed=False, page="half of a new page\n")
    outdated = staleness.outdated_examples(scripts, generated, lambda script: DEPS)
    assert outdated == {"plot_01_a.py": ["(its page or images are not those of its last run)"]}
    assert not list(generated.glob(f"*{staleness.RUNNING_SUFFIX}"))  # the leftover is gone
    assert record.read_bytes() == kept

    # failed (no .md5 from sphinx-gallery): ran, and the old record stays
    _ran(generated, "plot_01_a", EDITED, passed=False, page="a traceback\n")
    assert staleness.commit_records(generated) == {"plot_01_a"}
    assert record.read_bytes() == kept

    # succeeded: the new record
    _ran(generated, "plot_01_a", EDITED, page="the new page\n")
    assert staleness.commit_records(generated) == {"plot_01_a"}
    assert json.loads(record.read_text())["files"] == EDITED
    assert staleness.outdated_examples(scripts, generated, lambda script: EDITED) == {}


def test_an_edited_script_or_a_missing_record_runs_again(gallery):
    staleness = _staleness()
    scripts, generated = gallery
    (scripts / "plot_01_a.py").write_text(SCRIPT.replace("hello", "hello again"))
    assert staleness.outdated_examples(scripts, generated, lambda script: DEPS) == {
        "plot_01_a.py": ["plot_01_a.py"]
    }
    (scripts / "plot_01_a.py").write_text(SCRIPT)
    (generated / "plot_01_a.deps.json").write_text("{not json")
    assert staleness.outdated_examples(scripts, generated, lambda script: DEPS) == {
        "plot_01_a.py": ["(no record of what it ran with)"]
    }
