r"""How many heads: analytic costs at a fixed ``embed_dim``, and the head-count sweep."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.training import train

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "HeadCountRow",
    "attention_flops",
    "attention_weight_bytes",
    "decode_step_traffic",
    "draw_published",
    "head_count_sweep",
    "plot_head_count_sweep",
    "plot_relative_costs",
    "width_costs",
]


# ------------------------------------------------------------------------------------------------


def attention_flops(batch: int, seq_len: int, embed_dim: int, num_heads: int) -> dict[str, int]:
    r"""Analytic forward FLOPs of one self-attention layer (a multiply-add counts as 2 FLOPs).

    With :math:`N` = ``batch``, :math:`L` = ``seq_len``, :math:`E` = ``embed_dim``,
    :math:`h` = ``num_heads`` and :math:`d_k = E / h`:

    * ``projections``: Q, K, V and the output projection, :math:`4 \cdot 2NLE^2`
      (independent of :math:`h`);
    * ``scores``: :math:`QK^\top` for every head, :math:`h \cdot 2NL^2 d_k = 2NL^2E`
      (independent of :math:`h`);
    * ``weighted_sum``: weights times :math:`V`, :math:`2NL^2E` (independent of :math:`h`);
    * ``softmax``: scale, max, subtract, exp, sum and divide, counted as one operation per
      element each, :math:`6NhL^2` (**grows linearly** with :math:`h`);
    * ``total``: the sum.

    Biases, the mask and dropout are left out. The matrix products cost the same for every ``h``
    (the heads split ``E``, they do not add to it); only the element-wise work on the
    ``(N, h, L, L)`` score tensor grows with ``h``.
    """
    if embed_dim % num_heads:
        raise ValueError(f"num_heads={num_heads} must divide embed_dim={embed_dim}")
    head_dim = embed_dim // num_heads
    parts = {
        "projections": 4 * 2 * batch * seq_len * embed_dim * embed_dim,
        "scores": num_heads * 2 * batch * seq_len * seq_len * head_dim,
        "weighted_sum": num_heads * 2 * batch * seq_len * seq_len * head_dim,
        "softmax": 6 * batch * num_heads * seq_len * seq_len,
    }
    parts["total"] = sum(parts.values())
    return parts


def attention_weight_bytes(
    batch: int, seq_len: int, num_heads: int, dtype: torch.dtype = torch.float32
) -> int:
    """Bytes of the attention-weight tensor ``(batch, num_heads, seq_len, seq_len)``."""
    element = torch.empty((), dtype=dtype).element_size()
    return batch * num_heads * seq_len * seq_len * element


def decode_step_traffic(
    batch: int,
    context_len: int,
    embed_dim: int,
    num_heads: int,
    num_kv_heads: int,
    bytes_per_element: int = 2,
) -> dict[str, float]:
    r"""Bytes read and FLOPs of one decode step of one attention layer (one new token per
    sequence), the arithmetic of Shazeer 2019, section 2.4.1.

    With :math:`b` = ``batch``, :math:`n` = ``context_len`` cached tokens, :math:`E` =
    ``embed_dim``, :math:`h` = ``num_heads``, :math:`g` = ``num_kv_heads`` and :math:`d = E / h`:

    * ``flops``: the four projections :math:`2 b (2E^2 + 2 g d E)` plus the scores and the
      weighted sum over the cache :math:`2 \cdot 2 b h n d` (a multiply-add is 2 FLOPs);
    * ``weight_bytes``: the projection weights, read once per step,
      :math:`(2E^2 + 2 g d E)` elements;
    * ``cache_bytes``: the keys and values of every sequence, :math:`2 b n g d` elements;
    * ``bytes``: their sum; ``intensity``: ``flops / bytes``, the FLOPs per byte read.

    A device whose peak FLOP rate divided by its memory bandwidth (its ridge point) is far above
    ``intensity`` is bound by reading memory for this step; fewer key/value heads shrink
    ``cache_bytes`` by ``h / g`` and leave the attention FLOPs unchanged. Biases, the softmax
    and writes are left out.

    Raises:
        ValueError: if ``num_heads`` does not divide ``embed_dim`` or ``num_kv_heads`` does not
            divide ``num_heads``.
    """
    if embed_dim % num_heads or num_heads % num_kv_heads:
        raise ValueError(
            f"need num_heads | embed_dim and num_kv_heads | num_heads, got embed_dim={embed_dim}, "
            f"num_heads={num_heads}, num_kv_heads={num_kv_heads}"
        )
    head_dim = embed_dim // num_heads
    weights = 2 * embed_dim * embed_dim + 2 * num_kv_heads * head_dim * embed_dim
    flops = 2 * batch * weights + 2 * 2 * batch * num_heads * context_len * head_dim
    cache = 2 * batch * context_len * num_kv_heads * head_dim
    weight_bytes, cache_bytes = weights * bytes_per_element, cache * bytes_per_element
    total = weight_bytes + cache_bytes
    return {
        "flops": float(flops),
        "weight_bytes": float(weight_bytes),
        "cache_bytes": float(cache_bytes),
        "bytes": float(total),
        "intensity": flops / total,
    }


@dataclass
class HeadCountRow:
    """One head count of :func:`head_count_sweep`.

    Attributes:
        num_heads, head_dim: ``h`` and ``d_k = embed_dim / h``.
        attention_parameters: parameters of the attention layer (constant in ``h``).
        flops: :func:`attention_flops` ``["total"]`` for the reference shape;
            ``matmul_flops`` the part that does not depend on ``h``.
        weight_bytes: :func:`attention_weight_bytes` for the reference shape (float32).
        accuracies: accuracy of each seed; ``accuracy_mean``, ``accuracy_std`` (sample standard
            deviation), ``accuracy_min``, ``accuracy_max`` over the seeds.
    """

    num_heads: int
    head_dim: int
    attention_parameters: int
    flops: int
    matmul_flops: int
    weight_bytes: int
    accuracies: list[float]
    accuracy_mean: float
    accuracy_std: float
    accuracy_min: float
    accuracy_max: float


def head_count_sweep(
    head_counts: Sequence[int] = (1, 2, 4, 8),
    *,
    embed_dim: int = 16,
    seeds: Sequence[int] = (0, 1, 2),
    cost_batch: int = 32,
    cost_seq_len: int = 128,
    **train_kwargs: Any,
) -> list[HeadCountRow]:
    """Train the tiny task for every head count and seed at fixed ``embed_dim``; add the costs.

    Args:
        head_counts: values of ``h`` (each must divide ``embed_dim``).
        embed_dim: the fixed model width.
        seeds: training seeds per head count (at least 3 for a meaningful spread).
        cost_batch, cost_seq_len: the shape ``(batch, seq_len)`` at which FLOPs and weight memory
            are computed (the training shape is tiny; costs matter at larger ones).
        train_kwargs: passed to :func:`mha_ref.tutorial.training.train` (``steps``,
            ``vocab_size``, ...).

    Returns:
        one :class:`HeadCountRow` per head count. Cached when ``MHA_REF_CACHE_DIR`` is set.
    """
    for h in head_counts:
        if embed_dim % h:
            raise ValueError(f"head count {h} must divide embed_dim={embed_dim}")
    if len(seeds) < 2:
        raise ValueError(f"seeds needs at least 2 entries for a spread, got {list(seeds)}")
    arguments = dict(
        head_counts=tuple(head_counts),
        embed_dim=embed_dim,
        seeds=tuple(seeds),
        cost_batch=cost_batch,
        cost_seq_len=cost_seq_len,
        train_kwargs=dict(train_kwargs),
    )
    return cached("head_count_sweep", arguments, lambda: _head_count_sweep(**arguments))


def _head_count_sweep(
    head_counts: tuple[int, ...],
    embed_dim: int,
    seeds: tuple[int, ...],
    cost_batch: int,
    cost_seq_len: int,
    train_kwargs: dict[str, Any],
) -> list[HeadCountRow]:
    rows = []
    for h in head_counts:
        results = [train(num_heads=h, embed_dim=embed_dim, seed=s, **train_kwargs) for s in seeds]
        accuracies = [r.accuracy for r in results]
        flops = attention_flops(cost_batch, cost_seq_len, embed_dim, h)
        rows.append(
            HeadCountRow(
                num_heads=h,
                head_dim=embed_dim // h,
                attention_parameters=results[0].attention_parameters,
                flops=flops["total"],
                matmul_flops=flops["projections"] + flops["scores"] + flops["weighted_sum"],
                weight_bytes=attention_weight_bytes(cost_batch, cost_seq_len, h),
                accuracies=accuracies,
                accuracy_mean=round(statistics.fmean(accuracies), 6),
                accuracy_std=round(statistics.stdev(accuracies), 6),
                accuracy_min=min(accuracies),
                accuracy_max=max(accuracies),
            )
        )
    return rows



def plot_relative_costs(
    head_counts: Sequence[int],
    series: dict[str, Sequence[float]],
    *,
    title: str = "Cost relative to one head",
    xlabel: str = "number of heads h",
    ylabel: str = "relative to h = 1",
) -> Figure:
    """Each cost in ``series`` (label -> one value per head count) divided by its first value."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from mha_ref.tutorial.fonts import use_cjk_font_for

    use_cjk_font_for(title, xlabel, ylabel, list(series))
    fig, ax = plt.subplots(figsize=(5.8, 3.6), layout="constrained")
    # overlapping series (e.g. two flat ones) stay visible: shrinking markers, varied dashes
    markers, styles = "osD^v<>", ("-", "--", "-", "--", ":", "-.")
    for i, (label, values) in enumerate(series.items()):
        relative = [v / values[0] for v in values]
        ax.plot(
            head_counts,
            relative,
            marker=markers[i % len(markers)],
            markersize=9 - 1.2 * i,
            linestyle=styles[i % len(styles)],
            label=label,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"×{value:g}"))
    ax.set_xticks(head_counts, labels=[str(h) for h in head_counts])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8)
    return fig


