"""
Example 12: The low-rank bottleneck of narrow heads
===================================================

At a fixed ``embed_dim``, more heads means narrower heads: ``head_dim = embed_dim / num_heads``.
Bhojanapalli et al. (2020), "Low-Rank Bottleneck in Multi-head Attention Models"
(`arXiv:2002.07028 <https://arxiv.org/abs/2002.07028>`_, section 3), point out what a narrow
head loses. One head's scores on ``L`` keys are

.. math::

    S = \\frac{X W_Q (X W_K)^\\top}{\\sqrt{d_k}}, \\qquad W_Q, W_K \\in \\mathbb{R}^{d_{model} \\times d_k},

a product through ``head_dim`` (:math:`d_k`) columns, so :math:`\\mathrm{rank}(S) \\le d_k`. The
softmax ignores a constant added to a row, so a head can produce an attention pattern :math:`P`
exactly when :math:`\\log P + c \\mathbf{1}^\\top`, for some column :math:`c` of per-row constants,
is a matrix of rank :math:`d_k` or less (with inputs of rank :math:`L`). Their Theorem 1 puts the
threshold at :math:`d_k = L`; the per-row constant moves it one lower. Choosing :math:`c` to
centre every row gives rows that each sum to zero, and such a matrix has rank at most
:math:`L - 1`. So a head with :math:`d_k \\ge L - 1` can express *every* pattern with positive
weights; with :math:`d_k < L - 1` most patterns are out of reach.

This page measures how much that matters: for fixed inputs and a set of target patterns, it fits
the best single head of each width and reports how far the head's pattern stays from the target.
"""

# %%
# .. _ex12-inputs-and-target-patterns:
#
# Inputs and target patterns
# --------------------------
# The inputs ``X`` are ``L = 32`` fixed random vectors of width ``embed_dim = 64``. The targets are
# random attention patterns over the 32 keys: each row is the softmax of scaled Gaussian noise,
# so it puts most of its weight on a few keys, as a focused head would. Every row of every target
# is a different choice; nothing about them is low-rank by construction.
#
# :func:`~mha_ref.tutorial.low_rank.low_rank_sweep` fits one head per target and per ``head_dim``,
# in two steps: a closed form (the best rank-``head_dim`` approximation of the target's centred
# log-probabilities, by SVD, turned into ``W_Q`` and ``W_K``), then Adam on the KL divergence
# itself, starting from it. It runs in float64, seeded, on one thread.

import matplotlib.pyplot as plt

from mha_ref.tutorial.low_rank import low_rank_sweep
from mha_ref.tutorial.plotting import plot_heads, plot_lines, text_table

sweep = low_rank_sweep(head_dims=(1, 2, 4, 8, 16, 31, 32, 64), seq_len=32, embed_dim=64)
targets = sweep.targets  # (num_targets, seq_len, seq_len)
print(f"targets: {tuple(targets.shape)}, embed_dim: {sweep.embed_dim}, L: {sweep.seq_len}")
print(f"mean largest weight in a row: {targets.amax(dim=-1).mean():.3f}")
print(f"mean weight on a row's 3 largest keys: {targets.topk(3, dim=-1).values.sum(-1).mean():.3f}")

# %%
# .. _ex12-kl-divergence-against-head-dim:
#
# KL divergence against ``head_dim``
# ----------------------------------
# For each width we print the largest rank of a fitted score matrix, and the KL divergence
# :math:`\mathrm{KL}(P \,\|\, \mathrm{softmax}(S))` in nats, averaged over rows and targets (0
# means the head reproduces the target exactly). The column ``heads`` is how many heads of that
# width fit in ``embed_dim = 64`` (``-`` where ``head_dim`` does not divide it: ``L - 1`` is in the
# sweep only to test the threshold). What to look for: the rank never exceeds ``head_dim``, and
# it stops at ``L - 1`` even for wider heads: the closed form matches the centred
# log-probabilities, whose rows each sum to zero, so nothing wider is needed. The KL falls as
# ``head_dim`` grows and reaches zero at ``head_dim = L - 1`` already; below that, gradient
# descent finds better heads than the closed form, but not exact ones.

rows = [
    [
        d,
        sweep.embed_dim // d if sweep.embed_dim % d == 0 else "-",
        sweep.score_rank[i],
        f"{sweep.kl_closed_form[i]:.3f}",
        f"{sweep.kl_descent[i]:.3f}",
    ]
    for i, d in enumerate(sweep.head_dims)
]
print(text_table(["head_dim", "heads", "rank of S", "KL closed form", "KL gradient descent"], rows))

