"""Build every language of the site, sharing the start-up work: ``nox -s docs`` runs this.

    python docs/_ext/build_languages.py OUTDIR [--languages=en,zh_CN] [SPHINX-BUILD OPTIONS...]

builds ``docs/<lang>`` for each language, with the same options as::

    sphinx-build -b html -c . -D language=<lang> -n -W -q -j auto [OPTIONS...] \
        docs/<lang> OUTDIR-staging/<lang>

**Nothing half-built is published.** Sphinx writes into ``OUTDIR-staging`` (kept from build to
build, so that a rebuild writes only what changed). Only when every language succeeded is
``OUTDIR`` replaced, whole, by a copy of it, with the root page that sends a reader to a
language (``docs/root_index.html``). When a language fails, ``OUTDIR`` is deleted, so that no
complete-looking site is left from a failed build (nor an older one that the sources no longer
match), and ``OUTDIR-staging/BUILD-FAILED.txt`` says that the pages there are a failed build's,
to read, not to publish.

This process imports torch, matplotlib, Sphinx and the extensions once (2-3 s), then each
language is built, one after the other, in a child process forked from it. The children start
with those modules loaded, and otherwise are separate processes, as with ``sphinx-build``: that
matters, because Sphinx translates a module's messages when the module is imported during a
build, so a module first imported while English was being built would keep its English strings
in a Chinese build run in the same process. The second language also reuses the training
results the first one cached on disk (``mha_ref.tutorial.cache``). Where ``os.fork`` does not exist
(Windows), each language runs in a fresh ``python -m sphinx`` process instead.

Within a language, Sphinx reads and writes the pages in parallel on every core (``-j auto``;
``-j 1`` among the options turns that off). Before that, sphinx-gallery runs the examples: those
that time code first, one after the other with nothing beside them, then the others side by side in
worker processes, one per core up to 4 (``parallel`` in conf.py; each example seeds itself, so what
it prints does not depend on the worker or the order).

The first language that fails stops the build with its exit status. Each language's wall time
is written to ``OUTDIR/../timings/languages.json``; the first language's includes the imports.
``--languages=en`` builds a subset (the build tests use it on a small site).

**An EPUB per language.** Right after a language's HTML, Sphinx's ``epub`` builder writes the
same pages again from the same doctrees (``-d``), into ``OUTDIR/../epub/<lang>``: the
environment is loaded, not read again, and no example runs. The EPUB is copied into the
language's staging folder as ``mha-ref-<lang>.epub`` and published with the site (the
language's index links to it; ``docs/_ext/mha_ref_epub.py`` says what the EPUB leaves out).
Its wall time is written as ``<lang>-epub`` in the timings; ``--no-epub`` skips it. A book newer
than its doctrees and its templates, style sheets, extensions and configuration is kept as it is
(``epub_is_current``), so that a no-op rebuild stays a no-op.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = ("en", "zh_CN")
#: imported once, before any build, so that each language starts with them loaded. Importing
#: them here, where no Sphinx application has set a language yet, keeps their messages lazy
#: (translated when used). The list only saves time: a child imports anything else it needs.
SHARED_MODULES = (
    "torch",
    # imported by torch on the first use of some operators (the examples use them)
    "sympy",
    "torch.distributed.tensor",
    "torch.fx.experimental.symbolic_shapes",
    # imported by torch.profiler when it starts (mha_ref.tutorial.bench.peak_memory on a CPU): 0.5 s
    "torch._inductor",
    "numpy.random",
    "matplotlib.pyplot",
    "PIL.Image",
    "docutils.parsers.rst",
    "jinja2",
    "pygments.lexers.python",
    "sphinx.cmd.build",
    "sphinx.builders.html",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
    "sphinx_gallery.gen_rst",
    "myst_parser.parsers.sphinx_",
    "pydata_sphinx_theme",
    "sphinx_design.extension",
    "sphinx_copybutton",
    "sphinx.ext.doctest",
    "mha_ref",
    "mha_ref.tutorial.training",
    "mha_ref.tutorial.head_count",
    "mha_ref.tutorial.fonts",
    "mha_ref.tutorial.plotting",
    "mha_ref.tutorial.bench",
)


#: written into the staging folder when a build fails
FAILED_NOTE = "BUILD-FAILED.txt"


def staging_dir(outdir: Path) -> Path:
    """Where Sphinx writes the site before it is published to ``outdir``."""
    return outdir.with_name(f"{outdir.name}-staging")


def publish(staging: Path, outdir: Path) -> None:
    """Replace ``outdir`` by a copy of ``staging`` and the root page, in one rename.

    The copy is built beside ``outdir`` first, so that ``outdir`` is at every moment either
    the previous complete site, or nothing, or the new complete site.
    """
    fresh, old = outdir.with_name(f"{outdir.name}.new"), outdir.with_name(f"{outdir.name}.old")
    for leftover in (fresh, old):
        shutil.rmtree(leftover, ignore_errors=True)
    shutil.copytree(staging, fresh, ignore=shutil.ignore_patterns(FAILED_NOTE))
    root_page = ROOT / "docs" / "root_index.html"
    if root_page.is_file():
        shutil.copyfile(root_page, fresh / "index.html")
    if outdir.exists():
        outdir.rename(old)
    fresh.rename(outdir)
    shutil.rmtree(old, ignore_errors=True)


def withdraw(staging: Path, outdir: Path, lang: str, status: int) -> None:
    """After a failed build: delete ``outdir``, and mark the staging folder as failed."""
    shutil.rmtree(outdir, ignore_errors=True)
    staging.mkdir(parents=True, exist_ok=True)
    (staging / FAILED_NOTE).write_text(
        f"The {lang} build failed (exit status {status}). The pages in this folder are what "
        f"the failed build wrote: read them to find the problem, never publish them. The "
        f"site folder ({outdir.name}) was removed; a build in which every language succeeds "
        f"writes it again, whole.\n"
    )
    print(
        f"the {lang} build failed (exit status {status}): {outdir.name} was removed, nothing "
        f"was published; what the failed build wrote is in {staging.name}",
        file=sys.stderr,
    )


def sphinx_arguments(lang: str, outdir: Path, options: list[str]) -> list[str]:
    """The sphinx-build arguments for one language."""
    argv = ["-b", "html", "-c", str(ROOT), "-D", f"language={lang}", "-n", "-W", "-q", "-j", "auto"]
    # the doctrees (pickles that hold the building machine's paths) stay out of the site
    doctrees = outdir.parent / "doctrees" / lang
    return [*argv, "-d", str(doctrees), *options, str(ROOT / "docs" / lang), str(outdir / lang)]


def epub_dir(staging: Path) -> Path:
    """Where the EPUB builder writes its pages (beside the staging folder, not published)."""
    return staging.with_name("epub")


def epub_arguments(lang: str, staging: Path, options: list[str]) -> list[str]:
    """The sphinx-build arguments for one language's EPUB: the HTML build's, doctrees included,
    with the ``epub`` builder and its own output folder."""
    argv = sphinx_arguments(lang, staging, options)
    argv[argv.index("-b") + 1] = "epub"
    argv[-1] = str(epub_dir(staging) / lang)
    return argv


#: besides the doctrees, what the book's pages are made from: its templates, style sheets and
#: the extensions that write it, and the configuration
EPUB_INPUTS = (
    ROOT / "conf.py",
    ROOT / "docs" / "_templates",
    ROOT / "docs" / "_ext",
    ROOT / "docs" / "_static",
)


def epub_is_current(lang: str, staging: Path) -> bool:
    """Whether the language's book is newer than everything it is made from: its doctrees (which
    the HTML build writes again for every page it reads again) and :data:`EPUB_INPUTS`. A no-op
    rebuild then keeps the book instead of writing its 40 pages and zip again (10-15 s)."""
    from mha_ref_epub import epub_name

    book = epub_dir(staging) / lang / epub_name(lang)
    if not book.is_file():
        return False
    sources = [staging.parent / "doctrees" / lang, *EPUB_INPUTS]
    newest = max(
        (path.stat().st_mtime for source in sources for path in [source, *source.rglob("*")]),
        default=float("inf"),
    )
    return book.stat().st_mtime > newest


def ship_epub(lang: str, staging: Path) -> None:
    """Copy the language's EPUB into its staging folder, where the site links to it."""
    from mha_ref_epub import epub_name

    name = epub_name(lang)
    shutil.copyfile(epub_dir(staging) / lang / name, staging / lang / name)


