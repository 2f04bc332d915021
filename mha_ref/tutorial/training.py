"""Seeded, deterministic training of the tiny model on the lookup-table task.

**What is measured.** Accuracy on a fixed evaluation set, the loss curve, the per-head attention
weights on a fixed probe batch, the per-head entropy, and for each head the offset it attends to
most (:class:`mha_ref.tutorial.heads.HeadSummary`).

**Determinism.** Every run is seeded, uses one CPU thread and
``torch.use_deterministic_algorithms(True)`` (restored afterwards), and leaves the global random
state untouched (``torch.random.fork_rng``), so the same arguments give the same numbers.
Results are cached on disk by :mod:`mha_ref.tutorial.cache` when ``MHA_REF_CACHE_DIR`` is set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.heads import (
    HeadSummary,
    head_entropy,
    offset_profile,
    summarize_heads,
    uniform_entropy,
)
from mha_ref.tutorial.tasks import (
    IGNORE_INDEX,
    TinyAttentionModel,
    check_offsets,
    make_batch,
    make_table,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["TrainResult", "plot_loss_curves", "train"]

_PROBE_SEED = 2_000_003  # fixed: every run is probed and evaluated on the same sequences
_EVAL_SEED = 1_000_003


# ------------------------------------------------------------------------------------------------


@dataclass
class TrainResult:
    """Everything one :func:`train` run measured.

    Attributes:
        config: the arguments of the run.
        accuracy: fraction of correct predictions on the fixed evaluation set (positions with a
            target only).
        loss_curve: training loss after each step.
        num_parameters: parameters of the whole model; ``attention_parameters`` of the attention
            layer alone.
        probe_tokens: ``(P, L)`` the first probe sequences; ``probe_weights`` ``(P, H, L, L)``
            their per-head attention weights.
        offset_profile: ``(H, L)`` mean weight per head on each offset ``0, -1, -2, ...``
            (column ``d`` is offset ``-d``), over the whole probe batch.
        entropy: ``(H,)`` mean row entropy per head in nats; ``max_entropy``: the entropy of a
            head spreading evenly over all allowed keys.
        heads: one :class:`~mha_ref.tutorial.heads.HeadSummary` per head.
        table: the task's lookup table ``(V, V)``.
        eval_curve: ``(step, accuracy)`` on the evaluation set every ``eval_every`` steps (and
            after the last step); empty when ``eval_every`` is 0.
        model_state: the trained model's ``state_dict`` (float32 tensors); :meth:`model`
            rebuilds the model from it, for interventions such as ablation.
    """

    config: dict[str, Any]
    accuracy: float
    loss_curve: list[float]
    num_parameters: int
    attention_parameters: int
    probe_tokens: torch.Tensor
    probe_weights: torch.Tensor
    offset_profile: torch.Tensor
    entropy: torch.Tensor
    max_entropy: float
    heads: list[HeadSummary]
    table: torch.Tensor = field(repr=False)
    eval_curve: list[tuple[int, float]] = field(default_factory=list)
    model_state: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)

    def relations_found(self) -> list[int]:
        """Distinct offsets that some focused head attends to, nearest first."""
        return sorted({h.offset for h in self.heads if h.focused}, reverse=True)

    def relations_missing(self) -> list[int]:
        """The task's offsets that no focused head attends to."""
        found = set(self.relations_found())
        return [o for o in self.config["offsets"] if o not in found]

    def model(self) -> TinyAttentionModel:
        """The trained model, rebuilt from ``model_state``, in evaluation mode, on the CPU."""
        model = _build_model(self.config)
        model.load_state_dict(self.model_state)
        return model.eval()

    def eval_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed evaluation set ``(tokens, targets)``, each ``(eval_size, seq_len)``."""
        return evaluation_set(self.config, self.table)


@contextlib.contextmanager
def _reproducible(threads: int = 1) -> Iterator[None]:
    """Fixed thread count, deterministic kernels, global RNG state restored on exit."""
    old_threads = torch.get_num_threads()
    old_deterministic = torch.are_deterministic_algorithms_enabled()
    old_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.use_deterministic_algorithms(old_deterministic, warn_only=old_warn_only)
        torch.set_num_threads(old_threads)


def _build_model(config: dict[str, Any]) -> TinyAttentionModel:
    """A :class:`~mha_ref.tutorial.tasks.TinyAttentionModel` of the sizes in a run's config."""
    return TinyAttentionModel(
        config["vocab_size"],
        config["seq_len"],
        config["embed_dim"],
        config["num_heads"],
        config["mlp_hidden"],
    )


