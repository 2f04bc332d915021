"""What the build removes from the built site because its source is gone
(docs/_ext/mha_ref_build/orphans.py), without a build."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))


def test_the_listing_of_a_module_that_is_gone_leaves_the_built_site(tmp_path):
    """viewcode writes a page per module it sees and never removes one: after a module moves
    (``mha_ref.tutorial.smollm2.heads`` -> ``mha_ref.tutorial.real_models.heads``), an
    incremental build would keep publishing the old code. Only the pages of modules Python can
    no longer find go; the index and every live module's page stay."""
    from mha_ref_build import orphans  # noqa: E402 (docs/_ext is on the path above)

    listings = tmp_path / "_modules"
    pages = {
        "index": listings / "index.html",
        "live": listings / "mha_ref" / "functional.html",
        "live_package": listings / "mha_ref" / "tutorial" / "real_models" / "heads.html",
        "moved": listings / "mha_ref" / "tutorial" / "smollm2" / "heads.html",
        "deleted": listings / "mha_ref" / "no_such_module.html",
    }
    for page in pages.values():
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("<html></html>")
    removed = orphans._remove_stale_source_pages(tmp_path)
    assert sorted(removed) == sorted([pages["moved"], pages["deleted"]])
    assert [name for name, page in pages.items() if page.exists()] == [
        "index", "live", "live_package"
    ]
    assert not pages["moved"].parent.exists()  # its empty folder goes too
    assert orphans._remove_stale_source_pages(tmp_path / "nothing_built") == []
