"""
示例 13：FlashAttention 背后的在线 softmax
==========================================

论文里写的注意力先算出每个查询行的全部分数（每个头 ``(L, S)``），再做 softmax，再对值加权求和。
序列一长，分数就成了这一层里最大的张量；把它写进内存再读出来，花的时间比算术本身还多。
FlashAttention（Dao 等，2022）从不保存这些分数：它借助 *在线 softmax*\\ （Milakov 与 Gimelshein（2018）
用这种方法计算归一化因子；对加权后的值维护随时重新缩放的累加器，出自 Rabe 与 Staats（2021），
FlashAttention 以此为基础），沿着键一块一块地往前走，结果是 **精确的**，不是近似。

本例分三步搭起这个想法：为什么每个 softmax 都要减去行最大值；*运行中的* 最大值如何让我们一块一块地
做到这一点（:func:`mha_ref.tiled_attention`，并核对它等于完整注意力）；以及 PyTorch 自己的融合
内核在本设备上的表现——先核对，再计时。耗时只打印在 ``[timing]`` 行里：它们取决于机器。
"""

# %%
# .. _ex13-why-softmax-subtracts-the-row-maximum:
#
# 为什么 softmax 要减去行最大值
# -----------------------------
# :math:`\mathrm{softmax}(s)_j = e^{s_j} / \sum_k e^{s_k}`。照字面计算时，分数在 100 左右，
# ``exp`` 就已经超过 ``float32`` 能表示的最大数（下面第一行打印出来）：分子和总和都变成 ``inf``，
# 而 ``inf / inf`` 是 ``NaN``。先减去行最大值 :math:`m` 在数学上什么也没改变
# （:math:`e^{s_j - m} / \sum_k e^{s_k - m}`，因子 :math:`e^{-m}` 约掉了），却让每个指数都不大于 0。
# ``torch.softmax`` 内部就是这么做的。

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

logits = torch.tensor([100.0, 98.0, 90.0, 60.0], device=device)  # (S,) 一行 float32 分数
naive_exp = torch.exp(logits)  # (S,)
naive = naive_exp / naive_exp.sum()  # (S,)
shifted_exp = torch.exp(logits - logits.max())  # (S,)，每个指数都 <= 0
stable = shifted_exp / shifted_exp.sum()  # (S,)
print("float32 最大值：          ", torch.finfo(torch.float32).max)
print("分数 logits：             ", logits.tolist())
print("exp(logits)：             ", naive_exp.tolist())
print("照字面算的 softmax：      ", naive.tolist())
print("softmax(logits - max)：   ", [round(p, 6) for p in stable.tolist()])
print("torch.softmax：           ", [round(p, 6) for p in torch.softmax(logits, dim=0).tolist()])

# %%
# .. _ex13-one-block-at-a-time-the-running-maximum:
#
# 一次一块：运行最大值
# --------------------
# 整行的最大值需要整行。在线 softmax 则为每个查询行维护三个运行中的量：目前见过的最大分数
# :math:`m`，目前见过的键上的和 :math:`l = \sum e^{s_j - m}`，以及输出
# :math:`o = \sum e^{s_j - m} v_j`。新的一块键把最大值从 :math:`m` 抬到 :math:`m'` 时，之前累加的
# 和是相对旧最大值算的；乘以 :math:`e^{m - m'}` 就把它们换算到新最大值下。最后
# :math:`o / l` 就是注意力的输出。
#
# 下面是一行 10 个分数，每块 4 个（最后一块只有 2 个）：每块之后的运行最大值和运行和，
# 以及最后得到的概率，与对整行做 softmax 相同。

row = torch.tensor([1.0, 3.0, 0.5, 2.0, 6.0, 4.0, 1.5, 0.0, 7.0, 2.5], dtype=torch.float64)  # (S,)
running_max, running_sum, trace = float("-inf"), 0.0, []
for start in range(0, len(row), 4):
    block = row[start : start + 4]  # (block,)
    new_max = max(running_max, block.max().item())
    running_sum = running_sum * math.exp(running_max - new_max) + torch.exp(block - new_max).sum().item()
    running_max = new_max
    trace.append((f"{start}..{start + len(block) - 1}", f"{running_max:.1f}", f"{running_sum:.4f}"))
print(text_table(["本块的键", "运行最大值 m", "运行和 l"], trace))
online = torch.exp(row - running_max) / running_sum  # (S,)
print("max |在线 - softmax|：", f"{(online - torch.softmax(row, dim=0)).abs().max().item():.0e}")

