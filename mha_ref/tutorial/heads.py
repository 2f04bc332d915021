"""Reading the heads of a trained model: where each head looks, and how spread out it is.

Where a head looks (its attention weights) is measured here; what it *writes* is not: two heads
that look at the same key can pass on different things. Claims about what a head contributes need
an intervention (ablation), not these summaries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from mha_ref.tutorial.training import TrainResult

__all__ = [
    "FOCUS_THRESHOLD",
    "HeadSummary",
    "head_entropy",
    "offset_profile",
    "plot_head_profiles",
    "plot_offset_bars",
    "summarize_heads",
    "uniform_entropy",
]

#: A head whose largest mean weight on one offset reaches this is "focused" on that offset.
FOCUS_THRESHOLD = 0.5

#: A focused head's summary also names its second offset when that gets at least this much.
SECOND_RELATION_THRESHOLD = 0.1


# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadSummary:
    """What one head attends to, measured on the probe batch.

    Attributes:
        head: head index.
        offset: the offset (key position minus query position) with the largest mean weight.
        weight: that mean weight (0..1).
        runner_up_offset, runner_up_weight: the second largest.
        entropy: mean entropy of the head's attention rows, in nats (0 = one key only).
        focused: ``weight >= FOCUS_THRESHOLD``.

    Two heads with the same ``offset`` look at the same key; that does not make either one
    redundant: what each passes on is measured by ablation (:mod:`mha_ref.tutorial.ablation`).
    """

    head: int
    offset: int
    weight: float
    runner_up_offset: int
    runner_up_weight: float
    entropy: float
    focused: bool

    def describe(self, language: str = "en") -> str:
        """One line of text, ``"en"`` or ``"zh_CN"``, built from the measured numbers."""
        if language not in ("en", "zh_CN"):
            raise ValueError(f"language must be 'en' or 'zh_CN', got {language!r}")
        en = language == "en"
        if self.focused:
            text = (
                f"head {self.head} attends mostly to offset {self.offset:+d} "
                f"(mean weight {self.weight:.2f})"
                if en
                else f"头 {self.head} 主要关注偏移 {self.offset:+d}（平均权重 {self.weight:.2f}）"
            )
        else:
            text = (
                f"head {self.head} is spread out: offset {self.offset:+d} "
                f"(mean weight {self.weight:.2f}) and {self.runner_up_offset:+d} "
                f"({self.runner_up_weight:.2f})"
                if en
                else f"头 {self.head} 的注意力较分散：偏移 {self.offset:+d}（平均权重 "
                f"{self.weight:.2f}）和 {self.runner_up_offset:+d}（{self.runner_up_weight:.2f}）"
            )
        if self.focused and self.runner_up_weight >= SECOND_RELATION_THRESHOLD:
            text += (
                f", then offset {self.runner_up_offset:+d} ({self.runner_up_weight:.2f})"
                if en
                else f"，其次是偏移 {self.runner_up_offset:+d}（{self.runner_up_weight:.2f}）"
            )
        return text


def offset_profile(weights: torch.Tensor, min_query: int = 0) -> torch.Tensor:
    """Mean attention weight per head and offset.

    Args:
        weights: ``(N, H, L, L)`` causal attention weights.
        min_query: only query positions ``t >= min_query`` are averaged (e.g. the positions that
            have a target).

    Returns:
        ``(H, L)``: entry ``[h, d]`` is the mean weight head ``h`` gives to the key ``d``
        positions back (offset ``-d``), over all queries where that key exists.
    """
    seq_len = weights.shape[-1]
    profile = torch.zeros(weights.shape[1], seq_len, dtype=torch.float64)  # (H, L)
    for back in range(seq_len):
        queries = torch.arange(max(min_query, back), seq_len)  # (Q,)
        if len(queries) == 0:
            continue
        w = weights[:, :, queries, queries - back]  # (N, H, Q)
        profile[:, back] = w.double().mean(dim=(0, 2))  # (H,)
    return profile


def head_entropy(weights: torch.Tensor, min_query: int = 0) -> torch.Tensor:
    """Mean entropy (nats) of each head's rows ``t >= min_query``: ``(N, H, L, L) -> (H,)``."""
    rows = weights[:, :, min_query:, :].double()  # (N, H, Q, L)
    entropy = -(rows * torch.log(rows.clamp_min(1e-30))).sum(dim=-1)  # (N, H, Q)
    return entropy.mean(dim=(0, 2))  # (H,)


def uniform_entropy(seq_len: int, min_query: int = 0) -> float:
    """Mean entropy of a causal head that spreads evenly over all allowed keys (the maximum)."""
    values = [math.log(t + 1) for t in range(min_query, seq_len)]
    return sum(values) / len(values)


