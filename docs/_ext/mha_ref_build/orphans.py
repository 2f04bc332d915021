"""Examples and modules that no longer exist: before sphinx-gallery looks at the gallery
(``config-inited``), every file generated for an example whose script was deleted or renamed is
removed, from the generated sources and from the built site. Without it, the old page stays among
the sources in no table of contents, and the ``-W`` build fails without saying why. The source
listing (``sphinx.ext.viewcode``'s ``_modules/``) of a module that was deleted or moved goes too:
viewcode writes the pages of the modules it sees and never removes one, so an incremental build
would keep publishing the old code.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mha_ref_build import GALLERY_DIR, ROOT

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.config import Config


#: what sphinx-gallery writes into the gallery folder that belongs to no single example
_GALLERY_FILES = {"index", "sg_execution_times", "auto_examples_python", "auto_examples_jupyter"}


def _remove_orphans(gallery: Path, generated: Path, outdir: Path) -> None:
    """Delete everything generated for an example whose script is gone (deleted, renamed).

    Without this, its old page stays among the sources, in no table of contents: Sphinx warns
    about it, and the ``-W`` build fails without saying why. The built copies of its page,
    images and downloads go too, so that the published site does not keep them.
    """
    import glob

    from sphinx.util import logging

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
        logging.getLogger(__name__).info(
            f"{stem}: its example is gone; removed its {len(doomed)} generated files"
        )


def _remove_stale_source_pages(outdir: Path) -> list[Path]:
    """Delete the built source listing (``_modules/a/b.html``) of every module ``a.b`` that
    Python can no longer find (deleted, moved or renamed); return the pages removed."""
    import importlib.util

    listings = outdir / "_modules"
    if not listings.is_dir():
        return []
    removed = []
    for page in sorted(listings.rglob("*.html")):
        if page == listings / "index.html":
            continue
        module = ".".join(page.relative_to(listings).with_suffix("").parts)
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a parent package is gone
            found = False
        if not found:
            page.unlink()
            removed.append(page)
    for folder in sorted({p.parent for p in removed}, key=lambda f: len(f.parts), reverse=True):
        if folder != listings and not any(folder.iterdir()):
            folder.rmdir()  # the moved package's folder, once empty
    return removed


def _remove_orphans_of_the_language(app: Sphinx, config: Config) -> None:
    """:func:`_remove_orphans` and :func:`_remove_stale_source_pages` for the language being
    built."""
    from sphinx.util import logging

    gallery = ROOT / "gallery" / (config.language or "en")
    _remove_orphans(gallery, Path(app.srcdir) / GALLERY_DIR, Path(app.outdir))
    for page in _remove_stale_source_pages(Path(app.outdir)):
        logging.getLogger(__name__).info(f"{page.name}: its module is gone; removed its listing")
