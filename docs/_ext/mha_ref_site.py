"""Sphinx extension with what the mha-ref site needs beyond plain configuration.

- Per language: which gallery folder to execute (``gallery/<lang>``) and the search language.
- Staleness: sphinx-gallery re-runs an example only when the example file changes. Here an
  example also runs again when a file its output depends on changed: the ``mha_ref`` modules
  in the import closure of the script (``mha_ref.tutorial.sources``), and what every example
  depends on (``conf.py``, this file, the pinned toolchain, the modules this file runs around
  each example), each hashed by its code, not its bytes (a docstring or a comment changes
  nothing). Each example that ran and succeeded records those hashes beside its page
  (``<name>.deps.json``), with its script's and its outputs' hashes; an interrupted or failed
  build leaves the records as they were. The page of every example that ran is written again,
  so that new figures reach the site even when the text is unchanged.
- Nothing silently wrong: a generated page whose example was deleted or renamed is removed; an
  example that prints NaN without declaring it, or draws an empty figure, fails the build;
  characters that would end a block of the page's reST are escaped, and the building machine's
  paths are taken out of every example page (tracebacks included).
- Provenance: each executed example records the torch version, device and thread count it ran
  with, and the page shows it; the footer shows the commit the site was built from.
- Section ids: a section that has an explicit label gets that label as its HTML ``id``
  (``LabelledSectionIds``), so that both languages address it alike (the id made from a
  Chinese heading is ``id7``) and the language switcher can pass it on.
- ``reset_example_state``: run by sphinx-gallery before every example (seeds, threads, fonts).
- ``matplotlib_scraper``: draws each figure once, at twice the page's resolution, and derives the
  1x image from it, where sphinx-gallery's own scraper lays out and draws every figure twice for
  each of the two sizes. A figure that carries the weights it drew (``plot_heads`` attaches
  them) also gets its interactive view, written beside the image from those same numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = ("en", "zh_CN")
GALLERY_DIR = "auto_examples"
PROVENANCE_SUFFIX = ".provenance.json"
#: beside each generated page: the files its example's output depends on, with their hashes
DEPS_SUFFIX = ".deps.json"
#: a code cell holding this line may print NaN (the line is not shown: sphinx-gallery removes
#: ``# sphinx_gallery_...`` comments from the code on the page)
EXPECTED_NAN_FLAG = "# sphinx_gallery_mha_ref_expected_nan"

logger = logging.getLogger(__name__)


# -- what an example depends on --------------------------------------------------------------------
#: the mha_ref modules this file runs around every example: its provenance (the device), its
#: figure scraper (the fonts' glyph check, the interactive views) and the rerun rule itself
AROUND_EVERY_EXAMPLE = (
    "mha_ref.device",
    "mha_ref.tutorial.fonts",
    "mha_ref.tutorial.interactive",
    "mha_ref.tutorial.sources",
)


def dependency_files() -> list[Path]:
    """The files outside ``mha_ref`` whose change must re-run every example."""
    files = [ROOT / "conf.py", Path(__file__).resolve(), ROOT / "requirements" / "constraints.txt"]
    return [f for f in files if f.is_file()]


def example_dependencies(script: Path) -> dict[str, str]:
    """The hash of every file the output of the example ``script`` depends on, by path.

    The files of :func:`dependency_files`, the import closure of :data:`AROUND_EVERY_EXAMPLE`,
    and the import closure of the modules the script imports (``mha_ref.tutorial.sources``:
    read from its import statements, parents and data files included). A script whose imports
    cannot be read (a syntax error, an import by a computed name) depends on all of
    ``mha_ref``. Each file is hashed by what it does, not by its bytes
    (:func:`mha_ref.tutorial.sources.file_hash`): an edit to a docstring or a comment changes
    no hash.
    """
    from mha_ref.tutorial import sources

    files = {
        path.relative_to(ROOT).as_posix(): sources.file_hash(path)
        for path in dependency_files()
    }
    try:
        modules = sources.imported_names(script)
    except (SyntaxError, ValueError, UnicodeDecodeError):
        modules = None  # every module of mha_ref
    everything = sources.fingerprint(None if modules is None else [*modules,
                                                                    *AROUND_EVERY_EXAMPLE])
    return {**files, **everything}


#: beside each generated page while its example runs: what it depends on, until the build
#: makes it the example's record (:func:`commit_records`)
RUNNING_SUFFIX = ".deps-running.json"


def script_md5(script: Path) -> str:
    """The MD5 that sphinx-gallery keeps of an example script in ``<name>.py.md5``.

    Its rule (``sphinx_gallery.utils.get_md5sum``, text mode): the text read with universal
    newlines, encoded as UTF-8.
    """
    text = Path(script).read_text(encoding="utf-8", errors="surrogateescape")
    return hashlib.md5(text.encode("utf-8", errors="surrogateescape")).hexdigest()


def example_outputs(generated: Path, stem: str) -> dict[str, str]:
    """SHA-256 of what running example ``stem`` wrote into ``generated``, by file name: its
    page (``<stem>.rst``), its provenance, its images and thumbnail."""
    files = [
        generated / f"{stem}.rst",
        generated / f"{stem}{PROVENANCE_SUFFIX}",
        *generated.glob(f"images/sphx_glr_{stem}_[0-9][0-9][0-9]*"),
        *generated.glob(f"images/thumb/sphx_glr_{stem}_thumb.*"),
    ]
    return {
        path.relative_to(generated).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(files)
        if path.is_file()
    }


def _write_json(path: Path, payload: dict) -> None:
    """Write ``payload`` to ``path`` whole or not at all (an interrupted write leaves the old)."""
    partial = path.with_name(f"{path.name}.partial")
    partial.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)


def _read_record(path: Path) -> dict | None:
    """The record in ``path`` (``script``, ``files``, ``outputs``), or ``None`` if it has none."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not all(
        isinstance(record.get(key), str if key == "script" else dict)
        for key in ("script", "files", "outputs")
    ):
        return None
    return record


