"""Multi-head -> grouped-query attention on the tiny lookup-table model: convert, then uptrain.

Ainslie et al. (2023) turn a trained multi-head checkpoint into grouped-query attention by
mean-pooling each group's key and value heads (:func:`mha_ref.mha_to_gqa`), then train the
converted model a little more ("uptraining"). :func:`gqa_uptraining` does the same at the scale
of the tutorial: it trains :class:`~mha_ref.tutorial.tasks.TinyAttentionModel` with multi-head
attention, converts its attention layer for each requested number of key/value heads, and
measures the accuracy right after the conversion and after an uptraining of a given number of
steps. :func:`gqa_from_scratch` is the budget-matched control: the grouped model trained from
the start for as many steps as pre-training and uptraining together. As in Ainslie et
al.'s ablation (Sec. 2.1 and their Figure 5), the controls start from the same multi-head
checkpoint, with the same uptraining steps and data, and differ only in how the key/value heads
are initialised: the mean of each group's heads, the first head of each group, or random
weights (query and output projections kept in all three).

Seeded, one CPU thread, deterministic (as :func:`mha_ref.tutorial.training.train`), and cached
by :mod:`mha_ref.tutorial.cache` when ``MHA_REF_CACHE_DIR`` is set.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from mha_ref.grouped import GroupedQueryAttention, mha_to_gqa
from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.tasks import IGNORE_INDEX, TinyAttentionModel, make_batch, make_table
from mha_ref.tutorial.training import _EVAL_SEED, _reproducible

__all__ = ["KV_INITS", "GQARow", "UptrainResult", "gqa_from_scratch", "gqa_uptraining"]

#: The initialisations of the grouped layer's key/value heads, compared after uptraining.
#: ``"mean"`` of each group's heads (what :func:`mha_ref.mha_to_gqa` does), the ``"first"``
#: head of each group, or ``"random"`` weights.
KV_INITS = ("mean", "first", "random")


@dataclass(frozen=True)
class GQARow:
    """One number of key/value heads: each key/value initialisation, before and after uptraining.

    Attributes:
        num_kv_heads: key/value heads of the converted attention layer.
        converted_accuracy: ``{init: accuracy}`` right after the conversion, no training, for
            each ``init`` of :data:`KV_INITS`.
        uptrained_accuracy: ``{init: accuracy}`` after ``uptrain_steps`` more steps.
        uptrain_losses: training loss at each uptraining step of the mean-pooled model.
    """

    num_kv_heads: int
    converted_accuracy: dict[str, float]
    uptrained_accuracy: dict[str, float]
    uptrain_losses: list[float]


@dataclass(frozen=True)
class UptrainResult:
    """The multi-head model's accuracy and one :class:`GQARow` per number of key/value heads."""

    config: dict[str, Any]
    mha_accuracy: float
    rows: list[GQARow]


class _GQAInTinyModel(nn.Module):
    """Lets a ``GroupedQueryAttention`` stand where ``TinyAttentionModel`` calls its attention.

    The tiny model passes ``nn.MultiheadAttention``'s arguments (a bool mask with ``True`` =
    blocked); grouped-query attention takes ``True`` = may attend.
    """

    def __init__(self, gqa: GroupedQueryAttention) -> None:
        super().__init__()
        self.gqa = gqa

    def forward(self, query, key, value, attn_mask=None, need_weights=True, **_):
        allowed = None if attn_mask is None else ~attn_mask  # (L, S), True = may attend
        return self.gqa(query, key, value, attn_mask=allowed, need_weights=need_weights)


