"""Build every language of the site, sharing the start-up work: ``nox -s docs`` runs this.

    python docs/_ext/build_languages.py OUTDIR [--languages=en,zh_CN] [--epub | --no-epub]
                                        [SPHINX-BUILD OPTIONS...]
    python docs/_ext/build_languages.py --help

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

**An EPUB per language, when asked.** With ``--epub``, or by default when the environment
variable ``CI`` is set, right after a language's HTML Sphinx's ``epub`` builder writes the same
pages again from the same doctrees (``-d``), into ``OUTDIR/../epub/<lang>``: the environment is
loaded, not read again, and no example runs. The EPUB is copied into the language's staging
folder as ``mha-ref-<lang>.epub`` and published with the site (the language's index links to it;
``docs/_ext/mha_ref_epub.py`` says what the EPUB leaves out). Its wall time is written as
``<lang>-epub`` in the timings. A book newer than its doctrees and its templates, style sheets,
extensions and configuration is kept as it is (``epub_is_current``), so that a no-op rebuild
stays a no-op. Without books (``--no-epub``, the default outside CI: they are half the time of a
one-line edit's rebuild) no book is published, not even an older one, and the index pages say
that this build wrote none instead of linking one (``-D mha_epub=0``, ``mha_ref_epub.py``).

**This checkout's package.** Before anything is imported, the checkout is put first on
``sys.path`` (and ``PYTHONPATH``, for the examples' worker processes), and the build stops if
``mha_ref`` would still be loaded from elsewhere (``checkout_guard.py``): an environment made by
another checkout would otherwise build that checkout's code into these pages.
"""

from __future__ import annotations

import argparse
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

from checkout_guard import WrongCheckoutError, put_checkout_first, require_checkout

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


def withdraw_books(staging: Path, keep: list[str]) -> list[Path]:
    """Delete from the staging folder every language's book but those of ``keep``.

    Args:
        staging: the staging folder (``build/html-staging``).
        keep: the languages whose book this build wrote, or found current, and shipped.

    Returns:
        The books deleted. A book that this build did not write or check would be published
        beside pages it may no longer match (a build without books, or of one language only).

    Source: this project (``docs/_ext/build_languages.py``).
    """
    from mha_ref_epub import epub_name

    removed = []
    for lang in LANGUAGES:
        book = staging / lang / epub_name(lang)
        if lang not in keep and book.is_file():
            book.unlink()
            removed.append(book)
    return removed


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


def _languages(value: str) -> tuple[str, ...]:
    """``--languages``: a comma-separated subset of :data:`LANGUAGES`."""
    chosen = tuple(v for v in value.split(",") if v)
    unknown = [v for v in chosen if v not in LANGUAGES]
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {', '.join(LANGUAGES)}, given {value!r}"
        )
    return chosen


def parse_arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The script's own arguments, and the options it passes on to every Sphinx build.

    Args:
        argv: the command line after the script's name: OUTDIR first, then this script's
            options and Sphinx's, in any order.

    Returns:
        ``(args, sphinx_options)``: ``args.outdir`` (a resolved Path), ``args.languages`` (a
        tuple), ``args.epub`` (a bool: ``--epub``/``--no-epub``, by default whether ``CI`` is
        set); the other options, in their order.

    Raises:
        SystemExit: ``--help`` (status 0, after printing the usage), or a bad command line
            (status 2, with the problem and the usage): no OUTDIR, an OUTDIR that starts with
            ``-`` (an option mistyped is not a folder name), an OUTDIR after a Sphinx option,
            or an unknown language.

    Source: this project (``docs/_ext/build_languages.py``).
    """
    summary, _, details = __doc__.partition("\n\n")
    parser = argparse.ArgumentParser(
        prog="python docs/_ext/build_languages.py",
        usage="%(prog)s OUTDIR [--languages=en,zh_CN] [--epub | --no-epub] [SPHINX OPTIONS...]",
        description=summary,
        epilog="Any other option goes to every language's sphinx-build, e.g. -j 1 or "
        "-D abort_on_example_error=1. See the module docstring of docs/_ext/build_languages.py.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "outdir",
        metavar="OUTDIR",
        help="where the site is published (build/html); Sphinx writes into OUTDIR-staging first",
    )
    parser.add_argument(
        "--languages",
        type=_languages,
        default=LANGUAGES,
        help=f"the languages to build, comma-separated (default: {','.join(LANGUAGES)})",
    )
    parser.add_argument(
        "--epub",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write each language's EPUB and publish it with the site (default: only when the "
        "environment variable CI is set); without books, no book is published, not even an "
        "older one",
    )
    args, sphinx_options = parser.parse_known_args(argv)
    if args.outdir.startswith("-"):
        parser.error(
            f"OUTDIR: expected a folder name, given {args.outdir!r}, which starts with '-' "
            f"(a mistyped option?); to build into such a folder, write it as ./{args.outdir}"
        )
    if sphinx_options and argv.index(sphinx_options[0]) < argv.index(args.outdir):
        parser.error(
            f"OUTDIR: expected it first, before the Sphinx options, given {args.outdir!r} after "
            f"{sphinx_options[0]!r}; write the folder first, then the options "
            "(build/html -j 1)"
        )
    args.outdir = Path(args.outdir).resolve()
    if args.epub is None:
        args.epub = bool(os.environ.get("CI"))
    return args, sphinx_options


def main(argv: list[str]) -> int:
    args, options = parse_arguments(argv)
    outdir, languages, with_epub = args.outdir, args.languages, args.epub
    if not with_epub:
        # the index pages say that this build wrote no book, instead of linking one
        options = ["-D", "mha_epub=0", *options]
    # this checkout's mha_ref, not the one an environment made elsewhere points to
    put_checkout_first(ROOT)
    try:
        require_checkout(ROOT)
    except WrongCheckoutError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    staging = staging_dir(outdir)
    (staging / FAILED_NOTE).unlink(missing_ok=True)
    build = build_in_child if hasattr(os, "fork") else build_in_new_process
    timings: dict[str, float] = {}
    shipped: list[str] = []  # the languages whose book this build wrote or found current
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
                shipped.append(lang)
            timings[f"{lang}-epub"] = round(time.perf_counter() - start, 2)
            start = time.perf_counter()
        if status != 0:
            withdraw(staging, outdir, lang, status)
            return status
    withdraw_books(staging, keep=shipped)
    publish(staging, outdir)
    timings["publish"] = round(time.perf_counter() - start, 2)
    timings_file = outdir.parent / "timings" / "languages.json"
    timings_file.parent.mkdir(parents=True, exist_ok=True)
    timings_file.write_text(json.dumps(timings, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
