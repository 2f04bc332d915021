"""
Example 22: Multi-head latent attention
=======================================

Grouped-query attention (:ref:`sphx_glr_auto_examples_plot_15_grouped_heads_decode.py`) shrinks
the KV cache by sharing key/value heads. DeepSeek-V2's *multi-head latent attention* (MLA) keeps
every head's own keys and values but caches neither: each token is compressed once into a small
latent vector ``c = W^DKV h`` of ``kv_latent_dim`` numbers, and each head rebuilds its key and
value from it with its own up-projection. Positions cannot ride in the latent (RoPE's rotation
would sit between two matrices that are meant to be multiplied together ahead of time), so a
small shared *decoupled RoPE key* is cached beside it.

This example builds :class:`mha_ref.MultiHeadLatentAttention`, checks on the page that its
**absorbed** form (the up-projections folded into the query and output projections, attention
computed against the cached latents) equals the **naive** form, compares the cache per token
with MHA, GQA and MQA of the same width, and times one decode step against the context.
"""

# %%
# .. _ex22-naive-and-absorbed-forms:
#
# Naive and absorbed forms give the same numbers
# ----------------------------------------------
# One layer, ``embed_dim = 64``, 4 heads of ``head_dim = 16``, a latent of ``kv_latent_dim = 32``
# and a RoPE key of ``rope_dim = 8``, in ``float64``. The naive form rebuilds every head's keys
# ``W_i^UK c`` and values ``W_i^UV c`` and runs ordinary attention. The absorbed form never
# builds them: since ``q_i . (W_i^UK c) = ((W_i^UK)^T q_i) . c``, the query is mapped into the
# latent space once, and since the output is linear in the values, ``W^O_i W_i^UV`` maps the
# latent-space context straight to the output. Attention then runs as multi-query attention
# with one shared key of ``kv_latent_dim + rope_dim`` features per token.

# sphinx_gallery_parallel = False
import matplotlib.pyplot as plt
import torch

from mha_ref import (
    GroupedQueryAttention,
    MultiHeadLatentAttention,
    kv_cache_bytes_per_token,
    latent_cache_bytes_per_token,
    pick_device,
)
from mha_ref.tutorial.bench import environment, time_interleaved_spread
from mha_ref.tutorial.plotting import plot_lines, text_table

torch.manual_seed(0)
device = pick_device()

mla = MultiHeadLatentAttention(64, 4, kv_latent_dim=32, head_dim=16, rope_dim=8, dtype=torch.float64).to(device)
x = torch.randn(2, 10, 64, dtype=torch.float64, device=device)  # (batch, seq_len, embed_dim)
with torch.no_grad():
    naive, naive_weights = mla(x, is_causal=True, need_weights=True)  # (2, 10, 64), (2, 4, 10, 10)
    absorbed, absorbed_weights = mla(x, is_causal=True, need_weights=True, absorbed=True)
    query_weight, output_weight = mla.absorbed_weights()  # (4, 32, 64), (64, 4, 32)
print("absorbed query weight", tuple(query_weight.shape), "= (num_heads, kv_latent_dim, embed_dim)")
print("absorbed output weight", tuple(output_weight.shape), "= (embed_dim, num_heads, kv_latent_dim)")
print(f"max abs diff, outputs: {(naive - absorbed).abs().max().item():.1e}; weights: {(naive_weights - absorbed_weights).abs().max().item():.1e}")

# %%
# .. _ex22-decoding-with-the-latent-cache:
#
# Decoding with the latent cache
# ------------------------------
# At decode time only the latent and the rotated RoPE key of each token are appended to a
# :class:`mha_ref.LatentKVCache`. A prompt of 4 tokens, then one token per step, in both forms;
# each must equal the full causal forward pass above.

rows = []
with torch.no_grad():
    for absorbed_form in (False, True):
        cache = mla.new_cache(batch=2, max_len=10)
        pieces = [mla.decode(x[:, :4], cache, absorbed=absorbed_form)]  # (2, 4, 64)
        pieces += [mla.decode(x[:, t : t + 1], cache, absorbed=absorbed_form) for t in range(4, 10)]
        decoded = torch.cat(pieces, dim=1)  # (2, 10, 64)
        rows.append(("absorbed" if absorbed_form else "naive", tuple(cache.latents.shape), tuple(cache.rope_keys.shape),
                     f"{(decoded - naive).abs().max().item():.1e}"))
