"""
Example 9: Implementations compared
===================================

Multi-head attention can be written in several ways that compute the same function: a loop
over heads, one batched tensor program, a single packed projection, PyTorch's fused
``F.scaled_dot_product_attention``, or ``torch.nn.MultiheadAttention`` itself. Grouped-query and
multi-query attention change the function (fewer key/value heads) but have their own reference.

This example first **checks** that every implementation gives the same output as a reference,
and only then **times** them and reports their peak memory on the device this page was built on.
A benchmark of implementations that disagree would compare nothing.

Times depend on the machine, its load and the library build, and differ from run to run. They
are printed on lines that start with ``[timing]`` and are never copied into the text; read them
as "on this build, on this device", not as general truths.
"""

# %%
# .. _ex09-the-setup:
#
# The setup
# ---------
# A batch of 4 sequences of 128 tokens, ``embed_dim = 64`` and 8 heads (``head_dim = 8``), no
# mask. All implementations share the weights of one :class:`mha_ref.MultiHeadAttention`, and
# every call runs under ``torch.no_grad()`` (inference: no autograd graph is recorded). The
# environment a timing depends on is printed first.

# sphinx_gallery_parallel = False
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from mha_ref import (
    GroupedQueryAttention,
    MultiHeadAttention,
    merge_heads,
    pick_device,
    split_heads,
)
from mha_ref.tutorial.bench import environment, peak_memory, plot_benchmark, tensor_bytes, time_fn
from mha_ref.tutorial.plotting import text_table

torch.manual_seed(0)
device = pick_device()

batch, seq_len, embed_dim, num_heads = 4, 128, 64, 8
head_dim = embed_dim // num_heads

env = environment(device)
print(f"torch {env['torch']}, device: {env['device']}, threads: {env['threads']}")

ref = MultiHeadAttention(embed_dim, num_heads, batch_first=True, use_fused=False).to(device).eval()
W_q, W_k, W_v = ref.projection_weights()  # each (embed_dim, embed_dim)
b_q, b_k, b_v = ref.projection_biases()  # each (embed_dim,)
x = torch.randn(batch, seq_len, embed_dim, device=device)  # (batch, seq_len, embed_dim)
print("x:", tuple(x.shape))

# %%
# .. _ex09-the-implementations:
#
# The implementations
# -------------------
# 1. **Naive loop**: the paper's formula literally, one head at a time, each with its own slice
#    of the projection matrices.
# 2. **Batched explicit** (``mha_ref`` built with ``use_fused=False``): all heads at once through
#    ``split_heads``; the weights tensor ``(batch, num_heads, seq_len, seq_len)`` is materialised,
#    even though the call passes ``need_weights=False``.
# 3. **Packed QKV**: the same, but Q, K and V come from *one* matrix multiplication with the
#    packed ``in_proj_weight`` ``(3 * embed_dim, embed_dim)``.
# 4. **F.scaled_dot_product_attention**: packed projection, then PyTorch's fused attention,
#    which never hands the weights back (and may never store them all).
# 5. **mha_ref.MultiHeadAttention with its defaults** (``use_fused=True``): like
#    ``torch.nn.MultiheadAttention``, when no weights are asked for (``need_weights=False``) it
#    hands the attention itself to PyTorch's fused kernel, so it is expected to behave like 4.
# 6. **torch.nn.MultiheadAttention** with the same weights, asking for the weights (its default,
#    ``need_weights=True``).
# 7. The same module with ``need_weights=False``.
#
# Without autograd and in evaluation mode, ``torch.nn.MultiheadAttention`` takes its fused
# inference "fast path", in torch 2.13 whether the weights are asked for or not. Fused is not
# the same as weight-free: depending on the device and the PyTorch version, that path may still
# compute ``Q K^T`` and its softmax in full. An implementation that stores the whole weights
# tensor must reach at least its size in memory; the last column of the table below compares
# each peak with that size. It is a size comparison only: a peak below it shows the weights were
# never stored whole, a peak above it does not show they were (other tensors count too).