def plot_head_count_sweep(
    rows: Sequence[HeadCountRow],
    published: Sequence[dict[str, float]] | None = None,
    *,
    heads_label: str = "number of heads h",
    accuracy_label: str = "accuracy (mean ± std over seeds)",
    seeds_label: str = "one seed",
    accuracy_title: str = "Tiny task, this build",
    bleu_label: str = "BLEU (EN-DE newstest2013)",
    bleu_title: str = "Vaswani et al. 2017, Table 3 (A)",
    base_heads: int | None = 8,
    base_label: str = "base model",
    min_bleu_span: float = 3.0,
) -> Figure:
    """Accuracy of :func:`head_count_sweep` against ``h`` (error bars: standard deviation over
    seeds; dots: single seeds); beside it, if given, the published BLEU against ``h``
    (``published``: dicts with keys ``"h"`` and ``"bleu"``).

    The BLEU axis spans at least ``min_bleu_span`` BLEU, so a gap of a fraction of a point is not
    drawn as if it were large; the row with ``h == base_heads`` is marked ``base_label``.
    """
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for

    use_cjk_font_for(
        heads_label, accuracy_label, seeds_label, accuracy_title, bleu_label, bleu_title, base_label
    )
    panels = 2 if published else 1
    fig, axes = plt.subplots(
        1, panels, figsize=(4.6 * panels, 3.6), layout="constrained", squeeze=False
    )
    ax = axes[0, 0]
    hs = [row.num_heads for row in rows]
    ax.errorbar(
        hs,
        [row.accuracy_mean for row in rows],
        yerr=[row.accuracy_std for row in rows],
        marker="o",
        capsize=4,
        color="#2b6ca3",
        label=accuracy_label,
    )
    for i, row in enumerate(rows):
        ax.scatter(
            [row.num_heads] * len(row.accuracies),
            row.accuracies,
            s=14,
            color="#e07b39",
            zorder=3,
            label=seeds_label if i == 0 else None,
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(hs, labels=[str(h) for h in hs])
    ax.set_xlabel(heads_label)
    ax.set_ylabel(accuracy_label)
    ax.set_title(accuracy_title, fontsize=11)
    ax.legend(fontsize=8, loc="lower center")
    if published:
        draw_published(
            axes[0, 1], published, heads_label, bleu_label, bleu_title, base_heads, base_label,
            min_bleu_span,
        )
    return fig





def draw_published(
    ax: Any,
    published: Sequence[dict[str, float]],
    heads_label: str,
    bleu_label: str,
    bleu_title: str,
    base_heads: int | None = 8,
    base_label: str = "base model",
    min_bleu_span: float = 3.0,
) -> None:
    """Draw the published BLEU against ``h`` on the axes ``ax`` (see :func:`plot_head_count_sweep`).

    The BLEU axis spans at least ``min_bleu_span`` BLEU; the row with ``h == base_heads`` is
    circled and labelled ``base_label``.
    """
    ph = [int(row["h"]) for row in published]
    ax.plot(ph, [row["bleu"] for row in published], marker="s", color="#3a7d44")
    for row in published:
        ax.annotate(
            f"{row['bleu']:.1f}",
            (row["h"], row["bleu"]),
            textcoords="offset points",
            xytext=(0, 9),
            ha="center",
            fontsize=8,
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(ph, labels=[str(h) for h in ph])
    ax.set_xlabel(heads_label)
    ax.set_ylabel(bleu_label)
    ax.set_title(bleu_title, fontsize=11)
    low, high = min(r["bleu"] for r in published), max(r["bleu"] for r in published)
    half = max(min_bleu_span, high - low + 0.6) / 2
    ax.set_ylim((low + high) / 2 - half, (low + high) / 2 + half)
    base = [row for row in published if base_heads is not None and row["h"] == base_heads]
    if base:
        ax.scatter(
            [base[0]["h"]],
            [base[0]["bleu"]],
            s=160,
            facecolors="none",
            edgecolors="#c0392b",
            linewidths=1.5,
            zorder=3,
            label=base_label,
        )
        ax.legend(fontsize=8, loc="lower center")


def width_costs(
    head_counts: Sequence[int] = (1, 2, 4, 8, 16, 32),
    *,
    embed_dim: int = 512,
    seq_len: int = 256,
    batch: int = 2,
    device: torch.device | str = "cpu",
    repeats: int = 5,
    clock: Callable[[], float] = time.perf_counter,
) -> list[dict[str, Any]]:
    """Costs of one self-attention forward pass against ``h`` at a given (realistic) width.

    For each ``h``: the parameters of :class:`mha_ref.MultiHeadAttention`, the bytes of its
    attention-weight tensor ``(batch, h, seq_len, seq_len)`` in float32, and the time of one call
    of the **fused** path (``need_weights=False``: PyTorch's ``scaled_dot_product_attention``, no
    weight tensor kept) and of the **explicit** path (``need_weights=True``, per-head weights
    returned).

    The timing is interleaved: every module and path is warmed up once, then ``repeats`` rounds
    each time every ``(h, path)`` once, so a slow spell of a shared machine hits every
    configuration alike instead of one ``h``. Each configuration keeps its *minimum* over the
    rounds: load from other processes only ever adds time, so the minimum is the best estimate of
    how fast the code can run (a median or mean mixes in the machine's load). Inputs are seeded;
    times depend on the machine and are not reproducible.

    Args:
        clock: a function returning seconds; tests pass a fake one.

    Returns:
        one dict per ``h`` with keys ``h``, ``head_dim``, ``parameters``, ``weight_bytes``,
        ``fused_s``, ``explicit_s`` (seconds, minimum over the rounds).

    Raises:
        ValueError: if a head count does not divide ``embed_dim``, or ``repeats < 1``.
    """
    from mha_ref.multihead import MultiHeadAttention
    from mha_ref.tutorial.bench import measure_times

    for h in head_counts:
        if embed_dim % h:
            raise ValueError(f"head count {h} must divide embed_dim={embed_dim}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batch, seq_len, embed_dim, generator=generator).to(device)  # (N, L, E)
    modules = {
        h: MultiHeadAttention(embed_dim, h, batch_first=True).to(device).eval()
        for h in head_counts
    }
    calls = {}
    for h, module in modules.items():
        calls[(h, "fused")] = lambda m=module: m(x, x, x, need_weights=False)
        calls[(h, "explicit")] = lambda m=module: m(
            x, x, x, need_weights=True, average_attn_weights=False
        )
    best = dict.fromkeys(calls, math.inf)
    with torch.no_grad():
        for call in calls.values():  # warm-up, untimed
            measure_times(call, warmup=1, repeats=1, device=device, clock=clock)
        for _ in range(repeats):
            for key, call in calls.items():
                (seconds,) = measure_times(call, warmup=0, repeats=1, device=device, clock=clock)
                best[key] = min(best[key], seconds)
    return [
        {
            "h": h,
            "head_dim": embed_dim // h,
            "parameters": sum(p.numel() for p in module.parameters()),
            "weight_bytes": attention_weight_bytes(batch, seq_len, h),
            "fused_s": best[(h, "fused")],
            "explicit_s": best[(h, "explicit")],
        }
        for h, module in modules.items()
    ]
