"""
Example 5: What heads learn
===========================

Tutorials often say that the heads of multi-head attention "divide the work": one head follows
syntax, another follows coreference, and so on. In a large trained model that is hard to check,
because nobody knows which relations the data really needs. Here we build a task where we *do*
know: predicting the target needs exactly two relations, "the previous token" and "the token
before that". Then we train a tiny model with four heads, right here while this page is built,
and ask two questions that sound alike but are not:

* **where does each head look?** Read off its attention weights (the *QK circuit*: queries
  against keys decide the weights);
* **what does each head do for the model?** Remove it and measure what the model loses (the
  *OV circuit*: what the head reads from the values and writes through the output projection).

The second answer cannot be read off the first, and this page shows a case where reading it off
would be wrong.

Everything below is computed by :mod:`mha_ref.tutorial`; the script only calls it and prints or
plots what it returns. The prose says what to look for; the printed lines say what this build
found.
"""

# %%
# .. _ex05-the-task:
#
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
TOKEN_NAMES = list("ABCDEFGHIJKLMNOP")  # one name per token id

table = make_table(vocab_size=16, seed=0)  # (16, 16)
tokens, targets = make_batch(1, 8, table, torch.Generator().manual_seed(0))  # (1, 8), (1, 8)
print("table:", tuple(table.shape))
print("tokens: ", " ".join(TOKEN_NAMES[i] for i in tokens[0].tolist()))
print("targets:", " ".join(TOKEN_NAMES[i] if i >= 0 else "-" for i in targets[0].tolist()))

# %%
# .. _ex05-the-model-and-its-training:
#
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
# measured on a fixed evaluation set of new sequences. New sequences, but
# not new pairs: training sees every one of the 16 x 16 pairs ``(token[t - 1], token[t - 2])``,
# so this measures how well the table was learned, not generalisation to pairs never seen.

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
# .. _ex05-weights-of-each-head-on-one-sequence:
#
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
# .. _ex05-what-each-head-attends-to-measured:
#
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
# head? With four heads and two relations, some offset may have more than one head. It is
# tempting to call such a head redundant, a spare copy of the other. The weights cannot tell:
# they say where a head looks, not what it passes on. The next section measures that instead.
# The summary below is computed from the weights, not assumed.

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
    print(head.describe("en"))
print("entropy per head (nats):", [round(float(e), 3) for e in result.entropy])
print(f"entropy of a uniform head (nats): {result.max_entropy:.3f}")
print("relations the task needs:    ", list(result.config["offsets"]))
print("relations found in the heads:", result.relations_found())
print("relations no head covers:    ", result.relations_missing())

# %%
# .. _ex05-what-each-head-does-remove-and-measure:
#
# What each head does: remove it and measure
# ------------------------------------------
# How can we design experiments to measure the importance of an attention head? (This is one of
# d2l.ai's exercises on multi-head attention.) Intervene on the head and measure the model, on the
# same fixed evaluation set as before, without retraining:
#
# * **zero ablation** (head masking, Michel et al. 2019, arXiv:1905.10650): multiply the head's
#   slice of the context, its output before the output projection ``out_proj``, by a gate
#   :math:`\xi_h = 0`. That is the same as deleting the head's columns of ``out_proj.weight`` (its
#   rows of :math:`W^O` in the paper's notation, :math:`\mathrm{Concat}(\mathrm{head}_1, \ldots,
#   \mathrm{head}_h) W^O`);
# * **mean ablation**: replace that slice by its average over the evaluation sequences, so the
#   read-out still gets an input of the usual size, only one that no longer depends on the
#   sequence;
# * **gradient importance** (Michel et al. 2019, eq. 2): the derivative of the loss with respect
#   to the gate, :math:`I_h = \mathbb{E}_x |\partial \mathcal{L}(x) / \partial \xi_h|` at
#   :math:`\xi = 1`, computed in one backward pass. It is a first-order *ranking proxy*, not the
#   cost of removing the head: once the loss is near zero, as here, the derivative is far smaller
#   than the loss increase that removal causes, and it can misorder heads of similar importance.
#   The table prints the measured loss increase beside it;
# * beside them, **confidence** (Voita et al. 2019, arXiv:1905.09418): the mean over queries of
#   the head's largest attention weight. It is read off the weights like the summary above, so
#   it says where a head looks, with what certainty, and nothing about what it contributes.
#
# What to look for: is there a head whose removal costs (almost) nothing, as "redundant" would
# predict? Compare each head's accuracy after ablation with the full model's.
#
# :func:`~mha_ref.tutorial.ablation.ablation_report` computes all of it with a gated copy of the
# forward pass (:func:`~mha_ref.tutorial.ablation.gated_forward`), written with the package's own
# ``split_heads``, ``scaled_dot_product_attention`` and ``merge_heads``; with every gate at 1 it
# gives exactly the model's output.