def naive_loop(x):
    heads = []
    for i in range(num_heads):
        rows = slice(i * head_dim, (i + 1) * head_dim)  # this head's rows of W_q, W_k, W_v
        q = x @ W_q[rows].T + b_q[rows]  # (batch, seq_len, head_dim)
        k = x @ W_k[rows].T + b_k[rows]  # (batch, seq_len, head_dim)
        v = x @ W_v[rows].T + b_v[rows]  # (batch, seq_len, head_dim)
        scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (batch, seq_len, seq_len)
        heads.append(scores.softmax(dim=-1) @ v)  # (batch, seq_len, head_dim)
    return ref.out_proj(torch.cat(heads, dim=-1))  # (batch, seq_len, embed_dim)


def batched_explicit(x):
    return ref(x, x, x, need_weights=False)[0]  # (batch, seq_len, embed_dim)


def packed_qkv(x):
    qkv = F.linear(x, ref.in_proj_weight, ref.in_proj_bias)  # (batch, seq_len, 3 * embed_dim)
    q, k, v = (split_heads(t, num_heads) for t in qkv.chunk(3, dim=-1))  # each (batch, num_heads, seq_len, head_dim)
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (batch, num_heads, seq_len, seq_len)
    context = scores.softmax(dim=-1) @ v  # (batch, num_heads, seq_len, head_dim)
    return ref.out_proj(merge_heads(context))  # (batch, seq_len, embed_dim)


def fused_sdpa(x):
    qkv = F.linear(x, ref.in_proj_weight, ref.in_proj_bias)  # (batch, seq_len, 3 * embed_dim)
    q, k, v = (split_heads(t, num_heads) for t in qkv.chunk(3, dim=-1))  # each (batch, num_heads, seq_len, head_dim)
    context = F.scaled_dot_product_attention(q, k, v)  # (batch, num_heads, seq_len, head_dim)
    return ref.out_proj(merge_heads(context))  # (batch, seq_len, embed_dim)


default_mha = MultiHeadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
default_mha.load_state_dict(ref.state_dict())  # the same weights, default use_fused=True
torch_mha = ref.to_torch().eval()  # torch.nn.MultiheadAttention holding the same weights

implementations = {
    "naive loop over heads": naive_loop,
    "batched explicit (mha_ref)": batched_explicit,
    "packed QKV": packed_qkv,
    "F.scaled_dot_product_attention": fused_sdpa,
    "mha_ref.MultiHeadAttention (default: fused without weights)": lambda x: default_mha(x, x, x, need_weights=False)[0],
    "nn.MultiheadAttention, need_weights=True": lambda x: torch_mha(x, x, x)[0],
    "nn.MultiheadAttention, need_weights=False": lambda x: torch_mha(x, x, x, need_weights=False)[0],
}

# %%
# .. _ex09-check-first-same-output:
#
# Check first: same output?
# -------------------------
# The reference is the same ``mha_ref`` module run in float64, so every float32 implementation,
# ``mha_ref``'s own included, is measured against a result with far smaller rounding error. A
# difference at the level of float32 rounding, tiny next to the output scale printed first, means
# "the same function"; the script stops if any difference exceeds the tolerance ``1e-4``.

ref64 = MultiHeadAttention(embed_dim, num_heads, batch_first=True, dtype=torch.float64, use_fused=False)
ref64 = ref64.to(device).eval()
ref64.load_state_dict(ref.state_dict())
x64 = x.double()  # (batch, seq_len, embed_dim)
with torch.no_grad():
    expected = ref64(x64, x64, x64, need_weights=False)[0]  # (batch, seq_len, embed_dim)
print("output scale (max |expected|):", f"{expected.abs().max().item():.2f}")

check_rows = []
for name, fn in implementations.items():
    with torch.no_grad():
        out = fn(x)  # (batch, seq_len, embed_dim)
    diff = (out.double() - expected).abs().max().item()
    check_rows.append((name, tuple(out.shape), f"{diff:.0e}", diff < 1e-4))
print(text_table(["implementation", "output shape", "max abs diff", "equal"], check_rows))
if not all(row[-1] for row in check_rows):
    raise RuntimeError("an implementation disagrees with the reference; timing it is meaningless")

# %%
# .. _ex09-grouped-query-and-multi-query-attention:
#
# Grouped-query and multi-query attention
# ---------------------------------------
# :class:`mha_ref.GroupedQueryAttention` with ``num_kv_heads = 2`` (GQA) and ``1`` (MQA) has fewer
# key/value heads, so it is a different function with its own weights. Built with
# ``use_fused=False`` it runs its explicit path, checked here and timed below. Its reference: project
# with the module's own layers, then PyTorch's ``F.scaled_dot_product_attention(...,
# enable_gqa=True)`` on exactly those projected tensors.