def outdated_examples(gallery: Path, generated: Path, dependencies=example_dependencies
                      ) -> dict[str, list[str]]:
    """Decide which examples of ``gallery`` run again, and tell sphinx-gallery.

    The truth is each example's record (``<name>.deps.json``), written only after the example
    ran and its page was written (:func:`commit_records`): the script it ran, the hash of every
    file it depended on, and the hash of what it wrote. An example is up to date when all three
    match today's. sphinx-gallery skips an example whose ``<name>.py.md5`` matches its script,
    and runs one without that file: so the ``.md5`` of an outdated example is deleted, and that
    of an up-to-date one is written again if it is missing. No record is ever deleted here.
    A build interrupted after this leaves every record as it was: undo the edit, and the next
    build finds the examples up to date again and restores their ``.md5``.

    Args:
        gallery: the folder of the example scripts (``gallery/<lang>``).
        generated: the folder sphinx-gallery writes their pages to (``docs/<lang>/auto_examples``).
        dependencies: maps a script to the hashes of the files it depends on
            (:func:`example_dependencies`).

    Returns:
        dict[str, list[str]]: for each example that runs again (its script's name), why: the
        files that changed, or what is missing.
    """
    outdated = {}
    for leftover in generated.glob(f"*{RUNNING_SUFFIX}"):  # of an interrupted build
        leftover.unlink()
    for script in sorted(gallery.glob("*.py")):
        md5 = generated / f"{script.name}.md5"
        record = _read_record(generated / f"{script.stem}{DEPS_SUFFIX}")
        if record is None:
            reasons = ["(no record of what it ran with)"]
        elif record["script"] != script_md5(script):
            reasons = [script.name]
        else:
            reasons = _changed_files(record["files"], dependencies(script))
            if record["outputs"] != example_outputs(generated, script.stem):
                reasons.append("(its page or images are not those of its last run)")
        if reasons:
            md5.unlink(missing_ok=True)
            outdated[script.name] = reasons
        elif not md5.is_file() or md5.read_text() != record["script"]:
            md5.write_text(record["script"])  # up to date: a build was stopped after marking
    return outdated


def _changed_files(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """The paths whose hash differs, or that only one of the two records lists."""
    return sorted(p for p in recorded.keys() | current.keys() if recorded.get(p) != current.get(p))


def _mark_outdated_examples(gallery: Path, generated: Path) -> None:
    """Log and mark the examples that run again (:func:`outdated_examples`)."""
    never_ran = {path.name for path in gallery.glob("*.py")
                 if not (generated / f"{path.stem}.rst").is_file()}
    for name, changed in outdated_examples(gallery, generated).items():
        if name in never_ran:
            continue  # its first run: nothing to explain
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3
                                          else "")
        logger.info(f"{(gallery / name).relative_to(ROOT).as_posix()} runs again: {shown} changed")


def record_running(gallery_conf: dict, fname: str) -> None:
    """Write what the example about to run depends on (:func:`example_dependencies`), as
    ``<name>.deps-running.json``: computed when it starts, in the process that runs it, and
    made its record only once it succeeded (:func:`commit_records`)."""
    examples = Path(gallery_conf["src_dir"], gallery_conf["examples_dirs"][0]).resolve()
    script = examples / Path(fname).name
    running = Path(gallery_conf["src_dir"]) / GALLERY_DIR / f"{script.stem}{RUNNING_SUFFIX}"
    running.parent.mkdir(parents=True, exist_ok=True)
    _write_json(running, {"files": example_dependencies(script)})


def commit_records(generated: Path) -> set[str]:
    """Make the record of every example that ran and succeeded; forget the others' runs.

    Called once sphinx-gallery has run the examples and written their pages. An example
    succeeded when sphinx-gallery wrote its ``.md5`` (it does only for an example that ran
    without an error). Its record (``<name>.deps.json``) then gets what it ran with
    (``<name>.deps-running.json``), its script's MD5 and the hashes of what it wrote
    (:func:`example_outputs`). A failed example keeps its old record, so it runs again.

    Args:
        generated: the folder of the generated pages (``docs/<lang>/auto_examples``).

    Returns:
        set[str]: the names (``plot_01_shapes``) of the examples that ran, failed ones too.
    """
    ran = set()
    for running in sorted(generated.glob(f"*{RUNNING_SUFFIX}")):
        stem = running.name.removesuffix(RUNNING_SUFFIX)
        ran.add(stem)
        copy, md5 = generated / f"{stem}.py", generated / f"{stem}.py.md5"
        try:
            started = json.loads(running.read_text())
            passed = md5.is_file() and copy.is_file() and md5.read_text() == script_md5(copy)
        except (OSError, ValueError):
            passed = False
        if passed:
            record = {"script": md5.read_text(), "files": started["files"],
                      "outputs": example_outputs(generated, stem)}
            _write_json(generated / f"{stem}{DEPS_SUFFIX}", record)
        running.unlink()
    return ran


