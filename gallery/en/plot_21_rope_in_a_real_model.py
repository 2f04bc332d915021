"""
Example 21: RoPE inside a real model's heads
============================================

Example 20 put rotary position embedding (RoPE) into a two-layer toy. Here it is in a real
language model: SmolLM2-135M-Instruct, the model (and the 4-bit file) of the real-model examples, whose 270 heads (30 blocks
of 9 query heads) all rotate their queries and keys. Each head has 64 features, rotated in 32
pairs, and every pair turns at its own speed: the fastest by one radian per token, the slowest
so slowly that it hardly turns within the model's whole context. Barbero et al. (2024, "Round
and Round We Go! What makes Rotary Positional Encodings useful?", `arXiv:2410.06205
<https://arxiv.org/abs/2410.06205>`_) found that Gemma 7B builds its positional heads from the
fastest pairs and carries most of its query and key norm in the slowest ones, which act as
content channels. This page measures both on this model, then takes the rotation out of a
previous-token head, pair by pair, to see which pairs it needs.
"""

# %%
# .. _ex21-the-32-speeds:
#
# The 32 speeds
# -------------
# Pair :math:`i` of a head turns by :math:`\theta_i = b^{-2i/64}` radians per token, where
# :math:`b` is RoPE's base, 100000 in this model (:func:`mha_ref.rotary_frequencies`). The table gives, for a few pairs, that speed,
# the number of tokens it takes to turn once (:math:`2\pi/\theta_i`), and how far it turns across
# the text used below. A pair that turns by much less than a radian over the whole text hardly
# tells one position from another: what it adds to a score depends on content alone. (To run
# this page yourself you need the real model: the three install commands are printed below.)

import math

import matplotlib.pyplot as plt
import torch

from mha_ref import rotary_frequencies
from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.smollm2 import install_steps, load_smollm2
from mha_ref.tutorial.rope_heads import (
    plot_pair_shares,
    previous_token_scores,
    queries_and_keys,
    rope_head_analysis,
    weights_without_rotation,
)

print("install, in this order:", *install_steps(), sep="\n  ")
model = load_smollm2()
config = model.config
analysis = rope_head_analysis("statements", max_tokens=256)  # stored in the folder MHA_REF_CACHE_DIR names, if set, and read back on the next run
tokens, usage = analysis["tokens"], analysis["usage"]
text_len = len(tokens)
speeds = rotary_frequencies(config.head_dim, config.rope_base)  # (32,) radians per token
print(f"heads: {config.num_layers} blocks x {config.num_heads}; head_dim {config.head_dim}; "
      f"base {config.rope_base:g}; text: {text_len} tokens")
rows = [
    [i, f"{speeds[i]:.2e}", f"{2 * math.pi / speeds[i]:,.0f}", f"{speeds[i] * (text_len - 1):.3f}"]
    for i in (0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 31)
]
print(text_table(["pair", "radians per token", "tokens per turn", f"turn over {text_len} tokens"],
                 rows))

# %%
# .. _ex21-where-the-queries-and-keys-are-large:
#
# Where the queries and keys are large
# ------------------------------------
# For every head, the queries and keys are computed on the text (three paragraphs of the Python
# Language Reference on the ``for``, ``while`` and ``if`` statements, shipped with the package),
# before the rotation, and the size of each pair is measured (its root-mean-square norm over the
# tokens). A pair can add to a score at most the product of the query's and the key's sizes in
# it, so that product (the *usage* of the pair) says how much each speed can matter to the head
# (:class:`~mha_ref.tutorial.rope_heads.FrequencyUsage`). The heatmap shows each block's share
# per pair, averaged over its 9 heads (each row sums to 1).

share = usage.usage / usage.usage.sum(dim=-1, keepdim=True)  # (layers, heads, pairs)
per_block = share.mean(dim=1)  # (layers, pairs)
fig = plot_pair_shares(
    per_block,
    title="Share of each pair in the heads' query-key size",
    xlabel="pair (0 = fastest, 31 = slowest)",
    ylabel="block",
    colorbar_label="share (mean over the block's heads)",
)
plt.show()

