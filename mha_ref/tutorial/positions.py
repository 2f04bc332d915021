r"""Positions inside attention: five schemes in example 10's induction model, measured.

**What is compared.** :class:`~mha_ref.tutorial.induction.AttentionOnlyTransformer` with one
of its position schemes (:data:`~mha_ref.tutorial.induction.POSITIONS`: learned absolute,
sinusoidal, rotary, ALiBi, none) at a time, trained on example 10's task with one recipe and
the same seeds; only the positions change (for one seed, every scheme starts from the same
other weights and sees the same batches). Each run trains until it meets one stopping rule or
reaches one cap (:data:`SHORT_RECIPE`), the same for every scheme.

**What is measured**, on every seed (:func:`position_study`):

* whether the run converged (the step at which it met the stopping rule) and whether the
  induction circuit forms (phase change, second-copy accuracy, the previous-token score of the
  best layer-1 head);
* accuracy as the two copies move apart, beyond the distances seen in training (example 10's
  exercise 2: :func:`moved_copies`);
* the same distances with layer 2's search run without positions (:func:`positions_removed`),
  an intervention that tells whether the fall comes from layer 2 using position;
* accuracy on sequences longer than any in training (:func:`longer_batch`), for the schemes
  that can run them.

**What the positions add to the scores** (:func:`position_scores`): a layer-1 head's scores on
sequences that repeat one token, with the positions minus without them. With the content the
same everywhere, what is left comes from the positions alone.

Sources: Vaswani et al. 2017 (arXiv:1706.03762, Sec. 3.5: learned and sinusoidal); Su et al.
2021 (arXiv:2104.09864: RoPE); Press et al. 2022 (arXiv:2108.12409: ALiBi); Haviv et al. 2022
(arXiv:2203.16634: no positional encoding in a causal model); Olsson et al. 2022
(arXiv:2209.11895: the task).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from mha_ref.masks import causal_mask
from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.fonts import use_cjk_font_for
from mha_ref.tutorial.induction import (
    POSITIONS,
    AttentionOnlyTransformer,
    accuracy_with_ablation,
    head_scores,
    make_repeated_batch,
)
from mha_ref.tutorial.induction_training import InductionResult, train_induction

__all__ = [
    "GAP_PERIOD",
    "SHORT_RECIPE",
    "PositionRun",
    "PositionStudy",
    "diagonal_spread",
    "longer_batch",
    "moved_copies",
    "plot_score_maps",
    "position_scores",
    "position_study",
    "positions_removed",
]

#: The gap experiment's fixed period (example 10, exercise 2).
GAP_PERIOD = 5
#: The seed of the gap experiment's sequences (example 10, exercise 2).
GAP_SEED = 1

#: The recipe of example 20. Example 10's model is trained on smaller batches at a higher
#: learning rate (32 sequences at 1e-2, where example 10 trains 64 at 3e-3), each run until it
#: meets a stopping rule (:func:`~mha_ref.tutorial.induction_training.stopping_step`: three
#: evaluations in a row, each the mean second-copy accuracy of 20 training batches, at 0.9 or
#: more) or reaches the cap of ``steps``. Every scheme gets the same rule and the same cap, so
#: the budget is matched in convergence, not in steps; the cap is more than twice the slowest
#: phase change that example 20 measures with this recipe.
SHORT_RECIPE = {
    "steps": 600,
    "batch_size": 32,
    "lr": 1e-2,
    "stop_accuracy": 0.9,
    "stop_window": 20,
    "stop_evaluations": 3,
}


# ------------------------------------------------------------------------------------------------
# the position-only part of the scores
# ------------------------------------------------------------------------------------------------


def position_scores(model: AttentionOnlyTransformer) -> torch.Tensor:
    """What the positions add to the scores of each layer-1 head.

    Each sequence repeats one token (all ``vocab_size`` of them in turn), so the content is the
    same at every position. For each head, the scores with the model's positions minus the
    scores without them (no position embedding, no rotation, no bias), averaged over these
    sequences: the part of the scores that comes from the positions. Zero for ``"none"``.

    Args:
        model: a model of any position scheme.

    Returns:
        ``(num_heads, L, L)`` float64 with ``L = model.seq_len``; blocked cells (keys after
        the query) are NaN.
    """
    seq_len = model.seq_len
    vocab_size = model.token_embedding.num_embeddings
    tokens = torch.arange(vocab_size)[:, None].expand(vocab_size, seq_len)  # (V, L)
    first = model.layers[0]
    with torch.no_grad():
        with_positions = model.attention_scores(first, model.embed(tokens))  # (V, h, L, L)
        without = model.attention_scores(
            first, model.embed(tokens, with_positions=False), with_positions=False
        )  # (V, h, L, L)
    allowed = causal_mask(seq_len)  # (L, L) True = may attend
    difference = (with_positions.double() - without.double()).mean(dim=0)  # (h, L, L)
    return torch.where(allowed, difference, torch.nan)  # (h, L, L), NaN where blocked


def diagonal_spread(scores: torch.Tensor) -> torch.Tensor:
    """How far a score map is from depending on ``i - j`` alone, per head.

    For each offset ``i - j`` the spread (largest minus smallest score) along that diagonal,
    the largest over all offsets, divided by the spread of the whole map. ``0`` when every
    diagonal is constant (the scores depend on the offset only), up to ``1``.

    Args:
        scores: ``(num_heads, L, L)``, NaN where blocked (as :func:`position_scores` gives).

    Returns:
        ``(num_heads,)`` float64; ``0`` for a map that is constant everywhere.
    """
    seq_len = scores.shape[-1]
    worst = torch.zeros(scores.shape[0], dtype=torch.float64)  # (h,)
    for offset in range(seq_len):  # the diagonals on and below the main one: never blocked
        diagonal = scores.diagonal(offset=-offset, dim1=-2, dim2=-1).double()  # (h, L - offset)
        spread = diagonal.amax(dim=-1) - diagonal.amin(dim=-1)  # (h,)
        worst = torch.maximum(worst, spread)  # (h,)
    flat = scores.double().flatten(1)  # (h, L * L), NaN where blocked
    highest = torch.where(flat.isnan(), -torch.inf, flat).amax(dim=-1)  # (h,)
    lowest = torch.where(flat.isnan(), torch.inf, flat).amin(dim=-1)  # (h,)
    total = highest - lowest  # (h,)
    return torch.where(total > 0, worst / total.clamp(min=1e-300), 0.0)  # (h,)


def plot_score_maps(
    maps: Sequence[torch.Tensor],
    titles: Sequence[str],
    *,
    suptitle: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    colorbar_label: str | None = None,
    ncols: int = 3,
) -> Figure:
    """Heatmaps of signed score maps, each divided by its own largest size, one colour bar.

    Red is a score raised, blue one lowered, white unchanged; grey cells are blocked by the
    causal mask (NaN). Each map is divided by its largest absolute value, so every map uses the
    whole scale from -1 to 1 (print the sizes beside the figure when they matter); a map that is
    zero everywhere stays white.

    Args:
        maps: ``(L, L)`` maps, e.g. one head of :func:`position_scores` each.
        titles: one title per map.
        suptitle, xlabel, ylabel, colorbar_label: labels, in any language.
        ncols: maps per row.

    Returns:
        The figure.

    Raises:
        ValueError: the numbers of maps and titles differ, or a map is not 2-D.
    """
    if len(maps) != len(titles):
        raise ValueError(f"plot_score_maps: {len(maps)} maps but {len(titles)} titles")
    use_cjk_font_for(list(titles), suptitle, xlabel, ylabel, colorbar_label)
    nrows = -(-len(maps) // ncols)
    side = min(2.2, 6.6 / ncols)  # inches per map: the grid stays about 7 inches wide
    fig = plt.figure(figsize=(side * ncols + 0.9, side * nrows + 0.9), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    colours = mpl.colormaps["RdBu_r"].with_extremes(bad="#d0d0d0")
    image = None
    for index, ax in enumerate(axes.flat):
        if index >= len(maps):
            ax.remove()
            continue
        values = np.asarray(torch.as_tensor(maps[index]).double())
        if values.ndim != 2:
            raise ValueError(f"plot_score_maps: map {index} has shape {values.shape}, not (L, L)")
        finite = np.abs(values[np.isfinite(values)])
        largest = float(finite.max()) if finite.size else 0.0
        scaled = values / largest if largest > 1e-12 else values * 0.0  # NaN stays NaN
        image = ax.imshow(scaled, cmap=colours, vmin=-1.0, vmax=1.0)
        ax.set_title(titles[index], fontsize=8)
        ax.set_xticks(range(0, values.shape[1], 5))
        ax.set_yticks(range(0, values.shape[0], 5))
        ax.tick_params(labelsize=7, length=2)
    if image is not None:
        bar = fig.colorbar(image, ax=list(axes.flat[: len(maps)]), shrink=0.8)
        bar.ax.tick_params(labelsize=7)
        if colorbar_label:
            bar.set_label(colorbar_label, fontsize=8)
    if xlabel:
        fig.supxlabel(xlabel, fontsize=9)
    if ylabel:
        fig.supylabel(ylabel, fontsize=9)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    return fig


# ------------------------------------------------------------------------------------------------
# the two tests of length generalisation
# ------------------------------------------------------------------------------------------------


def moved_copies(tokens: torch.Tensor, period: int, gap: int) -> torch.Tensor:
    """Move the first copy ``gap`` positions earlier; the filler it passes fills the gap.

    Example 10's exercise 2: the second copy stays at the end, the distance between the two
    copies becomes ``period + gap``, and the tokens of the gap are the filler that preceded the
    first copy.

    Args:
        tokens: ``(N, L)`` sequences of :func:`~mha_ref.tutorial.induction.make_repeated_batch`
            with one fixed ``period``.
        period: that period.
        gap: filler tokens between the copies, ``0 .. L - 2 * period``.

    Returns:
        ``(N, L)`` int64, a new tensor.

    Raises:
        ValueError: ``gap`` is negative or larger than the filler before the first copy.
    """
    first_copy = tokens.shape[1] - 2 * period  # first position of the first copy
    if not 0 <= gap <= first_copy:
        raise ValueError(f"gap must be in 0 .. {first_copy} for period {period}, got gap={gap}")
    moved = tokens.clone()  # (N, L)
    block = slice(first_copy - gap, first_copy + period)  # the gap's filler, then the first copy
    moved[:, block] = tokens[:, block].roll(-gap, dims=1)  # now the first copy, then the filler
    return moved


def longer_batch(
    size: int, seq_len: int, vocab_size: int, min_period: int, max_period: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Example 10's sequences at another length: more filler before the two copies.

    The copies and their distances (``min_period .. max_period``) are those of training; only
    the positions are new when ``seq_len`` exceeds the training length.

    Args:
        size: sequences ``N``; seq_len: tokens per sequence ``L``; vocab_size: token ids.
        min_period, max_period: the range of the segment's length (both included).
        seed: the seed of the sequences.

    Returns:
        ``tokens (size, seq_len)`` and ``periods (size,)``, int64.
    """
    generator = torch.Generator().manual_seed(seed)
    return make_repeated_batch(size, seq_len, vocab_size, generator, min_period, max_period)


