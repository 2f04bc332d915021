"""
Example 13: The online softmax behind FlashAttention
====================================================

Attention as written in the paper computes all the scores of a query row, ``(L, S)`` per head,
then their softmax, then the weighted sum of the values. For long sequences the scores are the
largest tensor of the layer, and writing them to memory and reading them back costs more time
than the arithmetic. FlashAttention (Dao et al. 2022) never stores them: it walks over the keys
block by block with the *online softmax* (Milakov & Gimelshein 2018 compute the normaliser that
way; the running, rescaled accumulator of the weighted values is Rabe & Staats 2021, which
FlashAttention builds on), and the result is **exact**, not an approximation.

This example builds the idea in three steps: why every softmax subtracts the row maximum; how a
*running* maximum lets us do that one block at a time (:func:`mha_ref.tiled_attention`, checked
equal to full attention); and what PyTorch's own fused kernel does on this device, checked first,
then timed. Times are printed on ``[timing]`` lines only: they depend on the machine.
"""

# %%
# .. _ex13-why-softmax-subtracts-the-row-maximum:
#
# Why softmax subtracts the row maximum
# -------------------------------------
# :math:`\mathrm{softmax}(s)_j = e^{s_j} / \sum_k e^{s_k}`. Written literally, ``exp`` of a
# score around 100 already exceeds the largest ``float32`` number (printed first): the
# numerator and the sum become ``inf``, and ``inf / inf`` is ``NaN``. Subtracting the row
# maximum :math:`m` first changes nothing mathematically (:math:`e^{s_j - m} / \sum_k e^{s_k - m}`,
# the factor :math:`e^{-m}` cancels) and keeps every exponent at most 0. This is what
# ``torch.softmax`` does internally.

# sphinx_gallery_mha_ref_expected_nan
# sphinx_gallery_parallel = False
import math
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from mha_ref import pick_device, scaled_dot_product_attention, tiled_attention
from mha_ref.tutorial.bench import (
    environment,
    peak_memory,
    plot_benchmark,
    tensor_bytes,
    time_interleaved_spread,
)
from mha_ref.tutorial.plotting import text_table

torch.manual_seed(0)
device = pick_device()

logits = torch.tensor([100.0, 98.0, 90.0, 60.0], device=device)  # (S,) float32 scores of one row
naive_exp = torch.exp(logits)  # (S,)
naive = naive_exp / naive_exp.sum()  # (S,)
shifted_exp = torch.exp(logits - logits.max())  # (S,), every exponent <= 0
stable = shifted_exp / shifted_exp.sum()  # (S,)
print("largest float32:     ", torch.finfo(torch.float32).max)
print("logits:              ", logits.tolist())
print("exp(logits):         ", naive_exp.tolist())
print("naive softmax:       ", naive.tolist())
print("softmax(logits - max):", [round(p, 6) for p in stable.tolist()])
print("torch.softmax:       ", [round(p, 6) for p in torch.softmax(logits, dim=0).tolist()])

# %%
# .. _ex13-one-block-at-a-time-the-running-maximum:
#
# One block at a time: the running maximum
# ----------------------------------------
# The maximum of a whole row needs the whole row. The online softmax keeps instead, per query
# row, three running quantities: the largest score seen so far :math:`m`, the sum
# :math:`l = \sum e^{s_j - m}` over the keys seen so far, and the output
# :math:`o = \sum e^{s_j - m} v_j`. When a new block of keys raises the maximum from :math:`m`
# to :math:`m'`, the sums built so far are relative to the old maximum; multiplying them by
# :math:`e^{m - m'}` moves them to the new one. At the end, :math:`o / l` is the attention output.
#
# Below, one row of 10 scores in blocks of 4 (the last block holds 2): after each block the
# running maximum and sum, and at the end the same probabilities as a softmax over the whole row.

row = torch.tensor([1.0, 3.0, 0.5, 2.0, 6.0, 4.0, 1.5, 0.0, 7.0, 2.5], dtype=torch.float64)  # (S,)
running_max, running_sum, trace = float("-inf"), 0.0, []
for start in range(0, len(row), 4):
    block = row[start : start + 4]  # (block,)
    new_max = max(running_max, block.max().item())
    running_sum = running_sum * math.exp(running_max - new_max) + torch.exp(block - new_max).sum().item()
    running_max = new_max
    trace.append((f"{start}..{start + len(block) - 1}", f"{running_max:.1f}", f"{running_sum:.4f}"))
