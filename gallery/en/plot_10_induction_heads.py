"""
Example 10: Induction heads: two heads that only work together
==============================================================

A transformer can continue a pattern it has seen only once in its input: after ``... A B ... A``
it predicts ``B``. Olsson et al. (2022), "In-context Learning and Induction Heads"
(`arXiv:2209.11895 <https://arxiv.org/abs/2209.11895>`_), trace this to a circuit of two heads
in two different layers:

1. a **previous-token head** in layer 1 copies into each position which token came just before
   it;
2. an **induction head** in layer 2 looks for the position whose *previous token* is the current
   token, that is the token right after the earlier occurrence, and copies it as the prediction.

Neither head can do the job alone: the second head finds its key only through what the first one
wrote. This page trains a model with the two layers the circuit needs, while the page is built,
then checks each claim by measuring the attention weights and by switching heads off.
"""

# %%
# .. _ex10-the-task-a-segment-that-repeats:
#
# The task: a segment that repeats at a varying distance
# ------------------------------------------------------
# Each sequence is some filler tokens, then a random segment of distinct tokens, then the same
# segment again. The segment's length (the *period*) changes from sequence to sequence. That
# matters: with a fixed period, layer 2 could find the answer by position alone ("look
# ``period - 1`` tokens back") and no previous-token head would be needed. With a varying period
# the only way to predict the second copy is by content.
#
# The model predicts the next token at each position; it is trained and scored on the positions
# of the second copy, where the next token is determined by the first copy.

import matplotlib.pyplot as plt

from mha_ref import causal_mask
from mha_ref.tutorial.induction import accuracy_with_ablation, head_scores
from mha_ref.tutorial.induction_training import train_induction
from mha_ref.tutorial.plotting import plot_heads, text_table
from mha_ref.tutorial.training import plot_loss_curves

TOKEN_NAMES = list("ABCDEFGHIJKLMNOPQRSTUVWX")  # one name per token id

result = train_induction(seed=0)
tokens, periods = result.evaluation_batch()  # (512, seq_len), (512,)
config = result.config
print(f"vocabulary: {config['vocab_size']} tokens, sequence length: {config['seq_len']}")
print(f"period: {config['min_period']} to {config['max_period']} tokens")
for i in range(3):
    print(f"period {int(periods[i]):2d}:", " ".join(TOKEN_NAMES[t] for t in tokens[i].tolist()))

# %%
# .. _ex10-the-model-and-its-loss-curve:
#
# The model and its loss curve
# ----------------------------
# :class:`~mha_ref.tutorial.induction.AttentionOnlyTransformer` is the simplified transformer of
# Elhage et al. (2021): token and position embeddings, two causal
# :class:`mha_ref.MultiHeadAttention` layers that each *add* their output to a residual stream,
# and a linear unembedding. There is no MLP, so everything the model computes beyond the
# embeddings is done by its four heads (two per layer).
#
# :func:`~mha_ref.tutorial.induction_training.train_induction` trains it with Adam on one CPU thread,
# seeded and deterministic, so every build prints the same numbers. What to look for in the loss
# curve: a long plateau, where the model can only guess, then a sudden drop. Olsson et al. call
# this drop the *phase change*: it is when the induction circuit forms. The dashed line marks the
# step where the training batches' accuracy on the second copy first averages 50 % over 20 steps.

model = result.model()
phase_change = result.phase_change_step()
print(f"training steps: {config['steps']}, batch size: {config['batch_size']}")
print(f"loss: first step {result.loss_curve[0]:.3f}, last step {result.loss_curve[-1]:.4f}")
print(f"phase change (accuracy reaches 0.5): step {phase_change}")
print(f"second-copy accuracy on new sequences: {accuracy_with_ablation(model, tokens, periods):.3f}")

fig = plot_loss_curves(
    {"loss": result.loss_curve},
    title="Training loss on the second copy",
    xlabel="training step",
    ylabel="cross-entropy loss (log scale)",
)
fig.axes[0].axvline(phase_change, color="grey", linestyle="--", linewidth=1)
plt.show()

