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
# KL divergence against ``head_dim``
# ----------------------------------
# For each width we print the largest rank of a fitted score matrix, and the KL divergence
# :math:`\\mathrm{KL}(P \\,\\|\\, \\mathrm{softmax}(S))` in nats, averaged over rows and targets (0
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
# **Exercise 2.** Keep one head of ``head_dim = 4`` and change the sequence length ``L`` instead.
# Up to which ``L`` can it match every attention pattern exactly? Check your answer with new
# random targets and inputs for a range of lengths.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The threshold at the top of the page, read the other way: the centred log-probabilities of
#    ``L`` keys have rank up to ``L - 1``, so the head matches every pattern while
#    ``L - 1 <= head_dim``, that is up to ``L = head_dim + 1``. For longer sequences neither the
#    closed form nor gradient descent finds an exact head: the KL stays above zero. The fits
#    below use the functions of :mod:`mha_ref.tutorial.low_rank` that the sweep uses, with fewer
#    Adam steps:

from mha_ref.tutorial.low_rank import (
    fit_closed_form,
    fit_descent,
    head_scores,
    kl_divergence,
    make_inputs,
    make_targets,
)

head_dim, embed_dim, steps = 4, 8, 100
rows = []
for seq_len in range(3, 9):
    x = make_inputs(seq_len, embed_dim)  # (seq_len, embed_dim)
    small_targets = make_targets(8, seq_len)  # (8, seq_len, seq_len)
    w_q, w_k = fit_closed_form(x, small_targets, head_dim)  # (8, embed_dim, head_dim) each
    closed = kl_divergence(small_targets, head_scores(x, w_q, w_k)).mean()
    w_q, w_k = fit_descent(x, small_targets, w_q, w_k, steps=steps)  # (8, embed_dim, head_dim) each
    descent = kl_divergence(small_targets, head_scores(x, w_q, w_k)).mean()
    rows.append([seq_len, f"{closed.clamp(min=0):.4f}", f"{descent.clamp(min=0):.4f}"])
print(f"head_dim: {head_dim}, embed_dim: {embed_dim}, Adam steps: {steps}")
print(f"longest L with L - 1 <= head_dim: {head_dim + 1}")
print(text_table(["L", "KL closed form", "KL gradient descent"], rows))
