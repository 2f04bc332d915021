"""Training the two-layer attention-only model of :mod:`mha_ref.tutorial.induction`.

Seeded, one CPU thread, deterministic kernels (``mha_ref.tutorial.training._reproducible``), and
cached on disk (:mod:`mha_ref.tutorial.cache`), so the second language of the docs build and the
tests reuse the first build's model. The loss curve shows the phase change of Olsson et al. 2022
("In-context Learning and Induction Heads", arXiv:2209.11895, section 3).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.induction import (
    _EVAL_SEED,
    POSITIONS,
    AttentionOnlyTransformer,
    check_periods,
    make_repeated_batch,
    second_copy_accuracy,
    second_copy_mask,
)
from mha_ref.tutorial.training import _reproducible

__all__ = ["InductionResult", "stopping_step", "train_induction"]


# ------------------------------------------------------------------------------------------------
# training
# ------------------------------------------------------------------------------------------------


@dataclass
class InductionResult:
    """One :func:`train_induction` run.

    Attributes:
        config: the arguments of the run.
        state_dict: the trained parameters (rebuild the model with :meth:`model`).
        loss_curve: training loss (second-copy positions) after each step.
        accuracy_curve: second-copy accuracy of each training batch.
        seconds: wall time of the training loop (not reproducible; not for printing).
    """

    config: dict[str, Any]
    state_dict: dict[str, torch.Tensor] = field(repr=False)
    loss_curve: list[float]
    accuracy_curve: list[float]
    seconds: float

    def model(self) -> AttentionOnlyTransformer:
        """The trained model, in eval mode."""
        model = _build(self.config)
        model.load_state_dict(self.state_dict)
        return model.eval()

    def phase_change_step(self, threshold: float = 0.5, window: int = 20) -> int | None:
        """First step (1-based) at which the mean batch accuracy over ``window`` steps ends at
        or above ``threshold``; ``None`` if it never does."""
        curve = torch.tensor(self.accuracy_curve, dtype=torch.float64)  # (steps,)
        if len(curve) < window:
            return None
        smooth = curve.unfold(0, window, 1).mean(dim=1)  # (steps - window + 1,)
        above = (smooth >= threshold).nonzero()  # (k, 1)
        return int(above[0, 0]) + window if len(above) else None

    def converged_step(self) -> int | None:
        """The step at which the run met its stopping rule (:func:`stopping_step` with the
        ``stop_accuracy``, ``stop_window`` and ``stop_evaluations`` of :attr:`config`), the
        step it stopped at; ``None`` if it ran to its cap (``steps``) without meeting it, or
        was trained without a rule."""
        c = self.config
        if c.get("stop_accuracy") is None:
            return None
        return stopping_step(
            self.accuracy_curve, c["stop_accuracy"], c["stop_window"], c["stop_evaluations"]
        )

    def evaluation_batch(self, size: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
        """A fixed batch of new sequences (the same for every seed): ``(size, L)``, ``(size,)``."""
        c = self.config
        generator = torch.Generator().manual_seed(_EVAL_SEED)
        return make_repeated_batch(
            size, c["seq_len"], c["vocab_size"], generator, c["min_period"], c["max_period"]
        )


def stopping_step(
    accuracy_curve: Sequence[float], threshold: float, window: int, evaluations: int
) -> int | None:
    """The first step at which a training run's accuracy has stayed at or above a threshold.

    Every ``window`` steps the run is evaluated: the mean of the last ``window`` batch
    accuracies (each batch holds new sequences, scored before the step trains on them, so it is
    a held-out measure). The rule holds at the end of the first evaluation that makes
    ``evaluations`` evaluations in a row at or above ``threshold``. The stopping rule of
    example 20, in the spirit of early stopping's patience (Prechelt 1998, "Early Stopping -
    But When?"), here on the task accuracy rather than on a validation loss.

    Args:
        accuracy_curve: ``(steps,)`` batch accuracies, fractions in ``[0, 1]``, one per
            training step (:attr:`InductionResult.accuracy_curve`).
        threshold: the accuracy to stay at or above, a fraction in ``(0, 1]``.
        window: steps per evaluation, at least 1.
        evaluations: evaluations in a row that must reach ``threshold``, at least 1.

    Returns:
        The step (1-based; a multiple of ``window``) at which the rule first holds, or ``None``
        if it never holds within the curve.

    Raises:
        ValueError: ``threshold`` is outside ``(0, 1]``, or ``window`` or ``evaluations`` is
            below 1.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got threshold={threshold}")
    if window < 1 or evaluations < 1:
        raise ValueError(
            f"window and evaluations must be at least 1, got window={window}, "
            f"evaluations={evaluations}"
        )
    in_a_row = 0
    for end in range(window, len(accuracy_curve) + 1, window):
        mean = sum(accuracy_curve[end - window : end]) / window  # one evaluation
        in_a_row = in_a_row + 1 if mean >= threshold else 0
        if in_a_row >= evaluations:
            return end
    return None