# %%
# .. _ex13-tiled-attention-equals-full-attention:
#
# 分块注意力等于完整注意力
# ------------------------
# :func:`mha_ref.tiled_attention` 对所有查询行同时执行这个按键分块的循环，输出也像和一样按比例
# 重新缩放。在 ``float64`` 下它与 :func:`mha_ref.scaled_dot_product_attention` 只差舍入误差：
# 块大小能整除序列长度时如此，不能整除时也如此；加因果掩码、加填充掩码时如此；某个查询的键
# 全部被屏蔽时也如此（它的输出是 0，与完整计算一致）。

batch, num_heads, seq_len, head_dim = 2, 4, 300, 16
q, k, v = (torch.randn(batch, num_heads, seq_len, head_dim, dtype=torch.float64, device=device) for _ in range(3))  # 各 (batch, num_heads, seq_len, head_dim)
key_lengths = torch.tensor([300, 200], device=device)  # 每个序列的真实词元数
is_real_key = torch.arange(seq_len, device=device) < key_lengths[:, None]  # (batch, seq_len)
padding = is_real_key[:, None, None, :].expand(batch, 1, seq_len, seq_len).clone()  # (batch, 1, seq_len, seq_len)
padding[1, 0, 7] = False  # 序列 1 的查询 7 一个键也不能关注

check_rows = []
for block_size in (64, 100, 128, 300):
    for label, mask, causal in (("无", None, False), ("因果", None, True), ("填充", padding, False)):
        full = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)  # (batch, num_heads, seq_len, head_dim)
        tiled = tiled_attention(q, k, v, attn_mask=mask, is_causal=causal, block_size=block_size)  # (batch, num_heads, seq_len, head_dim)
        diff = (tiled - full).abs().max().item()
        check_rows.append((block_size, label, f"{diff:.0e}", diff < 1e-12))
print(text_table(["block_size", "掩码", "最大绝对差（float64）", "在 1e-12 内相等"], check_rows))
print("全被屏蔽的查询的输出：", tiled_attention(q, k, v, attn_mask=padding)[1, :, 7].abs().max().item())

# %%
# .. _ex13-what-tiling-saves:
#
# 分块省下了什么：同时存活的分数
# ------------------------------
# 完整计算要同时保存所有查询和所有键的分数与权重，``(batch, num_heads, L, S)``。分块计算每次只处理
# ``(batch, num_heads, L, block_size)``：在一块之内，分数、减去运行最大值后的分数以及它们的指数同时存活，
# 大约是三个块大小的张量，再加上随 ``L x head_dim`` 增长的部分（一份缩放后的查询、输出）和运行统计量
# ``(batch, num_heads, L, 1)``。下面把测得的峰值打印在这些大小旁边。
# （FlashAttention 还把查询也分块，并把每个小块放在 GPU 的片上存储里；那属于硬件层面，这里不复现。）
# 下面先按 ``float32`` 在更长的序列上算出这些大小，再测量每种做法调用一次的峰值内存。

batch, num_heads, seq_len, head_dim, block_size = 1, 8, 1024, 64, 128
q, k, v = (torch.randn(batch, num_heads, seq_len, head_dim, device=device) for _ in range(3))  # 各 (batch, num_heads, seq_len, head_dim)
full_scores = tensor_bytes((batch, num_heads, seq_len, seq_len), torch.float32)
block_scores = tensor_bytes((batch, num_heads, seq_len, block_size), torch.float32)
print(f"完整计算的分数 (batch, num_heads, L, S) = {(batch, num_heads, seq_len, seq_len)}：{full_scores / 2**20:.1f} MiB")
print(f"一块键的分数 (batch, num_heads, L, block_size) = {(batch, num_heads, seq_len, block_size)}：{block_scores / 2**20:.1f} MiB")
print(f"比值 S / block_size：{seq_len // block_size}")

# %%
# .. _ex13-pytorch-backends-on-this-device:
#
# PyTorch 在本设备上的各个后端
# ----------------------------
# ``F.scaled_dot_product_attention`` 会在几种内核（“后端”）之间选择；``torch.nn.attention.sdpa_kernel``
# 可以限定选择范围。``MATH`` 是普通算子的组合，会像 :func:`mha_ref.scaled_dot_product_attention`
# 一样保存分数。融合内核（``FLASH_ATTENTION``，PyTorch 也为 CPU 提供了它；以及 CUDA 上支持
# ``float32`` 的 ``EFFICIENT_ATTENTION``）借助在线 softmax 一块一块地计算；融合那一行标的是本设备上
# 实际运行的后端。先核对：两个后端以及
# :func:`mha_ref.tiled_attention` 都与 ``float64`` 结果比较。然后测峰值内存并计时（预热 2 轮，计时 9 轮；
# 中位数、最快和最慢的一轮），虚线标出完整分数的大小。

