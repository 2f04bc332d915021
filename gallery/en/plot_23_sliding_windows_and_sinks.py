"""
Example 23: Sliding windows and attention sinks
===============================================

In a sliding-window layer each token attends only to the last ``window`` tokens (Beltagy et al.
2020). Mistral 7B (v0.1) uses such a window in every layer (Jiang et al. 2023); Gemma 2 and 3 and
gpt-oss interleave sliding-window layers with full-attention ones. The mask is a band below the diagonal; the KV cache of
such a layer never needs more than ``window`` tokens, so it can be a ring buffer of fixed size,
and information still travels further than one window by hopping from layer to layer.

This example builds the banded mask (:func:`mha_ref.sliding_window_mask`), checks that decoding
step by step with a :class:`mha_ref.RollingKVCache` equals full attention with that mask,
computes the receptive field with depth and the memory per token, and then tries a window on a
model that was **not** trained with one: SmolLM2-135M-Instruct on a real text, with a window-only cache
against a window plus the first four tokens kept (StreamingLLM, Xiao et al. 2023), with
controls that change one factor each.
"""

# %%
# .. _ex23-the-banded-mask:
#
# The banded mask
# ---------------
# ``allowed[i, j] = (i - window < j <= i)``: each query sees its own key and the ``window - 1``
# before it. The second mask keeps the first two tokens visible as well, as StreamingLLM's
# cache does. (To run the last section yourself you need the real model: the three install
# commands are printed below.)

import matplotlib.pyplot as plt
import torch

from mha_ref import (
    KVCache,
    RollingKVCache,
    kv_cache_bytes_per_token,
    scaled_dot_product_attention,
    sliding_window_mask,
)
from mha_ref.tutorial.plotting import plot_lines, plot_masks, text_table
from mha_ref.tutorial.real_models.smollm2 import install_steps
from mha_ref.tutorial.windows import (
    KEPT_CONTROLS,
    receptive_field,
    rolling_decode_check,
    streaming_losses,
    window_mask,
)

print("install, in this order:", *install_steps(), sep="\n  ")
seq_len, window, num_sinks = 8, 3, 2
labels = [f"t{i}" for i in range(seq_len)]
fig = plot_masks(
    [sliding_window_mask(seq_len, window=window), window_mask(seq_len, window, num_sinks)],
    labels, labels,
    titles=[f"sliding_window_mask(window={window})", f"window {window} + first {num_sinks} tokens"],
    xlabel="key", ylabel="query", legend=("may attend", "blocked"),
)
plt.show()

# %%
# .. _ex23-a-ring-buffer-equals-masked-full-attention:
#
# A ring buffer equals the masked full attention
# ----------------------------------------------
# A :class:`mha_ref.RollingKVCache` of ``window = 3`` slots writes token ``t`` into slot
# ``t % 3``, overwriting the token three steps back. One query per step attends, without a
# mask, to whatever the cache holds. The table prints the positions held after each step and the
# difference from full attention with the banded mask, in ``float64``; the last column does the
# same with two first tokens kept for good (``num_sinks=2``, two more slots).

torch.manual_seed(0)
batch, num_heads, head_dim = 2, 4, 8
query, key, value = (torch.randn(batch, num_heads, seq_len, head_dim, dtype=torch.float64) for _ in range(3))  # each (batch, num_heads, seq_len, head_dim)
full_window = scaled_dot_product_attention(query, key, value, sliding_window_mask(seq_len, window=window))
full_sinks = scaled_dot_product_attention(query, key, value, window_mask(seq_len, window, num_sinks))
ring = RollingKVCache(batch, num_heads, window, head_dim, dtype=torch.float64)
ring_sinks = RollingKVCache(batch, num_heads, window, head_dim, num_sinks=num_sinks, dtype=torch.float64)
rows = []
for t in range(seq_len):
    k_t, v_t = key[:, :, t : t + 1], value[:, :, t : t + 1]  # (batch, num_heads, 1, head_dim)
    out = scaled_dot_product_attention(query[:, :, t : t + 1], *ring.append(k_t, v_t))  # (batch, num_heads, 1, head_dim)
    out_sinks = scaled_dot_product_attention(query[:, :, t : t + 1], *ring_sinks.append(k_t, v_t))
    rows.append((t, ring.positions.tolist(), f"{(out - full_window[:, :, t : t + 1]).abs().max().item():.0e}",
                 ring_sinks.positions.tolist(), f"{(out_sinks - full_sinks[:, :, t : t + 1]).abs().max().item():.0e}"))
print(text_table(["step", "positions held (window 3)", "diff vs masked full", "positions held (+2 first)", "diff vs masked full"], rows))

# %%
# .. _ex23-the-receptive-field-grows-with-depth:
#
# The receptive field grows with depth
# ------------------------------------
# One layer lets token ``i`` read tokens ``i - window + 1 .. i``. A second layer reads the first
# layer's outputs, each of which already summarises a window, so after ``depth`` layers token
# ``i`` can be reached from ``depth * (window - 1)`` positions back (Mistral 7B, Sec. 2). The
# table composes the masks (a boolean matrix product per layer, ``mha_ref.tutorial.windows.receptive_field`` in the
# lab code) for 64 tokens and a window of 4, and prints how far back the last token reaches.