def _build(config: dict[str, Any]) -> AttentionOnlyTransformer:
    return AttentionOnlyTransformer(
        config["vocab_size"],
        config["seq_len"],
        config["embed_dim"],
        config["num_heads"],
        position=config.get("position", "learned"),
    )


def train_induction(
    *,
    vocab_size: int = 24,
    seq_len: int = 20,
    min_period: int = 3,
    max_period: int = 10,
    embed_dim: int = 32,
    num_heads: int = 2,
    steps: int = 600,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    position: str = "learned",
    stop_accuracy: float | None = None,
    stop_window: int = 20,
    stop_evaluations: int = 3,
) -> InductionResult:
    """Train the two-layer :class:`~mha_ref.tutorial.induction.AttentionOnlyTransformer`.

    The data come from :func:`~mha_ref.tutorial.induction.make_repeated_batch`.

    CPU, one thread, seeded, deterministic (Adam; next-token cross-entropy on the second-copy
    positions). Cached on disk when ``MHA_REF_CACHE_DIR`` is set.

    ``position`` picks the model's position scheme (one of
    :data:`~mha_ref.tutorial.induction.POSITIONS`); the default ``"learned"`` is example 10's
    model, and for one seed every scheme starts from the same other weights and sees the same
    training batches.

    With ``stop_accuracy`` set, training stops early, at the first step at which
    :func:`stopping_step` (with ``stop_accuracy``, ``stop_window``, ``stop_evaluations``) holds
    on the batch accuracies; ``steps`` is then the cap. Up to that step the run is the same as
    one without the rule (same weights, same batches). Without it (the default) the run trains
    ``steps`` steps.

    Returns:
        an :class:`InductionResult` (its :meth:`~InductionResult.converged_step` says where the
        rule held).

    Raises:
        ValueError: an unknown ``position``, periods that do not fit ``seq_len``,
            ``stop_accuracy`` outside ``(0, 1]``, or ``stop_window`` or ``stop_evaluations``
            below 1.
    """
    arguments = dict(
        vocab_size=vocab_size,
        seq_len=seq_len,
        min_period=min_period,
        max_period=max_period,
        embed_dim=embed_dim,
        num_heads=num_heads,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        position=position,
    )
    if stop_accuracy is not None:
        if not 0.0 < stop_accuracy <= 1.0:
            raise ValueError(f"stop_accuracy must be in (0, 1], got stop_accuracy={stop_accuracy}")
        if stop_window < 1 or stop_evaluations < 1:
            raise ValueError(
                "stop_window and stop_evaluations must be at least 1, got "
                f"stop_window={stop_window}, stop_evaluations={stop_evaluations}"
            )
        arguments.update(
            stop_accuracy=stop_accuracy,
            stop_window=stop_window,
            stop_evaluations=stop_evaluations,
        )
    if position not in POSITIONS:
        raise ValueError(f"position must be one of {POSITIONS}, got position={position!r}")
    check_periods(seq_len, vocab_size, min_period, max_period)
    return cached("train_induction", arguments, lambda: _train_induction(arguments))


def _train_induction(config: dict[str, Any]) -> InductionResult:
    begin = time.perf_counter()
    with _reproducible():
        torch.manual_seed(config["seed"])
        model = _build(config)
        optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
        data = torch.Generator().manual_seed(config["seed"])
        loss_curve, accuracy_curve = [], []
        for _ in range(config["steps"]):
            tokens, periods = make_repeated_batch(
                config["batch_size"],
                config["seq_len"],
                config["vocab_size"],
                data,
                config["min_period"],
                config["max_period"],
            )  # (N, L), (N,)
            logits, _ = model(tokens)  # (N, L, V)
            queries = second_copy_mask(periods, config["seq_len"])[:, :-1]  # (N, L - 1)
            loss = F.cross_entropy(logits[:, :-1][queries], tokens[:, 1:][queries])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_curve.append(round(loss.item(), 6))
            accuracy_curve.append(second_copy_accuracy(logits.detach(), tokens, periods))
            if (
                config.get("stop_accuracy") is not None
                and len(accuracy_curve) % config["stop_window"] == 0
                and stopping_step(
                    accuracy_curve,
                    config["stop_accuracy"],
                    config["stop_window"],
                    config["stop_evaluations"],
                )
            ):
                break  # the rule holds at this step: stop (it held at no earlier step)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return InductionResult(
        config=dict(config),
        state_dict=state,
        loss_curve=loss_curve,
        accuracy_curve=accuracy_curve,
        seconds=time.perf_counter() - begin,
    )