@contextlib.contextmanager
def positions_removed(model: AttentionOnlyTransformer, layers: Sequence[int]) -> Iterator[None]:
    """Within the block, the given layers search without positions.

    Their queries and keys meet by content alone: ``"rope"`` does not rotate them (every token
    at position 0), ``"alibi"`` drops its biases, ``"learned"`` and ``"sinusoidal"`` subtract the
    position embedding from the layer's query and key inputs (its values and the residual
    stream keep it; what earlier layers wrote about positions stays too). The other layers are
    unchanged.

    Args:
        model: a model of any scheme but ``"none"``.
        layers: 0-based layer indices.

    Raises:
        ValueError: the model has no positions to remove, or a layer index is out of range.
    """
    if model.position == "none":
        raise ValueError("positions_removed: a model with position='none' has none to remove")
    for layer in layers:
        if not 0 <= layer < len(model.layers):
            raise ValueError(f"no layer {layer} in a model of {len(model.layers)} layers")
    before = model.positionless_layers
    model.positionless_layers = frozenset(layers)
    try:
        yield
    finally:
        model.positionless_layers = before


# ------------------------------------------------------------------------------------------------
# the study
# ------------------------------------------------------------------------------------------------


@dataclass
class PositionRun:
    """What one trained model (one scheme, one seed) measured.

    Attributes:
        position: the scheme; seed: the seed.
        phase_change: first step where the training accuracy averages 0.5 over 20 steps (None:
            never).
        converged_step: the step at which the run met the recipe's stopping rule and stopped
            (:meth:`~mha_ref.tutorial.induction_training.InductionResult.converged_step`);
            ``None``: it ran to the cap without meeting it, or the recipe has no rule.
        steps: the training steps the run took (its stopping step, or the cap).
        accuracy: second-copy accuracy on example 10's evaluation batch.
        previous_token: the best previous-token score among the layer-1 heads;
            previous_head: that head (0-based).
        gaps: accuracy with the copies ``GAP_PERIOD + gap`` apart, for each gap in
            ``PositionStudy.gaps``.
        gaps_without_positions: the same with layer 2's search run without positions
            (:func:`positions_removed`; empty for ``"none"``).
        longer: accuracy on sequences of each length of ``PositionStudy.longer_lens``;
            ``None`` where ``"learned"`` has no embedding for the positions.
        accuracy_curve: the second-copy accuracy of each training batch, ``steps`` fractions
            (:attr:`~mha_ref.tutorial.induction_training.InductionResult.accuracy_curve`).
    """

    position: str
    seed: int
    phase_change: int | None
    converged_step: int | None
    steps: int
    accuracy: float
    previous_token: float
    previous_head: int
    gaps: list[float]
    gaps_without_positions: list[float] = field(default_factory=list)
    longer: list[float | None] = field(default_factory=list)
    accuracy_curve: list[float] = field(default_factory=list)