from mha_ref.tutorial.ablation import ablation_report, chance_accuracy, plot_pruning_curve
from mha_ref.tutorial.plotting import text_table

report = ablation_report(result)
ablation_rows = [
    (
        head.head,
        f"{head.offset:+d}",
        f"{report.confidence[head.head]:.3f}",
        f"{report.zero_ablation[head.head]:.3f}",
        f"{report.mean_ablation[head.head]:.3f}",
        f"{report.loss_increase[head.head]:.3f}",
        f"{report.importance[head.head]:.4f}",
    )
    for head in result.heads
]
print(f"accuracy of the full model: {report.accuracy:.3f}, loss: {report.loss:.4f}")
print(
    text_table(
        [
            "head",
            "offset",
            "confidence",
            "zero-ablated acc.",
            "mean-ablated acc.",
            "loss increase",
            "importance",
        ],
        ablation_rows,
    )
)

# %%
# .. _ex05-two-heads-on-the-same-offset:
#
# Two heads on the same offset
# ----------------------------
# If two heads look at the same key, does removing both cost more than removing one? Below: every
# pair of heads that shares an offset, removed together (zero ablation).

for offset in result.relations_found():
    same = [h.head for h in result.heads if h.focused and h.offset == offset]
    for i, first in enumerate(same):
        for second in same[i + 1 :]:
            alone = [report.zero_ablation[first], report.zero_ablation[second]]
            print(
                f"offset {offset:+d}: without head {first}: {alone[0]:.3f}, "
                f"without head {second}: {alone[1]:.3f}, "
                f"without both: {report.pairs[(first, second)]:.3f}"
            )

# %%
# .. _ex05-pruning-least-important-first:
#
# Pruning, least important first
# ------------------------------
# Michel et al. and Voita et al. prune heads in order of importance and watch the quality fall.
# We do the same with the gradient importance: remove the least important head, then the next,
# until none is left. With no head the read-out receives no information about the tokens, so it
# can at best always predict the most frequent target (the dashed line). In large translation
# models these papers found many heads that can go at little cost. What to look for here: is the
# curve flat anywhere?

chance = chance_accuracy(result.eval_batch()[1])
print("heads from least to most important:", report.order)
print("accuracy with 0, 1, 2, ... heads removed:", [f"{a:.3f}" for a in report.pruning])
print(f"always predicting the most frequent target: {chance:.3f}")
fig = plot_pruning_curve(
    report,
    chance=chance,
    title="Accuracy as heads are pruned (gradient importance order)",
    xlabel="heads removed (least important first)",
    ylabel="accuracy on the evaluation set",
    head_label="head {}",
    chance_label="always the most frequent target",
)
plt.show()

# %%
# .. _ex05-a-larger-model-heads-that-can-go:
#
# A larger model: heads that can go
# ---------------------------------
# "No head can go" is a finding about *this* model, not about heads in general. Below, the same
# task, the same training and the same seed, in a model that is both wider and has more heads:
# ``embed_dim=64`` and ``num_heads=8`` (``head_dim=8``). What to look for: does this model's
# pruning curve stay near the full model's accuracy for its first few heads, as Michel et al.
# found in translation models, while the small one falls at the first head? This step changes
# two factors at once (width and head count); the section after it separates them.

wide = train(num_heads=8, embed_dim=64, seed=0)
wide_report = ablation_report(wide)
wide_chance = chance_accuracy(wide.eval_batch()[1])
print(f"wide model (embed_dim=64, 8 heads): accuracy {wide_report.accuracy:.3f}")
print(
    "wide model, zero-ablated accuracy per head:",
    [f"{a:.3f}" for a in wide_report.zero_ablation],
)
print("wide model, heads from least to most important:", wide_report.order)
print("narrow model, pruning curve:", [f"{a:.3f}" for a in report.pruning])
print("wide model, pruning curve:  ", [f"{a:.3f}" for a in wide_report.pruning])
fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
curves = {
    "embed_dim=16, 4 heads": report.pruning,
    "embed_dim=64, 8 heads": wide_report.pruning,
}
for name, curve in curves.items():
    ax.plot(range(len(curve)), curve, marker="o", label=name)
ax.axhline(wide_chance, color="grey", linestyle="--", label="always the most frequent target")
ax.set_title("Pruning curves, small and large model")
ax.set_xlabel("heads removed (least important first)")
ax.set_ylabel("accuracy on the evaluation set")
ax.set_ylim(0, 1.05)
ax.legend()
plt.show()