gqa_modules = {
    "GQA, 2 key/value heads": GroupedQueryAttention(embed_dim, num_heads, 2, use_fused=False),
    "MQA, 1 key/value head": GroupedQueryAttention(embed_dim, num_heads, 1, use_fused=False),
}
gqa_rows = []
for name, module in gqa_modules.items():
    module = module.to(device).eval()
    with torch.no_grad():
        q = split_heads(module.q_proj(x), num_heads)  # (batch, num_heads, seq_len, head_dim)
        k = split_heads(module.k_proj(x), module.num_kv_heads)  # (batch, num_kv_heads, seq_len, head_dim)
        v = split_heads(module.v_proj(x), module.num_kv_heads)  # (batch, num_kv_heads, seq_len, head_dim)
        context = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # (batch, num_heads, seq_len, head_dim)
        reference = module.out_proj(merge_heads(context))  # (batch, seq_len, embed_dim)
        out = module(x)[0]  # (batch, seq_len, embed_dim)
    diff = (out - reference).abs().max().item()
    gqa_rows.append((name, tuple(k.shape), f"{diff:.0e}", diff < 1e-4))
    implementations[name] = lambda x, m=module: m(x)[0]
print(text_table(["implementation", "key shape", "max abs diff vs SDPA", "equal"], gqa_rows))
if not all(row[-1] for row in gqa_rows):
    raise RuntimeError("GQA/MQA disagree with F.scaled_dot_product_attention(enable_gqa=True)")

# %%
# .. _ex09-then-time-and-memory:
#
# Then time and memory
# --------------------
# :func:`mha_ref.tutorial.bench.time_fn` calls each implementation 3 times to warm up, then times 10 calls
# one by one (synchronising the GPU before every clock read, when there is one) and reports the
# median. :func:`mha_ref.tutorial.bench.peak_memory` reports the peak tensor memory of one call above
# what existed before it: on a GPU from ``torch.cuda.max_memory_allocated``, on a CPU from the
# allocation and free events that ``torch.profiler`` records (temporaries inside an operator
# included). For scale, the size of the attention-weight tensor alone is printed first.
#
# What to look for: which implementations stay below the size of the ``(batch, num_heads,
# seq_len, seq_len)`` weights (the last column; those cannot have stored them whole), and how the loop over heads and the fused kernels compare with the batched code on
# this device. The loop holds one head's weights at a time, so its peak stays below the whole
# tensor. When you run the script
# yourself, keep the machine otherwise idle: if another program keeps a core busy, PyTorch's
# worker threads wait for each other and small operations can become many times slower (setting
# ``torch.set_num_threads(1)`` avoids that, at the price of using one core).

weights_bytes = tensor_bytes((batch, num_heads, seq_len, seq_len), torch.float32)
print(f"attention weights (batch, num_heads, seq_len, seq_len), float32: {weights_bytes / 2**20:.2f} MiB")

seconds, peaks = [], []
for fn in implementations.values():
    with torch.no_grad():
        seconds.append(time_fn(lambda fn=fn: fn(x), warmup=3, repeats=10, device=device))
        peaks.append(peak_memory(lambda fn=fn: fn(x), device))

memory_rows = [
    (name, f"{p.peak_mib:.2f}", "yes" if p.peak_bytes >= weights_bytes else "no")
    for name, p in zip(implementations, peaks, strict=True)
]
print(f"peak memory, measured with {peaks[0].method}:")
print(text_table(["implementation", "peak MiB", "peak >= size of the weights tensor"], memory_rows))
fastest = min(seconds)
for name, s in zip(implementations, seconds, strict=True):
    print(f"[timing] {name}: {s * 1e3:.3f} ms ({s / fastest:.1f} x the fastest)")

fig = plot_benchmark(
    list(implementations),
    seconds,
    [p.peak_bytes for p in peaks],
    title=f"batch={batch}, seq_len={seq_len}, embed_dim={embed_dim}, num_heads={num_heads}, on {env['device']}",
    time_label="median time per call (ms)",
    memory_label="peak memory (MiB)",
    memory_reference_bytes=weights_bytes,
    memory_reference_label="size of the attention weights",
)
plt.show()