# %%
# .. _ex10-where-the-heads-look:
#
# Where the heads look
# --------------------
# The heatmaps show all four heads on one new sequence, labelled by its tokens (rows: queries,
# columns: keys; grey cells are blocked by the causal mask). What to look for:
#
# - a **previous-token head** in layer 1 puts its weight on the diagonal just below the main one:
#   every token looks at the one before it;
# - an **induction head** in layer 2 shows no consistent stripe before the segment starts
#   repeating (each row still sums to 1, spread over whatever keys), then draws a *stripe* parallel to the diagonal, ``period - 1`` keys back: each query in the second copy
#   looks at the token that followed its own earlier occurrence, which is the token it is about
#   to predict.

# sphinx_gallery_thumbnail_number = 2
probe = int((periods >= 8).nonzero()[0, 0])  # the first sequence with a long segment
labels = [TOKEN_NAMES[t] for t in tokens[probe].tolist()]
with_weights = model(tokens[probe : probe + 1])[1]  # layers x (1, num_heads, seq_len, seq_len)
weights = [w[0, h].detach() for w in with_weights for h in range(w.shape[1])]
fig = plot_heads(
    weights,
    labels,
    titles=[f"layer {layer} head {head}" for layer in (1, 2) for head in (0, 1)],
    suptitle=f"Attention weights on one sequence (period {int(periods[probe])})",
    layers=[f"layer {layer}" for layer in (1, 2) for head in (0, 1)],
    ncols=2,
    colorbar_label="attention weight",
    xlabel="key (token)",
    ylabel="query (token)",
    blocked=~causal_mask(len(labels)),  # (seq_len, seq_len), True = blocked
    blocked_label="blocked by the causal mask (weight 0)",
)
plt.show()

# %%
# .. _ex10-the-two-scores-over-512-sequences:
#
# The two scores, over 512 sequences
# ----------------------------------
# One sequence can mislead, so we measure each head over the whole evaluation batch:
#
# - **previous-token score**: the mean weight a head puts on key ``t - 1``, over all queries;
# - **induction score**: the mean weight on the token right after the earlier occurrence of the
#   current token (key ``t - period + 1``), over the queries of the second copy.
#
# A head that spread its weight evenly would score about one over the number of keys it can
# see. Layers are numbered from 1, heads from 0, as in the titles above.

previous, induction = head_scores(model, tokens, periods)  # (layers, heads) each
rows = [
    [f"layer {layer + 1} head {head}", f"{previous[layer, head]:.3f}", f"{induction[layer, head]:.3f}"]
    for layer in range(previous.shape[0])
    for head in range(previous.shape[1])
]
print(text_table(["head", "previous-token score", "induction score"], rows))

# %%
# .. _ex10-switching-heads-off:
#
# Switching heads off
# -------------------
# A heatmap shows where a head looks, not whether the model needs it. So we *ablate*: we zero a
# head's output before the output projection (the other heads and the bias are untouched) and
# measure the accuracy on the second copy again. If the circuit needs both kinds of head, removing
# the previous-token head must break it, and so must removing the induction heads, while removing
# the other layer-1 head must not. Layer 2 has two heads; the table shows each alone and both
# together, since two heads can do the same job and cover for each other.

prev_head = int(previous[0].argmax())  # layer 1's previous-token head (0-based index)
other_head = 1 - prev_head
cases = [
    ("none (full model)", []),
    (f"layer 1 head {prev_head} (previous-token head)", [(0, prev_head)]),
    (f"layer 1 head {other_head} (the other head of layer 1)", [(0, other_head)]),
    ("layer 2 head 0", [(1, 0)]),
    ("layer 2 head 1", [(1, 1)]),
    ("layer 2 heads 0 and 1", [(1, 0), (1, 1)]),
]
rows = [[name, f"{accuracy_with_ablation(model, tokens, periods, heads):.3f}"] for name, heads in cases]
print(text_table(["ablated", "second-copy accuracy"], rows))

