r"""What each head *does*, measured by intervening on it: ablation, importance, pruning.

Where a head looks (its attention weights, the QK circuit: :mod:`mha_ref.tutorial.heads`) does
not say what it passes on (its values and output projection, the OV circuit). Two heads that look
at the same key can write different things, so a head's contribution is measured by changing it
and watching the model's accuracy:

* **zero ablation** (head masking): multiply the head's slice of the context (the per-head
  attention output, before ``out_proj``) by a gate :math:`\xi_h = 0`;
* **mean ablation**: replace that slice by its mean over the evaluation sequences, so the
  read-out still gets a typical input but nothing that depends on the sequence;
* **gradient importance**: :math:`I_h = \mathbb{E}_x \left|\partial \mathcal{L}(x) / \partial
  \xi_h\right|` at :math:`\xi = 1` (Michel et al. 2019, eq. 2), a first-order ranking proxy:
  once the loss is near zero it is far smaller than the loss increase that removing the head
  actually causes (:func:`loss_without`), so the report gives both;
* **confidence**: the mean over queries of the head's largest attention weight (Voita et al.
  2019); descriptive like the weights, shown beside the interventions to compare;
* **pruning curve**: accuracy as heads are removed one by one, least important first.

The gated forward pass recomputes the model's attention with the package's public functions
(:func:`mha_ref.split_heads`, :func:`mha_ref.scaled_dot_product_attention`,
:func:`mha_ref.merge_heads`), so the gate sits on a named tensor; with every gate at 1 it
equals the model's own forward pass exactly.

Sources: Michel, Levy and Neubig 2019, "Are Sixteen Heads Really Better than One?",
arXiv:1905.10650 (head masking, eq. 1-2, pruning by importance); Voita et al. 2019, "Analyzing
Multi-Head Self-Attention", arXiv:1905.09418 (confidence, head pruning).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from mha_ref.functional import merge_heads, scaled_dot_product_attention, split_heads
from mha_ref.masks import causal_mask
from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.tasks import IGNORE_INDEX, TinyAttentionModel
from mha_ref.tutorial.training import _reproducible, correct_fraction, train

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from mha_ref.tutorial.training import TrainResult

__all__ = [
    "HeadReport",
    "gated_forward",
    "gradient_importance",
    "head_confidence",
    "head_means",
    "accuracy_without",
    "loss_without",
    "ablation_report",
    "chance_accuracy",
    "one_token_accuracy",
    "removable_heads",
    "width_heads_grid",
    "plot_pruning_curve",
    "pruning_curve",
]


# ------------------------------------------------------------------------------------------------
# the gated forward pass
# ------------------------------------------------------------------------------------------------


def gated_forward(
    model: TinyAttentionModel,
    tokens: torch.Tensor,
    head_gate: torch.Tensor | None = None,
    head_replacement: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The model's forward pass with a gate on each head's context before ``out_proj``.

    Math: :math:`\mathrm{out} = W^O\,\mathrm{Concat}_h\big(\xi_h\,c_h + (1 - \xi_h)\,r_h\big)
    + b^O`, where :math:`c_h` is head :math:`h`'s context (its attention weights times its
    values) and :math:`r_h` the replacement (zero unless ``head_replacement`` is given).

    Args:
        model: a :class:`~mha_ref.tutorial.tasks.TinyAttentionModel` (its attention layer must
            use the default packed projections with biases, as the tiny model does).
        tokens: token ids.
        head_gate: the gates :math:`\xi`; ``None`` = all ones. Float, on the model's device.
        head_replacement: what a gated-off head is replaced by (e.g. :func:`head_means`);
            ``None`` = zeros. Broadcastable to the context.

    Shape:
        - tokens: ``(N, L)``.
        - head_gate: ``(H,)`` for all sequences, or ``(N, H)`` one gate per sequence.
        - head_replacement: broadcastable to ``(N, H, L, head_dim)``, e.g. ``(H, L, head_dim)``.
        - Returns: logits ``(N, L, V)`` and the per-head attention weights ``(N, H, L, L)``.

    Raises:
        ValueError: if ``head_gate`` does not have ``H`` entries in its last dimension.
    """
    attention = model.attention
    num_heads = attention.num_heads
    if head_gate is not None and head_gate.shape[-1] != num_heads:
        raise ValueError(
            f"head_gate must have num_heads={num_heads} entries in its last dimension, "
            f"got shape {tuple(head_gate.shape)}"
        )
    seq_len = tokens.shape[1]
    positions = torch.arange(seq_len, device=tokens.device)  # (L,)
    x = model.token_embedding(tokens) + model.position_embedding(positions)  # (N, L, E)
    w_q, w_k, w_v = attention.projection_weights()  # 3 x (E, E)
    b_q, b_k, b_v = attention.projection_biases()  # 3 x (E,)
    queries = split_heads(F.linear(x, w_q, b_q), num_heads)  # (N, H, L, d_k)
    keys = split_heads(F.linear(x, w_k, b_k), num_heads)  # (N, H, L, d_k)
    values = split_heads(F.linear(x, w_v, b_v), num_heads)  # (N, H, L, d_k)
    may_attend = causal_mask(seq_len, device=tokens.device)  # (L, L), True = may attend
    context, weights = scaled_dot_product_attention(
        queries, keys, values, attn_mask=may_attend, return_weights=True
    )  # (N, H, L, d_k), (N, H, L, L)
    if head_gate is not None:
        gate = head_gate.reshape(-1, num_heads, 1, 1)  # (N or 1, H, 1, 1)
        context = context * gate  # (N, H, L, d_k)
        if head_replacement is not None:
            context = context + (1 - gate) * head_replacement  # (N, H, L, d_k)
    merged = merge_heads(context)  # (N, L, E)
    return model.readout(attention.out_proj(merged)), weights  # (N, L, V), (N, H, L, L)