rows = []
for depth in (1, 2, 4, 8, 16):
    reach = receptive_field(64, 4, depth)  # (64, 64) bool
    farthest = 63 - int(reach[63].nonzero().min())
    rows.append((depth, farthest, depth * (4 - 1)))
print(text_table(["layers", "farthest token the last one reads", "depth x (window - 1)"], rows))

# %%
# .. _ex23-memory-per-token:
#
# Memory per token
# ----------------
# With Mistral 7B's shape (32 layers, 8 key/value heads of 128, a window of 4096, ``bfloat16``),
# the full cache grows with the text and the rolling one stops at the window. The rolling cache
# allocates all 4096 slots of its window from the start, so for a text shorter than the window
# it is the larger one (the table's first row). The byte counts below are those of real
# :class:`mha_ref.KVCache` and :class:`mha_ref.RollingKVCache` buffers of one layer (a single
# key/value head, to keep the memory small), times the heads and layers.

layers, kv_heads, kv_dim, mistral_window = 32, 8, 128, 4096
per_token = kv_cache_bytes_per_token(layers, kv_heads, kv_dim, torch.bfloat16)
rolling_one = RollingKVCache(1, 1, mistral_window, kv_dim, dtype=torch.bfloat16).nbytes()  # one head, one layer
rows = []
for n in (1024, 4096, 16384, 32768):
    full_one = KVCache(1, 1, n, kv_dim, dtype=torch.bfloat16).nbytes()  # one head, one layer
    rows.append((n, f"{full_one * kv_heads * layers / 2**20:.0f}", f"{per_token * n / 2**20:.0f}",
                 f"{rolling_one * kv_heads * layers / 2**20:.0f}"))
print(text_table(["tokens", "full cache (MiB)", "formula (MiB)", "rolling cache, window 4096 (MiB)"], rows))

# %%
# .. _ex23-a-window-on-a-model-trained-without-one:
#
# A window on a model trained without one
# ---------------------------------------
# SmolLM2-135M-Instruct was trained with full causal attention. The first 512 tokens of a shipped text
# (a chapter of the Python reference on assignment statements) go through it seven times: full
# attention, a window of 64 tokens in every block, and the same window with the first 4 tokens
# kept; then four controls. A plain window of 68 has the same cache size as 64 + 4 but keeps recent
# tokens instead of the first ones; a window of 64 plus token 0 alone keeps only the first token;
# a window of 64 plus token 16 alone, or token 32 alone, adds one slot as token 0 does, but keeps
# a token that is not the first one: if any one old token kept for good helped, these would help
# as much.
# Masks stand in for the caches here: the ring-buffer equality above holds for this model too, as the
# first line below shows, where the start of the text is decoded one token at a time with a ring
# buffer of the 16 recent tokens and the first 4 in every block (``rolling_decode_logits``),
# against the masked forward pass. The positions are the tokens' own, so RoPE sees true distances. StreamingLLM instead
# numbers the positions within the cache (Xiao et al. 2023, Sec. 3.2); that is not done here. The
# perplexity is ``exp`` of the mean loss over the tokens beyond the first window, the same tokens
# for every run. The last column is the share of the window-only run's excess perplexity (over
# full attention) that a run removes.

check = rolling_decode_check("assignment_statements", 48, 16, 4)  # stored in the folder MHA_REF_CACHE_DIR names, if set, and read back on the next run
print(f"ring buffers of {check['slots']} slots per block, {check['num_tokens']} tokens decoded one "
      f"at a time, against the masked forward pass: largest logit difference "
      f"{'below' if check['max_abs_diff'] < 1e-3 else 'ABOVE'} 1e-3 (logits up to "
      f"{check['max_abs_logit']:.0f}); the same most likely next token at {check['same_choice']} "
      f"of {check['num_tokens']} positions")

text_window, text_sinks = 64, 4
result = streaming_losses("assignment_statements", 512, text_window, text_sinks)
losses = result["losses"]
ppl = {key: losses[key][text_window:].mean().exp().item() for key in losses}
runs = (("full causal", "full", None), (f"window {text_window}", "window", text_window),
        (f"window {text_window + text_sinks} (no first tokens kept)", "wide_window", text_window + text_sinks),
        (f"window {text_window} + first 1", "first_token", text_window + 1),
        *((f"window {text_window} + only token {p}", f"token_{p}", text_window + 1)
          for p in KEPT_CONTROLS),
        (f"window {text_window} + first {text_sinks}", "sinks", text_window + text_sinks))
rows = [(name, "all" if key == "full" else slots, f"{ppl[key]:.2f}",
         f"{(ppl['window'] - ppl[key]) / (ppl['window'] - ppl['full']):.2f}") for name, key, slots in runs]
