"""
What heads learn
================

Tutorials often say that the heads of multi-head attention "divide the work": one head follows
syntax, another follows coreference, and so on. In a large trained model that is hard to check,
because nobody knows which relations the data really needs. Here we build a task where we *do*
know: predicting the target needs exactly two relations, "the previous token" and "the token
before that". Then we train a tiny model with four heads, right here while this page is built,
and read off the trained attention weights what each head actually does.

Everything below is computed by :mod:`mha_ref.tutorial`; the script only calls it and prints or
plots what it returns. The prose says what to look for; the printed lines say what this build
found.
"""

# %%
# The task
# --------
# Each sequence holds 8 random tokens from a vocabulary of 16. The target at position ``t`` is
# ``table[token[t - 1], token[t - 2]]``, where ``table`` is a fixed random 16 x 16 lookup table.
# The table is not symmetric, so the model must not only find both tokens but also know which is
# which. The first two positions have no target (marked ``-``).
#
# The tokens are numbers 0 to 15; to make the pictures readable we give them names.

import matplotlib.pyplot as plt
import torch

from mha_ref import causal_mask
from mha_ref.tutorial.heads import plot_head_profiles
from mha_ref.tutorial.plotting import plot_heads
from mha_ref.tutorial.tasks import make_batch, make_table
from mha_ref.tutorial.training import plot_loss_curves, train

torch.manual_seed(0)
LANGUAGE = "en"  # language of the printed head summaries
TOKEN_NAMES = list("ABCDEFGHIJKLMNOP")  # one name per token id

table = make_table(vocab_size=16, seed=0)  # (16, 16)
tokens, targets = make_batch(1, 8, table, torch.Generator().manual_seed(0))  # (1, 8), (1, 8)
print("table:", tuple(table.shape))
print("tokens: ", " ".join(TOKEN_NAMES[i] for i in tokens[0].tolist()))
print("targets:", " ".join(TOKEN_NAMES[i] if i >= 0 else "-" for i in targets[0].tolist()))

# %%
# The model and its training
# --------------------------
# :class:`~mha_ref.tutorial.tasks.TinyAttentionModel` is a token embedding plus a learned position
# embedding, **one** causal :class:`mha_ref.MultiHeadAttention` layer with ``embed_dim=16`` and
# ``num_heads=4`` (so ``head_dim=4``), and a small MLP that reads out a prediction at every
# position. There is no residual connection: all the model knows about the other tokens has passed
# through the attention weights.
#
# :func:`~mha_ref.tutorial.training.train` runs 200 Adam steps on fresh random batches. It trains on the
# CPU on purpose, even when a GPU is present: the model is far too small to gain from one, and on
# one CPU thread with deterministic kernels every build gets the same numbers. Accuracy is
# measured on a fixed evaluation set of new sequences.

result = train(num_heads=4, embed_dim=16, seed=0)
print(f"parameters: {result.num_parameters} (attention layer: {result.attention_parameters})")
print(f"loss: first step {result.loss_curve[0]:.3f}, last step {result.loss_curve[-1]:.4f}")
print(f"accuracy on the evaluation set: {result.accuracy:.3f}")

fig = plot_loss_curves(
    {"4 heads": result.loss_curve},
    title="Training loss",
    xlabel="training step",
    ylabel="cross-entropy loss (log scale)",
)
plt.show()

# %%
# The weights of each head on one sequence
# ----------------------------------------
# Now we feed a new sequence (the first of a fixed probe batch, drawn apart from the training
# data) and draw every head's attention weights: row = query position, column = key position,
# each row sums to 1. The grey upper triangle is what the causal mask blocks. A head that follows
# "the previous token" lights up the diagonal just below the main one; a head that follows "two
# tokens back" lights up the next diagonal down. The first rows are special: position 0 can only
# attend to itself, and position 1 has no token two back.

# sphinx_gallery_thumbnail_number = 2
probe_labels = [f"{t}:{TOKEN_NAMES[i]}" for t, i in enumerate(result.probe_tokens[0].tolist())]
weights = result.probe_weights[0]  # (num_heads, seq_len, seq_len)
print("probe weights:", tuple(weights.shape))
# the same labels and mask for both heatmaps of the probe sequence
probe_heatmap = dict(
    annotate_min=0.01,
    colorbar_label="attention weight",
    xlabel="key (position:token)",
    ylabel="query (position:token)",
    blocked=~causal_mask(len(probe_labels)),  # (seq_len, seq_len), True = blocked
    blocked_label="blocked by the causal mask (weight 0)",
)
fig = plot_heads(
    weights,
    probe_labels,
    titles=[f"head {h}" for h in range(weights.shape[0])],
    suptitle="Attention weights of each head (one probe sequence)",
    ncols=2,
    **probe_heatmap,
)
plt.show()

# %%
# What each head attends to, measured
# -----------------------------------
# One sequence can mislead, so we average over the whole probe batch (256 sequences). For every
# head and every offset (key position minus query position: ``-1`` is the previous token) we take
# the mean weight, counting only the query positions that have a target. The offset with the
# largest mean weight is the head's relation; a head puts at least half of its weight there to be
# called *focused*. The entropy of a row says how spread out it is: 0 nats means all weight on one
# key; the dashed line marks a head that spreads evenly over every key it may see.
#
# What to look for: does every relation the task needs (offsets ``-1`` and ``-2``) have a focused
# head? With four heads and two relations, some heads have nothing new to do: if two heads share
# an offset, one of them is redundant. The summary below is computed from the weights, not
# assumed.

fig = plot_head_profiles(
    result,
    title="Mean weight per head and offset (probe batch)",
    offset_label="offset (key position - query position)",
    head_label="head {}",
    entropy_title="Mean entropy per head",
    entropy_label="entropy (nats)",
    uniform_label="uniform over allowed keys",
    colorbar_label="mean attention weight",
)
plt.show()

for head in result.heads:
    print(head.describe(LANGUAGE))
print("entropy per head (nats):", [round(float(e), 3) for e in result.entropy])
print(f"entropy of a uniform head (nats): {result.max_entropy:.3f}")
print("relations the task needs:    ", list(result.config["offsets"]))
print("relations found in the heads:", result.relations_found())
print("relations no head covers:    ", result.relations_missing())

# %%
# And with a single head?
# -----------------------
# The same model with ``num_heads=1`` (so ``head_dim=16``) has one softmax row per position. To
# see both related tokens it must split that row between two keys, and the read-out receives a
# weighted *average* of the two, from which it has to tell them apart. Compare its summary and its
# accuracy with the four-head model above: whether one head copes, and how well, is what this
# build measured. :ref:`The next example <sphx_glr_auto_examples_plot_06_how_many_heads.py>`
# repeats this over several head counts and seeds.

single = train(num_heads=1, embed_dim=16, seed=0)
print(f"accuracy with 1 head:  {single.accuracy:.3f}")
print(f"accuracy with 4 heads: {result.accuracy:.3f}")
for head in single.heads:
    print(head.describe(LANGUAGE))

fig = plot_heads(
    single.probe_weights[0],
    probe_labels,
    titles=["the only head"],
    suptitle="One head, same probe sequence",
    **probe_heatmap,
)
plt.show()