# -- examples that no longer exist ---------------------------------------------------------------
#: what sphinx-gallery writes into the gallery folder that belongs to no single example
_GALLERY_FILES = {"index", "sg_execution_times", "auto_examples_python", "auto_examples_jupyter"}


def _remove_orphans(gallery: Path, generated: Path, outdir: Path) -> None:
    """Delete everything generated for an example whose script is gone (deleted, renamed).

    Without this, its old page stays among the sources, in no table of contents: Sphinx warns
    about it, and the ``-W`` build fails without saying why. The built copies of its page,
    images and downloads go too, so that the published site does not keep them.
    """
    import glob

    if not generated.is_dir():
        return
    sources = {script.stem for script in gallery.glob("*.py")}
    stems = {path.name.split(".")[0] for path in generated.iterdir() if path.is_file()}
    for stem in sorted(stems - sources - _GALLERY_FILES):
        name = glob.escape(stem)
        doomed = [
            *generated.glob(f"{name}.*"),
            *generated.glob(f"images/sphx_glr_{name}_[0-9][0-9][0-9]*"),
            *generated.glob(f"images/thumb/sphx_glr_{name}_thumb.*"),
            *outdir.glob(f"{GALLERY_DIR}/{name}.html"),
            *outdir.glob(f"_downloads/*/{name}.*"),
            *outdir.glob(f"_images/sphx_glr_{name}_[0-9][0-9][0-9]*"),
            *outdir.glob(f"_images/sphx_glr_{name}_thumb.*"),
        ]
        try:
            for path in doomed:
                path.unlink()
        except OSError as error:
            from sphinx.errors import ExtensionError

            raise ExtensionError(
                f"the example {stem} no longer exists, and its generated files could not be "
                f"removed ({error}); remove {generated.relative_to(ROOT)} and build again "
                f"(nox -s docs -- --fresh)"
            ) from error
        logger.info(f"{stem}: its example is gone; removed its {len(doomed)} generated files")


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
    # docs/_ext/mha_ref_course.py writes into the shipped notebooks (one text, kept there). The
    # package is not on PyPI (the name ``mha-ref`` on an index could be someone else's), so the
    # cell says where the site's own wheel is and how to install it.
    from mha_ref_course import first_notebook_cell

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
    # measurements (mha_ref.tutorial.smollm2.load.model_threads) take no more than their part
    workers = config.sphinx_gallery_conf.get("parallel") or 1
    os.environ["MHA_REF_MAX_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))

    import torch

    config.html_context = {
        **config.html_context,
        "build_commit": build_commit(),
        "build_torch": torch.__version__,
    }

    gallery, generated = ROOT / "gallery" / lang, Path(app.srcdir) / GALLERY_DIR
    _remove_orphans(gallery, generated, Path(app.outdir))
    if _plots(config):  # -D plot_gallery=0 runs nothing: then nothing is outdated either
        _mark_outdated_examples(gallery, generated)


def _plots(config: Config) -> bool:
    """Whether sphinx-gallery runs the examples (``plot_gallery``, which ``-D`` sets as text)."""
    value = getattr(config, "plot_gallery", True)
    return str(value).strip() not in ("0", "False", "false", "")


def _stop_example_workers(app: Sphinx, exception: Exception | None) -> None:
    """Stop the worker processes that ran the examples (``parallel`` in conf.py).

    joblib keeps them for reuse; left running to the end of the process, they leave its
    resource tracker warning about semaphores it had to clean up.
    """
    import sys

    reusable = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(reusable, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True)


def _drop_source_maps(app: Sphinx, exception: Exception | None) -> None:
    """Delete the theme's ``.map`` files: debugging aids for its developers, a third of the
    site's weight, and never requested by a reader's browser."""
    if exception is None and app.builder.format == "html":
        for source_map in Path(app.outdir, "_static").rglob("*.map"):
            source_map.unlink()


def _commit_records(app: Sphinx) -> None:
    """Record what each example that ran in this build ran with (:func:`commit_records`)."""
    _ran_this_build.update(commit_records(Path(app.srcdir) / GALLERY_DIR))


#: the examples that ran in this build (``plot_01_shapes``), once sphinx-gallery has run them
_ran_this_build: set[str] = set()


def _rewrite_executed_examples(app: Sphinx, env, added, changed, removed) -> list[str]:
    """Read and write again the page of every example that ran in this build.

    sphinx-gallery leaves an example's ``.rst`` untouched when its text is unchanged, and Sphinx
    does not count the example's figures as dependencies of the page (they are copied to
    ``_images`` only when the page is written). Without this, an edit to ``mha_ref`` that
    changes a figure but no printed number would leave the old figure on the site.
    """
    executed = {f"{GALLERY_DIR}/{stem}" for stem in _ran_this_build}
    if executed:
        executed = executed | {f"{GALLERY_DIR}/index"}  # the thumbnails
    return sorted((executed & env.found_docs) - set(added) - set(changed))


# -- before every example ----------------------------------------------------------------------
_started: dict[str, float] = {}


#: matplotlib's warning for a character its fonts lack: "Glyph 22836 (...) missing from font(s)"
_MISSING_GLYPH_WARNING = r"Glyph \d+ .*missing from"


def reset_example_state(gallery_conf: dict, fname: str, when: str) -> None:
    """Seed every generator, use one thread, set a CJK-capable font, record provenance.

    sphinx-gallery calls this before and after each example (``reset_modules`` in conf.py).
    After an example it records the example's wall time in ``build/timings/examples.json``.
    """
    import random
    import time
    import warnings

    import matplotlib as mpl
    import numpy as np
    import torch

    stem = Path(fname).stem if fname is not None else None
    key = f"{Path(gallery_conf['src_dir']).name}/{stem}"
    if stem is None:
        pass
    elif when == "after":
        _record_time(key, time.perf_counter() - _started.pop(key, time.perf_counter()))
    else:
        _freeze_survivors()
        record_running(gallery_conf, fname)
        _started[key] = time.perf_counter()

    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    # matplotlib's own fonts: Chinese labels get the font file bundled with the tutorial's
    # dependencies (mha_ref.tutorial.fonts), never whatever the building machine has installed
    mpl.rcParams["font.family"] = mpl.rcParamsDefault["font.family"]
    mpl.rcParams["font.sans-serif"] = mpl.rcParamsDefault["font.sans-serif"]
    mpl.rcParams["axes.unicode_minus"] = False
    # a character no font can draw (an empty box on the page) fails the example, naming it
    warnings.filterwarnings("error", message=_MISSING_GLYPH_WARNING, category=UserWarning)
    mpl.rcParams["svg.hashsalt"] = "mha-ref"

    if stem is None:
        return
    from mha_ref.device import pick_device

    device = pick_device()
    record = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "device_type": device.type,
        "threads": torch.get_num_threads(),
    }
    out_dir = Path(gallery_conf["src_dir"]) / GALLERY_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}{PROVENANCE_SUFFIX}").write_text(json.dumps(record, sort_keys=True) + "\n")


