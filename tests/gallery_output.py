"""What sphinx-gallery captured on the generated example pages (docs/<lang>/auto_examples).

Shared by the built-site tests and the reproducibility test. Wall-clock timings differ from run
to run by nature; the examples print them on lines starting with ``[timing]``, which are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMING_LINE = re.compile(r"^\s*\[timing\]")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", re.IGNORECASE)
_OUTPUT_BLOCK = re.compile(
    r"\.\. rst-class:: sphx-glr-script-out\n\n \.\. code-block:: none\n\n(.*?)(?=\n\S|\Z)", re.S
)


def generated_pages(folder: Path) -> dict[str, str]:
    """The generated reST page of every example in ``folder``, by file name."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("plot_*.rst"))}


def captured_outputs(rst: str) -> list[str]:
    """The text outputs sphinx-gallery captured, in order (one string per output block)."""
    return [match.group(1) for match in _OUTPUT_BLOCK.finditer(rst)]


def stable_lines(rst: str) -> list[str]:
    """Every captured output line except the timing lines."""
    return [
        line
        for block in captured_outputs(rst)
        for line in block.splitlines()
        if not TIMING_LINE.match(line)
    ]


def output_numbers(rst: str) -> list[str]:
    """Every number in the captured outputs, timing lines left out."""
    return [number for line in stable_lines(rst) for number in NUMBER.findall(line)]