def build_in_child(argv: list[str]) -> int:
    """Run sphinx-build with ``argv`` in a forked child process; return its exit status."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: build, then leave without running the parent's clean-up
        status = 1
        try:
            from sphinx.cmd.build import build_main

            status = build_main(argv)
        except BaseException:  # noqa: BLE001 (report anything, then exit non-zero)
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(wait_status)


def build_in_new_process(argv: list[str]) -> int:
    """Run sphinx-build with ``argv`` in a new Python process; return its exit status."""
    return subprocess.run([sys.executable, "-m", "sphinx", *argv], check=False).returncode


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    outdir, options = Path(argv[0]).resolve(), argv[1:]
    languages = LANGUAGES
    with_epub = "--no-epub" not in options
    options = [o for o in options if o != "--no-epub"]
    for option in [o for o in options if o.startswith("--languages=")]:
        languages = tuple(option.removeprefix("--languages=").split(","))
        options.remove(option)
    staging = staging_dir(outdir)
    (staging / FAILED_NOTE).unlink(missing_ok=True)
    build = build_in_child if hasattr(os, "fork") else build_in_new_process
    timings: dict[str, float] = {}
    start = time.perf_counter()
    if build is build_in_child:
        for module in SHARED_MODULES:
            importlib.import_module(module)
        # what is loaded now lives as long as the children: keep the garbage collector off it, so
        # that the children neither walk it nor copy the memory pages it would touch
        gc.collect()
        gc.freeze()
    for lang in languages:
        shutil.rmtree(staging / lang / ".doctrees", ignore_errors=True)  # from older builds
        status = build(sphinx_arguments(lang, staging, options))
        timings[lang] = round(time.perf_counter() - start, 2)
        start = time.perf_counter()
        if status == 0 and with_epub:
            # every page of the book is written again: the HTML build has just read what changed,
            # so the EPUB builder would find nothing new, though its pages are older than the
            # doctrees. (Not -a: that also compiles every message catalog again, and a newer
            # catalog makes the next build read the pages that use it again.)
            if not epub_is_current(lang, staging):
                shutil.rmtree(epub_dir(staging) / lang, ignore_errors=True)
                status = build(epub_arguments(lang, staging, options))
            if status == 0:
                ship_epub(lang, staging)
            timings[f"{lang}-epub"] = round(time.perf_counter() - start, 2)
            start = time.perf_counter()
        if status != 0:
            withdraw(staging, outdir, lang, status)
            return status
    publish(staging, outdir)
    timings["publish"] = round(time.perf_counter() - start, 2)
    timings_file = outdir.parent / "timings" / "languages.json"
    timings_file.parent.mkdir(parents=True, exist_ok=True)
    timings_file.write_text(json.dumps(timings, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