# %%
# .. _ex09-at-a-realistic-width:
#
# At a realistic width: forward, backward and torch.compile
# ---------------------------------------------------------
# The numbers above are for a teaching size. A GPT-2-small layer has ``embed_dim = 768`` and 12
# heads (``head_dim = 64``); its training batches are 8 sequences of 1024 tokens. That size runs
# on a GPU in milliseconds and slowly on an ordinary CPU, so on a CPU the same width is measured
# with 1 sequence of 512 tokens. The size used is
# computed from the device and printed.
#
# Three implementations, forward (no autograd, evaluation mode) and forward + backward (the
# gradient of a fixed random projection of the output): ``mha_ref`` explicit
# (``use_fused=False``), ``mha_ref`` with its defaults (fused attention), and
# ``torch.nn.MultiheadAttention``; then ``mha_ref`` with its defaults compiled with
# ``torch.compile``, forward only. (Compiling more modules, and the backward graph, takes long
# on a CPU, so this page compiles this one module and times its forward pass only.) On a CPU, ``torch.compile``'s
# default backend needs a C++ compiler: if none is found, the page says so and skips those rows.
# As before, outputs **and gradients** are checked against ``float64`` first.

from mha_ref.tutorial.bench import time_interleaved_spread, torch_compile_status

if device.type == "cuda":
    big_batch, big_len = 8, 1024
else:
    big_batch, big_len = 1, 512
big_dim, big_heads = 768, 12
print(f"size used on {device.type}: batch={big_batch}, seq_len={big_len}, embed_dim={big_dim}, num_heads={big_heads}")
compile_ok, compile_reason = torch_compile_status(device)
print(f"torch.compile: {'available' if compile_ok else 'skipped'}, {compile_reason}")

torch.manual_seed(0)
big_explicit = MultiHeadAttention(big_dim, big_heads, batch_first=True, use_fused=False).to(device).eval()
big_default = MultiHeadAttention(big_dim, big_heads, batch_first=True).to(device).eval()
big_default.load_state_dict(big_explicit.state_dict())
big_torch = big_explicit.to_torch().eval()
big_x = torch.randn(big_batch, big_len, big_dim, device=device)  # (batch, seq_len, embed_dim)
probe = torch.randn(big_batch, big_len, big_dim, device=device)  # (batch, seq_len, embed_dim): loss = (out * probe).sum()

big_modules = {
    "mha_ref explicit": big_explicit,
    "mha_ref default (fused)": big_default,
    "nn.MultiheadAttention": big_torch,
}
if compile_ok:
    big_modules["torch.compile(mha_ref default)"] = torch.compile(big_default)


def run(module, x):
    return module(x, x, x, need_weights=False)[0]  # (batch, seq_len, embed_dim)


def forward_backward(module, x):
    x = x.detach().requires_grad_(True)  # (batch, seq_len, embed_dim)
    module.zero_grad(set_to_none=True)
    (run(module, x) * probe).sum().backward()
    return x.grad  # (batch, seq_len, embed_dim)


big_ref = MultiHeadAttention(big_dim, big_heads, batch_first=True, dtype=torch.float64, use_fused=False).to(device)
big_ref.load_state_dict(big_explicit.state_dict())
big_x64 = big_x.double().requires_grad_(True)  # (batch, seq_len, embed_dim)
big_expected = run(big_ref, big_x64)  # (batch, seq_len, embed_dim)
(big_expected * probe.double()).sum().backward()

big_rows = []
for name, module in big_modules.items():
    with torch.no_grad():
        out_diff = (run(module, big_x).double() - big_expected).abs().max().item()
    if name.startswith("torch.compile"):  # compiled forward only
        big_rows.append((name, f"{out_diff:.0e}", "-", out_diff < 1e-4))
        continue
    x_grad = forward_backward(module, big_x)  # (batch, seq_len, embed_dim)
    grad_diff = max(
        (x_grad.double() - big_x64.grad).abs().max().item(),
        (module.in_proj_weight.grad.double() - big_ref.in_proj_weight.grad).abs().max().item(),
    )
    big_rows.append((name, f"{out_diff:.0e}", f"{grad_diff:.0e}", out_diff < 1e-4 and grad_diff < 1e-3))