print(text_table(["keys of the block", "running max m", "running sum l"], trace))
online = torch.exp(row - running_max) / running_sum  # (S,)
print("max |online - softmax|:", f"{(online - torch.softmax(row, dim=0)).abs().max().item():.0e}")

# %%
# .. _ex13-tiled-attention-equals-full-attention:
#
# Tiled attention equals full attention
# -------------------------------------
# :func:`mha_ref.tiled_attention` runs that loop over key blocks for every query row at once,
# with the output rescaled like the sum. In ``float64`` it matches
# :func:`mha_ref.scaled_dot_product_attention` to rounding, for block sizes that divide the
# sequence length and for ones that do not, with the causal mask, with a padding mask, and for a
# query whose keys are all masked (its output is 0, as in the full computation).

batch, num_heads, seq_len, head_dim = 2, 4, 300, 16
q, k, v = (torch.randn(batch, num_heads, seq_len, head_dim, dtype=torch.float64, device=device) for _ in range(3))  # each (batch, num_heads, seq_len, head_dim)
key_lengths = torch.tensor([300, 200], device=device)  # real tokens per sequence
is_real_key = torch.arange(seq_len, device=device) < key_lengths[:, None]  # (batch, seq_len)
padding = is_real_key[:, None, None, :].expand(batch, 1, seq_len, seq_len).clone()  # (batch, 1, seq_len, seq_len)
padding[1, 0, 7] = False  # query 7 of sequence 1 may attend to no key at all

check_rows = []
for block_size in (64, 100, 128, 300):
    for label, mask, causal in (("none", None, False), ("causal", None, True), ("padding", padding, False)):
        full = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)  # (batch, num_heads, seq_len, head_dim)
        tiled = tiled_attention(q, k, v, attn_mask=mask, is_causal=causal, block_size=block_size)  # (batch, num_heads, seq_len, head_dim)
        diff = (tiled - full).abs().max().item()
        check_rows.append((block_size, label, f"{diff:.0e}", diff < 1e-12))
print(text_table(["block_size", "mask", "max abs diff (float64)", "equal to 1e-12"], check_rows))
print("output of the fully masked query:", tiled_attention(q, k, v, attn_mask=padding)[1, :, 7].abs().max().item())

# %%
# .. _ex13-what-tiling-saves:
#
# What tiling saves: the scores alive at once
# -------------------------------------------
# The full computation holds the scores and the weights of every query and key,
# ``(batch, num_heads, L, S)``. The tiled one works on ``(batch, num_heads, L, block_size)`` at
# a time: within a block, the scores, the scores minus the running maximum and their
# exponentials are alive together, so about three block-sized tensors, plus what grows with
# ``L x head_dim`` (a scaled copy of the queries, the output) and the running statistics
# ``(batch, num_heads, L, 1)``. The measured peak is printed next to these sizes below.
# (FlashAttention
# also splits the queries into blocks and keeps each tile in the GPU's on-chip memory; that is
# about hardware and not reproduced here.) The sizes below are computed for ``float32`` at a
# longer length, then the peak memory of one call of each is measured.

batch, num_heads, seq_len, head_dim, block_size = 1, 8, 1024, 64, 128
q, k, v = (torch.randn(batch, num_heads, seq_len, head_dim, device=device) for _ in range(3))  # each (batch, num_heads, seq_len, head_dim)
full_scores = tensor_bytes((batch, num_heads, seq_len, seq_len), torch.float32)
block_scores = tensor_bytes((batch, num_heads, seq_len, block_size), torch.float32)
print(f"scores of the full computation (batch, num_heads, L, S) = {(batch, num_heads, seq_len, seq_len)}: {full_scores / 2**20:.1f} MiB")
print(f"scores of one key block (batch, num_heads, L, block_size) = {(batch, num_heads, seq_len, block_size)}: {block_scores / 2**20:.1f} MiB")
print(f"ratio S / block_size: {seq_len // block_size}")

# %%
# .. _ex13-pytorch-backends-on-this-device:
#
# PyTorch's backends on this device
# ---------------------------------
# ``F.scaled_dot_product_attention`` chooses among several kernels ("backends");
# ``torch.nn.attention.sdpa_kernel`` restricts the choice. ``MATH`` is the plain composition
# of operators, which stores the scores like :func:`mha_ref.scaled_dot_product_attention`. The
# fused kernels (``FLASH_ATTENTION``, which PyTorch also ships for the CPU, and
# ``EFFICIENT_ATTENTION`` on CUDA for ``float32``) work tile by tile with the online softmax; the
# fused row is labelled with the one that runs here. First the check: both backends, and :func:`mha_ref.tiled_attention`, against the ``float64``
# result. Then peak memory and time (2 warm-up rounds, 9 timed; median, fastest and slowest
# round), with the size of the full scores as a dashed line.