def summarize_heads(weights: torch.Tensor, min_query: int = 0) -> list[HeadSummary]:
    """One :class:`HeadSummary` per head of ``weights`` ``(N, H, L, L)``, measured, not assumed."""
    profile = offset_profile(weights, min_query)  # (H, L)
    entropy = head_entropy(weights, min_query)  # (H,)
    summaries: list[HeadSummary] = []
    for head in range(profile.shape[0]):
        top = torch.topk(profile[head], k=2)
        offset, runner_up = -int(top.indices[0]), -int(top.indices[1])
        weight = round(float(top.values[0]), 4)
        focused = weight >= FOCUS_THRESHOLD
        summaries.append(
            HeadSummary(
                head=head,
                offset=offset,
                weight=weight,
                runner_up_offset=runner_up,
                runner_up_weight=round(float(top.values[1]), 4),
                entropy=round(float(entropy[head]), 4),
                focused=focused,
            )
        )
    return summaries



def plot_head_profiles(
    result: TrainResult,
    *,
    title: str = "Which offset each head attends to",
    offset_label: str = "offset (key position - query position)",
    head_label: str = "head {}",
    entropy_title: str = "Mean entropy of each head",
    entropy_label: str = "entropy (nats)",
    uniform_label: str = "uniform over allowed keys",
    colorbar_label: str = "mean attention weight",
) -> Figure:
    """Left: mean weight per head and offset (a heatmap); right: mean entropy per head.

    The numbers are ``result.offset_profile`` and ``result.entropy``, measured on the probe
    batch over the query positions that have a target.
    """
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for

    use_cjk_font_for(
        title, offset_label, head_label, entropy_title, entropy_label, uniform_label, colorbar_label
    )
    profile = result.offset_profile.numpy()  # (H, L)
    num_heads, seq_len = profile.shape
    heads = [head_label.format(h) for h in range(num_heads)]
    fig, (ax_profile, ax_entropy) = plt.subplots(
        1, 2, figsize=(10, 1.2 + 0.6 * num_heads), width_ratios=(2.2, 1), layout="constrained"
    )
    image = ax_profile.imshow(profile, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for h in range(num_heads):
        for d in range(seq_len):
            value = profile[h, d]
            colour = "white" if value < 0.6 else "black"
            ax_profile.text(d, h, f"{value:.2f}", ha="center", va="center", color=colour)
    ax_profile.set_xticks(range(seq_len), labels=[f"{-d:+d}" if d else "0" for d in range(seq_len)])
    ax_profile.set_yticks(range(num_heads), labels=heads)
    ax_profile.set_xlabel(offset_label)
    ax_profile.set_title(title, fontsize=11)
    fig.colorbar(image, ax=ax_profile, shrink=0.9, label=colorbar_label)

    entropy = result.entropy.numpy()  # (H,)
    ax_entropy.barh(range(num_heads), entropy, color="#2b6ca3")
    for h, value in enumerate(entropy):
        ax_entropy.text(value, h, f" {value:.3f}", va="center", fontsize=8)
    ax_entropy.axvline(result.max_entropy, color="grey", linestyle="--", label=uniform_label)
    ax_entropy.set_yticks(range(num_heads), labels=heads)
    ax_entropy.invert_yaxis()
    ax_entropy.set_xlim(0, result.max_entropy * 1.1)
    ax_entropy.set_xlabel(entropy_label)
    ax_entropy.set_title(entropy_title, fontsize=11)
    ax_entropy.legend(loc="lower right", fontsize=8)
    return fig


def plot_offset_bars(
    profiles: dict[str, Sequence[float]],
    *,
    offsets: int = 4,
    title: str = "Where a single head puts its weight",
    offset_label: str = "offset (key position - query position)",
    weight_label: str = "mean attention weight",
) -> Figure:
    """Grouped bars: for each labelled head (label -> its row of an offset profile, column ``d``
    = offset ``-d``), the mean weight on the offsets ``0, -1, ..., -(offsets - 1)``.

    Put the measured entropy into each label; the bars show where the weight goes, the entropy
    how spread it is.
    """
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for

    use_cjk_font_for(title, offset_label, weight_label, list(profiles))
    fig, ax = plt.subplots(figsize=(6.0, 3.4), layout="constrained")
    width = 0.8 / max(len(profiles), 1)
    for i, (label, row) in enumerate(profiles.items()):
        values = [float(v) for v in list(row)[:offsets]]
        xs = [d + (i - (len(profiles) - 1) / 2) * width for d in range(len(values))]
        bars = ax.bar(xs, values, width=width, label=label)
        ax.bar_label(bars, labels=[f"{v:.2f}" for v in values], fontsize=7, padding=1)
    ax.set_xticks(range(offsets), labels=[f"{-d:+d}" if d else "0" for d in range(offsets)])
    ax.set_ylim(0, 1.12)
    ax.set_xlabel(offset_label)
    ax.set_ylabel(weight_label)
    ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8, loc="upper left")
    return fig