fig = plot_lines(
    sweep.head_dims,
    {"closed form (SVD)": sweep.kl_closed_form, "gradient descent": sweep.kl_descent},
    xlabel="head_dim",
    ylabel="KL(target || head) in nats",
    title="How well one head matches a target pattern (L = 32 keys)",
    logx=True,
)
fig.axes[0].axvline(sweep.seq_len - 1, color="grey", linestyle="--", linewidth=1)
fig.axes[0].annotate(
    "head_dim = L - 1 ", (sweep.seq_len - 1, max(sweep.kl_closed_form)), fontsize=8, ha="right"
)
ticks = [d for d in sweep.head_dims if d != sweep.seq_len]  # the ticks of L - 1 and L would overlap
fig.axes[0].set_xticks(ticks, [str(d) for d in ticks])
fig.axes[0].minorticks_off()
plt.show()

# %%
# .. _ex12-what-a-narrow-head-gets-wrong:
#
# What a narrow head gets wrong
# -----------------------------
# The first target beside the best heads of three widths. A head that is too narrow keeps the
# broad outline of the pattern but blurs it: it cannot put its weight on a different set of keys
# for every query.

# sphinx_gallery_thumbnail_number = 2
shown = [2, 8, 32]  # head_dim of the fitted heads to draw
fig = plot_heads(
    [targets[0]] + [sweep.fitted[d] for d in shown],
    titles=["target"] + [f"one head, head_dim = {d}" for d in shown],
    suptitle="Target pattern and the best head of each width",
    ncols=2,
    colorbar_label="attention weight",
    xlabel="key position",
    ylabel="query position",
)
plt.show()

# %%
# .. _ex12-what-this-means-for-the-number-of-heads:
#
# What this means for the number of heads
# ---------------------------------------
# Splitting a fixed ``embed_dim`` into more heads makes each head narrower. Once ``head_dim``
# falls below the sequence length minus one, each head can express fewer attention patterns, however it is
# trained: the table above measures the cost for these targets. More heads buy more patterns
# side by side, each less expressive. Bhojanapalli et al. argue that this is one reason why too
# many heads hurt (compare the ``h = 32`` row of Vaswani et al.'s Table 3 in
# :ref:`Example 6 <sphx_glr_auto_examples_plot_06_how_many_heads.py>`), and propose
# to decouple the two: set ``head_dim`` to the sequence length whatever the number of heads, and
# pay for it in parameters. The targets here are random, so nothing in them helps a narrow head;
# how much the bottleneck costs on the patterns a trained model actually needs is a different
# question, which this page does not measure.

# %%
# .. _ex12-exercises:
#
# Exercises
# ---------
# **Exercise 1.** In each row of an attention pattern, call the key with the largest weight the
# row's *most-attended key*. Across the queries of the first target, many different keys are
# most-attended. How many different keys can be most-attended in the pattern of the best head
# with ``head_dim = 1``, on any target? Write out the entries of a score matrix of rank 1 and
# reason from them.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    A score matrix of rank 1 is :math:`S_{ij} = a_i b_j`: one number per query times one number
#    per key. For a query with :math:`a_i > 0` the largest score is at the key with the largest
#    :math:`b_j`; for :math:`a_i < 0`, at the key with the smallest. So every query's
#    most-attended key is one of the same two keys, however the head is trained. Wider heads
#    have more directions to separate the keys by:

patterns = {"target 0": targets[0]}  # each (seq_len, seq_len)
patterns |= {f"one head, head_dim = {d}": sweep.fitted[d] for d in sweep.head_dims}
rows = [[name, len(pattern.argmax(dim=-1).unique())] for name, pattern in patterns.items()]
print(f"queries: {sweep.seq_len}")
print(text_table(["pattern", "different most-attended keys"], rows))