env = environment(device)
print(f"torch {env['torch']}，设备：{env['device']}，线程数：{env['threads']}")
# 本设备对这些输入实际运行的融合后端：限定为单个后端时 PyTorch 接受的第一个
# （CPU 版本只提供 FLASH_ATTENTION；在 CUDA 上，float32 用 EFFICIENT）
fused_backends = []
for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
    with warnings.catch_warnings(), sdpa_kernel(backend):
        warnings.simplefilter("ignore")  # PyTorch 会警告说明为何跳过它用不了的后端
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
    "F.sdpa，SDPBackend.MATH": math_backend,
    f"F.sdpa，SDPBackend.{fused_backend_used.name}": fused_backend,
    "mha_ref.tiled_attention，block_size=128": lambda: tiled_attention(q, k, v, block_size=block_size),
}
expected = scaled_dot_product_attention(q.double(), k.double(), v.double())  # (batch, num_heads, seq_len, head_dim)
backend_rows = []
for name, fn in implementations.items():
    diff = (fn().double() - expected).abs().max().item()
    backend_rows.append((name, f"{diff:.0e}", diff < 1e-5))
print(text_table(["实现", "与 float64 的最大绝对差", "在 1e-5 内相等"], backend_rows))
if not all(row[-1] for row in backend_rows):
    raise RuntimeError("有后端与 float64 参考结果不一致，计时没有意义")

spread = list(time_interleaved_spread(implementations, warmup=2, repeats=9, device=device).values())
seconds = [median for median, _, _ in spread]
peaks = [peak_memory(fn, device) for fn in implementations.values()]
memory_rows = [
    (name, f"{p.peak_mib:.1f}", "是" if p.peak_bytes >= full_scores else "否")
    for name, p in zip(implementations, peaks, strict=True)
]
print(f"峰值内存，用 {peaks[0].method} 测量：")
print(text_table(["实现", "峰值 MiB", "不小于完整分数"], memory_rows))
print(f"mha_ref.tiled_attention：峰值 {peaks[2].peak_mib:.1f} MiB；一块键的分数 {block_scores / 2**20:.1f} MiB；三块 {3 * block_scores / 2**20:.1f} MiB；与 q 同样大小的一个张量 {tensor_bytes(q.shape) / 2**20:.1f} MiB")
for name, (s, fastest, slowest) in zip(implementations, spread, strict=True):
    print(f"[timing] {name}：中位数 {s * 1e3:.1f} ms（最快 {fastest * 1e3:.1f}，最慢 {slowest * 1e3:.1f}）")

fig = plot_benchmark(
    list(implementations),
    seconds,
    [p.peak_bytes for p in peaks],
    title=f"batch={batch}，num_heads={num_heads}，L=S={seq_len}，head_dim={head_dim}，设备 {env['device']}",
    time_label="每次调用的中位耗时（ms）",
    memory_label="峰值内存（MiB）",
    memory_reference_bytes=full_scores,
    memory_reference_label="完整分数 (batch, num_heads, L, S) 的大小",
)
plt.show()

# %%
# 出处：Milakov 与 Gimelshein 2018，“Online normalizer calculation for softmax”，
# arXiv:1805.02867（归一化因子）；Rabe 与 Staats 2021，“Self-attention Does Not Need O(n²) Memory”，
# arXiv:2112.05682（输出累加器）；Dao 等 2022，“FlashAttention”，arXiv:2205.14135，第 3.1 节。

# %%
# .. _ex13-exercises:
#
# 练习
# ----
# **练习 1.** 在上面对 ``row`` 的手算循环里，假设第一块的 4 个键全被屏蔽：它们的分数都是
# ``-inf``。照原样运行，这一块之后、以及最后一块之后，运行最大值和运行和各是多少？实现时该怎样
# 处理这种情况？再进一步：如果 ``q`` 的每个查询都不能关注前 ``block_size`` 个键，
# :func:`mha_ref.tiled_attention` 是否仍与同一掩码下的完整注意力相等？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    一整块都被屏蔽之后，最大值仍是 :math:`-\infty`，于是重新缩放的因子 :math:`e^{m - m'}`
#    和这一块的指数 :math:`e^{s_j - m'}` 都成了 :math:`e^{-\infty - (-\infty)}`，在浮点运算里
#    就是 NaN；运行和里一旦出现 NaN，之后每一块都摆脱不了它。:func:`mha_ref.tiled_attention`
#    的做法是：只要最大值还是 :math:`-\infty`，就改为减去 0。这时还什么都没有累加，和保持为 0，
#    第一个含有真实分数的块让这一行从头开始。下面先把上面的循环分别不加、加上这个修正各跑一遍；
#    再在 ``float64`` 下比较屏蔽了第一块键时的分块计算与完整计算：