# %%
# .. _ex05-width-or-head-count:
#
# Width or head count? One factor at a time
# -----------------------------------------
# The step above changed ``embed_dim`` and ``num_heads`` together, so it cannot say which of the
# two made heads dispensable. :func:`mha_ref.tutorial.ablation.width_heads_grid` trains the four
# cells of ``embed_dim`` 16 or 64 by 4 or 8 heads, three seeds each, all with the same training as
# above (200 steps, the same rate): along a row only the number of heads changes, along a column
# only ``embed_dim``. For every run it counts the heads whose removal on their own (zero
# ablation) costs less than 0.01 of the full model's accuracy
# (:func:`~mha_ref.tutorial.ablation.removable_heads`).

from mha_ref.tutorial.ablation import width_heads_grid

cells = ((16, 4), (16, 8), (64, 4), (64, 8))
grid = width_heads_grid(cells, seeds=(0, 1, 2), tolerance=0.01)
grid_rows = []
for embed, heads in cells:
    runs = [r for r in grid if (r["embed_dim"], r["num_heads"]) == (embed, heads)]
    grid_rows.append(
        (
            embed,
            heads,
            embed // heads,
            "  ".join(f"{r['accuracy']:.3f}" for r in runs),
            "  ".join(str(len(r["removable"])) for r in runs),
        )
    )
print(
    text_table(
        ["embed_dim", "heads", "head_dim", "accuracy per seed", "heads that can go, per seed"],
        grid_rows,
    )
)

# %%
# Read it one factor at a time (the counts are the table's). **Width alone**, 4 heads at
# ``embed_dim`` 16 and then 64: on every seed of the narrow model no head can go; the wider one,
# with heads four times as wide, lets at most one go. **Head count alone at** ``embed_dim``
# **64**, 4 and then 8 heads: the 8-head model lets more heads go on every seed, although each of
# its heads is half as wide. **Head count alone at** ``embed_dim`` **16**: 8 heads of width 2 let
# no head go either, and they do not even reach the accuracy the other cells reach (the table's
# accuracies). So the two factors interact: in this task heads became dispensable only where
# there were more heads than the two relations need *and* each head was 8 wide or more (the
# ``(64, 8)`` cell). Three seeds and one task; whether it holds elsewhere is not measured here.

# %%
# .. _ex05-where-a-head-looks-is-not-what-it-does:
#
# Where a head looks is not what it does
# --------------------------------------
# The heatmaps and the offset profile describe the **QK circuit** of each head: which key its
# query picks. Two heads with the same offset pick the same token. What each then passes on is
# its **OV circuit**: its value projection reads some features of that token, and its columns of
# ``out_proj.weight`` write them into the output. Heads on the same offset can pass on different
# features of the same token, and the table above measured what each one's removal costs. Only an
# intervention measures a contribution; the weights alone never do, and neither does the
# confidence column, which is computed from the weights.
#
# The answer to d2l's exercise, then: **measure importance by intervening**. Mask a head (zero
# or mean ablation) and measure the drop on held-out data; rank all heads at once by the gradient
# with respect to the head gates (a first-order proxy that underestimates the drop once the loss
# is near zero); prune in order of importance and
# look for where the curve falls. Check whether the answer depends on the model's width and head
# count, changing one at a time. And report the numbers, not a reading of the heatmaps.
# :ref:`The next example <sphx_glr_auto_examples_plot_06_how_many_heads.py>` asks how the number
# of heads changes how fast this task is learned and how well.

# %%
# .. _ex05-exercises:
#
# Exercises
# ---------
# **Exercise 1.** The pairs removed together above give the accuracy left without the two heads
# that attend to offset ``-1``; the heads on offset ``-2`` still work (the gate zeroes one head's
# output and does not change where the others look). What is the best accuracy that *any*
# read-out could reach knowing only the token two back? Say how to compute that bound, then
# whether the ablated model is close to it or well below it. And the same question the other way
# round, with the heads on ``-2`` removed. What does your answer say about what zero ablation
# measures?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Knowing one token only, the best guess for each of its values is the target that occurs most
#    often with it; counting on the evaluation set gives that bound exactly. The ablated model stays
#    below it (how far below depends on the model: retrain with another seed and compare): its
#    read-out was trained to combine both tokens, and nothing was retrained after the heads went.
#    Zero ablation measures what *this trained model* loses, not how much information the remaining
#    heads could still carry.

eval_tokens, eval_targets = result.eval_batch()  # (N, seq_len), (N, seq_len)
vocab_size, seq_len = result.config["vocab_size"], eval_tokens.shape[1]
first = -min(result.config["offsets"])  # first position with a target


def best_accuracy_knowing(offset):
    """Accuracy of the best guess of each target from the token at ``offset`` alone."""
    known = eval_tokens[:, first + offset : seq_len + offset].flatten()  # (n,)
    target = eval_targets[:, first:].flatten()  # (n,)
    counts = torch.zeros(vocab_size, vocab_size)  # (known token, target)
    counts.index_put_((known, target), torch.ones(len(known)), accumulate=True)
    return (counts.amax(dim=1).sum() / counts.sum()).item()


