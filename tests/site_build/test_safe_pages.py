"""Example pages are safe and anonymous (docs/_ext/mha_ref_build/safe_pages.py), without a build:
the building machine's folders and the characters that end a reST block are taken out."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from mha_ref_build import safe_pages  # noqa: E402


def test_example_pages_lose_the_machine_paths_and_the_line_breaking_characters():
    import site as site_module

    packages = site_module.getsitepackages()[0]
    text = (
        f'File "{ROOT}/gallery/en/plot_x.py", line 3\n'
        f'File "{packages}/torch/nn/functional.py", line 9\n'
        f"see {Path.home()}/notes and {ROOT}.\n"
        "a\u2028b\u2029c\x85d\x00e\rf\tg"
    )
    cleaned = safe_pages.anonymize_paths(safe_pages.escape_line_ends(text))
    assert cleaned == (
        'File "gallery/en/plot_x.py", line 3\n'
        'File "torch/nn/functional.py", line 9\n'
        "see ~/notes and ..\n"
        "a\\u2028b\\u2029c\\u0085d\\u0000e\\u000df\tg"
    )
    assert len(cleaned.splitlines()) == 4