print(f"text: {result['tokens'].numel()} tokens; perplexity over tokens {text_window + 1}..{result['tokens'].numel() - 1}")
print(text_table(["attention", "tokens in the cache", "perplexity", "share of the excess removed"], rows))
sink_weight = result["sink_weight"]  # (num_layers,)
print(f"full attention: mean weight on token 0 beyond the window, per block: min {sink_weight.min():.3f}, "
      f"median {sink_weight.median():.3f}, max {sink_weight.max():.3f}; "
      f"blocks above 0.1: {int((sink_weight > 0.1).sum())} of {sink_weight.numel()}")

positions = list(range(text_window, result["tokens"].numel() - 1, 32))
curves = {label: [losses[key][p : p + 32].mean().item() for p in positions] for label, key in
          (("full causal", "full"), (f"window {text_window}", "window"), (f"window + first {text_sinks}", "sinks"))}
fig = plot_lines(positions, curves, xlabel="position (spans of 32 tokens)", ylabel="mean loss (nats)", title="SmolLM2-135M-Instruct, first 512 tokens of a shipped text")
plt.show()

# %%
# The window-only run loses the first tokens, on which the full model puts much of its attention
# (the weights printed above); keeping four of them removes most of the excess perplexity of the
# window-only run (the share printed above), though not all of it. The first two controls
# separate the two things the four kept tokens add. Four more recent slots (the window of 68, the
# same cache size) remove only a small share of the excess, while token 0 alone removes nearly as
# much as the first four: on this text, what helps is the first token, not the extra slots. And it
# is the first token as such: one extra slot that keeps token 16, or token 32, for good instead of
# token 0 removes none of the excess (its share, printed above, is near zero, even a little below
# it). What rescues the window is token 0, the sink token, not any one old token kept. Keeping
# token 0 keeps both its content and its position; these runs do not separate the two.
# This is one text, one window and one model; the interventions show that the first token matters
# to the window, not why the model relies on it.

# %%
# .. _ex23-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Mistral 7B has 32 layers and a window of 4096 tokens. How far back can its last
# layer's output at token ``i`` reach in theory? Check the rule ``depth * (window - 1)`` with
# the mask product for a window of 3 and 5 layers.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Each layer adds ``window - 1`` positions, so 32 layers reach ``32 * 4095`` tokens back (the
#    paper rounds it to about 131K). The mask product gives the same count for the small case:

print(f"Mistral 7B: {32 * (4096 - 1)} tokens back")
small = receptive_field(32, 3, 5)  # (32, 32) bool
print(f"window 3, 5 layers: the last token reads back to {31 - int(small[31].nonzero().min())} positions; rule: {5 * (3 - 1)}")

# %%
# **Exercise 2.** A :class:`mha_ref.RollingKVCache` with ``window = 4`` and ``num_sinks = 1``
# has taken 10 tokens. Which positions does it hold, in which slots, and how many bytes does it
# take per head for ``head_dim = 16`` in ``float32``?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Slot 0 keeps token 0 for good; the ring of slots 1 to 4 holds the last four tokens, 6 to 9,
#    token ``p`` in slot ``1 + (p - 1) % 4``. Keys and values of 5 slots of 16 numbers of 4 bytes
#    each: ``2 * 5 * 16 * 4`` bytes, whatever the number of tokens. The code fills one and prints
#    what it holds:

exercise = RollingKVCache(1, 1, 4, 16, num_sinks=1)
for _ in range(10):
    exercise.append(torch.zeros(1, 1, 1, 16), torch.zeros(1, 1, 1, 16))
print(f"positions by slot: {exercise.positions.tolist()}; bytes: {exercise.nbytes()}")


# %%
# .. _ex23-summary:
#
# Summary
# -------
# * A sliding window is a banded causal mask; a ring buffer of ``window`` slots decodes it
#   exactly (the table prints the differences), with a cache that stops growing.
# * Through ``depth`` layers a token reaches ``depth * (window - 1)`` positions back, as the
#   mask products print.
# * On SmolLM2-135M-Instruct, trained without a window, a window alone raises the perplexity far
#   above full attention; keeping the first four tokens removes most of the excess, not all of it.
#   A window with the same number of slots but no first tokens removes only a small part, and a
#   window plus token 0 alone removes almost as much as the first four: the first token is what
#   helps. On this text, a window plus token 16 or token 32 alone removes none: it is the first
#   token itself, the sink, and not any one extra old token (its content and its position are
#   kept together, and the runs do not separate them).
#
# Sources: Beltagy et al. 2020, "Longformer: The Long-Document Transformer", arXiv:2004.05150,
# Sec. 3.1; Jiang et al. 2023, "Mistral 7B", arXiv:2310.06825, Sec. 2 (sliding window, rolling
# buffer cache, the model's shape); Xiao et al. 2023, "Efficient Streaming Language Models with
# Attention Sinks", arXiv:2309.17453, Sec. 3; Allal et al. 2025, arXiv:2502.02737 (SmolLM2).
