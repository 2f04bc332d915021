r"""The lookup-table task and the tiny model trained on it.

**The task.** Sequences of ``seq_len`` random tokens from a vocabulary of ``vocab_size``. The
target at position ``t`` is ``table[token[t - 1], token[t - 2]]``, where ``table`` is a fixed
random ``(vocab_size, vocab_size)`` lookup table. Predicting it needs *two relations at once*:
"the previous token" and "the token before that", and the table is not symmetric, so the model
must also know which is which. Positions ``t < 2`` have no target. The two relations are the
``offsets`` argument, written as *key position minus query position* (``-1`` = previous token).

**The model.** Token embedding + learned position embedding, one causal
:class:`mha_ref.MultiHeadAttention` layer, and a two-layer MLP read-out per position. There is no
residual connection: everything the read-out knows about other tokens passed through attention.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from mha_ref.masks import allowed_to_blocked, causal_mask
from mha_ref.multihead import MultiHeadAttention

__all__ = ["IGNORE_INDEX", "TinyAttentionModel", "make_batch", "make_table"]

#: Target value of positions without a target (``F.cross_entropy``'s ``ignore_index``).
IGNORE_INDEX = -100


# ------------------------------------------------------------------------------------------------


def make_table(vocab_size: int, seed: int = 0) -> torch.Tensor:
    """The random lookup table ``(vocab_size, vocab_size)`` of the task, fixed by ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(vocab_size, (vocab_size, vocab_size), generator=generator)  # (V, V)


def make_batch(
    batch_size: int,
    seq_len: int,
    table: torch.Tensor,
    generator: torch.Generator,
    offsets: tuple[int, int] = (-1, -2),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token sequences and their targets.

    The target at position ``t`` is ``table[token[t + offsets[0]], token[t + offsets[1]]]``.

    Args:
        batch_size: number of sequences.
        seq_len: tokens per sequence.
        table: the ``(vocab_size, vocab_size)`` lookup table (:func:`make_table`).
        generator: the random stream the tokens are drawn from.
        offsets: the two relations, as key position minus query position (both negative).

    Returns:
        ``tokens`` ``(batch_size, seq_len)`` and ``targets`` ``(batch_size, seq_len)``; targets
        are ``-100`` (ignored by ``cross_entropy``) where ``t + offset < 0``.
    """
    check_offsets(offsets, seq_len)
    vocab_size = table.shape[0]
    tokens = torch.randint(vocab_size, (batch_size, seq_len), generator=generator)  # (B, L)
    targets = torch.full((batch_size, seq_len), IGNORE_INDEX, dtype=torch.long)  # (B, L)
    start = -min(offsets)  # first position where both related tokens exist
    positions = torch.arange(start, seq_len)  # (L - start,)
    first = tokens[:, positions + offsets[0]]  # (B, L - start)
    second = tokens[:, positions + offsets[1]]  # (B, L - start)
    targets[:, start:] = table[first, second]  # (B, L - start)
    return tokens, targets


def check_offsets(offsets: Sequence[int], seq_len: int) -> None:
    """Raise ValueError unless ``offsets`` are two different negative ints within ``seq_len``."""
    if len(offsets) != 2 or any(not isinstance(o, int) or o >= 0 for o in offsets):
        raise ValueError(f"offsets must be two negative ints such as (-1, -2), got {offsets!r}")
    if offsets[0] == offsets[1]:
        raise ValueError(f"offsets must be two different relations, got {offsets!r}")
    if -min(offsets) >= seq_len:
        raise ValueError(f"offsets {offsets!r} reach before the start of seq_len={seq_len}")


# ------------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------------


class TinyAttentionModel(nn.Module):
    """Embeddings, one causal :class:`mha_ref.MultiHeadAttention` layer, an MLP read-out.

    Args:
        vocab_size: number of token ids.
        seq_len: longest sequence (size of the position embedding).
        embed_dim: model width ``d_model``.
        num_heads: attention heads ``h`` (must divide ``embed_dim``).
        mlp_hidden: hidden width of the read-out MLP.

    Shape:
        - tokens: ``(N, L)`` token ids.
        - logits: ``(N, L, vocab_size)``; weights: ``(N, num_heads, L, L)`` per head.
    """

    def __init__(
        self, vocab_size: int, seq_len: int, embed_dim: int, num_heads: int, mlp_hidden: int
    ) -> None:
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(seq_len, embed_dim)
        self.attention = MultiHeadAttention(embed_dim, num_heads, batch_first=True)
        self.readout = nn.Sequential(
            nn.Linear(embed_dim, mlp_hidden), nn.ReLU(), nn.Linear(mlp_hidden, vocab_size)
        )

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq_len = tokens.shape[1]
        positions = torch.arange(seq_len, device=tokens.device)  # (L,)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (N, L, E)
        blocked = allowed_to_blocked(causal_mask(seq_len, device=tokens.device))  # (L, L)
        context, weights = self.attention(
            x, x, x, attn_mask=blocked, need_weights=True, average_attn_weights=False
        )  # (N, L, E), (N, H, L, L)
        return self.readout(context), weights  # (N, L, V), (N, H, L, L)




