"""Two clean builds of the whole site print the same text (timing lines left out).

CI builds the site, copies the generated example pages to the folder named by
``MHA_REF_FIRST_BUILD``, builds again from clean, then runs this test. Without that variable
there is nothing to compare, and the test says so (it fails instead when
``MHA_REF_REQUIRE_BUILT_SITE`` is set, as in CI).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gallery_output import ROOT, generated_pages, stable_lines

LANGUAGES = ("en", "zh_CN")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_second_clean_build_prints_the_same(lang):
    first_root = os.environ.get("MHA_REF_FIRST_BUILD")
    if not first_root:
        message = "MHA_REF_FIRST_BUILD is not set: no earlier build to compare with"
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)
    first = generated_pages(Path(first_root) / lang)
    second = generated_pages(ROOT / "docs" / lang / "auto_examples")
    assert first and first.keys() == second.keys()
    for name in first:
        assert stable_lines(first[name]) == stable_lines(second[name]), (
            f"{lang}/{name}: the printed output differs between two clean builds"
        )