# sphinx_gallery_mha_ref_expected_nan
masked_row = row.clone()  # (S,)
masked_row[:4] = float("-inf")  # 第一块键全被屏蔽


def running_stats(scores, block, safe):
    """每块之后的（运行最大值，运行和）；safe：最大值为 -inf 时改为减去 0。"""
    m, total, trace = float("-inf"), 0.0, []
    for start in range(0, len(scores), block):
        part = scores[start : start + block]  # (block,)
        new_max = max(m, part.max().item())
        shift = 0.0 if safe and new_max == float("-inf") else new_max
        total = total * math.exp(m - shift) + torch.exp(part - shift).sum().item()
        m = new_max
        trace.append((m, total))
    return trace


for label, safe in (("照原样运行的循环：      ", False), ("m 为 -inf 时改为减去 0：", True)):
    print(label, " | ".join(f"m={m:.1f}, l={total:.4f}" for m, total in running_stats(masked_row, 4, safe)))
m, total = running_stats(masked_row, 4, safe=True)[-1]
online = torch.exp(masked_row - m) / total  # (S,)
print("修正之后，max |在线 - softmax|：", f"{(online - torch.softmax(masked_row, dim=0)).abs().max().item():.0e}")

q64, k64, v64 = q.double(), k.double(), v.double()  # 各 (batch, num_heads, seq_len, head_dim)
after_first_block = torch.arange(seq_len, device=device) >= block_size  # (seq_len,)，True = 可以关注
full = scaled_dot_product_attention(q64, k64, v64, attn_mask=after_first_block)  # (batch, num_heads, seq_len, head_dim)
tiled = tiled_attention(q64, k64, v64, attn_mask=after_first_block, block_size=block_size)  # (batch, num_heads, seq_len, head_dim)
print(f"屏蔽前 {block_size} 个键：分块输出全是有限值：{tiled.isfinite().all().item()}，与完整计算的最大绝对差：{(tiled - full).abs().max().item():.0e}")

# %%
# **练习 2.** 把对 ``row`` 的手算循环改成每块 3 个键，而不是 4 个。每块之后的运行最大值依次是
# 多少？最终的运行和与每块 4 个键时相同吗？如果每块只有 1 个键（像数据流那样，一次来一个分数），
# 或者整行只分成一块，又会怎样？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    每块之后的运行最大值就是目前见过的分数中的最大值，所以中间的值取决于每块在哪里结束。最终的那一
#    对值却与分块无关：:math:`m` 总是整行的最大值，:math:`l = \sum_j e^{s_j - m}` 也总是对整行求和。
#    变的只是舍入：加法的顺序不同，而且每当一块带来新的最大值，运行和都要乘以 :math:`e^{m - m'}` 重
#    新缩放，这又是一次会舍入的乘法（每块 1 个键时，数据流中每出现一个新的最大值就缩放一次）。所以只差
#    舍入量级（这里是几次舍入：见打印出的差）。整行只有一块时，就是一次算完的普通 softmax。

whole_row_sum = torch.exp(row - row.max()).sum().item()
for block in (1, 3, 4, len(row)):
    trace = running_stats(row, block, safe=True)
    maxima = ", ".join(f"{m:.1f}" for m, _ in trace)
    print(f"每块 {block:2d} 个键：每块之后的运行最大值 [{maxima}]；最终的 l 减去整行的和 = {trace[-1][1] - whole_row_sum:.0e}")

# %%
# .. _ex13-summary:
#
# 小结
# ----
# * 减去行最大值让 softmax 在浮点运算中安全；在线 softmax 用一个逐块增长的最大值保住这份安全，
#   并把之前累加的部分按比例重新缩放。
# * 结果是同一个注意力，只差舍入：分块改变的是加法的顺序，不是函数本身。它改变的是内存里同时
#   存活的东西：只有一块键的几个块大小的张量（分数以及由它算出的指数），而不是全部键的分数。
# * 在本设备上，把融合后端的峰值内存与虚线比较：从不保存完整分数的内核会停在虚线以下。它能省下
#   多少时间取决于设备；在读写内存才是瓶颈的 GPU 上，这正是主要的收益。