def _freeze_survivors() -> None:
    """Collect garbage once, then exempt what survives from every later collection.

    sphinx-gallery runs a full garbage collection before each example. In a process holding
    torch, Sphinx and a built environment that walk takes about 0.2 s and finds nothing to free
    among those long-lived objects; frozen (:func:`gc.freeze`), they are skipped, so each
    collection walks only what the previous example left behind.
    """
    import gc

    gc.collect()
    gc.freeze()


def _record_time(key: str, seconds: float) -> None:
    """Add one example's wall time to the report; examples running side by side take turns."""
    path = ROOT / "build" / "timings" / "examples.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        if fcntl is not None:  # POSIX; elsewhere the build runs the examples one by one
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        times = json.loads(path.read_text()) if path.is_file() else {}
        times[key] = round(seconds, 2)
        path.write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")


# -- every build: NaN in the printed output -------------------------------------------------------
#: a NaN as Python, NumPy and torch print it ("nan", "-nan"; "NAN" from an upper-case format),
#: not inside a word ("nanoGPT"), and not "NaN", the word prose uses ("rows with NaN: [4]")
_NAN = re.compile(r"(?<![A-Za-z0-9_])(nan|NAN)(?![A-Za-z0-9_])")
_CELL = re.compile(r"^\.\. GENERATED FROM PYTHON SOURCE LINES (\d+)-(\d+)$", re.MULTILINE)
_OUTPUT = re.compile(
    r"^\.\. rst-class:: sphx-glr-script-out\n\n \.\. code-block:: none\n\n(.*?)(?=\n\S|\Z)",
    re.MULTILINE | re.DOTALL,
)


def undeclared_nan(rst: str, script: str) -> list[tuple[int, int, str]]:
    """The printed lines holding NaN in cells that do not declare it, as (first, last, line).

    ``rst`` is a page sphinx-gallery generated from ``script`` (the example's source): each
    cell follows a ``.. GENERATED FROM PYTHON SOURCE LINES a-b`` comment, its printed output
    in a ``sphx-glr-script-out`` block. A cell whose source lines hold
    :data:`EXPECTED_NAN_FLAG` may print NaN.
    """
    lines = script.splitlines()
    marks = list(_CELL.finditer(rst))
    found = []
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        first, last = int(mark.group(1)), int(mark.group(2))
        cell = rst[mark.end() : following.start() if following else len(rst)]
        if any(line.strip() == EXPECTED_NAN_FLAG for line in lines[first - 1 : last]):
            continue
        for output in _OUTPUT.finditer(cell):
            found += [(first, last, line.strip()) for line in output.group(1).splitlines()
                      if _NAN.search(line)]
    return found


def _check_printed_nan(app: Sphinx, env, docnames: list[str]) -> None:
    """Warn (a failure with ``-W``) for every undeclared NaN on every example page.

    Every build checks every page, also those whose example did not run again, so that the
    failure does not vanish on the next build.
    """
    if not _plots(app.config):
        return  # the pages are not this build's output (-D plot_gallery=0)
    lang = app.config.language or "en"
    for page in sorted((Path(app.srcdir) / GALLERY_DIR).glob("plot_*.rst")):
        script = ROOT / "gallery" / lang / f"{page.stem}.py"
        if not script.is_file():
            continue
        for first, last, line in undeclared_nan(page.read_text(encoding="utf-8"),
                                                script.read_text(encoding="utf-8")):
            logger.warning(
                f"{script.relative_to(ROOT).as_posix()}, lines {first}-{last}, printed NaN: "
                f"{line[:120]!r}. Fix the computation; if the NaN is what the cell shows, add "
                f"the line {EXPECTED_NAN_FLAG!r} to that cell",
                type="mha_ref",
                subtype="nan",
            )