env = environment(device)
print(f"torch {env['torch']}, device: {env['device']}, threads: {env['threads']}")
# the fused backend this device runs for these inputs: the first one PyTorch accepts when
# restricted to it (CPU builds ship FLASH_ATTENTION only; on CUDA, float32 goes to EFFICIENT)
fused_backends = []
for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
    with warnings.catch_warnings(), sdpa_kernel(backend):
        warnings.simplefilter("ignore")  # PyTorch warns why a backend it cannot use is skipped
        try:
            F.scaled_dot_product_attention(q, k, v)
        except RuntimeError:
            continue
    fused_backends.append(backend)
if not fused_backends:
    raise RuntimeError("no fused attention backend runs on this device")
fused_backend_used = fused_backends[0]


def math_backend():
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v)  # (batch, num_heads, seq_len, head_dim)


def fused_backend():
    with sdpa_kernel(fused_backend_used):
        return F.scaled_dot_product_attention(q, k, v)  # (batch, num_heads, seq_len, head_dim)


implementations = {
    "F.sdpa, SDPBackend.MATH": math_backend,
    f"F.sdpa, SDPBackend.{fused_backend_used.name}": fused_backend,
    "mha_ref.tiled_attention, block_size=128": lambda: tiled_attention(q, k, v, block_size=block_size),
}
expected = scaled_dot_product_attention(q.double(), k.double(), v.double())  # (batch, num_heads, seq_len, head_dim)
backend_rows = []
for name, fn in implementations.items():
    diff = (fn().double() - expected).abs().max().item()
    backend_rows.append((name, f"{diff:.0e}", diff < 1e-5))
print(text_table(["implementation", "max abs diff vs float64", "equal to 1e-5"], backend_rows))
if not all(row[-1] for row in backend_rows):
    raise RuntimeError("a backend disagrees with the float64 reference; timing it is meaningless")

spread = list(time_interleaved_spread(implementations, warmup=2, repeats=9, device=device).values())
seconds = [median for median, _, _ in spread]
peaks = [peak_memory(fn, device) for fn in implementations.values()]
memory_rows = [
    (name, f"{p.peak_mib:.1f}", "yes" if p.peak_bytes >= full_scores else "no")
    for name, p in zip(implementations, peaks, strict=True)
]
print(f"peak memory, measured with {peaks[0].method}:")
print(text_table(["implementation", "peak MiB", "at least the full scores"], memory_rows))
print(f"mha_ref.tiled_attention: peak {peaks[2].peak_mib:.1f} MiB; one key block of scores {block_scores / 2**20:.1f} MiB; three blocks {3 * block_scores / 2**20:.1f} MiB; one tensor of the size of q {tensor_bytes(q.shape) / 2**20:.1f} MiB")
for name, (s, fastest, slowest) in zip(implementations, spread, strict=True):
    print(f"[timing] {name}: median {s * 1e3:.1f} ms (min {fastest * 1e3:.1f}, max {slowest * 1e3:.1f})")

fig = plot_benchmark(
    list(implementations),
    seconds,
    [p.peak_bytes for p in peaks],
    title=f"batch={batch}, num_heads={num_heads}, L=S={seq_len}, head_dim={head_dim}, on {env['device']}",
    time_label="median time per call (ms)",
    memory_label="peak memory (MiB)",
    memory_reference_bytes=full_scores,
    memory_reference_label="size of the full scores (batch, num_heads, L, S)",
)
plt.show()

# %%
# Sources: Milakov & Gimelshein 2018, "Online normalizer calculation for softmax",
# arXiv:1805.02867 (the normaliser); Rabe & Staats 2021, "Self-attention Does Not Need O(n²)
# Memory", arXiv:2112.05682 (the output accumulator); Dao et al. 2022, "FlashAttention", arXiv:2205.14135, Sec. 3.1.