# %%
# **Exercise 2.** Keep one head of ``head_dim = 4`` on ``L = 5`` keys. Then ``head_dim >= L - 1``,
# so by the threshold at the top of the page the head can match every attention pattern, with inputs
# of rank ``L``. The sweep's inputs had more features than keys; give them fewer: ``embed_dim = 4``,
# as narrow as the head (a head is never wider than its inputs). Can the head still match every
# pattern? Count the numbers the scores can depend on, and the numbers a pattern needs.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    No. Whatever :math:`W_Q` and :math:`W_K` are, the scores are :math:`S = X M X^\top` with
#    :math:`M = W_Q W_K^\top / \sqrt{d_k}`, an ``embed_dim`` by ``embed_dim`` matrix (the two
#    projections hold more numbers, but the scores see them only through :math:`M`): at most
#    ``embed_dim**2`` numbers to choose, and the per-row constants that the softmax ignores add
#    ``L`` more. The log-probabilities of a pattern are ``L**2`` numbers, and with
#    ``embed_dim = L - 1`` there are fewer numbers to choose than that. So the reachable matrices
#    :math:`X M X^\top + c \mathbf{1}^\top` fill only a subspace of all ``L`` by ``L`` matrices, and
#    the log-probabilities of a random target almost surely lie outside it. Then no head matches
#    that target exactly, however it is trained: :math:`\mathrm{softmax}(S) = P` would put
#    :math:`\log P` in the subspace. With inputs of rank ``L``, :math:`X M X^\top` can be any
#    matrix, and the threshold applies. The table measures both sides: first the distance from each
#    target's centred log-probabilities to the nearest :math:`X M X^\top + c \mathbf{1}^\top` (a
#    least-squares projection, relative to their size, averaged over the targets; it lets :math:`M`
#    be any matrix, not only one of rank at most ``head_dim``), then the fits of a head of width 4, made as
#    in the sweep. With the narrowest inputs, gradient descent improves on the closed form but does
#    not reach zero, and the distance says that no training could. (The projections of a real layer
#    also have biases, which act like one more input feature that is always 1; with them, inputs of
#    width ``L - 1`` would do.)

import torch

from mha_ref.tutorial.low_rank import (
    fit_closed_form,
    fit_descent,
    head_scores,
    kl_divergence,
    make_inputs,
    make_targets,
)

head_dim, seq_len, steps = 4, 5, 300
small_targets = make_targets(8, seq_len)  # (8, seq_len, seq_len)
log_p = small_targets.log()  # (8, seq_len, seq_len)
centred = log_p - log_p.mean(dim=-1, keepdim=True)  # (8, seq_len, seq_len)
flat = centred.flatten(1).T  # (seq_len * seq_len, 8) one column per target
row_constants = torch.kron(torch.eye(seq_len, dtype=flat.dtype), torch.ones(seq_len, 1, dtype=flat.dtype))
rows = []
for embed_dim in (4, 5, 6, 8):
    x = make_inputs(seq_len, embed_dim)  # (seq_len, embed_dim)
    # X M X^T + c 1^T, flattened, is linear in (M, c): one column per entry of M and of c
    basis = torch.cat([torch.kron(x, x), row_constants], dim=1)  # (seq_len**2, embed_dim**2 + seq_len)
    nearest = basis @ torch.linalg.pinv(basis) @ flat  # (seq_len**2, 8)
    distance = ((flat - nearest).norm(dim=0) / flat.norm(dim=0)).mean()
    w_q, w_k = fit_closed_form(x, small_targets, head_dim)  # (8, embed_dim, head_dim) each
    closed = kl_divergence(small_targets, head_scores(x, w_q, w_k)).mean()
    w_q, w_k = fit_descent(x, small_targets, w_q, w_k, steps=steps)  # (8, embed_dim, head_dim) each
    descent = kl_divergence(small_targets, head_scores(x, w_q, w_k)).mean()
    rows.append(
        [
            embed_dim,
            int(torch.linalg.matrix_rank(x)),
            embed_dim**2 + seq_len,
            f"{distance:.3f}",
            f"{closed.clamp(min=0):.4f}",
            f"{descent.clamp(min=0):.4f}",
        ]
    )
print(f"head_dim: {head_dim}, L: {seq_len}, numbers in log P: L**2 = {seq_len**2}, Adam steps: {steps}")
print(
    text_table(
        ["embed_dim", "rank of X", "embed_dim**2 + L", "distance of log P", "KL closed form", "KL gradient descent"],
        rows,
    )
)

# %%
# .. _ex12-summary:
#
# Summary
# -------
# - A head's score matrix is a product through ``head_dim`` columns, so its rank is at most
#   ``head_dim``; the fitted heads' ranks never exceed it.
# - For these random targets the KL divergence falls as ``head_dim`` grows and reaches zero at
#   ``head_dim = L - 1``; a narrower head keeps the outline of a pattern but blurs it.
# - At a fixed ``embed_dim``, more heads means narrower heads, each able to express fewer
#   patterns. What that costs on the patterns a trained model needs is not measured here.