@dataclass
class PositionStudy:
    """All runs of :func:`position_study`, with the settings they share.

    Attributes:
        recipe: the arguments of :func:`~mha_ref.tutorial.induction_training.train_induction`
            shared by every run (all but ``position`` and ``seed``); config: the complete
            arguments of the first run (defaults included), e.g. its ``min_period``.
        seeds: the seeds; positions: the schemes.
        gaps: the gaps of the distance sweep; distances are ``GAP_PERIOD + gap``.
        longer_lens: the lengths of the longer sequences.
        runs: one :class:`PositionRun` per scheme and seed, scheme by scheme.
    """

    recipe: dict
    config: dict
    seeds: list[int]
    positions: list[str]
    gaps: list[int]
    longer_lens: list[int]
    runs: list[PositionRun]

    def of(self, position: str) -> list[PositionRun]:
        """The runs of one scheme, in seed order."""
        return [run for run in self.runs if run.position == position]

    def converged(self, position: str) -> list[PositionRun]:
        """The runs of one scheme that met the stopping rule (``converged_step`` set), in seed
        order."""
        return [run for run in self.of(position) if run.converged_step is not None]

    @property
    def distances(self) -> list[int]:
        """The distances between the copies in the sweep, ``GAP_PERIOD + gap``."""
        return [GAP_PERIOD + gap for gap in self.gaps]

    def model(self, position: str, seed: int) -> AttentionOnlyTransformer:
        """The trained model of one run (read from the training cache)."""
        return _train(self.recipe, position, seed).model()


