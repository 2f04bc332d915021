r"""Head importance during training: Michel et al.'s gate-gradient importance every few steps.

The training loop is :func:`mha_ref.tutorial.training.train`'s (same model, data, optimiser and
seeds, so the same trajectory); every ``eval_every`` steps it also measures each head's
importance :math:`I_h = \mathbb{E}_x |\partial\mathcal{L}(x)/\partial\xi_h|` at gates
:math:`\xi = 1` on the fixed evaluation set (:func:`mha_ref.tutorial.ablation.gradient_importance`)
and the accuracy on the same set. Measuring needs only a gradient with respect to the gates, so
the parameters and the optimiser are untouched by it.

Source: Michel, Levy, Neubig 2019, "Are Sixteen Heads Really Better than One?" (arXiv:1905.10650),
section 4.1 (importance, normalised per layer by its l2 norm over the heads) and section 6 (how
the important heads emerge during training).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from mha_ref.tutorial.ablation import gradient_importance
from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.tasks import make_table
from mha_ref.tutorial.training import (
    _build_model,
    _reproducible,
    accuracy_of,
    evaluation_set,
    train,
    train_step,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ImportanceCurve", "importance_curves", "plot_importance_curves"]


@dataclass
class ImportanceCurve:
    """One run of :func:`importance_curves`.

    Attributes:
        num_heads, seed: the run.
        steps: the evaluated steps ``(T,)``.
        accuracy: ``(T,)`` evaluation accuracy after each of them.
        importance: ``(T, H)`` nested lists, float: each head's importance at each step, divided
            by the l2 norm over the heads (Michel et al. sec. 4.1), so every row has norm 1.
        raw_norm: ``(T,)`` the l2 norm each row was divided by (how large the gradients were).
    """

    num_heads: int
    seed: int
    steps: list[int]
    accuracy: list[float]
    importance: list[list[float]]
    raw_norm: list[float]


def importance_curves(
    *,
    num_heads: int = 4,
    embed_dim: int = 16,
    seeds: Sequence[int] = (0, 1, 2),
    steps: int = 200,
    eval_every: int = 25,
    lr: float = 1e-2,
) -> list[ImportanceCurve]:
    r"""Train the tiny model once per seed and record each head's importance every few steps.

    Every other setting is :func:`~mha_ref.tutorial.training.train`'s default (the task of
    example 5). The evaluation set is the fixed one of ``train`` (``N = 1024`` sequences of
    ``L = 8`` tokens, int64), the same for every seed; importance and accuracy are measured on
    it after step ``eval_every``, ``2 * eval_every``, ... and after the last step.

    Args:
        num_heads: heads ``H`` of the model; must divide ``embed_dim``.
        embed_dim: the model width.
        seeds: training seeds (initialisation and training data), at least one.
        steps: training steps of every run (no early stop).
        eval_every: measure every this many steps, in ``1 .. steps``.
        lr: Adam's learning rate.

    Returns:
        one :class:`ImportanceCurve` per seed, in seed order. Cached when ``MHA_REF_CACHE_DIR``
        is set (keyed by this module's code and the arguments).

    Raises:
        ValueError: if ``num_heads`` does not divide ``embed_dim``, ``seeds`` is empty, or
            ``steps`` / ``eval_every`` are out of range.

    Source: Michel et al. 2019 (arXiv:1905.10650), sec. 4.1 (importance) and sec. 6 (its
    evolution during training).
    """
    if num_heads < 1 or embed_dim % num_heads:
        raise ValueError(
            f"num_heads must be >= 1 and divide embed_dim={embed_dim}, got {num_heads}; "
            "choose a divisor of embed_dim"
        )
    if not seeds:
        raise ValueError("seeds must name at least one seed, got an empty sequence")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1, got {steps!r}")
    if not isinstance(eval_every, int) or not 1 <= eval_every <= steps:
        raise ValueError(f"eval_every must be an int in 1..steps={steps}, got {eval_every!r}")
    arguments = dict(
        num_heads=num_heads,
        embed_dim=embed_dim,
        seeds=tuple(seeds),
        steps=steps,
        eval_every=eval_every,
        lr=lr,
    )
    return cached("importance_curves", arguments, lambda: _importance_curves(**arguments))


def _importance_curves(
    num_heads: int, embed_dim: int, seeds: tuple[int, ...], steps: int, eval_every: int, lr: float
) -> list[ImportanceCurve]:
    return [_one_run(num_heads, embed_dim, seed, steps, eval_every, lr) for seed in seeds]


def _one_run(
    num_heads: int, embed_dim: int, seed: int, steps: int, eval_every: int, lr: float
) -> ImportanceCurve:
    import inspect

    defaults = {
        name: p.default
        for name, p in inspect.signature(train).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    config = {**defaults, "num_heads": num_heads, "embed_dim": embed_dim, "seed": seed, "lr": lr}
    table = make_table(config["vocab_size"], config["table_seed"])  # (V, V)
    measured_steps, accuracy, importance, norms = [], [], [], []
    with _reproducible():
        torch.manual_seed(seed)
        model = _build_model(config)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        data = torch.Generator().manual_seed(seed)
        eval_tokens, eval_targets = evaluation_set(config, table)  # (N, L), (N, L)
        for step in range(1, steps + 1):
            train_step(model, optimizer, config, table, data)  # train()'s own step
            if step % eval_every == 0 or step == steps:
                raw = gradient_importance(model, eval_tokens, eval_targets)  # (H,) float64
                norm = float(raw.norm())
                measured_steps.append(step)
                accuracy.append(accuracy_of(model, eval_tokens, eval_targets))
                importance.append([round(float(v), 6) for v in raw / norm])
                norms.append(round(norm, 8))
    return ImportanceCurve(num_heads, seed, measured_steps, accuracy, importance, norms)


def plot_importance_curves(
    curves: Sequence[ImportanceCurve],
    *,
    title: str = "Head importance during training",
    xlabel: str = "training step",
    importance_label: str = "importance (l2-normalised over heads)",
    accuracy_label: str = "accuracy",
    seed_label: str = "seed {}",
    head_label: str = "head {}",
) -> Figure:
    """One panel per seed: each head's normalised importance against step (one colour per
    head) and, dashed on a second axis, the evaluation accuracy."""
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for

    use_cjk_font_for(title, xlabel, importance_label, accuracy_label, seed_label, head_label)
    colours = (
        "#2b6ca3",
        "#e07b39",
        "#3a7d44",
        "#8e44ad",
        "#c0392b",
        "#7f8c8d",
        "#b7950b",
        "#1abc9c",
    )
    fig, axes = plt.subplots(
        1,
        len(curves),
        figsize=(3.4 * len(curves), 3.4),
        layout="constrained",
        squeeze=False,
        sharey=True,
    )
    for ax, curve in zip(axes[0], curves, strict=True):
        rows = torch.tensor(curve.importance)  # (T, H)
        for h in range(curve.num_heads):
            ax.plot(
                curve.steps,
                rows[:, h],
                color=colours[h % len(colours)],
                linewidth=1.4,
                label=head_label.format(h),
            )
        ax.set_ylim(0, 1.05)
        ax.set_xlabel(xlabel)
        ax.set_title(seed_label.format(curve.seed), fontsize=10)
        ax.grid(True, alpha=0.3)
        twin = ax.twinx()
        twin.plot(
            curve.steps,
            curve.accuracy,
            color="black",
            linestyle="--",
            linewidth=1,
            label=accuracy_label,
        )
        twin.set_ylim(0, 1.05)
        if ax is axes[0, -1]:
            twin.set_ylabel(accuracy_label)
        else:
            twin.set_yticklabels([])
    axes[0, 0].set_ylabel(importance_label)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    twin_handles, twin_labels = twin.get_legend_handles_labels()
    fig.legend(
        handles + twin_handles,
        labels + twin_labels,
        loc="outside lower center",
        ncols=len(handles) + 1,
        fontsize=8,
    )
    fig.suptitle(title, fontsize=11)
    return fig
