"""The build's checks on what an example printed (docs/_ext/mha_ref_build/checks.py), without a
build: which printed NaN fails it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from mha_ref_build import checks  # noqa: E402


def test_which_printed_nan_counts():
    script = "\n".join(["x = 1"] * 3 + [checks.EXPECTED_NAN_FLAG, "y = 2"])
    rst = (
        ".. GENERATED FROM PYTHON SOURCE LINES 1-3\n\n"
        ".. rst-class:: sphx-glr-script-out\n\n .. code-block:: none\n\n"
        "    tensor([nan, 1.])\n    -nan and NAN\n    rows with NaN: [4]\n    nanoGPT, banana\n"
        "\n.. GENERATED FROM PYTHON SOURCE LINES 4-5\n\n"
        ".. rst-class:: sphx-glr-script-out\n\n .. code-block:: none\n\n    declared: nan\n"
    )
    assert checks.undeclared_nan(rst, script) == [
        (1, 3, "tensor([nan, 1.])"), (1, 3, "-nan and NAN")
    ]
