"""The mha-ref site's Sphinx extension: what the build needs beyond plain configuration.

One module per job; :func:`setup` below connects each to the Sphinx or sphinx-gallery event it
hooks into, in the order a build meets them, and is the table of contents of the build. The
modules that hold plain rules (which examples are outdated, the notebooks' Markdown, Chinese
line joining, the install commands) import Sphinx only inside the functions that need it, so
tests import them without a build.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphinx.application import Sphinx

#: the checkout: this package is ``docs/_ext/mha_ref_build``
ROOT = Path(__file__).resolve().parents[3]
LANGUAGES = ("en", "zh_CN")
#: where sphinx-gallery writes the example pages, in each language's source folder
GALLERY_DIR = "auto_examples"
#: beside each generated page: the torch, device and threads its example ran with
PROVENANCE_SUFFIX = ".provenance.json"


def setup(app: Sphinx) -> dict:
    """Connect every job of the build to its event; sphinx-gallery's own handlers have the
    default priority (500) unless said."""
    from mha_ref.tutorial.sources import file_hash
    from mha_ref_build import (
        architecture_figure,
        checks,
        chinese_text,
        course_path,
        discovery,
        example_run,
        exercises,
        notebooks,
        orphans,
        provenance,
        safe_pages,
        search,
        section_ids,
        settings,
        staleness,
        translations,
        wheel,
    )

    # -- config-inited: the language, then what runs (sphinx-gallery reads its conf at 10) ----
    app.connect("config-inited", settings._configure_language, priority=5)
    app.connect("config-inited", orphans._remove_orphans_of_the_language, priority=6)
    app.connect("config-inited", staleness._mark_outdated_examples, priority=7)
    app.connect("config-inited", wheel._build_wheel, priority=800)
    app.connect("config-inited", course_path._check_course, priority=850)
    app.connect("config-inited", discovery._configure_discovery, priority=860)
    app.connect("config-inited", search._set_search_scorer, priority=870)

    # -- builder-inited: after sphinx-gallery ran the examples and wrote their pages ----------
    app.connect("builder-inited", staleness._commit_records, priority=550)
    app.connect("builder-inited", notebooks._clean_notebooks, priority=600)
    app.connect("env-get-outdated", staleness._rewrite_executed_examples)

    # -- reading the pages ------------------------------------------------------------------
    app.connect("env-before-read-docs", checks._check_printed_nan)
    app.connect("source-read", safe_pages._clean_example_page, priority=100)  # before any other
    app.connect("source-read", discovery._describe_example, priority=300)  # before the notes
    app.connect("source-read", exercises._example_page, priority=400)
    app.connect("source-read", course_path._course_pages, priority=450)
    app.connect("source-read", provenance._add_provenance)
    app.connect("source-read", translations._translate_gallery_text)
    app.connect("autodoc-process-docstring", translations._translate_docstring_sections,
                priority=600)  # after napoleon
    app.connect("doctree-read", translations._translate_attribute_type_label)
    app.connect("doctree-read", checks._check_formulas)
    app.add_transform(section_ids.LabelledSectionIds)
    app.add_post_transform(chinese_text.join_chinese_text_transform())
    app.add_search_language(chinese_text.chinese_search_language())

    # -- what pages can say: roles and directives --------------------------------------------
    app.add_role("mha-wheel", wheel.WheelRole())
    app.add_directive("mha-wheel-install", wheel.WheelInstall)
    app.add_directive("mha-install-recipe", wheel.InstallRecipe)
    app.add_directive("mha-course-path", course_path.CoursePath)
    app.add_directive("mha-architecture", architecture_figure.ArchitectureFigure)

    # -- writing the pages -------------------------------------------------------------------
    app.connect("html-page-context", wheel._page_context)
    app.connect("html-page-context", chinese_text._full_width_field_colons)
    app.connect("html-page-context", discovery._tidy_head, priority=900)  # after OpenGraph's
    app.add_css_file("mha-print.css")  # docs/_static: code and output lines wrap on paper
    app.add_css_file("mha-course.css")  # docs/_static: the course path's lines and table
    app.add_js_file("table-stack.js")  # docs/_static: tables of 3+ columns stack on phones
    app.add_js_file("scroll-cue.js")  # docs/_static: a shadow where a code block scrolls sideways

    # -- build-finished ----------------------------------------------------------------------
    app.connect("build-finished", wheel._ship_wheel)
    app.connect("build-finished", settings._drop_source_maps)
    app.connect("build-finished", example_run._stop_example_workers)

    # -- the extensions this build sets up itself ---------------------------------------------
    app.setup_extension("sphinxext.opengraph")
    app.setup_extension("notfound.extension")
    app.setup_extension("mha_ref_epub")  # docs/_ext: the EPUB per language, for offline reading

    # Sphinx reads every page again when env_version changes: a change to the code of this
    # package (its transforms, its translations) then reaches pages whose source did not change
    here = Path(__file__).resolve().parent
    code = "".join(file_hash(path) for path in sorted(here.glob("*.py")))
    return {
        "parallel_read_safe": True,
        "parallel_write_safe": True,
        "version": "1",
        "env_version": int(hashlib.sha256(code.encode()).hexdigest()[:12], 16),
    }