def gqa_uptraining(
    num_kv_heads: Sequence[int] = (4, 2, 1),
    *,
    num_heads: int = 4,
    embed_dim: int = 16,
    vocab_size: int = 16,
    seq_len: int = 8,
    steps: int = 200,
    uptrain_steps: int = 100,
    batch_size: int = 64,
    lr: float = 1e-2,
    seed: int = 0,
    eval_size: int = 1024,
) -> UptrainResult:
    """Train with multi-head attention, convert to each ``num_kv_heads``, uptrain, evaluate.

    Args:
        num_kv_heads: the key/value head counts to convert to (each divides ``num_heads``).
        num_heads, embed_dim, vocab_size, seq_len: the model and task sizes.
        steps: Adam steps of the multi-head training.
        uptrain_steps: Adam steps after the conversion (the same for every initialisation).
        batch_size, lr, seed: as in :func:`mha_ref.tutorial.training.train`.
        eval_size: sequences of the fixed evaluation set.

    Returns:
        an :class:`UptrainResult`. Cached on disk when ``MHA_REF_CACHE_DIR`` is set.
    """
    arguments = dict(
        num_kv_heads=tuple(num_kv_heads), num_heads=num_heads, embed_dim=embed_dim,
        vocab_size=vocab_size, seq_len=seq_len, steps=steps, uptrain_steps=uptrain_steps,
        batch_size=batch_size, lr=lr, seed=seed, eval_size=eval_size,
    )
    for kv in arguments["num_kv_heads"]:
        if not isinstance(kv, int) or kv < 1 or num_heads % kv:
            raise ValueError(f"every num_kv_heads must divide num_heads={num_heads}, got {kv!r}")
    return cached("gqa_uptraining_kv_inits", arguments, lambda: _gqa_uptraining(**arguments))


def _fit(model: nn.Module, config: dict, steps: int, data: torch.Generator, table) -> list[float]:
    """``steps`` Adam steps on fresh batches of the task; returns the loss curve."""
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    losses = []
    for _ in range(steps):
        tokens, targets = make_batch(config["batch_size"], config["seq_len"], table, data)
        logits, _ = model(tokens)  # (B, L, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(round(loss.item(), 6))
    return losses


def _accuracy(model: nn.Module, config: dict, table: torch.Tensor) -> float:
    """Fraction of correct predictions on the fixed evaluation set (positions with a target)."""
    model.eval()
    with torch.no_grad():
        generator = torch.Generator().manual_seed(_EVAL_SEED)
        tokens, targets = make_batch(config["eval_size"], config["seq_len"], table, generator)
        logits, _ = model(tokens)  # (N, L, V)
        has_target = targets != IGNORE_INDEX  # (N, L)
        correct = logits.argmax(dim=-1)[has_target] == targets[has_target]  # (n,)
    model.train()
    return round(float(correct.double().mean()), 6)


def _convert(module: nn.Module, num_kv_heads: int, init: str, seed: int) -> GroupedQueryAttention:
    """The grouped layer for ``module`` with its key/value heads initialised by ``init``.

    Query and output projections are copied in all cases (:func:`mha_ref.mha_to_gqa`); only the
    key and value projections differ.
    """
    gqa = mha_to_gqa(module, num_kv_heads)
    if init == "mean":
        return gqa
    if init == "random":
        torch.manual_seed(seed + 2)
        gqa.k_proj.reset_parameters()
        gqa.v_proj.reset_parameters()
        return gqa
    embed_dim, num_heads = module.embed_dim, module.num_heads
    head_dim, group = embed_dim // num_heads, num_heads // num_kv_heads
    # rows of head h in the key (value) block of in_proj: [h * head_dim, (h + 1) * head_dim)
    first = torch.cat([torch.arange(j * group * head_dim, (j * group + 1) * head_dim)
                       for j in range(num_kv_heads)])  # (num_kv_heads * head_dim,)
    with torch.no_grad():
        for projection, block in ((gqa.k_proj, 1), (gqa.v_proj, 2)):
            rows = first + block * embed_dim
            projection.weight.copy_(module.in_proj_weight[rows])  # (kv * head_dim, embed_dim)
            if projection.bias is not None:
                projection.bias.copy_(module.in_proj_bias[rows])  # (kv * head_dim,)
    return gqa