def position_study(
    positions: Sequence[str] = POSITIONS,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    *,
    longer_lens: Sequence[int] = (20, 30, 40),
    **recipe: object,
) -> PositionStudy:
    """Train example 10's model with each position scheme and seed, and measure every run.

    Args:
        positions: the schemes, from :data:`~mha_ref.tutorial.induction.POSITIONS`.
        seeds: the seeds (each scheme is trained with each).
        longer_lens: the lengths of the longer evaluation sequences.
        **recipe: arguments of :func:`~mha_ref.tutorial.induction_training.train_induction`
            shared by all runs (default: its own defaults, example 10's recipe).

    Returns:
        a :class:`PositionStudy`. Cached on disk (and every training with it) when
        ``MHA_REF_CACHE_DIR`` is set.

    Raises:
        ValueError: an unknown scheme, or ``recipe`` names ``position`` or ``seed``.
    """
    for position in positions:
        if position not in POSITIONS:
            raise ValueError(f"positions must be taken from {POSITIONS}, got {position!r}")
    if "position" in recipe or "seed" in recipe:
        raise ValueError("pass the schemes as positions= and the seeds as seeds=, not in recipe")
    if not positions or not seeds:
        raise ValueError("position_study needs at least one scheme and one seed")
    arguments = dict(
        positions=list(positions),
        seeds=list(seeds),
        longer_lens=list(longer_lens),
        recipe=dict(recipe),
    )
    return cached("position_study", arguments, lambda: _study(arguments))