def train(
    *,
    num_heads: int = 4,
    embed_dim: int = 16,
    vocab_size: int = 16,
    seq_len: int = 8,
    offsets: tuple[int, int] = (-1, -2),
    steps: int = 200,
    batch_size: int = 64,
    lr: float = 1e-2,
    mlp_hidden: int = 64,
    seed: int = 0,
    table_seed: int = 0,
    eval_size: int = 1024,
    probe_size: int = 256,
    probe_keep: int = 4,
    eval_every: int = 0,
    stop_accuracy: float | None = None,
    stop_patience: int = 4,
) -> TrainResult:
    """Train :class:`~mha_ref.tutorial.tasks.TinyAttentionModel` on the lookup-table task.

    CPU, seeded, deterministic.

    Args:
        num_heads, embed_dim, vocab_size, seq_len, mlp_hidden: the model and task sizes.
        offsets: the two relations the target depends on (key minus query position).
        steps, batch_size, lr: Adam steps, sequences per step, learning rate.
        seed: model initialisation and training data; ``table_seed``: the lookup table.
        eval_size: sequences in the fixed evaluation set (the same for every ``seed``).
        probe_size: sequences whose attention weights are summarised (fixed, the same for every
            ``seed``); ``probe_keep``: how many of them to return with their weights.
        eval_every: also measure the evaluation accuracy every this many steps (a learning
            curve, ``TrainResult.eval_curve``); 0 = only at the end.
        stop_accuracy, stop_patience: stop before ``steps`` once the evaluation accuracy has
            been at least ``stop_accuracy`` at ``stop_patience`` evaluations in a row (a
            converged run); ``None`` = always run ``steps``. Needs ``eval_every``.

    Returns:
        a :class:`TrainResult`. Cached on disk when ``MHA_REF_CACHE_DIR`` is set.
    """
    arguments = dict(
        num_heads=num_heads,
        embed_dim=embed_dim,
        vocab_size=vocab_size,
        seq_len=seq_len,
        offsets=tuple(offsets),
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        mlp_hidden=mlp_hidden,
        seed=seed,
        table_seed=table_seed,
        eval_size=eval_size,
        probe_size=probe_size,
        probe_keep=probe_keep,
        eval_every=eval_every,
        stop_accuracy=stop_accuracy,
        stop_patience=stop_patience,
    )
    if not isinstance(eval_every, int) or eval_every < 0:
        raise ValueError(f"eval_every must be an int >= 0 (0 = no curve), got {eval_every!r}")
    if stop_accuracy is not None and not eval_every:
        raise ValueError("stop_accuracy needs eval_every > 0 (the accuracy it stops on)")
    check_offsets(arguments["offsets"], seq_len)
    return cached("train", arguments, lambda: _train(**arguments))