def _gqa_uptraining(**config: Any) -> UptrainResult:
    table = make_table(config["vocab_size"])  # (V, V)
    sizes = (config["vocab_size"], config["seq_len"], config["embed_dim"], config["num_heads"], 64)
    with _reproducible():
        torch.manual_seed(config["seed"])
        model = TinyAttentionModel(*sizes)
        _fit(model, config, config["steps"], torch.Generator().manual_seed(config["seed"]), table)
        mha_accuracy = _accuracy(model, config, table)
        rows = []
        for kv in config["num_kv_heads"]:
            converted_accuracy, uptrained_accuracy, mean_losses = {}, {}, []
            for init in KV_INITS:
                converted = copy.deepcopy(model)
                gqa = _convert(model.attention, kv, init, config["seed"])
                converted.attention = _GQAInTinyModel(gqa)
                converted_accuracy[init] = _accuracy(converted, config, table)
                data = torch.Generator().manual_seed(config["seed"] + 1)  # batches unseen so far
                losses = _fit(converted, config, config["uptrain_steps"], data, table)
                uptrained_accuracy[init] = _accuracy(converted, config, table)
                if init == "mean":
                    mean_losses = losses
            rows.append(GQARow(kv, converted_accuracy, uptrained_accuracy, mean_losses))
    return UptrainResult(config=dict(config), mha_accuracy=mha_accuracy, rows=rows)


def gqa_from_scratch(
    num_kv_heads: Sequence[int] = (2, 1),
    *,
    num_heads: int = 4,
    embed_dim: int = 16,
    vocab_size: int = 16,
    seq_len: int = 8,
    steps: int = 300,
    batch_size: int = 64,
    lr: float = 1e-2,
    seed: int = 0,
    eval_size: int = 1024,
) -> dict[int, float]:
    """Train the tiny model with grouped-query attention from the start; the control of
    :func:`gqa_uptraining` at a matched budget.

    The same model, optimiser, learning rate, task and evaluation set as :func:`gqa_uptraining`;
    the attention layer is a fresh :class:`mha_ref.GroupedQueryAttention` with ``num_kv_heads``
    key/value heads, trained for ``steps`` Adam steps (pass pre-training plus uptraining steps
    for a budget-matched comparison).

    Args:
        num_kv_heads: the key/value head counts (each divides ``num_heads``).
        num_heads, embed_dim, vocab_size, seq_len, batch_size, lr, seed, eval_size: as in
            :func:`gqa_uptraining`.
        steps: the whole training budget.

    Returns:
        ``{num_kv_heads: accuracy on the evaluation set}``. Cached when ``MHA_REF_CACHE_DIR``
        is set.

    Raises:
        ValueError: if a ``num_kv_heads`` does not divide ``num_heads``.
    """
    arguments = dict(
        num_kv_heads=tuple(num_kv_heads), num_heads=num_heads, embed_dim=embed_dim,
        vocab_size=vocab_size, seq_len=seq_len, steps=steps, batch_size=batch_size, lr=lr,
        seed=seed, eval_size=eval_size,
    )
    for kv in arguments["num_kv_heads"]:
        if not isinstance(kv, int) or kv < 1 or num_heads % kv:
            raise ValueError(f"every num_kv_heads must divide num_heads={num_heads}, got {kv!r}")
    return cached("gqa_from_scratch", arguments, lambda: _gqa_from_scratch(**arguments))


def _gqa_from_scratch(**config: Any) -> dict[int, float]:
    table = make_table(config["vocab_size"])  # (V, V)
    sizes = (config["vocab_size"], config["seq_len"], config["embed_dim"], config["num_heads"], 64)
    accuracies = {}
    with _reproducible():
        for kv in config["num_kv_heads"]:
            torch.manual_seed(config["seed"])
            model = TinyAttentionModel(*sizes)
            reference = model.attention  # the model's own layer, for its options
            model.attention = _GQAInTinyModel(
                GroupedQueryAttention(
                    config["embed_dim"], config["num_heads"], kv,
                    bias=reference.in_proj_bias is not None, batch_first=reference.batch_first,
                )
            )
            data = torch.Generator().manual_seed(config["seed"])
            _fit(model, config, config["steps"], data, table)
            accuracies[kv] = _accuracy(model, config, table)
    return accuracies