print(text_table(["decode form", "cached latents", "cached RoPE keys", "max abs diff vs full forward"], rows))

# %%
# .. _ex22-what-the-cache-costs-per-token:
#
# What the cache costs per token
# ------------------------------
# The same table as :ref:`sphx_glr_auto_examples_plot_14_kv_cache.py`, for the width of
# DeepSeek-V2 (60 layers, 128 heads of ``head_dim = 128``, ``kv_latent_dim = 512`` and
# ``rope_dim = 64``, from the paper's Sec. 3.1.2) with MHA, GQA with 8 key/value heads and MQA of
# the same width beside it, in ``bfloat16``. MLA's count does not depend on the number of heads.

layers, heads, head_dim, latent_dim, rope_dim = 60, 128, 128, 512, 64
context = 4096
shapes = {"MHA": heads, "GQA, 8 kv heads": 8, "MQA": 1}
rows = []
for name, kv_heads in shapes.items():
    per_token = kv_cache_bytes_per_token(layers, kv_heads, head_dim, torch.bfloat16)
    rows.append((name, layers, heads, f"{kv_heads} kv heads", f"{2 * kv_heads * head_dim}", f"{per_token / 2**10:.1f}",
                 f"{per_token * context / 2**30:.2f}"))
mla_per_token = latent_cache_bytes_per_token(layers, latent_dim, rope_dim, torch.bfloat16)
rows.append(("MLA", layers, heads, f"latent {latent_dim} + rope {rope_dim}", f"{latent_dim + rope_dim}",
             f"{mla_per_token / 2**10:.1f}", f"{mla_per_token * context / 2**30:.2f}"))
print(text_table(["attention", "layers", "heads", "cached per token and layer", "numbers", "KiB per token",
                  f"GiB for {context} tokens"], rows))
gqa_groups = (latent_dim + rope_dim) / (2 * head_dim)
print(f"MLA caches as much as GQA with {gqa_groups:.2f} key/value heads; "
      f"MHA caches {kv_cache_bytes_per_token(layers, heads, head_dim, torch.bfloat16) / mla_per_token:.1f} times more")

# %%
# .. _ex22-bytes-read-against-arithmetic:
#
# Bytes read against arithmetic, per cached token
# -----------------------------------------------
# Fewer bytes per token do not make every decode step bound by memory. At the same shape
# (``bfloat16``, batch 1, one layer), the absorbed MLA step reads each cached token's latent and
# RoPE key once, ``2 * (kv_latent_dim + rope_dim)`` bytes, and every one of the 128 heads
# multiplies them: ``2 * (kv_latent_dim + rope_dim)`` FLOPs for its score and
# ``2 * kv_latent_dim`` for its weighted sum (a multiply-add counts 2). GQA and MHA read a key and
# a value per key/value head and spend ``2 * 2 * head_dim`` FLOPs per query head. The ratio is the
# step's arithmetic intensity against the cache; the ridge point is the NVIDIA H100 SXM's, from
# the datasheet figures of :ref:`sphx_glr_auto_examples_plot_15_grouped_heads_decode.py`
# (3.35 TB/s, 989 TFLOP/s dense BF16). The projection weights, read once per step, are left out.

gpu_bandwidth, gpu_flops = 3.35e12, 989e12  # bytes/s, FLOP/s (NVIDIA H100 SXM, dense BF16)
intensity_rows = []
for name, kv_heads in (("MHA", heads), ("GQA, 8 kv heads", 8)):
    read_bytes = 2 * kv_heads * head_dim * 2  # key + value, 2 bytes each
    flops = heads * 2 * 2 * head_dim  # score + weighted sum, per query head
    intensity_rows.append((name, read_bytes, flops, f"{flops / read_bytes:.0f}"))
mla_read = (latent_dim + rope_dim) * 2  # one latent + one RoPE key, 2 bytes each
mla_flops = heads * 2 * ((latent_dim + rope_dim) + latent_dim)  # score + weighted sum, per head
intensity_rows.append(("MLA absorbed", mla_read, mla_flops, f"{mla_flops / mla_read:.0f}"))
print(text_table(["attention", "bytes read per cached token", "FLOPs per cached token", "FLOP/byte"], intensity_rows))
print(f"H100 SXM ridge point: {gpu_flops / gpu_bandwidth:.0f} FLOP/byte; "
      f"MLA absorbed reaches {mla_flops / mla_read / (gpu_flops / gpu_bandwidth):.2f} of it")

