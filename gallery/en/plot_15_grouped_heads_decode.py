"""
Example 15: Grouped heads at decode time
========================================

When a model generates text, each step computes attention for **one** new query per head against
**all** cached keys and values. The arithmetic is small (one dot product per cached token and
head); the data is not: the whole cache is read at every step. Multi-query attention (Shazeer
2019) and grouped-query attention (Ainslie et al. 2023) share each key/value head among a group
of query heads, so the cache, and what a step must read, shrink by the group size.

This example times one decode step against a cache of 4096 tokens for 8, 4, 2 and 1 key/value
heads, shows what the explicit grouped path keeps in memory (and what it does not copy), then
converts a trained multi-head model to grouped-query attention by mean-pooling its key/value
heads, before and after an "uptraining", as Ainslie et al. do, and sets it beside the grouped
model trained from scratch for the same total number of steps, and for as many steps as the
uptraining alone. Times are printed on
``[timing]`` lines only.
"""

# %%
# .. _ex15-one-decode-step-against-a-long-cache:
#
# One decode step against a long cache
# ------------------------------------
# A layer with ``embed_dim = 512`` and 8 query heads (``head_dim = 64``), a batch of 4
# sequences, and a cache already holding 4096 tokens of keys and values (random: only their size
# matters here). One step feeds one new token per sequence through
# :meth:`mha_ref.GroupedQueryAttention.decode`; :meth:`mha_ref.KVCache.crop` puts the cache back
# to 4096 tokens before each repeat. Two paths compute the step: ``mha_ref``'s explicit one
# (``use_fused=False``) and PyTorch's fused ``F.scaled_dot_product_attention(...,
# enable_gqa=True)`` (the default). They are checked equal first.

# sphinx_gallery_parallel = False
import matplotlib.pyplot as plt
import torch

from mha_ref import (
    GroupedQueryAttention,
    MultiHeadAttention,
    causal_mask,
    kv_cache_bytes_per_token,
    mha_to_gqa,
    pick_device,
    repeat_kv_heads,
    split_heads,
)
from mha_ref.tutorial.bench import (
    environment,
    peak_memory,
    plot_benchmark,
    tensor_bytes,
    time_interleaved_spread,
)
from mha_ref.tutorial.plotting import text_table
from mha_ref.tutorial.training import plot_loss_curves
from mha_ref.tutorial.uptraining import KV_INITS, gqa_from_scratch, gqa_uptraining

torch.manual_seed(0)
device = pick_device()
env = environment(device)
print(f"torch {env['torch']}, device: {env['device']}, threads: {env['threads']}")

batch, cached_len, embed_dim, num_heads = 4, 4096, 512, 8
head_dim = embed_dim // num_heads
x_new = torch.randn(batch, 1, embed_dim, device=device)  # (batch, 1, embed_dim): one new token each