# %%
# .. _ex10-what-this-shows:
#
# What this shows
# ---------------
# Read the tables together. The circuit is visible in the weights *and* necessary in the
# ablations: the model that predicts the second copy loses that ability without its
# previous-token head, although that head never looks at the answer itself; it only prepares the
# keys that layer 2 searches. Whether layer 2's heads duplicate each other is also measured
# above: if each alone keeps most of the accuracy but both together lose it, they are two copies
# of the induction head. Olsson et al. argue that this circuit is a main source of in-context
# learning in large language models. It is not the only circuit that could solve this task (for
# instance, a layer-1 head could find the earlier copy of the current token and pass on its
# position, and a layer-2 query built from that position could pick the key one step later
# through the learned position embedding: Q-composition). The ablations on this page show that
# the previous-token head is *necessary*; they do not show whether layer 2 uses it through its
# keys or its queries. The ablation that separates the two, removing the head from one input of
# layer 2 at a time, is in :ref:`Example 11 <sphx_glr_auto_examples_plot_11_heads_decomposed.py>`,
# with Elhage et al.'s composition scores on three seeds: that is where K-composition is
# measured.

# %%
# .. _ex10-try-it:
#
# Try it: the model runs in this page
# -----------------------------------
# The view under this figure holds the trained model itself: its parameters were written into
# the page when it was built (the numbers below), and a short script in the page runs the same
# forward pass as ``model(tokens)`` on the sequence in the view's text box, in your browser; no
# request leaves the page. Edit the sequence: type a segment, then type it again, and watch the
# layer-2 heads (the heads the ablations above showed the model needs) and the predictions under
# the box. The box takes the letters A to X, up to 20 of them: the position embedding has 20
# rows. The figure shows the starting sequence; the lines below are the predictions the page
# recomputes on it.

import torch

from mha_ref.tutorial.live_views import attach_live_model, export_model

live_text = "WVUTSRQPONHEARTHEART"  # ten filler tokens, then the segment HEART twice
live_tokens = torch.tensor([[TOKEN_NAMES.index(c) for c in live_text]])  # (1, seq_len)
with torch.no_grad():
    live_logits, live_weights = model(live_tokens)  # (1, seq_len, vocab_size), layers x (1, h, L, L)
predicted = live_logits[0].argmax(dim=-1)  # (seq_len,) the predicted next token at each position
second_copy = range(len(live_text) - 5, len(live_text) - 1)  # the positions whose next token is known
print("sequence:", " ".join(live_text))
print("second copy, token -> predicted next token:", ", ".join(
    f"{live_text[t]} -> {TOKEN_NAMES[predicted[t]]}" for t in second_copy
))
exported = export_model(model)
print(f"parameters in the page: {sum(p.numel() for p in model.parameters())} float32 numbers, "
      f"{len(exported['data']) / 1000:.1f} kB of base64 text")
fig = plot_heads(
    [w[0, h] for w in live_weights for h in range(w.shape[1])],
    list(live_text),
    titles=[f"layer {layer} head {head}" for layer in (1, 2) for head in (0, 1)],
    suptitle="The live model's heads on the starting sequence",
    layers=[f"layer {layer}" for layer in (1, 2) for head in (0, 1)],
    ncols=2,
    colorbar_label="attention weight",
    xlabel="key (token)",
    ylabel="query (token)",
    blocked=~causal_mask(len(live_text)),  # (seq_len, seq_len), True = blocked
    blocked_label="blocked by the causal mask (weight 0)",
)
attach_live_model(fig, model, TOKEN_NAMES, initial_layer="layer 2")
plt.show()

# %%
# .. _ex10-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Take every evaluation sequence and change one token of the *first* copy only:
# the segment's third token becomes a token that occurs nowhere else in the sequence. The second
# copy is left as it was, so at the second copy's second token the sequence still continues with
# the original third token. Which token does the model predict there: the original one, the new
# one, or something else? Reason from what each of the two heads does.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    At that query the current token is the segment's second token. The previous-token head
#    still writes "the token before me is the segment's second token" into the edited position
#    of the first copy, since the token before it did not change; the induction head finds that
#    position by this key and copies what sits there: the new token. The model predicts the
#    token that followed the earlier occurrence, whatever it is, not the token that "should"
#    come. Below: one sequence before and after the edit, the model's prediction at that query,
#    then the fractions over all sequences:

import torch

batch_index = torch.arange(len(tokens))  # (N,)
start = config["seq_len"] - 2 * periods  # (N,) first position of the first copy
present = torch.zeros(len(tokens), config["vocab_size"], dtype=torch.bool)  # (N, vocab_size)
present[batch_index[:, None], tokens] = True
new_token = (~present).int().argmax(dim=1)  # (N,) the smallest token id absent from the sequence
edited = tokens.clone()  # (N, seq_len)
edited[batch_index, start + 2] = new_token  # the segment's third token, in the first copy only
query = config["seq_len"] - periods + 1  # (N,) the segment's second token, in the second copy
with torch.no_grad():
    logits, _ = model(edited)  # (N, seq_len, vocab_size)
