"""
Example 14: The KV cache: generating one token at a time
========================================================

A language model generates text one token at a time: it predicts the next token, appends it,
and runs again. With causal attention a token never looks at later tokens, so the keys and
values of the tokens already there **do not change** when a new token arrives. Recomputing them
at every step would be wasted work; the *KV cache* keeps them and computes, per step, only the
new token's query, key and value.

This example generates step by step with a growing cache (:meth:`mha_ref.GroupedQueryAttention.decode`,
:class:`mha_ref.KVCache`) and checks that the outputs equal full causal attention over the whole
sequence; shows which causal mask the new tokens need (the *bottom-right* one); and computes what
the cache costs in memory, per token, for a few model shapes.
"""

# %%
# .. _ex14-decode-step-by-step:
#
# Decode step by step, and compare with the full sequence
# -------------------------------------------------------
# One attention layer, ``embed_dim = 64`` and 8 heads, each with its own key/value head
# (``num_kv_heads = num_heads``: ordinary multi-head attention), in ``float64`` so that any
# difference larger than rounding would show. The reference is the layer applied once to the whole
# sequence of 12 tokens with ``is_causal=True``. Then the same tokens go through
# ``decode``: first a prompt of 5 tokens at once ("prefill"), then one token per step. Each
# call appends the new keys and values to the cache and attends to everything cached.

import matplotlib.pyplot as plt
import torch

from mha_ref import (
    GroupedQueryAttention,
    KVCache,
    causal_mask,
    kv_cache_bytes_per_token,
    pick_device,
    scaled_dot_product_attention,
    split_heads,
)
from mha_ref.tutorial.plotting import plot_lines, plot_masks, text_table

torch.manual_seed(0)
device = pick_device()

batch, seq_len, embed_dim, num_heads, prompt_len = 2, 12, 64, 8, 5
layer = GroupedQueryAttention(embed_dim, num_heads, num_kv_heads=num_heads, dtype=torch.float64).to(device).eval()
x = torch.randn(batch, seq_len, embed_dim, dtype=torch.float64, device=device)  # (batch, seq_len, embed_dim)

with torch.no_grad():
    full, _ = layer(x, is_causal=True)  # (batch, seq_len, embed_dim)
    cache = layer.new_cache(batch, max_len=seq_len)
    print("empty cache: keys", tuple(cache.keys.shape), "= (batch, num_kv_heads, cached_len, head_dim)")
    steps, pieces, start = [], [], 0
    for stop in [prompt_len, *range(prompt_len + 1, seq_len + 1)]:
        out = layer.decode(x[:, start:stop], cache)  # (batch, new_len, embed_dim)
        diff = (out - full[:, start:stop]).abs().max().item()
        steps.append((f"{start}..{stop - 1}", stop - start, tuple(cache.keys.shape), f"{diff:.0e}"))
        pieces.append(out)
        start = stop
print(text_table(["tokens", "new_len", "cached keys shape", "max abs diff vs full"], steps))
generated = torch.cat(pieces, dim=1)  # (batch, seq_len, embed_dim)
print("all steps together equal the full causal output:", torch.allclose(generated, full, rtol=0, atol=1e-12))

# %%
# Projections saved: without a cache, step ``t`` would project all ``t`` tokens to keys and
# values again. With the cache, each token is projected once.

with_cache = seq_len
without_cache = prompt_len + sum(range(prompt_len + 1, seq_len + 1))
print(f"key/value projections for {seq_len} tokens: {with_cache} with the cache, {without_cache} without")

# %%
# .. _ex14-which-causal-mask-the-new-tokens-need:
#
# Which causal mask the new tokens need
# -------------------------------------
# When several new tokens arrive at once (the prompt, or a chunk of it), their queries are the
# *last* rows of the sequence: ``new_len`` queries against all the keys, cached and new, ``total``
# of them (the code below calls it so), with ``new_len <= total``. The correct mask puts the last
# query at the last key: the causal triangle aligned **bottom-right**, which ``decode`` builds once
# it has appended the new keys, when the cache's ``cached_len`` is that total:
# ``causal_mask(new_len, cached_len, alignment="bottom_right")``. PyTorch's ``is_causal=True`` means
# the *top-left* alignment, right only when ``new_len == total``, that is when nothing was cached
# before. See :ref:`masks-kv-cache` and :ref:`sphx_glr_auto_examples_plot_04_masks.py`.
#
# Below, 3 new tokens arrive when 4 are cached. The bottom-right mask reproduces the last 3
# rows of full causal attention; the top-left one does not.

