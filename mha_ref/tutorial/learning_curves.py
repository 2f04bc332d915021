"""How many heads, over time: learning curves per head count, and steps to reach an accuracy.

A comparison after a fixed, short number of steps measures how *fast* each head count learns,
not what it *can* represent. Here every head count trains long enough to converge, with the
evaluation accuracy measured every few steps, so both questions get their own number:

* **speed**: the first evaluated step from which the accuracy stays at or above a threshold
  (e.g. 0.99) until the end of training;
* **capacity** (as far as this task can show it): the accuracy at the end, once the curves
  are flat.

Every run is :func:`mha_ref.tutorial.training.train` with ``eval_every``, cached by
:mod:`mha_ref.tutorial.cache`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.training import train

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "LearningCurve",
    "learned_counts",
    "learning_curves",
    "plot_learning_curves",
    "plot_rate_sweep",
    "plot_steps_to_threshold",
    "steps_to_reach",
    "summarize_curves",
    "truncate_curve",
]


# ------------------------------------------------------------------------------------------------


def steps_to_reach(curve: Sequence[tuple[int, float]], threshold: float) -> int | None:
    """The first step of ``curve`` (``(step, accuracy)`` pairs) from which every accuracy is at
    least ``threshold``; ``None`` if the last one is below it.

    "Reached and stayed": a curve that touches the threshold and falls back does not count
    until it stays.
    """
    reached = None
    for step, accuracy in curve:
        if accuracy >= threshold:
            reached = step if reached is None else reached
        else:
            reached = None
    return reached


@dataclass
class LearningCurve:
    """One run of :func:`learning_curves`.

    Attributes:
        num_heads, head_dim, seed: the run.
        steps, accuracy: the evaluation accuracy after each evaluated step.
        final_accuracy: the accuracy after the last step.
        steps_to_threshold: :func:`steps_to_reach` of the curve, ``None`` if never reached.
        loss_curve: the training loss after every step.
        offset_profile: ``(H, L)`` as nested lists, the mean weight per head on each offset
            ``0, -1, -2, ...`` at the end of the run (``TrainResult.offset_profile``); ``None``
            for a curve cut by :func:`truncate_curve`, whose end has no probe.
        entropy: ``(H,)`` mean row entropy per head in nats at the end of the run; ``None`` as
            above.
    """

    num_heads: int
    head_dim: int
    seed: int
    steps: list[int]
    accuracy: list[float]
    final_accuracy: float
    steps_to_threshold: int | None
    loss_curve: list[float]
    offset_profile: list[list[float]] | None = None
    entropy: list[float] | None = None

    def accuracy_at(self, step: int) -> float:
        """The accuracy at the last evaluation at or before ``step``; the final accuracy if the
        run stopped (converged) before ``step``."""
        if step >= self.steps[-1]:
            return self.final_accuracy
        before = [a for s, a in zip(self.steps, self.accuracy, strict=True) if s <= step]
        if not before:
            raise ValueError(f"no evaluation at or before step {step}; first at {self.steps[0]}")
        return before[-1]


def learning_curves(
    head_counts: Sequence[int] = (1, 2, 4, 8),
    *,
    embed_dim: int = 16,
    seeds: Sequence[int] = (0, 1, 2),
    steps: int = 1200,
    eval_every: int = 25,
    threshold: float = 0.99,
    stop_accuracy: float | None = None,
    stop_patience: int = 4,
    **train_kwargs: Any,
) -> list[LearningCurve]:
    """Train every head count with every seed at a fixed ``embed_dim``; keep the curves.

    Args:
        head_counts: values of ``h`` (each must divide ``embed_dim``).
        embed_dim: the fixed model width.
        seeds: training seeds (initialisation and data; the evaluation set is the same).
        steps: training steps of every run (long enough for every curve to flatten).
        eval_every: evaluate the accuracy every this many steps.
        threshold: the accuracy whose first lasting crossing is reported.
        stop_accuracy, stop_patience: a run stops early once it has converged, see
            :func:`~mha_ref.tutorial.training.train`; ``None`` = every run trains ``steps``.
        train_kwargs: passed to :func:`mha_ref.tutorial.training.train` (``lr``, ...).

    Returns:
        one :class:`LearningCurve` per ``(h, seed)``, ``h`` major. Cached when
        ``MHA_REF_CACHE_DIR`` is set.

    Raises:
        ValueError: if a head count does not divide ``embed_dim``, or ``eval_every`` is not in
            ``1 .. steps``.
    """
    for h in head_counts:
        if embed_dim % h:
            raise ValueError(f"head count {h} must divide embed_dim={embed_dim}")
    if not 1 <= eval_every <= steps:
        raise ValueError(f"eval_every must be in 1..steps={steps}, got {eval_every}")
    arguments = dict(
        head_counts=tuple(head_counts),
        embed_dim=embed_dim,
        seeds=tuple(seeds),
        steps=steps,
        eval_every=eval_every,
        threshold=threshold,
        stop_accuracy=stop_accuracy,
        stop_patience=stop_patience,
        train_kwargs=dict(train_kwargs),
    )
    return cached("learning_curves", arguments, lambda: _learning_curves(**arguments))


def _learning_curves(
    head_counts: tuple[int, ...],
    embed_dim: int,
    seeds: tuple[int, ...],
    steps: int,
    eval_every: int,
    threshold: float,
    stop_accuracy: float | None,
    stop_patience: int,
    train_kwargs: dict[str, Any],
) -> list[LearningCurve]:
    curves = []
    for h in head_counts:
        for seed in seeds:
            result = train(
                num_heads=h,
                embed_dim=embed_dim,
                seed=seed,
                steps=steps,
                eval_every=eval_every,
                stop_accuracy=stop_accuracy,
                stop_patience=stop_patience,
                **train_kwargs,
            )
            curves.append(
                LearningCurve(
                    num_heads=h,
                    head_dim=embed_dim // h,
                    seed=seed,
                    steps=[s for s, _ in result.eval_curve],
                    accuracy=[a for _, a in result.eval_curve],
                    final_accuracy=result.accuracy,
                    steps_to_threshold=steps_to_reach(result.eval_curve, threshold),
                    loss_curve=result.loss_curve,
                    offset_profile=result.offset_profile.tolist(),
                    entropy=result.entropy.tolist(),
                )
            )
    return curves


def truncate_curve(curve: LearningCurve, steps: int, threshold: float) -> LearningCurve:
    """The curve a run of only ``steps`` training steps would have given.

    Training is deterministic and the early stop looks only at past evaluations, so the first
    ``steps`` steps of a longer run are exactly a run of ``steps`` steps: same evaluations, same
    stop. This lets a comparison at a fixed budget reuse longer runs instead of training again.

    Args:
        curve: a :class:`LearningCurve`.
        steps: the budget; it must be an evaluated step of ``curve`` or lie after its last one
            (a run that stopped early is returned unchanged, apart from the missing probe).
        threshold: the accuracy of ``steps_to_threshold``, recomputed on the cut curve.

    Returns:
        a :class:`LearningCurve` with ``offset_profile`` and ``entropy`` set to ``None`` (the
        probe was taken at the end of the long run, not at ``steps``) and ``loss_curve`` cut
        to ``steps`` entries.

    Raises:
        ValueError: if ``steps`` is inside the curve but not one of its evaluated steps.
    """
    if steps < curve.steps[-1] and steps not in curve.steps:
        raise ValueError(
            f"steps={steps} is not an evaluated step of the curve (evaluated: {curve.steps[:3]}"
            f"...); choose a multiple of the evaluation interval"
        )
    kept = [(s, a) for s, a in zip(curve.steps, curve.accuracy, strict=True) if s <= steps]
    return LearningCurve(
        num_heads=curve.num_heads,
        head_dim=curve.head_dim,
        seed=curve.seed,
        steps=[s for s, _ in kept],
        accuracy=[a for _, a in kept],
        final_accuracy=kept[-1][1],
        steps_to_threshold=steps_to_reach(kept, threshold),
        loss_curve=curve.loss_curve[:steps],
    )


def learned_counts(
    sweep: dict[float, Sequence[LearningCurve]], learned: float
) -> list[dict[str, Any]]:
    """One row per learning rate and head count of a learning-rate sweep.

    Args:
        sweep: learning rate -> the curves trained at it (:func:`learning_curves`, or
            :func:`truncate_curve` of them), all with the same step budget.
        learned: the final accuracy at or above which a run counts as having learned the task.

    Returns:
        dicts with ``lr``, ``num_heads``, ``final_accuracy`` (per seed, in seed order),
        ``learned`` (how many seeds reached ``learned``) and ``seeds`` (how many ran).
    """
    rows = []
    for lr, curves in sweep.items():
        for h in dict.fromkeys(c.num_heads for c in curves):
            finals = [c.final_accuracy for c in curves if c.num_heads == h]
            rows.append(
                {
                    "lr": lr,
                    "num_heads": h,
                    "final_accuracy": finals,
                    "learned": sum(a >= learned for a in finals),
                    "seeds": len(finals),
                }
            )
    return rows


def summarize_curves(curves: Sequence[LearningCurve]) -> list[dict[str, Any]]:
    """One row per head count: steps to the threshold per seed and their median, final accuracy
    per seed, its mean and minimum. A seed that never reaches the threshold counts as ``None``
    and makes the median ``None``.
    """
    rows = []
    for h in dict.fromkeys(c.num_heads for c in curves):
        runs = [c for c in curves if c.num_heads == h]
        reached = [c.steps_to_threshold for c in runs]
        finals = [c.final_accuracy for c in runs]
        rows.append(
            {
                "num_heads": h,
                "head_dim": runs[0].head_dim,
                "steps_to_threshold": reached,
                "median_steps": None if None in reached else statistics.median(reached),
                "final_accuracy": finals,
                "final_mean": round(statistics.fmean(finals), 6),
                "final_min": min(finals),
            }
        )
    return rows


def plot_learning_curves(
    curves: Sequence[LearningCurve],
    *,
    threshold: float | None = 0.99,
    title: str = "Evaluation accuracy during training",
    xlabel: str = "training step",
    ylabel: str = "accuracy",
    heads_label: str = "h = {}",
    threshold_label: str = "threshold {:.2f}",
) -> Figure:
    """Accuracy against step: one colour per head count, one thin line per seed.

    ``threshold``, if given, is drawn as a dashed line. The legend names each head count once.
    """
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for

    use_cjk_font_for(title, xlabel, ylabel, heads_label, threshold_label)
    fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    colours = ("#2b6ca3", "#e07b39", "#3a7d44", "#8e44ad", "#c0392b", "#7f8c8d")
    head_counts = list(dict.fromkeys(c.num_heads for c in curves))
    for i, h in enumerate(head_counts):
        for j, curve in enumerate(c for c in curves if c.num_heads == h):
            ax.plot(
                curve.steps,
                curve.accuracy,
                color=colours[i % len(colours)],
                linewidth=1.2,
                alpha=0.85,
                label=heads_label.format(h) if j == 0 else None,
            )
    if threshold is not None:
        ax.axhline(
            threshold,
            color="grey",
            linestyle="--",
            linewidth=1,
            label=threshold_label.format(threshold),
        )
    ax.set_ylim(0, 1.03)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def plot_steps_to_threshold(
    rows: Sequence[dict[str, Any]],
    published: Sequence[dict[str, float]] | None = None,
    *,
    heads_label: str = "number of heads h",
    steps_label: str = "steps to reach 0.99 and stay",
    seeds_label: str = "one seed",
    median_label: str = "median over seeds",
    steps_title: str = "Tiny task: speed to learn (this build)",
    bleu_label: str = "BLEU (EN-DE newstest2013)",
    bleu_title: str = "Vaswani et al. 2017, Table 3 (A)",
    base_label: str = "base model",
) -> Figure:
    """Left: the steps each seed needed (:func:`summarize_curves` rows) against ``h``, with the
    median; right, if given, the published BLEU against ``h``
    (:func:`mha_ref.tutorial.head_count.draw_published`).

    The two panels measure different things (speed to learn a toy task; quality at convergence
    on translation); their titles must say so.
    """
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for
    from mha_ref.tutorial.head_count import draw_published

    use_cjk_font_for(
        heads_label, steps_label, seeds_label, median_label, steps_title, bleu_label, bleu_title,
        base_label,
    )
    panels = 2 if published else 1
    fig, axes = plt.subplots(
        1, panels, figsize=(4.8 * panels, 3.6), layout="constrained", squeeze=False
    )
    ax = axes[0, 0]
    hs = [row["num_heads"] for row in rows]
    for i, row in enumerate(rows):
        reached = [s for s in row["steps_to_threshold"] if s is not None]
        ax.scatter(
            [row["num_heads"]] * len(reached),
            reached,
            s=18,
            color="#e07b39",
            zorder=4,  # above the median's hollow marker, so a seed equal to it stays visible
            label=seeds_label if i == 0 else None,
        )
    medians = [(row["num_heads"], row["median_steps"]) for row in rows if row["median_steps"]]
    ax.plot(
        *zip(*medians, strict=True),
        marker="o",
        markersize=10,
        markerfacecolor="none",
        color="#2b6ca3",
        label=median_label,
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(hs, labels=[str(h) for h in hs])
    ax.set_ylim(bottom=0)
    ax.set_xlabel(heads_label)
    ax.set_ylabel(steps_label)
    ax.set_title(steps_title, fontsize=11)
    ax.legend(fontsize=8, loc="lower left")
    if published:
        draw_published(axes[0, 1], published, heads_label, bleu_label, bleu_title, 8, base_label)
    return fig


def plot_rate_sweep(
    rows: Sequence[dict[str, Any]],
    *,
    learned: float | None = None,
    title: str = "Final accuracy per learning rate and head count",
    heads_label: str = "number of heads h",
    accuracy_label: str = "final accuracy",
    rate_label: str = "lr = {:g}",
    learned_label: str = "learned: {:.2f}",
) -> Figure:
    """Final accuracy of every seed (:func:`learned_counts` rows) against ``h``, one colour per
    learning rate, the rates side by side around each ``h``; ``learned``, if given, dashed."""
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for

    use_cjk_font_for(title, heads_label, accuracy_label, rate_label, learned_label)
    fig, ax = plt.subplots(figsize=(6.0, 3.6), layout="constrained")
    colours = ("#2b6ca3", "#c0392b", "#3a7d44", "#8e44ad")
    rates = list(dict.fromkeys(r["lr"] for r in rows))
    head_counts = list(dict.fromkeys(r["num_heads"] for r in rows))
    width = 0.6 / max(len(rates), 1)
    for i, lr in enumerate(rates):
        for j, h in enumerate(head_counts):
            (row,) = [r for r in rows if r["lr"] == lr and r["num_heads"] == h]
            x = j + (i - (len(rates) - 1) / 2) * width
            ax.scatter(
                [x] * len(row["final_accuracy"]),
                row["final_accuracy"],
                s=22,
                color=colours[i % len(colours)],
                label=rate_label.format(lr) if j == 0 else None,
                zorder=3,
            )
    if learned is not None:
        ax.axhline(learned, color="grey", linestyle="--", linewidth=1,
                   label=learned_label.format(learned))
    ax.set_xticks(range(len(head_counts)), labels=[str(h) for h in head_counts])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(heads_label)
    ax.set_ylabel(accuracy_label)
    ax.set_title(title, fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="center right")
    return fig