predicted = logits[batch_index, query].argmax(dim=-1)  # (N,)
print("original:", " ".join(TOKEN_NAMES[t] for t in tokens[probe].tolist()))
print("edited:  ", " ".join(TOKEN_NAMES[t] for t in edited[probe].tolist()))
print(f"prediction at position {int(query[probe])} of the edited sequence: {TOKEN_NAMES[predicted[probe]]}")
print(f"predicts the new token:      {(predicted == new_token).double().mean():.3f}")
print(f"predicts the original token: {(predicted == tokens[batch_index, query + 1]).double().mean():.3f}")

# %%
# **Exercise 2.** In training, the two copies always follow each other directly. Move the first
# copy earlier, two positions at a time until it starts the sequence, and fill the gap with
# filler tokens, so that the copies move apart, in the end further than in any training
# sequence. Predict the second-copy accuracy as the gap grows, for the full model and with the
# previous-token head switched off.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    An ideal induction head searches by content alone: "where did my token occur before, and
#    what came next?". Nothing in that search depends on how far back the earlier copy is, so
#    one would expect no fall. The rows below say otherwise. The full model stays near perfect
#    over the distances seen in training and one position beyond them; after that its accuracy
#    falls with every row. From row to row the distance grows and the first copy starts earlier
#    (the filler uses tokens that are not in the segment). Example 20 measures why, retraining
#    this model with each of five position schemes, on three seeds each, with a shorter recipe.
#    The learned position embedding is not the cause: with sinusoidal positions, and with rotary
#    positions, which see only distances, the model also falls beyond the trained distances on
#    every seed (with ALiBi's two heads, or with no positions, it learns the task on no seed).
#    What the three share is that layer 2 uses position in its search: with its queries and
#    keys computed without positions, the fall is smaller on every seed, at some cost at the
#    shortest distances. Training never shows the copies further apart, so
#    nothing forces the search to ignore distance, and it does not. What the rows do show is
#    that it generalises only a little beyond the distances it was trained on. The last column
#    is another matter: the search still goes through the keys that the previous-token head
#    prepares, so without that head it fails at every gap. The sequences all have the same
#    period; the last line shows one of them with the largest gap, the first copy at the start:

from mha_ref.tutorial.induction import make_repeated_batch

period = 5
fixed, fixed_periods = make_repeated_batch(
    512, config["seq_len"], config["vocab_size"], torch.Generator().manual_seed(1), period, period
)  # (512, seq_len), (512,)
first_copy = config["seq_len"] - 2 * period  # first position of the first copy
rows = []
for gap in range(0, first_copy + 1, 2):
    moved = fixed.clone()  # (512, seq_len)
    block = slice(first_copy - gap, first_copy + period)  # the gap's filler, then the first copy
    moved[:, block] = fixed[:, block].roll(-gap, dims=1)  # now the first copy, then the filler
    full = accuracy_with_ablation(model, moved, fixed_periods)
    without = accuracy_with_ablation(model, moved, fixed_periods, [(0, prev_head)])
    rows.append([gap, period + gap, f"{full:.3f}", f"{without:.3f}"])
print(f"period: {period}; distance between the two copies in training: {config['min_period']} to {config['max_period']}")
print(text_table(["gap", "distance", "full model", f"without layer 1 head {prev_head}"], rows))
print(" ".join(TOKEN_NAMES[t] for t in moved[0].tolist()))

# %%
# .. _ex10-summary:
#
# Summary
# -------
# * Two layers are what the circuit needs: a previous-token head in layer 1 writes "the token
#   before me" into each position, an induction head in layer 2 finds the position after the
#   earlier occurrence of the current token and copies what is there.
# * The weights show where the heads look; the ablations show that the previous-token head is
#   necessary for the second-copy accuracy, although it never looks at the answer.
# * That layer 2 uses it through its keys (K-composition) is measured in Example 11 (composition
#   ablation, composition scores and activation patching, on three seeds), not on this page.