# -- source-read: an example page is text of this build, safe and anonymous ------------------------
#: what docutils takes as the end of a line besides "\n" (``str.splitlines``), and the other
#: control characters: on a page, each would end the block it is in (a raw-HTML block, a line of
#: printed output) and let what follows be read as reST
_LINE_ENDS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def escape_line_ends(text: str) -> str:
    """Write each character of :data:`_LINE_ENDS` as its escape, e.g. ``\\u2028``."""
    return _LINE_ENDS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def machine_paths() -> list[str]:
    """The building machine's folders that a traceback or a warning may print, longest first:
    the checkout, the Python installation and its packages, the home folder."""
    import site
    import sys

    folders = {str(ROOT), sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path.home())}
    folders |= set(site.getsitepackages()) | {site.getusersitepackages()}
    return sorted((f for f in folders if len(f) > 1), key=len, reverse=True)


def anonymize_paths(text: str) -> str:
    """Take the building machine's folders out of ``text``: a path inside the checkout or an
    installed package becomes relative (``gallery/en/plot_01_shapes.py``,
    ``torch/nn/functional.py``), one in the home folder starts with ``~``."""
    home = str(Path.home())
    for folder in machine_paths():
        inside, itself = ("~/", "~") if folder == home else ("", ".")
        text = text.replace(folder + "/", inside)
        text = re.sub(re.escape(folder) + r"(?![\w-]|\.\w)", itself, text)  # the folder alone
    return text


def _clean_example_page(app: Sphinx, docname: str, source: list[str]) -> None:
    if docname.startswith(f"{GALLERY_DIR}/"):
        source[0] = anonymize_paths(escape_line_ends(source[0]))


# -- source-read: show provenance on each example page ---------------------------------------------
_PROVENANCE_TEXT = {
    "en": "This page's outputs were computed when the site was built: torch {torch}, "
    "device ``{device}``, {threads} CPU thread(s).",
    "zh_CN": "本页的输出都是在构建网站时运行代码得到的：torch {torch}，设备 ``{device}``，"
    "{threads} 个 CPU 线程。",
}


# sphinx-gallery writes these English sentences into every generated page; no catalog covers
# them, so the Chinese build replaces them here
_ZH_GALLERY_TEXT = [
    (
        re.compile(
            r":ref:`Go to the end <(sphx_glr_download_[^>]+)>`\s+"
            r"to download the full example code\.?"
        ),
        r":ref:`跳到页末 <\1>` 下载完整的示例代码。",
    ),
    (re.compile(r"Download Python source code: "), "下载 Python 源代码："),
    (re.compile(r"Download Jupyter notebook: "), "下载 Jupyter 笔记本："),
    (re.compile(r"Download zipped: "), "下载 zip 压缩包："),
    (re.compile(r"Download all examples in Python source code: "), "下载全部示例的源代码："),
    (re.compile(r"Download all examples in Jupyter notebooks: "), "下载全部示例的笔记本："),
]


def _translate_gallery_text(app: Sphinx, docname: str, source: list[str]) -> None:
    if app.config.language != "zh_CN" or not docname.startswith(f"{GALLERY_DIR}/"):
        return
    for pattern, replacement in _ZH_GALLERY_TEXT:
        source[0] = pattern.sub(replacement, source[0])


#: the docstrings' own section titles (``napoleon_custom_sections`` in conf.py), in Chinese;
#: napoleon translates only its standard titles (Args, Returns, Raises)
_ZH_DOCSTRING_SECTIONS = {"Shape": "形状", "Source": "出处"}
_RUBRIC = re.compile(r"(\s*\.\. rubric:: )(\w+)\s*")


def _translate_docstring_sections(app: Sphinx, what, name, obj, options, lines: list[str]) -> None:
    """On Chinese pages, title the docstrings' own sections in Chinese, as napoleon and Sphinx
    title their standard ones (参数, 返回). Runs after napoleon (``autodoc-process-docstring``,
    priority 600)."""
    if app.config.language != "zh_CN":
        return
    for i, line in enumerate(lines):
        match = _RUBRIC.fullmatch(line)
        if match and match.group(2) in _ZH_DOCSTRING_SECTIONS:
            lines[i] = match.group(1) + _ZH_DOCSTRING_SECTIONS[match.group(2)]


#: the label of the ``:type:`` field napoleon writes under each attribute. Sphinx shows that
#: field's name as it is, capitalised ("Type"), not as one of its translated labels; it has to
#: stay ``:type:`` in the docstring, because only a field Sphinx knows gets its type linked
#: (``list[HeadSummary]``), so the label is changed in the doctree, after Sphinx linked it
_ZH_ATTRIBUTE_TYPE_LABEL = {"Type": "类型"}


def _translate_attribute_type_label(app: Sphinx, doctree) -> None:
    """On Chinese pages, label the attributes' type field 类型 (``doctree-read``)."""
    from docutils import nodes

    if app.config.language != "zh_CN":
        return
    for name in doctree.findall(nodes.field_name):
        if (label := _ZH_ATTRIBUTE_TYPE_LABEL.get(name.astext())) is not None:
            name[:] = [nodes.Text(label)]


