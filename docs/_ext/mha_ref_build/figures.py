"""The figure scraper (sphinx-gallery's ``image_scrapers`` in ``conf.py``): each figure an example
shows is drawn once, at twice the page's resolution, and the 1x image is scaled down from it, where
sphinx-gallery's own scraper lays out and draws every figure twice for each of the two sizes. A
figure that would show nothing (no finite data, one flat colour) or a character as an empty box
fails the build, naming the example. A figure that carries the weights it drew
(``mha_ref.tutorial.plotting.plot_heads`` attaches them) also gets its interactive view, written
beside the image from those same numbers.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from mha_ref_build import ROOT
from mha_ref_build.safe_pages import _LINE_ENDS


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
            f"image_srcset={gallery_conf['image_srcset']!r}, but "
            "mha_ref_build.figures.matplotlib_scraper draws 2x images only: set image_srcset to "
            "['2x'] or use the 'matplotlib' scraper"
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