print(text_table(["implementation", "output max abs diff", "gradient max abs diff", "equal"], big_rows))
if not all(row[-1] for row in big_rows):
    raise RuntimeError("an implementation disagrees with the float64 reference at the realistic width")

# %%
# Then time (1 warm-up and 7 interleaved rounds:
# :func:`mha_ref.tutorial.bench.time_interleaved_spread`; median, fastest and slowest round) and
# peak memory, for the forward pass and for forward + backward. The dashed line is the size of
# the attention weights ``(batch, num_heads, seq_len, seq_len)`` in ``float32``. With
# forward + backward, activations and gradients alone can exceed that size, so a "yes" in the
# last column says nothing about the weights there. Where two rows' ranges of times overlap, their
# difference is within the noise of this machine.


def no_grad_forward(module):
    def call():
        with torch.no_grad():
            return run(module, big_x)

    return call


big_calls = {f"forward: {name}": no_grad_forward(module) for name, module in big_modules.items()}
big_calls |= {
    f"forward+backward: {name}": (lambda module=module: forward_backward(module, big_x))
    for name, module in big_modules.items()
    if not name.startswith("torch.compile")
}
big_spread = time_interleaved_spread(big_calls, warmup=1, repeats=7, device=device)
big_seconds = {name: median for name, (median, _, _) in big_spread.items()}
big_peaks = []
for call in big_calls.values():
    for module in big_modules.values():
        module.zero_grad(set_to_none=True)  # grads of earlier calls are freed here, not during the measurement
    big_peaks.append(peak_memory(call, device))
big_weights = tensor_bytes((big_batch, big_heads, big_len, big_len), torch.float32)
print(text_table(
    ["implementation", "peak MiB", "peak >= size of the weights tensor"],
    [(name, f"{p.peak_mib:.0f}", "yes" if p.peak_bytes >= big_weights else "no") for name, p in zip(big_calls, big_peaks, strict=True)],
))
print(f"environment: torch {env['torch']}, python {env['python']}, device {env['device']}, threads {env['threads']} of {env['cpu_count']} CPUs")
for name, (s, fastest, slowest) in big_spread.items():
    print(f"[timing] {name}: median {s * 1e3:.1f} ms (min {fastest * 1e3:.1f}, max {slowest * 1e3:.1f})")

fig = plot_benchmark(
    list(big_calls),
    list(big_seconds.values()),
    [p.peak_bytes for p in big_peaks],
    title=f"batch={big_batch}, seq_len={big_len}, embed_dim={big_dim}, num_heads={big_heads}, on {env['device']}",
    time_label="median time per call (ms)",
    memory_label="peak memory (MiB)",
    memory_reference_bytes=big_weights,
    memory_reference_label="size of the attention weights",
)
plt.show()

# %%
# .. _ex09-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Back to the teaching size. Double ``seq_len`` twice (the same batch and
# width) and predict, for the batched explicit path, the loop over heads and
# ``F.scaled_dot_product_attention``: does each one's peak memory grow about like ``seq_len``
# or like its square?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The batched explicit path stores the whole ``(batch, num_heads, seq_len, seq_len)`` weights
#    tensor, so its peak follows the square of ``seq_len``. The loop keeps one head's
#    ``(batch, seq_len, seq_len)`` at a time: a smaller peak, but still a square. Where the fused
#    kernel never stores the scores whole, what it keeps (queries, keys, values, the output)
#    grows only like ``seq_len``, and the printed growth says whether this device's kernel does
#    that. Longer sequences are where the fused kernels earn their keep.

quadratic_paths = {
    "batched explicit (mha_ref)": batched_explicit,
    "naive loop over heads": naive_loop,
    "F.scaled_dot_product_attention": fused_sdpa,
}
longer = [x.repeat(1, k, 1) for k in (1, 2, 4)]  # each (batch, k * seq_len, embed_dim)
print("seq_len:", [t.shape[1] for t in longer])
for name, fn in quadratic_paths.items():
    with torch.no_grad():
        peak = [peak_memory(lambda fn=fn, t=t: fn(t), device).peak_bytes for t in longer]
    growth = [f"{b / a:.1f} x" for a, b in zip(peak[:-1], peak[1:], strict=True)]
    print(f"{name}: peak MiB {[f'{p / 2**20:.2f}' for p in peak]}, growth per doubling {growth}")