def _add_provenance(app: Sphinx, docname: str, source: list[str]) -> None:
    prefix = f"{GALLERY_DIR}/plot_"
    if not docname.startswith(prefix):
        return
    record_file = Path(app.srcdir) / f"{docname}{PROVENANCE_SUFFIX}"
    if not record_file.is_file():
        return
    record = json.loads(record_file.read_text())
    text = _PROVENANCE_TEXT[app.config.language].format(**record)
    note = f"\n\n.. rst-class:: mha-provenance\n\n.. note::\n\n   {text}\n"
    # put the note right after the page title block that sphinx-gallery writes
    source[0] = _insert_after_title(source[0], note)


def _insert_after_title(rst: str, note: str) -> str:
    lines = rst.split("\n")
    for i in range(1, len(lines)):
        underline = lines[i]
        if underline and set(underline) == {"="} and lines[i - 1].strip():
            return "\n".join(lines[: i + 1]) + note + "\n".join(lines[i + 1 :])
    return rst + note


# -- doctree-read: no stray spaces inside Chinese sentences -------------------------------------
# A line break in the source becomes a space in HTML. Between two Chinese characters (or Chinese
# punctuation) that space does not belong: join such lines. Text next to Latin letters keeps it.
# Han characters, CJK and full-width punctuation, and the dash, ellipsis and quotes Chinese text
# uses (——, ……, “ ”): a line break between two of them is not a space
_CJK = r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u2014\u2026\u201c\u201d]"
_CJK_LINE_BREAK = re.compile(rf"(?<={_CJK})[ \t]*\n[ \t]*(?={_CJK})")
# full-width punctuation (。，；：（） …) carries its own spacing: no space beside it, ever
_FULL_WIDTH = r"[\u3000-\u303f\uff00-\uffef]"
_SPACE_BY_FULL_WIDTH = re.compile(rf"(?<={_FULL_WIDTH})\s+|\s+(?={_FULL_WIDTH})")


def _join_cjk_lines(doctree) -> None:
    """Remove the spaces a browser would show between Chinese characters and beside Chinese
    punctuation: at source line breaks, and around inline markup (a link, ``code``), which reST
    and Markdown need spaces around."""
    from docutils import nodes

    cjk_char, full_width = re.compile(_CJK), re.compile(_FULL_WIDTH)
    # sphinx-gallery shows an example's code as its own node, code_links_block (highlighted
    # tokens with links to the API), not as a literal_block; the built-site test
    # test_the_code_shown_is_the_code_that_ran fails if code is ever touched here again
    from sphinx_gallery._doctree_links import code_links_block

    verbatim = (
        nodes.literal_block,
        code_links_block,
        nodes.literal,
        nodes.raw,
        nodes.comment,
        nodes.math,
    )
    for text in list(doctree.findall(nodes.Text)):
        parent = text.parent
        if parent is None or _inside(text, verbatim):
            continue
        content = text.astext()
        previous_char = _neighbour_text(text, -1)[-1:] or " "
        next_char = _neighbour_text(text, +1)[:1] or " "
        chinese_before, chinese_after = cjk_char.match(previous_char), cjk_char.match(next_char)
        punctuation_beside = full_width.match(previous_char) or full_width.match(next_char)
        if content.strip() == "" and content:
            # a space of its own (MyST makes each soft line break a Text node): drop it between
            # two Chinese characters, or beside Chinese punctuation
            if (chinese_before and chinese_after) or punctuation_beside:
                _replace(text, nodes.Text(""))
            continue
        joined = _SPACE_BY_FULL_WIDTH.sub("", _CJK_LINE_BREAK.sub("", content))
        last, first = joined.rstrip()[-1:] or " ", joined.lstrip()[:1] or " "
        if (chinese_after and cjk_char.match(last)) or full_width.match(next_char):
            joined = joined.rstrip()
        if (chinese_before and cjk_char.match(first)) or full_width.match(previous_char):
            joined = joined.lstrip()
        if joined != content:
            _replace(text, nodes.Text(joined))


def _inside(node, kinds: tuple) -> bool:
    """Whether ``node`` lies anywhere inside a node of one of ``kinds``: code is split into
    ``inline`` nodes by the time post-transforms run, so its text's parent is not the block."""
    ancestor = node.parent
    while ancestor is not None:
        if isinstance(ancestor, kinds):
            return True
        ancestor = ancestor.parent
    return False


class JoinChineseText(SphinxPostTransform):
    """Run :func:`_join_cjk_lines` on zh pages once cross-references are resolved (Sphinx's
    resolver has priority 10), so that the text of a link, such as an example's title, is
    known."""

    default_priority = 900

    def run(self, **kwargs) -> None:
        if (self.config.language or "").startswith("zh"):
            _join_cjk_lines(self.document)


def _position(node) -> int:
    """Where ``node`` is among its parent's children. By identity: Text nodes are strings, and
    ``list.index()`` (which docutils' ``Element.replace`` uses) finds the first *equal* one,
    often an earlier line break of the same paragraph."""
    return next(i for i, sibling in enumerate(node.parent.children) if sibling is node)


def _replace(text, new_text) -> None:
    """Put ``new_text`` where ``text`` is, in its parent."""
    text.parent[_position(text)] = new_text


def _neighbour_text(node, step: int) -> str:
    """The text of the sibling before (step -1) or after (step +1) ``node``, or ``""``."""
    siblings = node.parent.children
    index = _position(node) + step
    if 0 <= index < len(siblings):
        return siblings[index].astext()
    return ""