new_len, total = 3, 7
q, k, v = (split_heads(torch.randn(batch, total, embed_dim, dtype=torch.float64, device=device), num_heads) for _ in range(3))  # each (batch, num_heads, total, head_dim)
top_left = causal_mask(new_len, total, alignment="top_left", device=device)  # (new_len, total)
bottom_right = causal_mask(new_len, total, alignment="bottom_right", device=device)  # (new_len, total)
reference = scaled_dot_product_attention(q, k, v, is_causal=True)[:, :, -new_len:]  # (batch, num_heads, new_len, head_dim)
for name, mask in (("bottom_right", bottom_right), ("top_left (is_causal=True)", top_left)):
    out = scaled_dot_product_attention(q[:, :, -new_len:], k, v, attn_mask=mask)  # (batch, num_heads, new_len, head_dim)
    print(f"{name}: max abs diff vs the last rows of full causal attention = {(out - reference).abs().max().item():.1e}")

fig = plot_masks(
    [top_left, bottom_right],
    [f"t{i}" for i in range(total - new_len, total)],
    [f"t{i}" for i in range(total)],
    titles=['alignment="top_left" (is_causal=True)', 'alignment="bottom_right"'],
    legend=("may attend", "blocked"),
    xlabel="cached key",
    ylabel="new query",
)
plt.show()

# %%
# .. _ex14-what-the-cache-costs:
#
# What the cache costs
# --------------------
# Per token, the cache holds one key and one value vector of ``head_dim`` numbers for each
# key/value head of each layer: :func:`mha_ref.kv_cache_bytes_per_token`. It does not depend on
# the number of *query* heads. The table uses the published shapes of three models (layers,
# query heads, key/value heads, head_dim); the last row is the 70B shape with as many key/value
# heads as query heads, i.e. what grouped-query attention saved there.

models = {
    "GPT-2 small": (12, 12, 12, 64),
    "Llama 2 7B": (32, 32, 32, 128),
    "Llama 2 70B (GQA)": (80, 64, 8, 128),
    "Llama 2 70B shape, 64 KV heads": (80, 64, 64, 128),
}
context = 4096
rows = []
for name, (layers, heads, kv_heads, head_dim) in models.items():
    for dtype in (torch.float32, torch.float16):
        per_token = kv_cache_bytes_per_token(layers, kv_heads, head_dim, dtype)
        rows.append((name, layers, heads, kv_heads, head_dim, str(dtype).removeprefix("torch."),
                     f"{per_token / 2**10:.0f}", f"{per_token * context / 2**30:.2f}"))
print(text_table(["model", "layers", "heads", "kv heads", "head_dim", "dtype", "KiB per token",
                  f"GiB for {context} tokens"], rows))
print("this example's layer, per token:", kv_cache_bytes_per_token(1, layer.num_kv_heads, layer.head_dim, torch.float64), "bytes; preallocated cache:", cache.nbytes(), "bytes")

# %%
# The cache grows linearly with the sequence (and with the batch): for the 70B shape in
# ``float16``, per sequence, as the key/value heads shrink from 64 to 8 to 1.

lengths = [512, 1024, 2048, 4096, 8192]
curves = {
    f"num_kv_heads = {kv}": [kv_cache_bytes_per_token(80, kv, 128, torch.float16) * n / 2**30 for n in lengths]
    for kv in (64, 8, 1)
}
fig = plot_lines(lengths, curves, xlabel="tokens in the cache", ylabel="KV cache (GiB)", title="80 layers, head_dim 128, float16, one sequence")
plt.show()

# %%
# Sources: Shazeer 2019, "Fast Transformer Decoding: One Write-Head is All You Need",
# arXiv:1911.02150, Sec. 2.4; Pope et al. 2022, "Efficiently Scaling Transformer Inference",
# arXiv:2211.05102; model shapes from Radford et al. 2019 (GPT-2) and Touvron et al. 2023,
# arXiv:2307.09288 (Llama 2).

