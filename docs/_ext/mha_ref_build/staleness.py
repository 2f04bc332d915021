"""Which examples run again: sphinx-gallery re-runs an example only when its script changes; this
also runs it again when a file its output depends on changed, and records what each example ran
with.

Hooks: ``config-inited`` (after :mod:`.settings` chose the language's gallery, before
sphinx-gallery's own handler) tells sphinx-gallery which examples are outdated by deleting their
``<name>.py.md5``; sphinx-gallery's ``reset_modules`` (through :mod:`.example_run`) writes what an
example starts with; ``builder-inited`` (after sphinx-gallery ran the examples) makes that the
example's record (``<name>.deps.json``) once it succeeded; ``env-get-outdated`` reads and writes
again the page of every example that ran, so that a new figure reaches the site even when the page's
text is unchanged. The rules are plain functions (no Sphinx): a file is hashed by its code
(:func:`mha_ref.tutorial.sources.file_hash`, docstrings and comments left out), and a record is
written only after its example succeeded and is never deleted here, so an interrupted or failed
build leaves the records as they were.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from mha_ref_build import GALLERY_DIR, PROVENANCE_SUFFIX, ROOT

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.config import Config


#: beside each generated page: the files its example's output depends on, with their hashes
DEPS_SUFFIX = ".deps.json"


# -- what an example depends on --------------------------------------------------------------------
#: the mha_ref modules this file runs around every example: its provenance (the device), its
#: figure scraper (the fonts' glyph check, the interactive views) and the rerun rule itself
AROUND_EVERY_EXAMPLE = (
    "mha_ref.device",
    "mha_ref.tutorial.fonts",
    "mha_ref.tutorial.interactive",
    "mha_ref.tutorial.sources",
)


#: the modules of this package that run around every example, in the process that runs it (its
#: state and provenance, the figure scraper, the records), or set what it runs with (settings:
#: the threads it may take, the training cache): a change to their code runs every example
#: again. The others change pages, never what an example prints.
AROUND_EVERY_EXAMPLE_HERE = (
    "__init__.py",
    "example_run.py",
    "figures.py",
    "provenance.py",
    "safe_pages.py",
    "settings.py",
    "staleness.py",
)


def dependency_files() -> list[Path]:
    """The files outside ``mha_ref`` whose change must re-run every example: ``conf.py``, the
    pinned toolchain and :data:`AROUND_EVERY_EXAMPLE_HERE`."""
    here = Path(__file__).resolve().parent
    files = [ROOT / "conf.py", *(here / name for name in AROUND_EVERY_EXAMPLE_HERE),
             ROOT / "requirements" / "constraints.txt"]
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


def _mark_outdated_examples(app: Sphinx, config: Config) -> None:
    """Log and mark the examples that run again (:func:`outdated_examples`)."""
    from sphinx.util import logging

    from mha_ref_build.settings import runs_examples

    if not runs_examples(config):  # -D plot_gallery=0 runs nothing: nothing is outdated either
        return
    logger = logging.getLogger(__name__)
    gallery = ROOT / "gallery" / (config.language or "en")
    generated = Path(app.srcdir) / GALLERY_DIR
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