fast, slow = range(0, 8), range(24, 32)
all_heads = share.flatten(0, 1)  # (270, pairs)
print(f"mean share of the 8 fastest pairs: {all_heads[:, list(fast)].sum(-1).mean():.3f}")
print(f"mean share of the 8 slowest pairs: {all_heads[:, list(slow)].sum(-1).mean():.3f}")
print(f"mean share of the 8 pairs 16 to 23: {all_heads[:, 16:24].sum(-1).mean():.3f}")
most = per_block.mean(dim=0).argsort(descending=True)[:4].tolist()  # the largest shares
print(f"pairs with the largest mean share: {most}")

# %%
# As in Gemma 7B, most of the size sits in slow pairs, which over this text turn by a small
# fraction of a radian (see the first table): an attention score (the query-key product before
# the softmax) built from them depends on what the tokens are, not on where. The fastest pairs hold a small share on average, but not in every
# head.
#
# .. _ex21-heads-that-rely-on-position:
#
# Heads that rely on position
# ---------------------------
# The previous-token score of each head is its mean attention weight on the token just before
# each query (measured here on this text; example 16 measures it on repeated random tokens, so
# the values differ from example 16's). The table puts the five heads with the highest score beside their share in the
# fastest 8 pairs, and the five heads with the largest share in the fastest pairs beside their
# score. (Blocks and heads are numbered from 0, as in the other real-model examples.)

previous = analysis["previous"]  # (layers, heads)
fast_share = usage.share(list(fast))  # (layers, heads)


def describe(index):
    layer, head = divmod(int(index), config.num_heads)
    return [f"({layer}, {head})", f"{previous[layer, head]:.3f}", f"{fast_share[layer, head]:.3f}"]


header = ["head (block, head)", "previous-token score", "share of the 8 fastest pairs"]
print("highest previous-token scores:")
print(text_table(header, [describe(i) for i in previous.flatten().argsort(descending=True)[:5]]))
print("largest shares of the fastest pairs:")
print(text_table(header, [describe(i) for i in fast_share.flatten().argsort(descending=True)[:5]]))

# %%
# .. _ex21-taking-the-rotation-out-pair-by-pair:
#
# Taking the rotation out, pair by pair
# -------------------------------------
# Sizes say what a head *can* use. To see what the top previous-token head *needs*, its block's
# attention is recomputed with the rotation taken out of some pairs (their angle set to 0 for
# queries and keys alike), and its previous-token score measured again
# (:func:`~mha_ref.tutorial.rope_heads.rotation_removal_curve`). Two orders: the fastest pairs
# first, or the slowest first. With nothing removed, the recomputation is the model's own
# attention, to float32 rounding (checked below the table: the score, and the largest difference
# of one weight). Only this head's pattern is measured.