# -- read transform: a labelled section's id is its label -----------------------------------------
class LabelledSectionIds(SphinxTransform):
    """Put a section's explicit label (``(masks-causal)=``, ``.. _ex04-a-padded-batch:``) first
    among its ids, so that the HTML writer emits ``<section id="masks-causal">`` and the headerlink,
    the page's table of contents and the sidebar use it. Every page has a label on every
    section, the same in both languages (tests/test_section_labels.py), so a section's address
    is shared by the two languages and does not change when a section is added above it.

    docutils keeps the id made from the heading first (``building-a-causal-mask``, or ``id5``
    for a Chinese heading), and Sphinx's ``SortIds`` (priority 261) moves only an ``id``-prefixed
    first id back, so an English reST section would keep its heading's id. The other ids stay,
    after the label, so that old links still land. Runs after ``SortIds`` and before the
    ``doctree-read`` collectors read the ids.
    """

    default_priority = 262

    def apply(self, **kwargs) -> None:
        from docutils import nodes

        for section in self.document.findall(nodes.section):
            labels = [
                self.document.nameids.get(name)
                for name in section["names"]
                if self.document.nametypes.get(name)  # True: an explicit target
            ]
            label = next((id_ for id_ in labels if id_ in section["ids"]), None)
            if label and section["ids"][0] != label:
                section["ids"].remove(label)
                section["ids"].insert(0, label)


# -- html-page-context: full-width colons after Chinese field labels -------------------------------
#: docutils' HTML writer ends every field label with an ASCII colon (``参数:``); Chinese
#: punctuation is full-width (``参数：``)
_FIELD_COLON = '<span class="colon">:</span>'


def _full_width_field_colons(app: Sphinx, pagename, templatename, context: dict, doctree) -> None:
    if (app.config.language or "").startswith("zh") and "body" in context:
        context["body"] = context["body"].replace(_FIELD_COLON, '<span class="colon">：</span>')


# -- Chinese search: one-character words too -------------------------------------------------------
#: Chinese function words left out of the index even though single characters are kept
_ZH_STOPWORDS = frozenset("的了和与及或是在把被也就都而之其这那个着吗呢吧啊")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def _chinese_search_language() -> type:
    """Sphinx's Chinese search language, keeping the one-character words it drops.

    Sphinx indexes only words of two or more characters, so queries such as "键" (key), "值"
    (value) or "头" (head), which jieba cuts as words of their own, found nothing. This keeps a
    single Han character unless it is a function word (:data:`_ZH_STOPWORDS`).
    """
    from sphinx.search.zh import SearchChinese

    class SearchChineseWithCharacters(SearchChinese):
        def word_filter(self, stemmed_word: str) -> bool:
            if len(stemmed_word) == 1 and _HAN.fullmatch(stemmed_word):
                return stemmed_word not in _ZH_STOPWORDS
            return super().word_filter(stemmed_word)

    return SearchChineseWithCharacters


# -- figures: drawn once, at 2x --------------------------------------------------------------------
def matplotlib_scraper(block, block_vars: dict, gallery_conf: dict, **kwargs) -> str:
    """sphinx-gallery's matplotlib scraper, drawing each figure once instead of three times.

    sphinx-gallery saves a figure at 1x and again at every ``image_srcset`` factor, and each
    ``savefig`` of a figure with a layout engine draws it twice: once to lay it out, once to
    render it. That was a third of the docs build. Here the figure is drawn once, at twice its
    resolution (for high-density screens), as ``plt.show()`` would draw it on screen: the layout
    engine runs inside that draw. The 1x image is that picture scaled down. The page gets the
    same two files and the same reST (``figure_rst``).
    """
    import matplotlib.pyplot as plt
    from sphinx.errors import ExtensionError
    from sphinx_gallery.scrapers import (
        HLIST_HEADER,
        HLIST_IMAGE_MATPLOTLIB,
        _matplotlib_fig_titles,
        figure_rst,
    )

    from mha_ref.tutorial.fonts import MissingGlyphError, raise_on_missing_glyphs

    if list(gallery_conf["image_srcset"]) != [2.0]:
        raise ValueError(
            f"image_srcset={gallery_conf['image_srcset']!r}, but mha_ref_site.matplotlib_scraper "
            "draws 2x images only: set image_srcset to ['2x'] or use the 'matplotlib' scraper"
        )
    image_rsts = []
    image_paths = block_vars["image_path_iterator"]  # endless: one name per figure asked for
    for fig_num, image_path in zip(plt.get_fignums(), image_paths, strict=False):
        fig = plt.figure(fig_num)
        example = Path(block_vars["src_file"]).relative_to(ROOT).as_posix()
        if not _draws_data(fig):
            plt.close("all")
            raise ExtensionError(
                f"{example}, figure {fig_num}: the figure is empty (no axes holds a line, "
                f"bar, image or other data with a finite value). Draw into it, or close it "
                f"(plt.close(fig)) if it is not meant to be shown"
            )
        image_1x = Path(image_path)
        image_2x = image_1x.with_name(f"{image_1x.stem}_2_00x{image_1x.suffix}")
        dpi = fig.dpi if plt.rcParams["savefig.dpi"] == "figure" else plt.rcParams["savefig.dpi"]
        try:
            with raise_on_missing_glyphs():
                picture = _draw_once(fig, 2 * dpi)
        except MissingGlyphError as error:
            plt.close("all")
            raise ExtensionError(f"{example}, figure {fig_num}: {error}") from error
        except Exception:
            plt.close("all")
            raise
        if all(low == high for low, high in picture.convert("RGB").getextrema()):
            plt.close("all")
            raise ExtensionError(
                f"{example}, figure {fig_num}: the picture is one flat colour: nothing shows"
            )
        picture.save(image_2x)
        # each 1x pixel is the mean of 2 x 2 pixels: as sharp as a Lanczos filter here, and
        # faster, with smaller files
        picture.reduce(2).save(image_1x)
        srcset = [{0: image_1x, 2.0: image_2x}]
        # the titles become the image's alt text, which sphinx-gallery writes into the HTML
        # without escaping: a double quote (a title such as alignment="top_left") would end it
        alt = _matplotlib_fig_titles(fig).replace('"', "'")
        alt = " ".join(_LINE_ENDS.sub(" ", alt).split())  # one line: it is a reST option
        rst = figure_rst([image_1x], gallery_conf["src_dir"], alt, srcset)
        image_rsts.append(rst + _interactive_view_rst(fig, Path(gallery_conf["src_dir"]).name))
    plt.close("all")
    if len(image_rsts) <= 1:
        return "".join(image_rsts)
    multi = [
        rst.replace(":class: sphx-glr-single-img", ":class: sphx-glr-multi-img")
        for rst in image_rsts
    ]
    return HLIST_HEADER + "".join(
        HLIST_IMAGE_MATPLOTLIB + textwrap.indent(rst, " " * 6) for rst in multi
    )