# %%
# MHA and GQA stay far below the ridge point: their decode step is bound by reading the cache.
# The absorbed MLA step at 128 heads comes close to it (the ratio printed), so on such a GPU it is
# near the compute bound as well.

# %%
# .. _ex22-one-decode-step-beside-gqa:
#
# One decode step against the context, beside GQA
# -----------------------------------------------
# A smaller layer, quick to time even on an ordinary CPU: ``embed_dim = 512``, 8 heads of 64,
# batch 1, one new token per step, ``float32``, timed on the device that runs this page (the last
# line printed names it). MHA (8 key/value heads), GQA (2) and MLA with
# ``kv_latent_dim = 256`` (4 head widths, as in DeepSeek-V2) and ``rope_dim = 32``; the absorbed
# MLA step gets its folded weights computed once, as an inference engine would, and the naive
# MLA step rebuilds every cached key and value at every step. All four run ``mha_ref``'s explicit
# attention (GQA with ``use_fused=False``), so that no side gets PyTorch's fused kernel. Per
# cached token and head, the absorbed step multiplies ``kv_latent_dim + rope_dim`` numbers for
# the score and ``kv_latent_dim`` for the weighted sum, against ``2 * head_dim`` for GQA (the
# first line printed). The times are taken in rounds
# (2 warm-up, 7 timed; :func:`mha_ref.tutorial.bench.time_interleaved_spread`) and given as ratios
# to GQA's step at the same context. Times are printed on ``[timing]`` lines only: they depend on
# the machine and change from run to run. They describe this machine, not a GPU, where what bounds
# the step depends on its arithmetic intensity (the table above).

embed_dim, num_heads, step_head_dim = 512, 8, 64
contexts = [256, 512, 1024, 2048]
torch.manual_seed(1)
gqa_layers = {kv: GroupedQueryAttention(embed_dim, num_heads, kv, bias=False, use_fused=False).to(device).eval() for kv in (8, 2)}
mla_layer = MultiHeadLatentAttention(embed_dim, num_heads, 256, step_head_dim, 32).to(device).eval()
with torch.no_grad():
    folded = mla_layer.absorbed_weights()  # computed once for every step
x_new = torch.randn(1, 1, embed_dim, device=device)  # (batch, 1, embed_dim)
print(f"multiply-adds per cached token and head: MLA absorbed {256 + 32 + 256}, GQA {2 * step_head_dim}, "
      f"ratio {(256 + 32 + 256) / (2 * step_head_dim):.2f}")


def gqa_step(layer, cache, cached_len):
    cache.crop(cached_len)
    return layer.decode(x_new, cache)  # (1, 1, embed_dim)


def mla_step(cache, cached_len, absorbed_form):
    cache.crop(cached_len)
    return mla_layer.decode(x_new, cache, absorbed=absorbed_form, absorbed_weights=folded if absorbed_form else None)


ratios = {"MHA / GQA": [], "MLA absorbed / GQA": [], "MLA naive / GQA": []}
timing_rows = []
for cached_len in contexts:
    steps = {}
    for kv, layer in gqa_layers.items():
        cache = layer.new_cache(1, cached_len + 1)
        cache.append(torch.randn(1, kv, cached_len, step_head_dim, device=device), torch.randn(1, kv, cached_len, step_head_dim, device=device))
        steps[f"GQA {kv}"] = lambda layer=layer, cache=cache, n=cached_len: gqa_step(layer, cache, n)
    latent_cache = mla_layer.new_cache(1, cached_len + 1)
    latent_cache.append(torch.randn(1, cached_len, 256, device=device), torch.randn(1, cached_len, 32, device=device))
    steps["MLA absorbed"] = lambda c=latent_cache, n=cached_len: mla_step(c, n, True)
    steps["MLA naive"] = lambda c=latent_cache, n=cached_len: mla_step(c, n, False)
    with torch.no_grad():
        spread = time_interleaved_spread(steps, warmup=2, repeats=7, device=device)
    base = spread["GQA 2"][0]
    ratios["MHA / GQA"].append(spread["GQA 8"][0] / base)
    ratios["MLA absorbed / GQA"].append(spread["MLA absorbed"][0] / base)
    ratios["MLA naive / GQA"].append(spread["MLA naive"][0] / base)
    timing_rows.append((cached_len, f"{base * 1e3:.2f}", *(f"{ratios[k][-1]:.2f}" for k in ratios)))