for offset in result.relations_found():
    removed = tuple(h.head for h in result.heads if h.focused and h.offset == offset)
    (kept,) = [o for o in result.config["offsets"] if o != offset]
    print(
        f"heads {removed} on offset {offset:+d} removed: accuracy {report.pairs[removed]:.3f}; "
        f"best possible from the token at {kept:+d} alone: {best_accuracy_knowing(kept):.3f}"
    )
print(f"always the most frequent target: {chance:.3f}")

# %%
# **Exercise 2.** The gradient importance is the mean size of the slope of the loss with respect
# to a head's gate, taken at :math:`\xi_h = 1`. Take the head whose removal raised the loss
# most. If the loss rose along a straight line with that slope while the gate goes from 1 to 0,
# what would removing the head cost? Predict whether the real loss stays below that line or
# rises above it, and where along the way it rises fastest.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Lower the gate in steps with :func:`~mha_ref.tutorial.ablation.gated_forward` and measure.
#    Near :math:`\xi_h = 1` the trained model is right with a large margin, so a small nudge
#    changes its loss very little: the slope there is small. The cost builds up as the gate
#    shrinks and the margin runs out, each step costing more than the one before, so the loss
#    ends far above the straight line. That is why the table prints the loss increase beside
#    the importance: the gradient ranks heads to first order, it does not measure what removing
#    one costs.

from mha_ref.tutorial.ablation import gated_forward
from mha_ref.tutorial.tasks import IGNORE_INDEX

head = max(range(len(result.heads)), key=lambda h: report.loss_increase[h])
slope = report.importance[head]
narrow_model = result.model()
has_target = eval_targets != IGNORE_INDEX  # (N, seq_len)
print(f"head {head}: gradient importance {slope:.4f}, full-model loss {report.loss:.4f}")
for gate_value in [1.0, 0.75, 0.5, 0.25, 0.0]:
    gate = torch.ones(len(result.heads))  # (num_heads,)
    gate[head] = gate_value
    with torch.no_grad():
        logits, _ = gated_forward(narrow_model, eval_tokens, gate)  # (N, seq_len, vocab_size)
    loss = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), eval_targets, ignore_index=IGNORE_INDEX
    )
    accuracy = (logits.argmax(dim=-1) == eval_targets)[has_target].double().mean()
    line = report.loss + slope * (1 - gate_value)
    print(
        f"gate {gate_value:.2f}: straight line {line:.4f}, measured loss {loss.item():.4f}, "
        f"accuracy {accuracy.item():.3f}"
    )

# %%
# **Exercise 3.** Voita et al.'s confidence costs one forward pass and no intervention. Prune
# the wide model's heads in order of confidence, the least confident first, instead of in order
# of gradient importance. Predict: does that curve fall sooner, later, or about as the
# importance curve printed above?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    In this model the cheap proxy does about as well: the first half of the two orders holds the
#    same heads, and the two curves stay close until only a few heads are left (with another seed
#    the orders can differ more; try it). That agreement is itself a measurement: it is known only
#    because the pruning was run. The confidence says how sharply a head looks, not what it writes;
#    every head of the wide model looks sharply, and the ablation found some that can go. Whether
#    the proxy ranks well in another model is again a question for an intervention.

from mha_ref.tutorial.ablation import pruning_curve

wide_tokens, wide_targets = wide.eval_batch()  # (N, seq_len), (N, seq_len)
by_confidence = sorted(range(len(wide.heads)), key=lambda h: (wide_report.confidence[h], h))
confidence_curve = pruning_curve(wide.model(), wide_tokens, wide_targets, by_confidence)
print("wide model, confidence per head:", [f"{c:.3f}" for c in wide_report.confidence])
print("least to most confident:        ", by_confidence)
print("least to most important:        ", wide_report.order)
print("pruning curve, confidence order:", [f"{a:.3f}" for a in confidence_curve])
print("pruning curve, importance order:", [f"{a:.3f}" for a in wide_report.pruning])

# %%
# .. _ex05-summary:
#
# Summary
# -------
# * Where a head looks (its offset profile) is read off the weights; what it contributes is
#   measured only by intervening: zero or mean ablation, the gate-gradient importance, pruning.
# * In the small model (``embed_dim`` 16, 4 heads) no head can go on any of three seeds.
# * Changing one factor at a time: widening the model alone (4 heads) lets at most one head go;
#   8 heads instead of 4 at ``embed_dim`` 64 let more go on every seed, at ``embed_dim`` 16 none
#   (and do not learn the task fully). Spare heads that are wide enough make heads dispensable
#   here; neither factor alone does.
# * A cheap proxy (confidence, gradient importance) ranks heads; whether it ranks them well is
#   known only because the pruning was run.