def head_means(model: TinyAttentionModel, tokens: torch.Tensor) -> torch.Tensor:
    """Each head's context averaged over the sequences ``tokens`` ``(N, L)``: ``(H, L, d_k)``.

    The mean is taken per position (position 0, which can only see itself, keeps its own mean);
    it is the replacement of mean ablation.
    """
    captured: dict[str, torch.Tensor] = {}

    def keep_context(module: torch.nn.Module, inputs: tuple[torch.Tensor]) -> None:
        captured["merged"] = inputs[0]  # (N, L, E), the heads' contexts side by side

    hook = model.attention.out_proj.register_forward_pre_hook(keep_context)
    try:
        with torch.no_grad():
            gated_forward(model, tokens)
    finally:
        hook.remove()
    context = split_heads(captured["merged"], model.attention.num_heads)  # (N, H, L, d_k)
    return context.mean(dim=0)  # (H, L, d_k)


# ------------------------------------------------------------------------------------------------
# measurements
# ------------------------------------------------------------------------------------------------


def accuracy_without(
    model: TinyAttentionModel,
    tokens: torch.Tensor,
    targets: torch.Tensor,
    removed: tuple[int, ...] | list[int] = (),
    replacement: torch.Tensor | None = None,
) -> float:
    """Accuracy with the heads in ``removed`` gated off (zero, or ``replacement`` if given).

    Args:
        model, tokens, targets: the model and the evaluation set ``(N, L)``, ``(N, L)``.
        removed: indices of the heads to remove; ``()`` = the full model.
        replacement: ``(H, L, d_k)`` from :func:`head_means` for mean ablation; ``None`` = zero.

    Returns:
        the fraction of correct predictions at positions with a target, rounded to 6 digits.
    """
    gate = torch.ones(model.attention.num_heads)  # (H,)
    gate[list(removed)] = 0.0
    with torch.no_grad():
        logits, _ = gated_forward(model, tokens, gate, replacement)  # (N, L, V)
    return correct_fraction(logits, targets)


def loss_without(
    model: TinyAttentionModel,
    tokens: torch.Tensor,
    targets: torch.Tensor,
    removed: tuple[int, ...] | list[int] = (),
) -> float:
    """Mean cross-entropy loss with the heads in ``removed`` zeroed (``()`` = the full model).

    Returns:
        the loss over the positions with a target, rounded to 6 significant digits.
    """
    gate = torch.ones(model.attention.num_heads)  # (H,)
    gate[list(removed)] = 0.0
    with torch.no_grad():
        logits, _ = gated_forward(model, tokens, gate)  # (N, L, V)
    loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=IGNORE_INDEX)
    return float(f"{loss.item():.6g}")