for line in text_table(["context", "GQA step (ms)", "MHA / GQA", "MLA absorbed / GQA", "MLA naive / GQA"], timing_rows).splitlines():
    print("[timing]", line)
print("[timing] on", environment(device)["device"])

fig = plot_lines(contexts, ratios, xlabel="cached tokens", ylabel="time of one decode step / GQA's", title="one decode step against the context (batch 1, 8 heads)", logx=True, logy=True)
plt.show()

# %%
# .. _ex22-exercises:
#
# Exercises
# ---------
# **Exercise 1.** DeepSeek-V2's Table 1 says that MLA with ``kv_latent_dim = 4 * head_dim`` and
# ``rope_dim = head_dim / 2`` caches as much per token as GQA with 2.25 groups. Derive it from
# what each caches per token and layer, and check it for ``head_dim = 64``.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    GQA with ``g`` key/value heads caches ``2 * g * head_dim`` numbers (a key and a value per
#    head); MLA caches ``kv_latent_dim + rope_dim = 4 * head_dim + head_dim / 2 = 4.5 * head_dim``.
#    Equal when ``2 g = 4.5``, that is ``g = 2.25``. The code compares the two byte counts:

small_head = 64
mla_bytes = latent_cache_bytes_per_token(1, 4 * small_head, small_head // 2)
print(f"MLA, bytes per token and layer: {mla_bytes}")
print(f"4 x MLA: {4 * mla_bytes} bytes; GQA with 9 = 4 x 2.25 kv heads: {kv_cache_bytes_per_token(1, 9, small_head)} bytes")

# %%
# **Exercise 2.** Why can the RoPE part not be absorbed too? Rotate the *content* keys by their
# positions and try to fold ``W^UK`` into the query anyway: for which key positions does the
# folded score still equal the real one?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The real score is ``q . R_j (W^UK c_j)`` with ``R_j`` the rotation of position ``j``; the
#    folded one is ``((W^UK)^T q) . c_j``, which drops ``R_j``. They agree only where ``R_j`` is
#    the identity, position 0. Folding needs one fixed matrix between the query and the latent,
#    and with RoPE that matrix changes with every key position. The code measures the gap per
#    key position:

from mha_ref import apply_rotary

w_uk = torch.randn(16, 32, dtype=torch.float64)  # (head_dim, kv_latent_dim): one head's W^UK
q_one = torch.randn(16, dtype=torch.float64)  # (head_dim,)
latents = torch.randn(6, 32, dtype=torch.float64)  # (seq_len, kv_latent_dim)
keys = apply_rotary(latents @ w_uk.T, torch.arange(6))  # (seq_len, head_dim), rotated content keys
real = keys @ q_one  # (seq_len,)
folded_scores = latents @ (w_uk.T @ q_one)  # (seq_len,)
print(f"|real - folded| per key position: {[f'{d:.1e}' for d in (real - folded_scores).abs().tolist()]}")


# %%
# .. _ex22-summary:
#
# Summary
# -------
# * MLA caches one latent of ``kv_latent_dim`` numbers and one shared RoPE key of ``rope_dim``
#   numbers per token and layer, whatever the number of heads; every head still has its own
#   keys and values, rebuilt by its own up-projection.
# * The absorbed form (up-projections folded into the query and output projections) equals the
#   naive form to rounding, as the first two tables print; it is multi-query attention in the
#   latent space with one key of ``kv_latent_dim + rope_dim`` features.
# * The cache table prints how MLA's bytes per token compare with MHA, GQA and MQA of the same
#   width; the timing table prints, for this machine, what one decode step costs relative to
#   GQA, and how much slower the naive step is once it must rebuild the cache at every step.
#
# Sources: DeepSeek-AI 2024, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
# Language Model", arXiv:2405.04434, Sec. 2.1 (Eqs. 9-19, Table 1) and Sec. 3.1.2 (the model's
# shape); Ainslie et al. 2023, arXiv:2305.13245 (GQA); Shazeer 2019, arXiv:1911.02150 (MQA).
