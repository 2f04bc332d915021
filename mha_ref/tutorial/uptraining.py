"""Multi-head -> grouped-query attention on the tiny lookup-table model: convert, then uptrain.

Ainslie et al. (2023) turn a trained multi-head checkpoint into grouped-query attention by
mean-pooling each group's key and value heads (:func:`mha_ref.mha_to_gqa`), then train the
converted model a little more ("uptraining"). :func:`gqa_uptraining` does the same at the scale
of the tutorial: it trains :class:`~mha_ref.tutorial.tasks.TinyAttentionModel` with multi-head
attention, converts its attention layer for each requested number of key/value heads, measures
the accuracy right after the conversion, after a short uptraining, and, as a control, of the
same grouped model trained from a random initialisation for the same number of steps.

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

__all__ = ["GQARow", "UptrainResult", "gqa_uptraining"]


@dataclass(frozen=True)
class GQARow:
    """One number of key/value heads, measured three ways.

    Attributes:
        num_kv_heads: key/value heads of the converted attention layer.
        converted_accuracy: evaluation accuracy right after mean-pooling, no training.
        uptrained_accuracy: after ``uptrain_steps`` more steps of the converted model.
        scratch_accuracy: the same grouped model from a random initialisation, trained for
            ``uptrain_steps`` steps (what the conversion is worth).
        uptrain_losses: training loss at each uptraining step.
    """

    num_kv_heads: int
    converted_accuracy: float
    uptrained_accuracy: float
    scratch_accuracy: float
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
        uptrain_steps: Adam steps after the conversion (and of the from-scratch control).
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
    return cached("gqa_uptraining", arguments, lambda: _gqa_uptraining(**arguments))


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
            converted = copy.deepcopy(model)
            converted.attention = _GQAInTinyModel(mha_to_gqa(model.attention, kv))
            converted_accuracy = _accuracy(converted, config, table)
            data = torch.Generator().manual_seed(config["seed"] + 1)  # batches unseen so far
            losses = _fit(converted, config, config["uptrain_steps"], data, table)
            uptrained_accuracy = _accuracy(converted, config, table)

            torch.manual_seed(config["seed"])
            scratch = TinyAttentionModel(*sizes)
            scratch.attention = _GQAInTinyModel(
                GroupedQueryAttention(config["embed_dim"], config["num_heads"], kv)
            )
            data = torch.Generator().manual_seed(config["seed"] + 1)
            _fit(scratch, config, config["uptrain_steps"], data, table)
            rows.append(
                GQARow(kv, converted_accuracy, uptrained_accuracy,
                       _accuracy(scratch, config, table), losses)
            )
    return UptrainResult(config=dict(config), mha_accuracy=mha_accuracy, rows=rows)
