"""The interactive views on the built pages hold the numbers the examples compute.

Each example that draws attention weights is run again here, as the docs build runs it (same
seeds, one thread), and the data embedded in its built page is compared with what its figures
carry: same tokens, same blocked cells, the same weights bit for bit. Skipped when there is no
build (``nox -s docs``), failed when CI says there must be one.
"""

from __future__ import annotations

import json
import os
import random
import re
import runpy
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from mha_ref.tutorial.interactive import view_data  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "build" / "html"
VIEW = re.compile(
    r'<div class="mha-attn" data-mha-attn="1"><script type="application/json">(.*?)</script>'
)


def embedded_views(page: Path) -> list[dict]:
    return [json.loads(text) for text in VIEW.findall(page.read_text(encoding="utf-8"))]


def run_example(path: Path) -> list[dict]:
    """Run one gallery script as the docs build does; the view data of each figure it made."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    plt.close("all")
    shown: list[dict | None] = []

    def show(*args, **kwargs):  # sphinx-gallery scrapes the open figures at each cell's end
        shown.extend(view_data(plt.figure(n)) for n in plt.get_fignums())
        plt.close("all")

    original_show, plt.show = plt.show, show
    try:
        runpy.run_path(str(path), run_name="__main__")
        show()
    finally:
        plt.show = original_show
        torch.set_num_threads(threads)
        plt.close("all")
    return [data for data in shown if data is not None]


@pytest.mark.built_site
@pytest.mark.parametrize("lang", ["en", "zh_CN"])
@pytest.mark.parametrize("example", ["plot_01_shapes", "plot_04_masks", "plot_10_induction_heads"])
def test_the_views_on_the_page_are_the_examples_numbers(lang, example):
    page = HTML / lang / "auto_examples" / f"{example}.html"
    if not page.is_file():
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(f"{page} is missing")
        pytest.skip("build/html is missing: run `nox -s docs` first")
    on_page = embedded_views(page)
    computed = run_example(ROOT / "gallery" / lang / f"{example}.py")
    assert len(on_page) == len(computed) >= 1
    if example == "plot_10_induction_heads":
        assert sum("live" in data for data in on_page) == 1
    for built, fresh in zip(on_page, computed, strict=True):
        assert built["lang"] == lang  # the page's language, whatever the labels
        for field in ("kind", "queries", "keys", "names", "blocked", "title", "layers"):
            assert built[field] == fresh[field], field
        # example 10's live model: the page holds the parameters the build trained, bit for bit
        assert built.get("live") == fresh.get("live")
        assert built["vmax"] == pytest.approx(fresh["vmax"], rel=1e-12)
        built_w = np.array(built["weights"], dtype=np.float64)
        fresh_w = np.array(fresh["weights"], dtype=np.float64)
        assert np.array_equal(built_w, fresh_w, equal_nan=True)
        if built["blocked"] is not None:  # a blocked cell holds an exact zero, shown as blocked
            blocked = np.array([[[c == "1" for c in r] for r in h] for h in built["blocked"]])
            assert (built_w[blocked] == 0).all() and blocked.any()
