r"""A figure of one pre-norm decoder block, with the sizes of a real model.

SmolLM2 (and LLaMA) stack identical blocks, each of them pre-norm: the *residual stream*
``x`` runs straight through the block, and two branches read it and add back to it,
:math:`x \leftarrow x + \mathrm{Attn}(\mathrm{RMSNorm}(x))`, then
:math:`x \leftarrow x + \mathrm{MLP}(\mathrm{RMSNorm}(x))`
(:class:`mha_ref.tutorial.real_models.smollm2.SmolLM2Block`). :func:`plot_prenorm_block` draws that
block as boxes on the stream, its labels given by the page in its language and filled with the
sizes of the model's config (:func:`block_sizes`).

Source: Touvron et al. 2023, "LLaMA", arXiv:2302.13971, Sec. 2.2 (pre-normalisation, SwiGLU,
rotary embeddings); Xiong et al. 2020, "On Layer Normalization in the Transformer
Architecture", arXiv:2002.04745 (pre-norm against post-norm); the residual stream view of
Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits".
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from mha_ref.tutorial.fonts import use_cjk_font_for

__all__ = ["BLOCK_LABELS", "BLOCK_SIZES", "block_sizes", "plot_prenorm_block"]

#: the sizes of a block that the figure shows, as the config names them
BLOCK_SIZES = ("embed_dim", "num_heads", "num_kv_heads", "head_dim", "ffn_dim", "num_layers")

#: the figure's labels in English; a page passes its own (the same keys). ``{name}`` is
#: replaced by the size of that name (:data:`BLOCK_SIZES`).
BLOCK_LABELS = {
    "title": "One block of SmolLM2 (pre-norm); the model stacks {num_layers} of them",
    "stream": "residual stream x, shape (batch, L, {embed_dim})",
    "enter": "x from the block before (block 0: the token embeddings)",
    "leave": "x to the next block (after the last: RMSNorm, then the logits)",
    "norm": "RMSNorm",
    "attention": "grouped-query attention, RoPE\n{num_heads} query heads, {num_kv_heads} key/value "
    "heads\nhead_dim {head_dim}",
    "mlp": "MLP (SwiGLU)\n{embed_dim} → {ffn_dim} → {embed_dim}",
    "add_attention": "x + attention(RMSNorm(x))",
    "add_mlp": "x + MLP(RMSNorm(x))",
}

_STREAM_X = 20  # where the residual stream runs, in the axes' 0..100 coordinates
_BRANCH_X = 64  # the centre of the branches' boxes
_INK = "#333333"
_STREAM_COLOUR = "#1f4e9a"


def block_sizes(config) -> dict[str, int]:
    """The sizes of :data:`BLOCK_SIZES`, read from a model's config.

    Args:
        config: an object with those attributes, e.g.
            :class:`~mha_ref.tutorial.real_models.smollm2.SmolLM2Config` (``model.config``).

    Returns:
        dict[str, int]: ``{name: size}`` in the order of :data:`BLOCK_SIZES`.

    Raises:
        TypeError: if ``config`` lacks one of them or one is not an int (the message names it).
    """
    sizes = {}
    for name in BLOCK_SIZES:
        value = getattr(config, name, None)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"config must have an int {name!r} (a model's config, e.g. model.config), got "
                f"{value!r} from {type(config).__name__}."
            )
        sizes[name] = value
    return sizes


def _box(ax, y: float, height: float, text: str, colour: str) -> None:
    """A rounded box on the branch, centred at ``(_BRANCH_X, y)``, 52 units wide."""
    ax.add_patch(FancyBboxPatch((_BRANCH_X - 26, y - height / 2), 52, height,
                                boxstyle="round,pad=0.4,rounding_size=1.5", linewidth=1.1,
                                edgecolor=_INK, facecolor=colour))
    ax.text(_BRANCH_X, y, text, ha="center", va="center", fontsize=9, linespacing=1.5)


def _arrow(ax, points: list[tuple[float, float]]) -> None:
    """Straight lines through ``points``, the arrow head on the last one."""
    for start, end in zip(points[:-2], points[1:-1], strict=True):
        ax.plot(*zip(start, end, strict=True), color=_INK, linewidth=1.1, solid_capstyle="butt")
    ax.add_patch(FancyArrowPatch(points[-2], points[-1], arrowstyle="-|>", mutation_scale=11,
                                 linewidth=1.1, color=_INK, shrinkA=0, shrinkB=0))


def _branch(ax, tap: float, norm_y: float, box_y: float, box_h: float, add_y: float,
            text: str, colour: str, norm: str, add: str) -> None:
    """One branch: from the stream at ``tap`` through RMSNorm and a box, back to an add."""
    _arrow(ax, [(_STREAM_X, tap), (_BRANCH_X, tap), (_BRANCH_X, norm_y - 3.3)])
    _box(ax, norm_y, 4.5, norm, "#eeeeee")
    _arrow(ax, [(_BRANCH_X, norm_y + 3.3), (_BRANCH_X, box_y - box_h / 2 - 0.8)])
    _box(ax, box_y, box_h, text, colour)
    top = box_y + box_h / 2 + 0.8
    _arrow(ax, [(_BRANCH_X, top), (_BRANCH_X, add_y), (_STREAM_X + 2.6, add_y)])
    ax.add_patch(Circle((_STREAM_X, add_y), 2.4, facecolor="white", edgecolor=_STREAM_COLOUR,
                        linewidth=1.6, zorder=3))
    ax.text(_STREAM_X, add_y, "+", ha="center", va="center", fontsize=12, zorder=4,
            color=_STREAM_COLOUR)
    ax.text(_STREAM_X + 4, add_y + 1.2, add, ha="left", va="bottom", fontsize=8.5,
            color=_STREAM_COLOUR)


def plot_prenorm_block(config, labels: Mapping[str, str] | None = None) -> Figure:
    """Draw one pre-norm block: the residual stream, and the attention and MLP branches.

    The stream runs up the left; each branch leaves it, goes through RMSNorm and its layer,
    and is added back (the circles). The boxes carry the sizes of ``config``.

    Args:
        config: the model's config (:func:`block_sizes` reads it).
        labels: the texts of the figure, with the keys of :data:`BLOCK_LABELS` (default: those,
            in English); ``{name}`` in a label is replaced by the size of that name. Chinese
            labels get the bundled CJK font (:func:`mha_ref.tutorial.fonts.use_cjk_font_for`).

    Returns:
        matplotlib.figure.Figure: the figure (6.4 by 6.6 inches).

    Raises:
        TypeError: as :func:`block_sizes`.
        KeyError: if ``labels`` lacks a key of :data:`BLOCK_LABELS` (the message lists them).
    """
    sizes = block_sizes(config)
    labels = BLOCK_LABELS if labels is None else labels
    missing = [key for key in BLOCK_LABELS if key not in labels]
    if missing:
        raise KeyError(f"labels lacks {missing}; it needs every key of BLOCK_LABELS: "
                       f"{list(BLOCK_LABELS)}.")
    text = {key: labels[key].format(**sizes) for key in BLOCK_LABELS}
    use_cjk_font_for(*text.values())
    fig, ax = plt.subplots(figsize=(5.8, 6.0))  # small: example 16 loads it with the page
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.93)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.axis("off")
    ax.set_title(text["title"], fontsize=10)
    ax.add_patch(FancyArrowPatch((_STREAM_X, 6), (_STREAM_X, 95), arrowstyle="-|>",
                                 mutation_scale=16, linewidth=3.0, color=_STREAM_COLOUR))
    ax.text(_STREAM_X - 5.5, 66, text["stream"], rotation=90, ha="center", va="center",
            fontsize=9, color=_STREAM_COLOUR)
    ax.text(_STREAM_X - 4, 2.5, text["enter"], ha="left", va="center", fontsize=8.5)
    ax.text(_STREAM_X - 4, 98, text["leave"], ha="left", va="center", fontsize=8.5)
    _branch(ax, tap=12, norm_y=19, box_y=33, box_h=13, add_y=46, text=text["attention"],
            colour="#f3e8f8", norm=text["norm"], add=text["add_attention"])
    _branch(ax, tap=55, norm_y=62, box_y=74, box_h=9, add_y=86, text=text["mlp"],
            colour="#e3f2df", norm=text["norm"], add=text["add_mlp"])
    return fig