def gradient_importance(
    model: TinyAttentionModel, tokens: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    r"""Michel et al.'s head importance :math:`I_h = \mathbb{E}_x |\partial\mathcal{L}(x) /
    \partial\xi_h|` at :math:`\xi = 1`, with one loss :math:`\mathcal{L}(x)` per sequence.

    Each sequence gets its own gates ``(N, H)``, so one backward pass of the summed loss gives
    every per-sequence derivative at once (sequence ``n`` depends only on gate row ``n``).

    Args:
        model, tokens, targets: the model and the sequences ``(N, L)``, ``(N, L)``.

    Returns:
        ``(H,)`` float64: the mean absolute derivative per head (the model's parameters get no
        gradient).
    """
    gates = torch.ones(tokens.shape[0], model.attention.num_heads, requires_grad=True)  # (N, H)
    logits, _ = gated_forward(model, tokens, gates)  # (N, L, V)
    losses = F.cross_entropy(
        logits.transpose(1, 2), targets, ignore_index=IGNORE_INDEX, reduction="none"
    )  # (N, L), 0 where there is no target
    per_sequence = losses.sum(dim=1) / (targets != IGNORE_INDEX).sum(dim=1)  # (N,)
    (grad,) = torch.autograd.grad(per_sequence.sum(), gates)  # (N, H)
    return grad.abs().double().mean(dim=0)  # (H,)


def head_confidence(weights: torch.Tensor, min_query: int = 0) -> torch.Tensor:
    """Voita et al.'s confidence: each head's largest weight per query, averaged.

    Args:
        weights: ``(N, H, L, L)`` attention weights.
        min_query: only query positions ``t >= min_query`` count (e.g. those with a target).

    Returns:
        ``(H,)`` float64, each in ``(0, 1]``: 1 = every query puts all its weight on one key.
    """
    top = weights[:, :, min_query:, :].amax(dim=-1)  # (N, H, Q)
    return top.double().mean(dim=(0, 2))  # (H,)


def chance_accuracy(targets: torch.Tensor) -> float:
    """Accuracy of always predicting the most frequent target of ``targets`` ``(N, L)``.

    A model with every head removed sees no token at all and can do no better than this.
    """
    counts = torch.bincount(targets[targets != IGNORE_INDEX])  # (V,)
    return round(float(counts.max() / counts.sum()), 6)


def one_token_accuracy(tokens: torch.Tensor, targets: torch.Tensor, offset: int) -> float:
    """The best accuracy any read-out can reach knowing only the token at ``offset``.

    For each value of that token the best guess is the target that occurs most often with it;
    counting on ``(tokens, targets)`` gives the bound exactly (example 5, exercise 1).

    Args:
        tokens, targets: ``(N, L)`` token ids (int64) and targets (``IGNORE_INDEX`` = none).
        offset: the relation known, a negative key-minus-query offset such as ``-1``.

    Raises:
        ValueError: if ``offset`` is not negative or leaves no position with a target.
    """
    seq_len = tokens.shape[1]
    if offset >= 0 or -offset >= seq_len:
        raise ValueError(f"offset must be in -{seq_len - 1}..-1, got {offset}")
    has_target = targets != IGNORE_INDEX  # (N, L)
    has_target[:, :-offset] = False  # no token at that offset
    rows, cols = has_target.nonzero(as_tuple=True)  # (n,), (n,)
    if not len(rows):
        raise ValueError(f"no position with a target has a token at offset {offset}")
    known = tokens[rows, cols + offset]  # (n,)
    target = targets[rows, cols]  # (n,)
    size = int(max(tokens.max(), targets.max())) + 1
    counts = torch.zeros(size, size, dtype=torch.float64)  # (known token, target)
    counts.index_put_((known, target), torch.ones(len(known), dtype=torch.float64), accumulate=True)
    return round(float(counts.amax(dim=1).sum() / counts.sum()), 6)


def removable_heads(result: TrainResult, tolerance: float = 0.01) -> list[int]:
    """The heads of a trained run whose zero ablation, one at a time, costs less than
    ``tolerance`` of the full model's accuracy on the evaluation set.

    A head counts as one "that can go" on its own; two such heads may still be needed together
    (the pairs of :func:`ablation_report` measure that).

    Raises:
        ValueError: if ``tolerance`` is not in ``[0, 1]``.
    """
    if not 0.0 <= tolerance <= 1.0:
        raise ValueError(f"tolerance must be in [0, 1] (an accuracy drop), got {tolerance}")
    model = result.model()
    tokens, targets = result.eval_batch()  # (N, L), (N, L)
    with _reproducible():
        full = accuracy_without(model, tokens, targets)
        return [
            h
            for h in range(model.attention.num_heads)
            if accuracy_without(model, tokens, targets, (h,)) > full - tolerance
        ]


def width_heads_grid(
    cells: tuple[tuple[int, int], ...],
    seeds: tuple[int, ...] = (0, 1, 2),
    tolerance: float = 0.01,
) -> list[dict]:
    """Train every ``(embed_dim, num_heads)`` cell with every seed (the default training of
    :func:`~mha_ref.tutorial.training.train`) and count the heads that can go.

    A design that changes one factor at a time: list cells that differ in ``embed_dim`` only or
    in ``num_heads`` only.

    Returns:
        A list with one dict per cell and seed (cells in the order given, seeds inside each),
        with the keys ``embed_dim``, ``num_heads``, ``head_dim``, ``seed``, ``accuracy`` (the
        full model's) and ``removable`` (:func:`removable_heads`). Cached when
        ``MHA_REF_CACHE_DIR`` is set.

    Raises:
        ValueError: if a cell's ``num_heads`` does not divide its ``embed_dim``.
    """
    for embed_dim, num_heads in cells:
        if embed_dim % num_heads:
            raise ValueError(
                f"cell (embed_dim={embed_dim}, num_heads={num_heads}): num_heads must divide "
                "embed_dim"
            )
    arguments = dict(
        cells=tuple(tuple(c) for c in cells), seeds=tuple(seeds), tolerance=tolerance
    )
    return cached("width_heads_grid", arguments, lambda: _width_heads_grid(**arguments))


def _width_heads_grid(cells, seeds, tolerance) -> list[dict]:
    rows = []
    for embed_dim, num_heads in cells:
        for seed in seeds:
            result = train(num_heads=num_heads, embed_dim=embed_dim, seed=seed)
            rows.append(
                {
                    "embed_dim": embed_dim,
                    "num_heads": num_heads,
                    "head_dim": embed_dim // num_heads,
                    "seed": seed,
                    "accuracy": result.accuracy,
                    "removable": removable_heads(result, tolerance),
                }
            )
    return rows


def pruning_curve(
    model: TinyAttentionModel,
    tokens: torch.Tensor,
    targets: torch.Tensor,
    order: list[int],
) -> list[float]:
    """Accuracy with the first ``k`` heads of ``order`` removed, for ``k = 0 .. H``.

    Returns:
        ``H + 1`` accuracies: the full model first, no head at all last.
    """
    return [accuracy_without(model, tokens, targets, order[:k]) for k in range(len(order) + 1)]


@dataclass
class HeadReport:
    """Every per-head measurement of :func:`ablation_report`, in head order.

    Attributes:
        accuracy: the full model's accuracy on the evaluation set.
        zero_ablation, mean_ablation: accuracy with one head zeroed / replaced by its mean.
        loss: the full model's mean cross-entropy loss on the evaluation set.
        loss_increase: the loss with one head zeroed minus ``loss`` (:func:`loss_without`): the
            cost that the gradient importance only ranks to first order.
        importance: the gradient importance :math:`I_h` (:func:`gradient_importance`), a
            first-order ranking proxy; once the loss is near zero it is far smaller than
            ``loss_increase``.
        confidence: :func:`head_confidence`, over the query positions that have a target.
        order: heads from least to most important (by ``importance``).
        pruning: accuracy with the first ``k`` heads of ``order`` removed, ``k = 0 .. H``.
        pairs: accuracy with each pair of heads zeroed, keyed ``(i, j)`` with ``i < j``.
    """

    accuracy: float
    zero_ablation: list[float]
    mean_ablation: list[float]
    loss: float
    loss_increase: list[float]
    importance: list[float]
    confidence: list[float]
    order: list[int]
    pruning: list[float]
    pairs: dict[tuple[int, int], float]


def ablation_report(result: TrainResult) -> HeadReport:
    """Ablate, rank and prune the heads of a :func:`~mha_ref.tutorial.training.train` result.

    Everything is measured on the run's fixed evaluation set (``result.eval_batch()``), in
    float32 on the CPU, on one thread with deterministic kernels. Accuracies are rounded to 6
    digits, importance and confidence to 6 significant digits. Cached (keyed by the run's
    arguments) when ``MHA_REF_CACHE_DIR`` is set.
    """
    return cached("ablation_report", result.config, lambda: _ablation_report(result))


def _ablation_report(result: TrainResult) -> HeadReport:
    with _reproducible():
        return _measure(result)


def _measure(result: TrainResult) -> HeadReport:
    model = result.model()
    tokens, targets = result.eval_batch()  # (N, L), (N, L)
    num_heads = model.attention.num_heads
    start = -min(result.config["offsets"])  # first query position with a target
    means = head_means(model, tokens)  # (H, L, d_k)
    importance = gradient_importance(model, tokens, targets)  # (H,)
    with torch.no_grad():
        _, weights = gated_forward(model, tokens)  # (N, H, L, L)
    order = sorted(range(num_heads), key=lambda h: (float(importance[h]), h))
    loss = loss_without(model, tokens, targets)
    return HeadReport(
        accuracy=accuracy_without(model, tokens, targets),
        zero_ablation=[accuracy_without(model, tokens, targets, [h]) for h in range(num_heads)],
        mean_ablation=[
            accuracy_without(model, tokens, targets, [h], means) for h in range(num_heads)
        ],
        loss=loss,
        loss_increase=[
            float(f"{loss_without(model, tokens, targets, [h]) - loss:.6g}")
            for h in range(num_heads)
        ],
        importance=[float(f"{v:.6g}") for v in importance.tolist()],
        confidence=[float(f"{v:.6g}") for v in head_confidence(weights, start).tolist()],
        order=order,
        pruning=pruning_curve(model, tokens, targets, order),
        pairs={
            (i, j): accuracy_without(model, tokens, targets, [i, j])
            for i in range(num_heads)
            for j in range(i + 1, num_heads)
        },
    )


def plot_pruning_curve(
    report: HeadReport,
    *,
    chance: float | None = None,
    title: str = "Accuracy as heads are pruned",
    xlabel: str = "heads removed (least important first)",
    ylabel: str = "accuracy",
    head_label: str = "head {}",
    chance_label: str = "chance (most frequent target)",
) -> Figure:
    """The pruning curve; each point after the first is labelled with the head just removed.

    ``chance``, if given, is drawn as a dashed line.
    """
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for

    use_cjk_font_for(title, xlabel, ylabel, head_label, chance_label)
    fig, ax = plt.subplots(figsize=(5.5, 3.4), layout="constrained")
    removed = range(len(report.pruning))
    ax.plot(removed, report.pruning, marker="o", color="#2b6ca3")
    for k, value in enumerate(report.pruning):
        label = f"{value:.3f}"
        if k:  # the head removed at this step, above its accuracy
            label = f"-{head_label.format(report.order[k - 1])}\n{label}"
        ax.annotate(
            label,
            (k, value),
            textcoords="offset points",
            xytext=(0, 8),
            ha="center",
            fontsize=8,
            bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85),
        )
    if chance is not None:
        ax.axhline(chance, color="grey", linestyle="--", label=chance_label)
        ax.legend(fontsize=8, loc="upper right")
    ax.set_xticks(list(removed))
    ax.set_xlim(-0.4, len(report.pruning) - 0.6)
    ax.set_ylim(0, 1.22)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    return fig
