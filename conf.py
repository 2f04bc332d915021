"""One Sphinx configuration for both languages of the mha-ref site.

Build one language with the source directory of that language and ``-c .``::

    sphinx-build -b html -c . -D language=zh_CN docs/zh_CN build/html/zh_CN

``nox -s docs`` does the same for every language, each in a child process forked after one
shared import of torch, matplotlib and Sphinx (``docs/_ext/build_languages.py``). The
per-language parts (which gallery to execute, which entry of the language switcher is current)
are set by ``docs/_ext/mha_ref_build/settings.py``.
"""

import importlib.metadata
import logging
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).parent.resolve()
sys.path[:0] = [str(ROOT), str(ROOT / "docs" / "_ext")]

project = "mha-ref"
author = "mha-ref contributors"
copyright = "2026, mha-ref contributors"
release = version = importlib.metadata.version("mha-ref")

# -- General -------------------------------------------------------------------------------------
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",  # the API page links every object to its source
    "sphinx_gallery.gen_gallery",
    "sphinx_copybutton",
    "sphinx_design",
    "mha_ref_build",  # docs/_ext/mha_ref_build: one module per job of the build (its setup())
    "mha_ref_weight",  # docs/_ext: each page loads only the scripts it uses; the phone drawer
]
language = "en"  # always given on the command line: -D language=en or -D language=zh_CN
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
templates_path = [str(ROOT / "docs" / "_templates")]
exclude_patterns = ["**/*.ipynb", "**/*.py", "**/*.md5", "**/*.zip", "**/*.pickle"]
nitpicky = True
nitpick_ignore_regex = [
    # torch, numpy and matplotlib types in docstrings: no offline inventory to resolve them
    ("py:class", r"(torch|numpy|np|matplotlib|collections\.abc|typing|pathlib)\..*"),
    ("py:class", r"(Tensor|Module|Figure|Axes|optional|callable|Path|Callable|Sequence|Iterable)"),
    ("py:(obj|mod|func|meth|attr|data)", r"(torch|numpy|matplotlib)\..*"),
    ("py:class", r"mha_ref\.tutorial\.cache\.T"),  # the TypeVar of cached()
]