layers, caches, check_rows = {}, {}, []
for num_kv_heads in (8, 4, 2, 1):
    layer = GroupedQueryAttention(embed_dim, num_heads, num_kv_heads, use_fused=False).to(device).eval()
    cache = layer.new_cache(batch, max_len=cached_len + 1)
    cache.append(
        torch.randn(batch, num_kv_heads, cached_len, head_dim, device=device),  # (batch, num_kv_heads, cached_len, head_dim)
        torch.randn(batch, num_kv_heads, cached_len, head_dim, device=device),  # (batch, num_kv_heads, cached_len, head_dim)
    )
    with torch.no_grad():
        explicit = layer.decode(x_new, cache)  # (batch, 1, embed_dim)
        cache.crop(cached_len)
        layer.use_fused = True
        fused = layer.decode(x_new, cache)  # (batch, 1, embed_dim)
        cache.crop(cached_len)
    diff = (explicit - fused).abs().max().item()
    check_rows.append((num_kv_heads, num_heads // num_kv_heads, tuple(cache.keys.shape), f"{diff:.0e}", diff < 1e-5))
    layers[num_kv_heads], caches[num_kv_heads] = layer, cache
print(text_table(["num_kv_heads", "group size", "cached keys shape", "max abs diff explicit vs fused", "equal to 1e-5"], check_rows))
if not all(row[-1] for row in check_rows):
    raise RuntimeError("the explicit and fused decode steps disagree; timing them is meaningless")

# %%
# .. _ex15-what-one-step-reads-and-holds:
#
# What one step reads, and what it holds
# --------------------------------------
# The cache shrinks with the key/value heads; the scores of a step, ``(batch, num_heads, 1,
# cached_len)``, do not: there is still one score per *query* head and cached token. The explicit
# path never repeats the keys and values to ``num_heads`` heads: it stacks each group's query
# heads into one ``(batch, num_kv_heads, group * 1, head_dim)`` block and multiplies it with its
# key/value head as stored. (``repeat_kv_heads`` would copy the cache up to the size of the
# multi-head one, which undoes the saving; the last line below measures that.) Nor does the
# explicit path copy the keys to scale them: the scale goes onto the queries and the scores.

scores_bytes = tensor_bytes((batch, num_heads, 1, cached_len), torch.float32)
implementations = {}
for num_kv_heads, layer in layers.items():
    for path, use_fused in (("explicit", False), ("fused", True)):

        def step(layer=layer, cache=caches[num_kv_heads], use_fused=use_fused):
            layer.use_fused = use_fused
            cache.crop(cached_len)
            return layer.decode(x_new, cache)  # (batch, 1, embed_dim)

        implementations[f"num_kv_heads={num_kv_heads}, {path}"] = step
with torch.no_grad():
    peaks = [peak_memory(step, device) for step in implementations.values()]
memory_rows = [
    (num_kv_heads, f"{tensor_bytes(caches[num_kv_heads].keys.shape) * 2 / 2**20:.0f}", f"{scores_bytes / 2**20:.2f}",
     f"{peaks[2 * i].peak_mib:.1f}", f"{peaks[2 * i + 1].peak_mib:.1f}")
    for i, num_kv_heads in enumerate(layers)
]
print(text_table(["num_kv_heads", "K and V cached (MiB)", "scores of one step (MiB)", "explicit step peak (MiB)", "fused step peak (MiB)"], memory_rows))
print(f"peak memory measured with {peaks[0].method}")

one_kv_keys, one_kv_values = caches[1].keys, caches[1].values  # each (batch, 1, cached_len, head_dim)
with torch.no_grad():
    repeated = peak_memory(lambda: repeat_kv_heads(one_kv_keys, one_kv_values, num_heads), device)
print(f"repeat_kv_heads on the 1-head cache allocates {repeated.peak_mib:.0f} MiB (the 8-head cache holds {tensor_bytes(caches[8].keys.shape) * 2 / 2**20:.0f} MiB)")

# %%
# Now the time of one step: 2 warm-up rounds, then 9 rounds, each round calling every variant
# once (:func:`mha_ref.tutorial.bench.time_interleaved_spread`), so that a change of machine load
# hits them alike; each line gives the median and, in brackets, the fastest and slowest round.
# Read the times from 8 to 1 key/value heads against the cache sizes above. On one CPU thread
# the step's time presumably goes mostly to the two matrix products over the cache (scores and
# weighted sum), plus a fixed cost of the projections and the call: an estimate from the FLOP
# counts, not profiled on this page. The times fall with the cache, but
# not in proportion to it, and where the rounds of two rows overlap (one row's slowest above the
# other's fastest), the order of their medians means little. On a GPU a decode step is bound by reading the
# cache from memory, which is why fewer key/value heads make it faster there (Shazeer 2019;
# Ainslie et al. 2023); this CPU build does not measure that.

with torch.no_grad():
    spread = list(time_interleaved_spread(implementations, warmup=2, repeats=9, device=device).values())
seconds = [median for median, _, _ in spread]
for name, (s, fastest, slowest) in zip(implementations, spread, strict=True):
    print(f"[timing] decode step, {name}: median {s * 1e3:.2f} ms (min {fastest * 1e3:.2f}, max {slowest * 1e3:.2f})")

fig = plot_benchmark(
    list(implementations),
    seconds,
    [p.peak_bytes for p in peaks],
    title=f"one decode step: batch={batch}, cached_len={cached_len}, num_heads={num_heads}, head_dim={head_dim}, on {env['device']}",
    time_label="median time per step (ms)",
    memory_label="peak memory of the step (MiB)",
    memory_reference_bytes=tensor_bytes(caches[8].keys.shape) * 2,
    memory_reference_label="K and V cached with 8 key/value heads",
)
plt.show()

# %%
# .. _ex15-what-a-decode-step-costs-on-a-gpu:
#
# What a decode step costs on a GPU: the arithmetic
# -------------------------------------------------
# The CPU times above cannot show what bounds a decode step on a GPU, but the arithmetic of
# Shazeer (2019, section 2.4.1) can. One step of this layer reads the projection weights once and
# the keys and values of every cached token of every sequence, and does little arithmetic per
# byte read: :func:`mha_ref.tutorial.head_count.decode_step_traffic` counts both (float16,
# ``cached_len`` tokens, the layer above). A device is bound by memory for a step whose FLOPs per
# byte (the *intensity*) lie far below its peak FLOP rate divided by its bandwidth (its *ridge
# point*). For the device we take the NVIDIA H100 SXM's published figures (NVIDIA, "H100 Tensor
# Core GPU" datasheet): 3.35 TB/s of HBM3 bandwidth and 989 TFLOP/s of dense BF16 tensor-core
# arithmetic (the datasheet's 1,979 is with sparsity). The last two columns are the time reading
# the bytes would take at that bandwidth and the time the FLOPs would take at that rate: lower
# bounds, not measurements.

from mha_ref.tutorial.head_count import decode_step_traffic

gpu_name, gpu_bandwidth, gpu_flops = "NVIDIA H100 SXM", 3.35e12, 989e12  # bytes/s, FLOP/s (dense BF16)
ridge = gpu_flops / gpu_bandwidth
print(f"{gpu_name}: {gpu_bandwidth / 1e12:.2f} TB/s, {gpu_flops / 1e12:.0f} TFLOP/s, ridge point {ridge:.0f} FLOP/byte")
traffic_rows = []
for traffic_batch in (1, 64):
    for num_kv_heads in (8, 4, 2, 1):
        t = decode_step_traffic(traffic_batch, cached_len, embed_dim, num_heads, num_kv_heads)
        memory_us, compute_us = t["bytes"] / gpu_bandwidth * 1e6, t["flops"] / gpu_flops * 1e6
        traffic_rows.append((traffic_batch, num_kv_heads, f"{t['cache_bytes'] / 2**20:.1f}", f"{t['weight_bytes'] / 2**20:.1f}",
                             f"{t['flops'] / 1e6:.1f}", f"{t['intensity']:.1f}", f"{memory_us:.2f}", f"{compute_us:.3f}"))
print(text_table(["batch", "num_kv_heads", "K/V read (MiB)", "weights read (MiB)", "MFLOPs", "FLOP/byte", "memory time (us)", "FLOP time (us)"], traffic_rows))

# %%
# Read the table (the numbers are the ones printed): every row's intensity lies far below the
# ridge point, so on this GPU a decode step of this layer would be bound by reading memory, and
# the memory time is many times the FLOP time. Fewer key/value heads cut the bytes of the cache
# by the group size while the attention FLOPs stay, so the intensity rises; with a large batch the
# cache is nearly all of what is read. That is the case for multi-query and grouped-query
# attention (Shazeer 2019; Ainslie et al. 2023), and why the CPU timings of this page, bound by
# other things, fall less than the cache.

# %%
# .. _ex15-from-multi-head-to-grouped-query-mean-pooling:
#
# From multi-head to grouped-query attention: mean-pooling
# --------------------------------------------------------
# Ainslie et al. build a grouped-query model from a trained multi-head one: the key (and value)
# projection of each new key/value head is the **mean** of the projections of the heads in its
# group; the query and output projections are kept. :func:`mha_ref.mha_to_gqa` does that. With as
# many key/value heads as query heads nothing is pooled, and the converted layer computes the same
# function (checked in ``float64``, on a causal mask: ``True`` = blocked for the multi-head
# layer, ``is_causal=True`` for the grouped one).

mha = MultiHeadAttention(embed_dim, num_heads, batch_first=True, dtype=torch.float64).to(device).eval()
x = torch.randn(2, 16, embed_dim, dtype=torch.float64, device=device)  # (batch, seq_len, embed_dim)
conversion_rows = []
with torch.no_grad():
    expected, _ = mha(x, x, x, attn_mask=~causal_mask(16, device=device), need_weights=False)  # (batch, seq_len, embed_dim)
    for num_kv_heads in (8, 4, 2, 1):
        gqa = mha_to_gqa(mha, num_kv_heads)
        out, _ = gqa(x, is_causal=True)  # (batch, seq_len, embed_dim)
        diff = (out - expected).abs().max().item()
        conversion_rows.append((num_kv_heads, tuple(gqa.k_proj.weight.shape), f"{diff:.0e}" if num_kv_heads == num_heads else f"{diff:.2f}"))
print(text_table(["num_kv_heads", "k_proj.weight shape", "max abs diff vs the multi-head layer"], conversion_rows))

# %%
# With fewer key/value heads the pooled layer is a different function, so the model loses
# accuracy; the question is how much uptraining wins back. On the site's lookup-table task (the target depends on
# the previous token and the one before: :mod:`mha_ref.tutorial.tasks`),
# :func:`mha_ref.tutorial.uptraining.gqa_uptraining` trains the tiny model with 4 multi-head heads
# for 200 steps, converts it to 4, 2 and 1 key/value heads, and measures accuracy on a fixed
# evaluation set right after the conversion and after 100 more steps (``before -> after``). The
# controls follow Ainslie et al.'s ablation (Sec. 2.1): from the same multi-head checkpoint, with
# the same 100 steps on the same batches, the key/value heads start as the mean of their group,
# as the group's head 0, or random (query and output projections kept each time). The second
# table repeats the whole run for three seeds, since a tiny model varies from seed to seed.
# Seeded, one thread.

results = {seed: gqa_uptraining(num_kv_heads=(4, 2, 1), steps=200, uptrain_steps=100, seed=seed) for seed in (0, 1, 2)}
result = results[0]
print(f"multi-head model (4 heads), seed 0: accuracy {result.mha_accuracy:.3f}")
print(text_table(
    ["num_kv_heads", "K/V mean of the group", "K/V head 0 of the group", "K/V random"],
    [(r.num_kv_heads, *(f"{r.converted_accuracy[init]:.3f} -> {r.uptrained_accuracy[init]:.3f}" for init in KV_INITS)) for r in result.rows],
))
print(text_table(
    ["num_kv_heads", "mean: after uptraining, seeds 0 / 1 / 2", "head 0 of the group", "random"],
    [(rows[0].num_kv_heads, *(" / ".join(f"{r.uptrained_accuracy[init]:.3f}" for r in rows) for init in KV_INITS))
     for rows in zip(*(results[seed].rows for seed in (0, 1, 2)), strict=True)],
))
fig = plot_loss_curves(
    {f"num_kv_heads = {r.num_kv_heads}": r.uptrain_losses for r in result.rows},
    title="Uptraining after mean-pooling the key/value heads",
    xlabel="uptraining step",
    ylabel="cross-entropy loss (log scale)",
)
plt.show()

# %%
# How much uptraining that is, and the control it needs. Ainslie et al. uptrain for 5% of the
# pre-training steps; the line below gives this page's fraction. The other line of the comparison
# is the grouped model **trained from scratch**, with nothing converted, for the same total number
# of steps as pre-training plus uptraining (:func:`mha_ref.tutorial.uptraining.gqa_from_scratch`:
# the same model, optimiser, learning rate, task and evaluation set, three seeds), and the same
# model trained from scratch for as many steps as the uptraining alone.

pre_steps, up_steps = 200, 100
print(
    f"uptraining budget: {up_steps} steps after {pre_steps} of pre-training, "
    f"{up_steps / pre_steps:.0%} of pre-training (Ainslie et al. 2023: 5%)"
)
scratch = {seed: gqa_from_scratch((2, 1), steps=pre_steps + up_steps, seed=seed) for seed in (0, 1, 2)}
scratch_short = {seed: gqa_from_scratch((2, 1), steps=up_steps, seed=seed) for seed in (0, 1, 2)}  # as many steps as the uptraining
uptrained = {
    kv: [next(r for r in results[seed].rows if r.num_kv_heads == kv).uptrained_accuracy["mean"] for seed in (0, 1, 2)]
    for kv in (2, 1)
}
print(text_table(
    ["num_kv_heads", f"convert + uptrain ({pre_steps} + {up_steps} steps), seeds 0 / 1 / 2", f"from scratch ({pre_steps + up_steps} steps)",
     f"from scratch ({up_steps} steps)"],
    [(kv, " / ".join(f"{a:.3f}" for a in uptrained[kv]), " / ".join(f"{scratch[seed][kv]:.3f}" for seed in (0, 1, 2)),
      " / ".join(f"{scratch_short[seed][kv]:.3f}" for seed in (0, 1, 2))) for kv in (2, 1)],
))
better = {kv: sum(scratch[seed][kv] > uptrained[kv][i] for i, seed in enumerate((0, 1, 2))) for kv in (2, 1)}
better_short = {kv: sum(scratch_short[seed][kv] > uptrained[kv][i] for i, seed in enumerate((0, 1, 2))) for kv in (2, 1)}
for kv in (2, 1):
    print(f"num_kv_heads={kv}: with {pre_steps + up_steps} steps, from scratch ahead of convert + uptrain on "
          f"{better[kv]} of 3 seeds; with {up_steps} steps, on {better_short[kv]} of 3")

# %%
# Read the two tables together (the numbers are the ones printed). After the conversion, 100
# uptraining steps bring the grouped model with 2 key/value heads back on every seed; the
# multi-query model (1 key/value head) stays well below the multi-head model on every seed. And
# the from-scratch line shows that this is not a limit of multi-query attention on this task:
# trained from the start for the same 300 steps, it reaches nearly the multi-head accuracy on
# every seed, ahead of convert-then-uptrain. Whether uptraining "pays" depends on which of the
# two columns it is set against. The 300-step column counts the pre-training as part of its cost
# (200 + 100 steps against 300). If the multi-head model exists anyway, its pre-training is a sunk
# cost, and the fair comparison is the 100 uptraining steps against 100 steps from scratch, the
# last column: there convert-then-uptrain is ahead on every seed, for 2 key/value heads and for
# 1 (the counts printed). So, counting the pre-training in, on a toy whose whole pre-training
# costs seconds, uptraining does not pay, and its budget here (the fraction printed above) is ten
# times the paper's; with the pre-training sunk, it does. Uptraining pays where pre-training is what is expensive, as for the large
# checkpoints of Ainslie et al.: there a few percent of that compute is far less than training a
# grouped model again. This toy cannot reproduce that regime; it only shows the control that
# decides it.

# %%
# .. _ex15-what-to-take-away:
#
# What to take away
# -----------------
# * A decode step reads the whole cache for a little arithmetic; fewer key/value heads mean less
#   to store and, for a kernel that reads each shared head once per group, less to read (on a
#   GPU, what bounds the step; on one CPU thread the times fall less than the cache).
# * What grouping does not shrink: the query heads, their scores (one per query head and cached
#   token), and the output projection.
# * The explicit grouped path multiplies each query group with its key/value head as stored,
#   without repeating or scaling a copy of the cache; repeating the heads (``repeat_kv_heads``)
#   would copy the cache back to its multi-head size.
# * Mean-pooling is exact with as many key/value heads as query heads, an approximation below;
#   compare the three initialisations above, all uptrained alike from the same checkpoint: what
#   the mean keeps of the trained key/value heads shows as the gap to head 0 of the group and to
#   random weights, and the seeds show how much of it is luck.
#
# Sources: Shazeer 2019, "Fast Transformer Decoding: One Write-Head is All You Need",
# arXiv:1911.02150; Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer
# Models from Multi-Head Checkpoints", arXiv:2305.13245, Sec. 2.1.

# %%
# .. _ex15-exercises:
#
# Exercises
# ---------
# **Exercise 1.** A model of the Llama 2 7B shape (32 layers, 32 query heads of ``head_dim =
# 128``) keeps its KV cache in ``float16``. What is the largest ``num_kv_heads`` (a divisor of
# 32) for which the cache of one sequence of 8192 tokens takes at most 1 GiB? Think first about
# how the cache scales with ``num_kv_heads``.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The cache is proportional to ``num_kv_heads``: halving the key/value heads halves it, and
#    the number of query heads does not enter the formula at all. So start from the multi-head
#    cache and halve until it fits. The table goes through the divisors with
#    :func:`mha_ref.kv_cache_bytes_per_token`:

budget_layers, budget_heads, budget_head_dim, budget_tokens = 32, 32, 128, 8192
budget_rows = []
for kv in (32, 16, 8, 4, 2, 1):
    cache_bytes = kv_cache_bytes_per_token(budget_layers, kv, budget_head_dim, torch.float16) * budget_tokens
    budget_rows.append((kv, budget_heads // kv, f"{cache_bytes / 2**30:.3f}", cache_bytes <= 2**30))
print(text_table(["num_kv_heads", "group size", f"GiB for {budget_tokens} tokens", "at most 1 GiB"], budget_rows))
print("largest num_kv_heads that fits:", max(kv for kv, _, _, fits in budget_rows if fits))

# %%
# **Exercise 2.** ``mha_to_gqa(mha, 4)`` averages the key (and value) projections of 2 of
# ``mha``'s 8 heads into each key/value head. Which two heads make key/value head 1: heads 1 and
# 5, or heads 2 and 3? And which query heads of the converted layer then attend with key/value
# head 1?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Neighbours: the groups are consecutive, key/value head ``j`` is the mean of heads
#    ``j * group`` to ``(j + 1) * group - 1``, and the same rule assigns query head ``i`` to
#    key/value head ``i // group``. The code compares the mean of each candidate pair with the
#    converted layer's rows for key/value head 1; then it recomputes, for every query head, the
#    attention weights it would have with key/value head 1, and lists the query heads whose
#    weights in the layer are exactly those:

gqa4 = mha_to_gqa(mha, 4)
key_rows = mha.in_proj_weight.detach()[embed_dim : 2 * embed_dim]  # (embed_dim, embed_dim): the key projection, head by head
kv_head_1 = gqa4.k_proj.weight.detach()[head_dim : 2 * head_dim]  # (head_dim, embed_dim)
for first, second in ((1, 5), (2, 3)):
    pooled = (key_rows[first * head_dim : (first + 1) * head_dim] + key_rows[second * head_dim : (second + 1) * head_dim]) / 2  # (head_dim, embed_dim)
    print(f"mean of heads {first} and {second} equals key/value head 1: {torch.allclose(pooled, kv_head_1)}")
with torch.no_grad():
    _, weights = gqa4(x, need_weights=True)  # (batch, num_heads, seq_len, seq_len)
    queries = split_heads(gqa4.q_proj(x), num_heads)  # (batch, num_heads, seq_len, head_dim)
    keys = split_heads(gqa4.k_proj(x), gqa4.num_kv_heads)  # (batch, num_kv_heads, seq_len, head_dim)
    with_kv_head_1 = torch.softmax(queries @ keys[:, 1:2].transpose(-2, -1) / head_dim**0.5, dim=-1)  # (batch, num_heads, seq_len, seq_len)
print("query heads that attend with key/value head 1:", [h for h in range(num_heads) if torch.allclose(with_kv_head_1[:, h], weights[:, h])])

# %%
# **Exercise 3.** Mean-pooling is exact with as many key/value heads as query heads. Take a copy
# of ``mha`` in which every odd head ``h`` gets the key and value projections of head ``h - 1``
# (the query projections stay as they are, so the heads still differ). Is ``mha_to_gqa`` of that
# copy exact at 4 key/value heads? At 2?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    At 4 key/value heads each group is a pair of heads with the same key and value projections:
#    their mean is that same projection, every query head keeps its query and output rows, and the
#    converted layer computes the copy's function, to rounding. At 2, each group holds two pairs
#    that differ, and the mean is again an approximation. What pooling loses is how much the heads
#    of a group differ in their keys and values, not how many heads share one. The code compares
#    the copy and the original ``mha`` with their conversions:

twin = MultiHeadAttention(embed_dim, num_heads, batch_first=True, dtype=torch.float64).to(device).eval()
twin.load_state_dict(mha.state_dict())
with torch.no_grad():
    for h in range(1, num_heads, 2):  # odd head h takes the key and value rows of head h - 1
        for start in (embed_dim, 2 * embed_dim):  # the key block of in_proj_weight, then the value block
            rows_h = slice(start + h * head_dim, start + (h + 1) * head_dim)
            rows_before = slice(start + (h - 1) * head_dim, start + h * head_dim)
            twin.in_proj_weight[rows_h] = twin.in_proj_weight[rows_before]  # (head_dim, embed_dim)
            twin.in_proj_bias[rows_h] = twin.in_proj_bias[rows_before]  # (head_dim,)
    twin_rows = []
    for num_kv_heads in (4, 2):
        diffs = []
        for module in (twin, mha):
            reference, _ = module(x, x, x, attn_mask=~causal_mask(16, device=device), need_weights=False)  # (batch, seq_len, embed_dim)
            out, _ = mha_to_gqa(module, num_kv_heads)(x, is_causal=True)  # (batch, seq_len, embed_dim)
            diffs.append(f"{(out - reference).abs().max().item():.0e}")
        twin_rows.append((num_kv_heads, *diffs))
print(text_table(["num_kv_heads", "copy with paired heads: max abs diff", "original mha: max abs diff"], twin_rows))

# %%
# .. _ex15-summary:
#
# Summary
# -------
# * A decode step reads the whole KV cache for one query per head; grouped-query and multi-query
#   attention shrink that cache by the group size, and the explicit grouped path never copies it.
# * By the arithmetic of Shazeer 2019 (computed, not measured), such a step does a few FLOPs per
#   byte read, far below a GPU's ridge point: on a GPU it is bound by memory, which is what fewer
#   key/value heads relieve.
# * Mean-pooling a trained multi-head layer is exact only with as many key/value heads as query
#   heads. Here 100 uptraining steps, 50% of pre-training against the paper's 5%, bring back the
#   model with 2 key/value heads but not the multi-query one.
# * The budget-matched control decides the question on this toy: trained from scratch for the
#   same 300 steps, the multi-query model learns the task. Against 100 steps from scratch, as
#   many as the uptraining alone (pre-training sunk), convert-then-uptrain is ahead on every seed.
#   Uptraining pays when pre-training is the expensive part, the regime of Ainslie et al., which a
#   toy of a few seconds is not.