def _interactive_view_rst(fig, lang: str) -> str:
    """A raw-HTML block with the interactive view of ``fig``, or ``""`` when it has none.

    The view's data is what the plotting function drew (``mha_ref.tutorial.interactive``);
    its script and style sheet are loaded once for the whole site (``conf.py``).
    """
    from sphinx.errors import ExtensionError

    from mha_ref.tutorial.interactive import view_html

    html = view_html(fig, lang)
    if html is None:
        return ""
    if len(html.splitlines()) != 1 or not html.isascii():
        # one line of ASCII, the block's only line: nothing in it can end the block
        raise ExtensionError(f"the interactive view's HTML is not one line of ASCII: {html!r}")
    return f"\n.. raw:: html\n\n   {html}\n\n"


def _draws_data(fig) -> bool:
    """Whether some axes of ``fig`` holds data that can show: a line or a collection with a
    finite point, an image with a finite value, a patch (bars, boxes) of finite size.

    Text alone does not count: a figure of labels and titles over empty axes is a figure whose
    data went missing.
    """
    import numpy as np

    def finite(values) -> bool:
        """Whether ``values`` hold a finite number, or a row of them (a point, for 2-D)."""
        array = np.ma.filled(np.ma.asarray(values, dtype=float), np.nan)
        if array.ndim == 2 and array.shape[1] == 2:  # points (x, y): both finite
            return bool(np.isfinite(array).all(axis=1).any())
        return array.size > 0 and bool(np.isfinite(array).any())

    for ax in fig.axes:
        shown = [
            *(finite(line.get_xydata()) for line in ax.lines if line.get_visible()),
            *(finite(image.get_array()) for image in ax.images if image.get_visible()),
            *(finite(patch.get_verts()) for patch in ax.patches if patch.get_visible()),
            *(
                finite(collection.get_offsets())
                or any(finite(path.vertices) for path in collection.get_paths())
                for collection in ax.collections
                if collection.get_visible()
            ),
        ]
        if any(shown):
            return True
    return bool(fig.images)


def _draw_once(fig, dpi: float):
    """Draw ``fig`` once at ``dpi`` dots per inch; return the picture as a PIL image.

    One ``canvas.draw()`` both lays the figure out (its layout engine runs inside the draw) and
    renders it. The picture is RGB when it is fully opaque, which makes a smaller, faster PNG
    than ``savefig``'s RGBA.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    screen_dpi = fig.dpi
    fig.set_dpi(dpi)
    try:
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        picture = Image.frombuffer(
            "RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1
        ).copy()  # the copy outlives the canvas's buffer
    finally:
        fig.set_dpi(screen_dpi)
    if picture.getchannel("A").getextrema() == (255, 255):
        picture = picture.convert("RGB")
    return picture


def setup(app: Sphinx) -> dict:
    app.add_search_language(_chinese_search_language())
    app.connect("config-inited", _configure_language, priority=5)  # before sphinx-gallery's 10
    # after sphinx-gallery ran the examples (its generate_gallery_rst has the default, 500)
    app.connect("builder-inited", _commit_records, priority=550)
    app.connect("env-get-outdated", _rewrite_executed_examples)
    app.connect("source-read", _clean_example_page, priority=100)  # before any other handler
    app.connect("env-before-read-docs", _check_printed_nan)
    app.connect("source-read", _add_provenance)
    app.connect("source-read", _translate_gallery_text)
    app.connect("autodoc-process-docstring", _translate_docstring_sections, priority=600)
    app.connect("doctree-read", _translate_attribute_type_label)
    app.add_transform(LabelledSectionIds)
    app.add_post_transform(JoinChineseText)
    app.connect("html-page-context", _full_width_field_colons)
    app.connect("build-finished", _drop_source_maps)
    app.connect("build-finished", _stop_example_workers)
    return {
        "parallel_read_safe": True,
        "parallel_write_safe": True,
        "version": "1",
        # Sphinx re-reads every page when an extension's env_version changes: a change to this
        # file (its doctree transforms, its translations) then reaches pages whose source did not
        "env_version": int(hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12], 16),
    }
