"""The package's wheel, shipped with the site: built from this checkout once per change of the
package (``config-inited``, into ``build/wheel/``, with ``pip wheel`` and no network), copied into
each language's ``_downloads/`` and into the two zips of all examples (``build-finished``). The
``mha-wheel`` role links to it, the ``mha-wheel-install`` and ``mha-install-recipe`` directives show
how to install it, and every page's template gets the same commands (``html-page-context``).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective, SphinxRole

from mha_ref_build import ROOT
from mha_ref_build.install import (
    TORCH_CPU_COMMAND,
    install_command,
    install_commands,
    model_install_commands,
    recipe_text,
    wheel_name,
)

WHEEL_DIR = ROOT / "build" / "wheel"
DOWNLOADS = "_downloads"

logger = logging.getLogger(__name__)


def _wheel_inputs() -> list[Path]:
    files = sorted(p for p in (ROOT / "mha_ref").rglob("*") if p.is_file() and _packaged(p))
    return [*files, ROOT / "pyproject.toml", ROOT / "README.md", ROOT / "LICENSE"]


def _packaged(path: Path) -> bool:
    # every file of the package's folder goes into the copy, and pyproject.toml's package data
    # alone decides what the wheel holds (a list kept here too once left the real model's texts
    # out of the shipped wheel); only Python's caches stay behind
    return "__pycache__" not in path.parts and path.suffix not in {".pyc", ".pyo"}


def _inputs_hash(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _source_date_epoch() -> str:
    """The commit's time, so that two builds of one commit date the wheel's files alike."""
    try:
        done = subprocess.run(
            ["git", "log", "-1", "--format=%ct"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=20,
        )
        return str(max(int(done.stdout.strip()), 315532800))  # zip dates start in 1980
    except (OSError, subprocess.SubprocessError, ValueError):
        return "315532800"


def make_wheel(out_dir: Path) -> Path:
    """Build the package's wheel into ``out_dir``; return its path.

    ``pip wheel --no-deps --no-build-isolation`` on a copy of the package's files (so the
    checkout gets no ``build/lib`` or ``.egg-info``), with the setuptools the environment pins:
    no network. The files inside are dated by the commit (``SOURCE_DATE_EPOCH``), so two builds
    of one checkout give the same bytes.
    """
    name = wheel_name()
    with tempfile.TemporaryDirectory(prefix="mha-ref-wheel-") as tmp:
        src, out = Path(tmp, "src"), Path(tmp, "out")
        for path in _wheel_inputs():
            copy = src / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
        env = {**os.environ, "SOURCE_DATE_EPOCH": _source_date_epoch(), "PIP_NO_INPUT": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
             "--no-index", "-q", "-w", str(out), str(src)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )  # fmt: skip
        built = out / name
        if done.returncode != 0 or not built.is_file():
            raise ExtensionError(
                f"pip wheel failed (exit {done.returncode}), or made no {name}:\n"
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, out_dir / name)
    return out_dir / name


def build_wheel() -> Path:
    """The wheel in ``build/wheel/``, built again only when the package's files changed."""
    name = wheel_name()
    target = WHEEL_DIR / name
    stamp = WHEEL_DIR / f"{name}.sha256"
    current = _inputs_hash(_wheel_inputs())
    if target.is_file() and stamp.is_file() and stamp.read_text().strip() == current:
        return target
    for old in WHEEL_DIR.glob("*.whl"):
        old.unlink()
    make_wheel(WHEEL_DIR)
    stamp.write_text(current + "\n")
    logger.info(f"built {target.relative_to(ROOT)}")
    return target


def _build_wheel(app: Sphinx, config: Config) -> None:
    app.mha_wheel = build_wheel()  # type: ignore[attr-defined]


def wheel_uri(docname: str) -> str:
    """The wheel's address relative to the page ``docname``."""
    return posixpath.relpath(f"{DOWNLOADS}/{wheel_name()}", posixpath.dirname(docname) or ".")


class WheelRole(SphinxRole):
    """``{mha-wheel}`download the package```: a link to the wheel shipped with the site."""

    def run(self):
        uri = wheel_uri(self.env.docname)
        node = nodes.reference(self.rawtext, self.text, refuri=uri, classes=["mha-wheel"])
        return [node], []


class WheelInstall(SphinxDirective):
    """The command that installs the shipped wheel, then the directive's own lines, as bash."""

    has_content = True

    def run(self):
        lines = [install_command(wheel_name()), *self.content]
        block = nodes.literal_block("\n".join(lines), "\n".join(lines))
        block["language"] = "bash"
        return [block]


_VIEWPORT = re.compile(r'<meta name="viewport"[^>]*>\n?')


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    # docutils writes a viewport meta among the page's metatags; Sphinx's layout has its own
    context["metatags"] = _VIEWPORT.sub("", context.get("metatags", ""))
    context["mha_wheel"] = wheel_name()
    context["mha_wheel_uri"] = wheel_uri(pagename)
    lang = app.config.language or "en"
    models = (
        model_install_commands(lang, pagename.split("/")[-1])
        if pagename.startswith("auto_examples/plot_")
        else ()
    )
    context["mha_wheel_install"] = install_command(wheel_name(), bool(models))
    context["mha_torch_cpu_install"] = TORCH_CPU_COMMAND
    context["mha_model_install"] = list(models)


def _ship_wheel(app: Sphinx, exception: Exception | None) -> None:
    """Copy the wheel into the language's ``_downloads/`` and into the two zips of all examples.

    An example's own zip (its script and notebook) does not carry it: that page links to the
    wheel, and one copy per example would add the wheel's size to the site once per example.
    """
    # the EPUB (docs/_ext/mha_ref_epub.py) has no downloads
    if exception is not None or app.builder.name != "html":
        return
    wheel: Path = app.mha_wheel  # type: ignore[attr-defined]
    downloads = Path(app.outdir, DOWNLOADS)
    downloads.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(wheel, downloads / wheel.name)
    data = wheel.read_bytes()
    for archive in sorted(downloads.glob("*/*.zip")):
        wanted = data if archive.name.startswith("auto_examples_") else None
        _set_wheel_in_zip(archive, wheel.name, wanted)


def _set_wheel_in_zip(archive: Path, name: str, data: bytes | None) -> None:
    """Make ``archive`` hold the wheel ``name`` with ``data`` (``None``: no wheel at all).

    A staging folder kept from an older build can hold zips with an older wheel, or an
    example's zip with a wheel from before examples stopped carrying one: both are rewritten.
    """
    with zipfile.ZipFile(archive) as existing:
        wheels = [n for n in existing.namelist() if n.endswith(".whl")]
        if data is None and not wheels:
            return
        if data is not None and wheels == [name] and existing.read(name) == data:
            return
        kept = [info for info in existing.infolist() if info.filename not in wheels]
        members = [(info, existing.read(info)) for info in kept]
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as rewritten:
        for info, content in members:
            rewritten.writestr(info, content)
        if data is not None:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            rewritten.writestr(info, data, compress_type=zipfile.ZIP_STORED)


class InstallRecipe(SphinxDirective):
    """``{mha-install-recipe}``: the recipe's paragraph, then its commands (and the directive's
    own lines) as one bash block."""

    has_content = True

    def run(self):
        lang = self.config.language or "en"
        para = nodes.paragraph(classes=["mha-install-recipe"])
        para += nodes.Text(recipe_text(lang))
        lines = [*install_commands(wheel_name()), *self.content]
        block = nodes.literal_block("\n".join(lines), "\n".join(lines))
        block["language"] = "bash"
        return [para, block]