def _train(**config: Any) -> TrainResult:
    offsets = config["offsets"]
    start = -min(offsets)
    table = make_table(config["vocab_size"], config["table_seed"])  # (V, V)
    with _reproducible():
        torch.manual_seed(config["seed"])
        model = _build_model(config)
        optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
        data = torch.Generator().manual_seed(config["seed"])
        eval_tokens, eval_targets = evaluation_set(config, table)  # (N_eval, L), (N_eval, L)
        loss_curve, eval_curve = [], []
        for step in range(1, config["steps"] + 1):
            loss = train_step(model, optimizer, config, table, data)
            loss_curve.append(round(loss, 6))
            every = config["eval_every"]
            if every and (step % every == 0 or step == config["steps"]):
                eval_curve.append((step, accuracy_of(model, eval_tokens, eval_targets)))
                if _converged(eval_curve, config["stop_accuracy"], config["stop_patience"]):
                    break

        model.eval()
        with torch.no_grad():
            accuracy = accuracy_of(model, eval_tokens, eval_targets)

            probe_gen = torch.Generator().manual_seed(_PROBE_SEED)
            probe_tokens, _ = make_batch(
                config["probe_size"], config["seq_len"], table, probe_gen, offsets
            )  # (P, L)
            _, weights = model(probe_tokens)  # (P, H, L, L)

    keep = config["probe_keep"]
    return TrainResult(
        config=dict(config),
        accuracy=accuracy,
        loss_curve=loss_curve,
        num_parameters=sum(p.numel() for p in model.parameters()),
        attention_parameters=sum(p.numel() for p in model.attention.parameters()),
        probe_tokens=probe_tokens[:keep].clone(),  # (keep, L)
        probe_weights=weights[:keep].clone(),  # (keep, H, L, L)
        offset_profile=offset_profile(weights, start).float(),  # (H, L)
        entropy=head_entropy(weights, start).float(),  # (H,)
        max_entropy=uniform_entropy(config["seq_len"], start),
        heads=summarize_heads(weights, start),
        table=table,
        eval_curve=eval_curve,
        model_state={k: v.detach().clone() for k, v in model.state_dict().items()},
    )


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    config: dict[str, Any],
    table: torch.Tensor,
    data: torch.Generator,
) -> float:
    """One step of :func:`train`'s loop: a fresh batch, the loss, its gradient, an update.

    Args:
        model: the model being trained (:func:`train`'s ``TinyAttentionModel``).
        optimizer: its optimiser.
        config: the run's configuration (:func:`train`'s arguments): ``batch_size``,
            ``seq_len`` and ``offsets`` are read.
        table: the task's ``(vocab_size, vocab_size)`` table (:func:`make_table`).
        data: the generator the training batches are drawn from (advanced by one batch).

    Returns:
        float: the batch's cross-entropy loss before the update (nats per predicted token).
    """
    tokens, targets = make_batch(
        config["batch_size"], config["seq_len"], table, data, config["offsets"]
    )  # (B, L), (B, L)
    logits, _ = model(tokens)  # (B, L, V)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def _converged(
    eval_curve: list[tuple[int, float]], stop_accuracy: float | None, patience: int
) -> bool:
    """Whether the last ``patience`` evaluations all reached ``stop_accuracy``."""
    if stop_accuracy is None or len(eval_curve) < patience:
        return False
    return all(accuracy >= stop_accuracy for _, accuracy in eval_curve[-patience:])


def evaluation_set(config: dict[str, Any], table: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The fixed evaluation sequences of a run with ``config``: ``(N_eval, L)`` tokens, targets.

    The same for every training seed (drawn from a fixed generator).
    """
    eval_gen = torch.Generator().manual_seed(_EVAL_SEED)
    return make_batch(
        config["eval_size"], config["seq_len"], table, eval_gen, config["offsets"]
    )  # (N_eval, L), (N_eval, L)


def accuracy_of(
    model: TinyAttentionModel, tokens: torch.Tensor, targets: torch.Tensor
) -> float:
    """Fraction of correct predictions (positions with a target), rounded to 6 digits.

    Args:
        model: the model; it is run without gradients and its training mode is left as found.
        tokens, targets: ``(N, L)`` token ids and targets (``IGNORE_INDEX`` = no target).
    """
    with torch.no_grad():
        logits, _ = model(tokens)  # (N, L, V)
    return correct_fraction(logits, targets)


def correct_fraction(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Accuracy of ``logits`` ``(N, L, V)`` against ``targets`` ``(N, L)``, rounded to 6 digits."""
    has_target = targets != IGNORE_INDEX  # (N, L)
    correct = logits.argmax(dim=-1)[has_target] == targets[has_target]  # (n,)
    return round(float(correct.double().mean()), 6)



def plot_loss_curves(
    curves: dict[str, Sequence[float]],
    *,
    title: str = "Training loss",
    xlabel: str = "training step",
    ylabel: str = "cross-entropy loss (log scale)",
) -> Figure:
    """Loss against training step, one line per entry of ``curves`` (label -> losses), log y.

    The y axis is logarithmic, with labels at 1, 2 and 5 times each power of ten, so the values
    between the powers can be read; say so in ``ylabel``.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    from mha_ref.tutorial.fonts import use_cjk_font_for

    use_cjk_font_for(title, xlabel, ylabel, list(curves))
    fig, ax = plt.subplots(figsize=(5.5, 3), layout="constrained")
    for label, losses in curves.items():
        ax.plot(range(1, len(losses) + 1), losses, label=label)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
    ax.grid(True, which="major", axis="y", alpha=0.3)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    if len(curves) > 1:
        ax.legend(fontsize=8)
    return fig