# %%
# .. _ex14-exercises:
#
# Exercises
# ---------
# **Exercise 1.** A model has 24 layers, each with 16 key/value heads of ``head_dim = 64``, and
# keeps its cache in ``bfloat16``. How many KiB does its KV cache take per token? And how many MiB
# for a batch of 8 sequences of 2048 tokens? Work it out from what the cache stores per token.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Per token and layer the cache holds one key and one value vector, ``head_dim`` numbers each,
#    for every key/value head; multiply by the layers and by the bytes of one ``bfloat16``
#    number (printed first). For the batch, multiply by the sequences and their tokens. The code
#    checks the formula against real buffers: one layer's :class:`mha_ref.KVCache` for the whole
#    batch, counted once per layer.

num_layers, kv_heads, kv_head_dim, cache_dtype = 24, 16, 64, torch.bfloat16
cache_batch, cache_len = 8, 2048
per_token = kv_cache_bytes_per_token(num_layers, kv_heads, kv_head_dim, cache_dtype)
one_layer = KVCache(cache_batch, kv_heads, cache_len, kv_head_dim, dtype=cache_dtype)  # buffers (batch, num_kv_heads, max_len, head_dim)
itemsize = torch.empty((), dtype=cache_dtype).element_size()
print("bytes per bfloat16 number:", itemsize)
print(f"per token: 2 (key and value) x {num_layers} layers x {kv_heads} heads x {kv_head_dim} numbers x {itemsize} bytes = {per_token} bytes = {per_token / 2**10:.0f} KiB")
print(f"{cache_batch} sequences x {cache_len} tokens: {per_token * cache_batch * cache_len / 2**20:.0f} MiB by the formula, "
      f"{num_layers * one_layer.nbytes() / 2**20:.0f} MiB in {num_layers} layers of KVCache buffers")

# %%
# **Exercise 2.** While generating, each step feeds **one** new token to ``decode``, which then
# passes no mask at all. Why is that right? And if the step passed ``is_causal=True`` instead,
# which of the cached keys would that one query see, and what would its output be?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The new token is the last position of the sequence, so every cached token, itself included,
#    comes before it or is it: the bottom-right mask of a single query allows every key, the same
#    as no mask. ``is_causal=True`` aligns the triangle top-left instead: it puts the single query
#    at position 0, where it may see key 0 only. The softmax over one key gives it all the weight,
#    so the output is exactly the value of the first token, whatever the query. The code prints
#    both one-row masks and checks both claims on ``q``, ``k``, ``v`` from the mask section:

newest = q[:, :, -1:]  # (batch, num_heads, 1, head_dim): the query of the last token
print("bottom_right:", causal_mask(1, total, alignment="bottom_right", device=device).int().tolist())
print("top_left:    ", causal_mask(1, total, alignment="top_left", device=device).int().tolist())
last_row = scaled_dot_product_attention(q, k, v, is_causal=True)[:, :, -1:]  # (batch, num_heads, 1, head_dim)
no_mask = scaled_dot_product_attention(newest, k, v)  # (batch, num_heads, 1, head_dim)
top_left_out = scaled_dot_product_attention(newest, k, v, is_causal=True)  # (batch, num_heads, 1, head_dim)
print(f"no mask vs the last row of full causal attention: {(no_mask - last_row).abs().max().item():.1e}")
print(f"is_causal=True vs the value of token 0:           {(top_left_out - v[:, :, :1]).abs().max().item():.1e}")

# %%
# .. _ex14-summary:
#
# Summary
# -------
# * Decoding with a cache is the same function as full causal attention: each step's output
#   equals the corresponding rows of the full computation (checked above in ``float64``).
# * New tokens are the *last* queries: their causal mask is aligned bottom-right.
# * The cache trades compute for memory, and its size is set by layers x key/value heads x
#   head_dim x bytes, per token: that is the number grouped-query attention reduces
#   (:ref:`sphx_glr_auto_examples_plot_15_grouped_heads_decode.py`).