# -- MyST -----------------------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# -- autodoc --------------------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"  # the docstrings' Args say what each argument is
autodoc_inherit_docstrings = False  # no nn.Module boilerplate under our forward methods
autodoc_default_options = {"show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# mha_ref's docstrings follow PyTorch's layout: a Shape section with named dims, the Source
napoleon_custom_sections = ["Shape", "Source", "Math"]

# -- Math, served with the site (no CDN) ---------------------------------------------------------
# docs/_static/mathjax: a MathJax 3.2.2 subset. The loader (startup.js) fetches the components
# below from beside it: TeX input, CommonHTML output (its font comes with it) and the hidden MathML
# that screen readers read. The combined tex-chtml.js held these and the contextual menu too,
# 1.16 MB for each page with a formula against 0.76 MB now (noxfile.py: vendor-mathjax).
mathjax_path = "mathjax/startup.js"
mathjax3_config = {"loader": {"load": ["input/tex", "output/chtml", "a11y/assistive-mml"]}}

# joblib restarts a worker whose memory grew by 300 MB while it ran an example: a real-model
# example keeps the model (0.5 GB) loaded for the next one in that worker, on purpose. The
# restart costs a second; the warning it prints ("...can be caused by a memory leak") is noise.
warnings.filterwarnings("ignore", message="A worker stopped while some jobs were given")

# -- sphinx-gallery -------------------------------------------------------------------------------
def _example_workers() -> int | bool:
    """How many worker processes run the examples: ``MHA_REF_EXAMPLE_WORKERS``, or one per core
    up to 4 (``False``, the build's own process, on Windows and for 1)."""
    value = os.environ.get("MHA_REF_EXAMPLE_WORKERS", "")
    if value and not value.isdigit():
        raise ValueError(
            f"MHA_REF_EXAMPLE_WORKERS must be a whole number of workers, got {value!r}; "
            "unset it to run one worker per core"
        )
    workers = int(value) if value else min(os.cpu_count() or 1, 4)
    return workers if workers > 1 and os.name == "posix" else False


sphinx_gallery_conf = {
    "examples_dirs": ["../../gallery/en"],  # replaced per language (mha_ref_build/settings.py)
    "gallery_dirs": ["auto_examples"],  # -> docs/<lang>/auto_examples
    "filename_pattern": r"\.py$",  # execute every example
    "ignore_pattern": r"__init__\.py|/_",
    "within_subsection_order": "FileNameSortKey",
    "reset_modules": ("matplotlib", "mha_ref_build.example_run.reset_example_state"),
    "reset_modules_order": "both",
    "ignore_repr_types": (
        r"matplotlib\.(text|axes|figure|image|lines|collections|legend|colorbar)"
        r"|torch\._C\.Generator|NoneType"
    ),
    "doc_module": ("mha_ref",),
    "backreferences_dir": "gen_modules/backreferences",
    "reference_url": {"mha_ref": None},
    "remove_config_comments": True,
    "min_reported_time": 10**6,  # no "Total running time" line: it changes every build
    "write_computation_times": False,
    "show_signature": False,
    "show_memory": False,
    # examples run side by side in worker processes (joblib), one per core up to 4: on 2 cores
    # that halves the cold build. Each example seeds itself, so what they print does not depend
    # on the order or the worker. Not on Windows (the timing report's lock is POSIX).
    # MHA_REF_EXAMPLE_WORKERS=1 runs them in the build's own process: the build tests' tiny sites
    # do, since starting two workers (each imports torch) costs more than their examples.
    "parallel": _example_workers(),
    "abort_on_example_error": False,  # run all, then fail the build listing every failure
    "only_warn_on_example_error": False,
    "image_srcset": ["2x"],
    # each figure drawn once at 2x, the 1x image scaled down from it (mha_ref_build/figures.py)
    "image_scrapers": ("mha_ref_build.figures.matplotlib_scraper",),
    # one zip of every script and one of every notebook, on the gallery's index; the build adds
    # the package's wheel to each (docs/_ext/mha_ref_build/wheel.py), so a zip is all a reader needs
    "download_all_examples": True,
    # set per language by docs/_ext/mha_ref_build/settings.py: checks that mha_ref is installed
    # and says how to install the wheel shipped with the site (it is not on PyPI, so the notebook
    # must not pip-install that name)
    "first_notebook_cell": None,
    "matplotlib_animations": False,
    "capture_repr": ("_repr_html_", "__repr__"),
}

# -- HTML -----------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
# the interactive attention views' script and style live with the code that writes their data
html_static_path = [str(ROOT / "docs" / "_static"), str(ROOT / "mha_ref" / "tutorial" / "static")]
html_css_files = ["mha-ref.css", "attention-view.css"]
html_js_files = [
    "attention-view.js",
    "zh-search-fix.js",
    "lang-switch-anchor.js",
    "figure-links.js",
    "card-titles.js",
    "fit-math.js",
]
html_title = "mha-ref"
html_favicon = str(ROOT / "docs" / "_static" / "favicon.svg")
locale_dirs = [str(ROOT / "docs" / "_locale")]  # a few theme strings missing from its zh catalog
# one catalog (docs/_locale/zh_CN/LC_MESSAGES/api.po) for the docstrings of both API pages, api.md
# and api_tutorial.md; the other Chinese pages are written in Chinese, so none of their
# paragraphs is one of its msgids
gettext_compact = "api"
html_last_updated_fmt = None
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "navbar_end": ["language-switcher", "theme-switcher"],  # docs/_templates/language-switcher.html
    "navbar_align": "left",
    "show_version_warning_banner": False,
    "use_edit_page_button": False,
    "footer_start": ["copyright", "build-provenance"],
    "footer_end": ["theme-version"],
    "secondary_sidebar_items": ["page-toc", "sg_download_links"],
}
html_context = {"default_mode": "auto"}
# No left sidebar: on the top-level pages it would be an empty "Section Navigation", and on the
# example pages it would take the width that wide figures and shape-commented code lines need
# (the navbar, the gallery's index and the previous/next links lead from example to example).
# On a phone, the theme's drawer lists the examples (docs/_templates/examples-nav.html), shown
# there only: from 960 px up, mha-ref.css hides the primary sidebar again.
html_sidebars = {"**": ["examples-nav.html"]}

# -- Search: Chinese is segmented by jieba at index time ------------------------------------------
html_search_options = {"dict": str(ROOT / "docs" / "_ext" / "jieba_userdict.txt")}
try:
    import jieba

    jieba.setLogLevel(logging.WARNING)
except ImportError:  # the zh index then has no Chinese terms; the tests catch that
    pass

# -- copybutton: copy code, not prompts or outputs ------------------------------------------------
copybutton_exclude = ".linenos, .gp, .go"
