"""Per-language settings (``config-inited``, before sphinx-gallery reads its configuration): which
gallery folder to execute (``gallery/<lang>``), the notebooks' first cell, the search language and
the search box's text, the copyright line, where trainings are cached, how many threads an example
may take, and the commit and torch the footer names. ``conf.py`` holds what both languages share;
what depends on the language is set here, from ``-D language=...``. After the build
(``build-finished``), the theme's source maps are deleted: a third of the site's weight that no
reader's browser asks for.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from mha_ref_build import LANGUAGES, ROOT

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.config import Config


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def build_commit() -> str:
    """Short commit id of the checkout, with ``-dirty`` when tracked files were changed."""
    return _git("describe", "--always", "--dirty", "--abbrev=12") or "unknown"


# -- config-inited: choose the language's gallery --------------------------------------------------
def _configure_language(app: Sphinx, config: Config) -> None:
    lang = config.language or "en"
    src_name = Path(app.srcdir).name
    if lang not in LANGUAGES:
        raise ValueError(f"language={lang!r} is not built by this site; use one of {LANGUAGES}")
    if src_name != lang:
        raise ValueError(
            f"source directory {app.srcdir} is for {src_name!r} but language={lang!r}: "
            f"build it with -D language={src_name}"
        )
    config.sphinx_gallery_conf["examples_dirs"] = [f"../../gallery/{lang}"]
    # every notebook opens with the install and a check for the package: the same cell that
    # notebooks.py writes into the shipped notebooks (one text, kept there). The
    # package is not on PyPI (the name ``mha-ref`` on an index could be someone else's), so the
    # cell says where the site's own wheel is and how to install it.
    from mha_ref_build.notebooks import first_notebook_cell

    config.sphinx_gallery_conf["first_notebook_cell"] = first_notebook_cell(lang)
    config.html_search_language = "zh" if lang.startswith("zh") else "en"
    # a theme option, not a message: the theme's catalogs cannot translate it
    search_bar_text = "搜索文档……" if lang.startswith("zh") else "Search the docs ..."
    config.html_theme_options = {**config.html_theme_options, "search_bar_text": search_bar_text}
    if lang.startswith("zh"):  # conf.py's "2026, mha-ref contributors", in Chinese
        config.copyright = config.copyright.replace(", ", "，").replace("contributors", "贡献者")

    # results of deterministic training runs are cached on disk, keyed by code and inputs, so
    # the second language reuses what the first computed (mha_ref.tutorial.cache reads this)
    os.environ.setdefault("MHA_REF_CACHE_DIR", str(ROOT / "build" / ".cache" / "experiments"))

    # examples side by side (``parallel`` in conf.py) share the cores: the real model's
    # measurements (mha_ref.tutorial.real_models.loading.model_threads) take no more than their part
    workers = config.sphinx_gallery_conf.get("parallel") or 1
    os.environ["MHA_REF_MAX_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))

    import torch

    config.html_context = {
        **config.html_context,
        "build_commit": build_commit(),
        "build_torch": torch.__version__,
    }


def runs_examples(config: Config) -> bool:
    """Whether sphinx-gallery runs the examples (``plot_gallery``, which ``-D`` sets as text)."""
    value = getattr(config, "plot_gallery", True)
    return str(value).strip() not in ("0", "False", "false", "")


def _drop_source_maps(app: Sphinx, exception: Exception | None) -> None:
    """Delete the theme's ``.map`` files: debugging aids for its developers, a third of the
    site's weight, and never requested by a reader's browser."""
    if exception is None and app.builder.format == "html":
        for source_map in Path(app.outdir, "_static").rglob("*.map"):
            source_map.unlink()