# %%
# .. _ex13-exercises:
#
# Exercises
# ---------
# **Exercise 1.** In the hand loop over ``row``, suppose the whole first block of 4 keys is
# masked: its scores are ``-inf``. If the loop runs as written, what are the running maximum and
# the running sum after that block, and after the last one? What must an implementation do
# about it? Then: with every query of ``q`` barred from the first ``block_size`` keys, does
# :func:`mha_ref.tiled_attention` still equal full attention under the same mask?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    After a fully masked block the maximum is still :math:`-\infty`, so the rescaling factor
#    :math:`e^{m - m'}` and the block's exponentials :math:`e^{s_j - m'}` are both
#    :math:`e^{-\infty - (-\infty)}`, which is NaN in floating point; and a NaN in the running
#    sum stays there for every later block. The fix, in :func:`mha_ref.tiled_attention`: while the
#    maximum is still :math:`-\infty`, subtract 0 instead. Nothing has been summed yet, so the sum
#    stays 0 and the first block with a real score starts the row afresh. The loop below is the one
#    above, with and without that fix; then the tiled and the full computation (in ``float64``)
#    with the first block of keys masked:

# sphinx_gallery_mha_ref_expected_nan
masked_row = row.clone()  # (S,)
masked_row[:4] = float("-inf")  # the first block of keys is masked


def running_stats(scores, block, safe):
    """(running max, running sum) after each block; safe: subtract 0 while the max is -inf."""
    m, total, trace = float("-inf"), 0.0, []
    for start in range(0, len(scores), block):
        part = scores[start : start + block]  # (block,)
        new_max = max(m, part.max().item())
        shift = 0.0 if safe and new_max == float("-inf") else new_max
        total = total * math.exp(m - shift) + torch.exp(part - shift).sum().item()
        m = new_max
        trace.append((m, total))
    return trace


for label, safe in (("loop as written:         ", False), ("subtract 0 while m = -inf:", True)):
    print(label, " | ".join(f"m={m:.1f}, l={total:.4f}" for m, total in running_stats(masked_row, 4, safe)))
m, total = running_stats(masked_row, 4, safe=True)[-1]
online = torch.exp(masked_row - m) / total  # (S,)
print("with the fix, max |online - softmax|:", f"{(online - torch.softmax(masked_row, dim=0)).abs().max().item():.0e}")

q64, k64, v64 = q.double(), k.double(), v.double()  # each (batch, num_heads, seq_len, head_dim)
after_first_block = torch.arange(seq_len, device=device) >= block_size  # (seq_len,), True = may attend
full = scaled_dot_product_attention(q64, k64, v64, attn_mask=after_first_block)  # (batch, num_heads, seq_len, head_dim)
tiled = tiled_attention(q64, k64, v64, attn_mask=after_first_block, block_size=block_size)  # (batch, num_heads, seq_len, head_dim)
print(f"first {block_size} keys masked: tiled output finite: {tiled.isfinite().all().item()}, max abs diff vs full: {(tiled - full).abs().max().item():.0e}")

# %%
# **Exercise 2.** Run the hand loop over ``row`` with blocks of 3 instead of 4. Which running
# maxima appear after each block, and is the final running sum the same as with blocks of 4?
# What about blocks of 1 key (a stream, one score at a time) and one block of the whole row?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    After each block the running maximum is the maximum of the scores seen so far, so the
#    intermediate values depend on where the blocks end. The final pair does not: :math:`m` is the
#    maximum of the whole row, and :math:`l = \sum_j e^{s_j - m}` over the whole row, whatever the
#    blocks. Only the roundings change: the additions come in another order, and whenever a block
#    brings a new maximum the running sum is rescaled by :math:`e^{m - m'}`, one more multiplication
#    that rounds (with blocks of 1, at every new maximum of the stream). Hence a difference of rounding
#    size (here a few roundings: the printed differences). One block of the whole row is the ordinary softmax, computed in one pass.

whole_row_sum = torch.exp(row - row.max()).sum().item()
for block in (1, 3, 4, len(row)):
    trace = running_stats(row, block, safe=True)
    maxima = ", ".join(f"{m:.1f}" for m, _ in trace)
    print(f"blocks of {block:2d}: running max after each block [{maxima}]; final l - whole-row sum = {trace[-1][1] - whole_row_sum:.0e}")

# %%
# .. _ex13-summary:
#
# Summary
# -------
# * Subtracting the row maximum is what makes softmax safe in floating point; the online softmax
#   keeps that safety with a maximum that grows block by block, rescaling what was summed before.
# * The result is the same attention, to rounding: tiling changes the order of the additions,
#   not the function. It changes what is alive in memory: a few block-sized tensors (scores and
#   the exponentials made from them) for one block of keys instead of the scores of all keys.
# * On this device, compare the fused backend's peak memory with the dashed line: a kernel that
#   never stores the full scores stays below it. How much time that saves depends on the device;
#   on GPUs, where reading and writing memory is the bottleneck, it is the main win.