# %%
# **Exercise 2.** MQA keeps a single key/value head, an eighth of the keys and values of MHA
# here. Yet in the peak-memory table its peak is close to the batched explicit path's, far
# above the fused kernels'. Which tensor keeps it there? Predict the size of the keys and of the
# attention weights for MHA, GQA and MQA.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Grouping shares keys and values between query heads, but every query head still scores
#    every key: the weights keep one ``(seq_len, seq_len)`` matrix per *query* head, the same
#    size for all three. The keys shrink with ``num_kv_heads``; the weights, the largest tensor,
#    do not. The keys stay small during the attention step too: this explicit path does not
#    repeat the shared keys and values to every query head (as ``enable_gqa=True`` in
#    :func:`mha_ref.scaled_dot_product_attention` does, with ``repeat_interleave``); it stacks
#    the query heads of each group and scores them against their one key/value head. GQA and MQA
#    save the KV cache when generating text; the memory of the weights is saved only by a kernel
#    that never stores them.


def mib(tensor):
    return tensor.numel() * tensor.element_size() / 2**20


size_rows = []
with torch.no_grad():
    keys = split_heads(F.linear(x, W_k, b_k), num_heads)  # (batch, num_heads, seq_len, head_dim)
    _, weights = ref(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
    size_rows.append(("MHA", tuple(keys.shape), f"{mib(keys):.3f}", tuple(weights.shape), f"{mib(weights):.3f}"))
    for name, module in gqa_modules.items():
        keys = split_heads(module.k_proj(x), module.num_kv_heads)  # (batch, num_kv_heads, seq_len, head_dim)
        _, weights = module(x, need_weights=True)  # (batch, num_heads, seq_len, seq_len)
        size_rows.append((name, tuple(keys.shape), f"{mib(keys):.3f}", tuple(weights.shape), f"{mib(weights):.3f}"))
print(text_table(["implementation", "key shape", "keys MiB", "weights shape", "weights MiB"], size_rows))

# %%
# **Exercise 3.** The check compared every implementation with a float64 reference, within a
# tolerance. Why not simply test two float32 implementations with ``torch.equal``? Predict: is
# the output of the loop over heads equal bit for bit to that of the batched explicit path, of
# packed QKV and of ``F.scaled_dot_product_attention``? If not, how large are the differences
# next to float32's precision at the scale of the output?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    They compute the same function but not the same sequence of roundings: each adds the same
#    products in its own order (one head at a time or all at once, three matrix products or one
#    packed product, a kernel that may walk the keys in blocks). Every float32 operation rounds
#    to a relative error of about ``torch.finfo(torch.float32).eps``, so the outputs differ in
#    their last bits, by a few roundings at the output's scale. ``torch.equal`` would call equal
#    functions different; the test that says "the same function" compares with a more precise
#    reference and allows rounding error, as the check above does.

with torch.no_grad():
    loop_output = naive_loop(x)  # (batch, seq_len, embed_dim)
for name, fn in {
    "batched explicit (mha_ref)": batched_explicit,
    "packed QKV": packed_qkv,
    "F.scaled_dot_product_attention": fused_sdpa,
}.items():
    with torch.no_grad():
        other = fn(x)  # (batch, seq_len, embed_dim)
    print(
        f"loop over heads vs {name}: equal bit for bit {torch.equal(loop_output, other)}, "
        f"max abs diff {(loop_output - other).abs().max().item():.0e}"
    )
eps = torch.finfo(torch.float32).eps
print(f"float32 eps times the output scale: {eps * expected.abs().max().item():.0e}")

# %%
# .. _ex09-summary:
#
# Summary
# -------
# - The loop over heads, the batched explicit code, the packed projection,
#   ``F.scaled_dot_product_attention``, ``mha_ref`` with its defaults and
#   ``torch.nn.MultiheadAttention`` compute the same function: each is checked against a float64
#   reference before anything is timed.
# - Grouped-query and multi-query attention are different functions, with fewer key/value heads;
#   they are checked against ``F.scaled_dot_product_attention(..., enable_gqa=True)``.
# - A peak memory below the size of the ``(batch, num_heads, seq_len, seq_len)`` weights shows
#   that an implementation never stored them whole; a peak above it shows nothing.
# - Times depend on the device, its load and the library build; where two rows' ranges overlap,
#   their difference is noise.