#: trainings already run in this process, by recipe, scheme and seed: without a cache folder
#: (a reader's download) :meth:`PositionStudy.model` would otherwise train each model again
_trained: dict[tuple[str, str, int], InductionResult] = {}


def _train(recipe: dict, position: str, seed: int) -> InductionResult:
    key = (repr(sorted(recipe.items())), position, seed)
    if key not in _trained:
        _trained[key] = train_induction(**recipe, position=position, seed=seed)
    return _trained[key]


def _study(arguments: dict) -> PositionStudy:
    recipe, longer_lens = arguments["recipe"], arguments["longer_lens"]
    runs, configs = [], []
    for position in arguments["positions"]:
        for seed in arguments["seeds"]:
            result = _train(recipe, position, seed)
            runs.append(_measure(result, longer_lens))
            configs.append(result.config)
    first_copy = configs[0]["seq_len"] - 2 * GAP_PERIOD
    return PositionStudy(
        recipe=dict(recipe),
        config=dict(configs[0]),
        seeds=list(arguments["seeds"]),
        positions=list(arguments["positions"]),
        gaps=list(range(0, first_copy + 1, 2)),
        longer_lens=list(longer_lens),
        runs=runs,
    )


def _measure(result: InductionResult, longer_lens: Sequence[int]) -> PositionRun:
    """Every measurement of one trained model."""
    config, model = result.config, result.model()
    tokens, periods = result.evaluation_batch()  # (512, L), (512,)
    previous, _ = head_scores(model, tokens, periods)  # (layers, h)
    fixed, fixed_periods = make_repeated_batch(
        512,
        config["seq_len"],
        config["vocab_size"],
        torch.Generator().manual_seed(GAP_SEED),
        GAP_PERIOD,
        GAP_PERIOD,
    )  # (512, L), (512,): example 10's exercise 2
    first_copy = config["seq_len"] - 2 * GAP_PERIOD
    sweep = [moved_copies(fixed, GAP_PERIOD, gap) for gap in range(0, first_copy + 1, 2)]
    gaps = [accuracy_with_ablation(model, moved, fixed_periods) for moved in sweep]
    without = []
    if model.position != "none":
        with positions_removed(model, [1]):
            without = [accuracy_with_ablation(model, moved, fixed_periods) for moved in sweep]
    longer = []
    for length in longer_lens:
        if model.position == "learned" and length > config["seq_len"]:
            longer.append(None)  # the learned table has no row beyond seq_len
            continue
        long_tokens, long_periods = longer_batch(
            512, length, config["vocab_size"], config["min_period"], config["max_period"],
            seed=GAP_SEED,
        )  # (512, length), (512,)
        longer.append(accuracy_with_ablation(model, long_tokens, long_periods))
    return PositionRun(
        position=model.position,
        seed=config["seed"],
        phase_change=result.phase_change_step(),
        converged_step=result.converged_step(),
        steps=len(result.accuracy_curve),
        accuracy=accuracy_with_ablation(model, tokens, periods),
        previous_token=round(float(previous[0].max()), 6),
        previous_head=int(previous[0].argmax()),
        gaps=gaps,
        gaps_without_positions=without,
        longer=longer,
        accuracy_curve=list(result.accuracy_curve),
    )
