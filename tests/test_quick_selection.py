"""``nox -s quick`` runs what it says it runs: the selection named in noxfile.py does not shrink
without anyone noticing.

The session runs the files of ``QUICK_TESTS`` (noxfile.py) with the marker expression
``QUICK_MARKERS``, which leaves out the tests that need a built site or build one. Checked here:
the named files exist, the bilingual parity, section-label, glossary-term, reST and notebook
checks and the attention reference's unit tests are among them, and pytest collects tests from
every one of them with those markers (a file whose tests all moved behind a marker, or whose
module is skipped because a package is missing, would otherwise leave the session green and
empty).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: what the session must include, whatever else it runs
REQUIRED = {
    "tests/pages/test_i18n_parity.py",  # the two languages' examples and pages in step
    "tests/pages/test_section_labels.py",  # every section labelled, the same in both languages
    "tests/pages/test_terms.py",  # one Chinese term per concept, as the glossary gives it
    "tests/pages/test_example_numbers.py",  # reST titles and their underlines, example numbers
    "tests/pages/test_course_path.py",  # the course data file, notebooks without reST
    # reST and Markdown inline markup that the parser leaves open
    "tests/pages/test_inline_markup.py",
    "tests/pages/test_notebook_markdown.py",  # notebook headings whole, no internal labels
    "tests/reference/test_functional.py",  # the attention reference's core
    "tests/reference/test_masks.py",
    "tests/reference/test_modules.py",
}


def noxfile_constants() -> dict[str, object]:
    """The literal constants assigned at the top level of noxfile.py (nox is not imported)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return found


def collected(files: list[str], markers: str) -> tuple[Counter, str]:
    """How many tests pytest collects from each file with the marker expression, and its output."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [*command, "-m", markers, *files], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = Counter(line.split("::")[0] for line in result.stdout.splitlines() if "::" in line)
    return counts, result.stdout


def test_the_quick_selection_names_existing_files_and_the_required_checks():
    constants = noxfile_constants()
    files = list(constants["QUICK_TESTS"])
    assert files == sorted(set(files)), "QUICK_TESTS: keep it sorted, each file once"
    missing = [f for f in files if not (ROOT / f).is_file()]
    assert not missing, f"QUICK_TESTS names files that do not exist: {missing}"
    assert REQUIRED <= set(files), f"QUICK_TESTS lacks {sorted(REQUIRED - set(files))}"
    assert "not built_site" in constants["QUICK_MARKERS"]
    assert "not build" in constants["QUICK_MARKERS"]


def test_every_quick_file_contributes_tests():
    constants = noxfile_constants()
    files = list(constants["QUICK_TESTS"])
    counts, output = collected(files, constants["QUICK_MARKERS"])
    empty = [f for f in files if counts[f] == 0]
    assert not empty, (
        f"nox -s quick would run no test of {empty} (all deselected by "
        f"{constants['QUICK_MARKERS']!r}, or the module skipped):\n{output[-2000:]}"
    )
    assert sum(counts.values()) > 500, counts