layer, head = analysis["head"]
removed = list(range(config.head_dim // 2 + 1))
fig = plot_lines(
    removed,
    {"fastest pairs first": analysis["fast_first"], "slowest pairs first": analysis["slow_first"]},
    xlabel="pairs whose rotation is taken out",
    ylabel="previous-token score",
    title=f"Head ({layer}, {head}) as its rotation is taken out",
)
plt.show()
rows = [[n, f"{analysis['fast_first'][n]:.3f}", f"{analysis['slow_first'][n]:.3f}"]
        for n in (0, 1, 2, 4, 8, 16, 24, 28, 31, 32)]
print(text_table(["pairs not rotated", "fastest first", "slowest first"], rows))
with torch.no_grad():
    _, own = model(tokens, need_weights=True)  # the model's own pass: (1, heads, L, L) per block
own_score = previous_token_scores(own[layer][0])[head]  # this head's score in the model's pass
queries, keys = queries_and_keys(model, tokens, layer)  # (heads, L, hd), (kv_heads, L, hd)
nothing = torch.zeros(config.head_dim // 2, dtype=torch.bool)  # (pairs,) every pair rotated
recomputed = weights_without_rotation(model, queries, keys, nothing)[head]  # (L, L)
gap = (recomputed - own[layer][0, head]).abs().max()  # largest difference of one weight
print(f"with nothing removed: {analysis['fast_first'][0]:.5f}; the same head in the model's own "
      f"forward pass: {own_score:.5f}; largest difference of a weight: {gap:.1e}")

# %%
# Taking the rotation out of the single fastest pair removes most of the head's weight on the
# previous token ("fastest first"): the head needs that pair. The other order shows that it is
# not enough: the slowest half of the pairs can stop turning with almost no change, but the
# score falls as the middle pairs stop too, and with only the fastest pair still turning
# ("slowest first", 31 pairs) little of it is left. The previous-token pattern is built from
# the faster half of the pairs, the fastest one and the middle ones together, not from the
# slow half; that it uses the fast end agrees with what Barbero et al. found in Gemma. Most of
# this head's size is in other pairs (its share of the fastest 8 pairs is in the table above).
#
# The same intervention on every head at once, each in its own block with no pair rotated:
# how many of the heads with a clear previous-token pattern keep it?

unrotated = analysis["unrotated"]  # (layers, heads)
clear = previous > 0.3
kept = (unrotated[clear] > 0.5 * previous[clear]).sum()
print(f"heads with a previous-token score above 0.3: {int(clear.sum())}")
print(f"of these, heads that keep more than half of it without any rotation: {int(kept)}")
print(f"largest score without rotation, over all heads: {unrotated.max():.3f}")

# %%
# .. _ex21-what-this-shows:
#
# What this shows
# ---------------
# In this model, as in Gemma 7B, the queries and keys are largest in the slow pairs, which
# barely turn over a text of this length and so carry content. The strongest previous-token
# head is made with the faster half of the pairs: it loses most of its pattern when the
# fastest pair stops turning, keeps it while only the slowest half stop, and loses most of it
# again when only the fastest pair still turns; and no head with a clear previous-token pattern keeps
# it without any rotation. RoPE gives every head both kinds of channel, and each head has its
# own mix. Barbero et al. argue that the slow pairs are why a larger base helps long contexts:
# the larger the base, the more pairs stay nearly still across the context.

# %%
# .. _ex21-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Barbero et al. propose p-RoPE: do not rotate the slowest pairs at all. From
# the curve of the head above, how many of the slowest pairs could stop turning before its
# previous-token score falls by more than 0.01?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Read the "slowest first" curve until it falls by more than 0.01 below its start:

start = analysis["slow_first"][0]
safe = next(n for n, score in enumerate(analysis["slow_first"]) if score < start - 0.01) - 1
print(f"the {safe} slowest pairs can stop turning: score {analysis['slow_first'][safe]:.3f} "
      f"(from {start:.3f}); one more: {analysis['slow_first'][safe + 1]:.3f}")
print(f"the slowest of the rest, pair {31 - safe}, turns {speeds[31 - safe] * (text_len - 1):.3f} "
      f"radians over the text")

# %%
# **Exercise 2.** The model can read 8192 tokens. Which pairs never complete a full turn within
# that context, and what share of the heads' query-key size do they hold on average?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    A pair completes a turn in :math:`2\pi/\theta_i` tokens. The pairs that need more tokens than
#    the context holds never come round to the same angle within it, and they hold most of
#    the size:

never = [i for i in range(len(speeds)) if 2 * math.pi / speeds[i] > config.context_length]
print(f"pairs that do not turn once in {config.context_length} tokens: {never[0]} to {never[-1]}")
print(f"their mean share of the heads' size: {all_heads[:, never].sum(-1).mean():.3f}")

# %%
# .. _ex21-summary:
#
# Summary
# -------
# - Every head of SmolLM2-135M-Instruct rotates its queries and keys in 32 pairs, from one radian per token
#   to far less than a radian over the whole context.
# - Most of the query and key size sits in slow pairs: channels for content.
# - The strongest previous-token head loses its pattern when the rotation is taken out of the
#   fastest pair, keeps it when the slowest half lose theirs, and cannot keep it with the
#   fastest pair alone: its position comes from the fastest and the middle pairs together. No head with a clear previous-token pattern keeps it without rotation.
