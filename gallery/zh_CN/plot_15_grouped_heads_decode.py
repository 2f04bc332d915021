"""
示例 15：解码时的分组头
=======================

模型生成文本时，每一步都要为每个头的 **一个** 新查询，对 **全部** 缓存的键和值计算注意力。算术量很小
（每个缓存词元、每个头一次点积）；数据量却不小：每一步都要把整个缓存读一遍。多查询注意力（Shazeer
2019）和分组查询注意力（Ainslie 等 2023）让一组查询头共用一个键/值头，于是缓存以及每一步要读的
数据都按组的大小缩小。

本例在缓存已有 4096 个词元时，分别用 8、4、2、1 个键/值头为一步解码计时；说明显式分组路径在内存里
保存了什么（以及它没有复制什么）；然后像 Ainslie 等人那样，把一个训练好的多头模型的键/值头取平均，
转换成分组查询注意力，比较“追加训练”（uptraining）前后的效果，并与从头训练同样总步数、以及只训练
追加训练那么多步的分组模型对照。耗时只打印在 ``[timing]`` 行里。
"""

# %%
# .. _ex15-one-decode-step-against-a-long-cache:
#
# 对着长缓存的一步解码
# --------------------
# 一个 ``embed_dim = 512``、8 个查询头（``head_dim = 64``）的层，批大小 4，缓存里已有 4096 个词元的
# 键和值（随机生成：这里只有它们的大小要紧）。一步解码让每个序列的一个新词元经过
# :meth:`mha_ref.GroupedQueryAttention.decode`；每次重复之前，:meth:`mha_ref.KVCache.crop` 把缓存
# 恢复到 4096 个词元。有两条路径计算这一步：``mha_ref`` 的显式路径（``use_fused=False``）和 PyTorch
# 的融合路径 ``F.scaled_dot_product_attention(..., enable_gqa=True)`` （默认）。先核对两者相等。

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
print(f"torch {env['torch']}，设备：{env['device']}，线程数：{env['threads']}")

batch, cached_len, embed_dim, num_heads = 4, 4096, 512, 8
head_dim = embed_dim // num_heads
x_new = torch.randn(batch, 1, embed_dim, device=device)  # (batch, 1, embed_dim)：每个序列一个新词元

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
print(text_table(["num_kv_heads", "组大小", "缓存中键的形状", "显式与融合的最大绝对差", "在 1e-5 内相等"], check_rows))
if not all(row[-1] for row in check_rows):
    raise RuntimeError("显式与融合的解码步结果不一致，计时没有意义")

# %%
# .. _ex15-what-one-step-reads-and-holds:
#
# 一步要读什么，要存什么
# ----------------------
# 缓存随键/值头减少而缩小；一步的分数 ``(batch, num_heads, 1, cached_len)`` 却不变：每个 *查询* 头、
# 每个缓存词元仍有一个分数。显式路径从不把键和值重复成 ``num_heads`` 个头：它把每组的查询头叠成一个
# ``(batch, num_kv_heads, group * 1, head_dim)`` 的块，直接与缓存里原样存放的键/值头相乘。
# （``repeat_kv_heads`` 会把缓存复制回多头缓存的大小，省下的又全部还回去；下面最后一行测量了这一点。）
# 显式路径也不为缩放而复制键：缩放系数乘在查询和分数上。

scores_bytes = tensor_bytes((batch, num_heads, 1, cached_len), torch.float32)
implementations = {}
for num_kv_heads, layer in layers.items():
    for path, use_fused in (("显式", False), ("融合", True)):

        def step(layer=layer, cache=caches[num_kv_heads], use_fused=use_fused):
            layer.use_fused = use_fused
            cache.crop(cached_len)
            return layer.decode(x_new, cache)  # (batch, 1, embed_dim)

        implementations[f"num_kv_heads={num_kv_heads}，{path}"] = step
with torch.no_grad():
    peaks = [peak_memory(step, device) for step in implementations.values()]
memory_rows = [
    (num_kv_heads, f"{tensor_bytes(caches[num_kv_heads].keys.shape) * 2 / 2**20:.0f}", f"{scores_bytes / 2**20:.2f}",
     f"{peaks[2 * i].peak_mib:.1f}", f"{peaks[2 * i + 1].peak_mib:.1f}")
    for i, num_kv_heads in enumerate(layers)
]
print(text_table(["num_kv_heads", "缓存的 K 和 V（MiB）", "一步的分数（MiB）", "显式一步的峰值（MiB）", "融合一步的峰值（MiB）"], memory_rows))
print(f"峰值内存的测量方法：{peaks[0].method}")

one_kv_keys, one_kv_values = caches[1].keys, caches[1].values  # 各 (batch, 1, cached_len, head_dim)
with torch.no_grad():
    repeated = peak_memory(lambda: repeat_kv_heads(one_kv_keys, one_kv_values, num_heads), device)
print(f"对 1 个头的缓存调用 repeat_kv_heads 分配了 {repeated.peak_mib:.0f} MiB（8 个头的缓存占 {tensor_bytes(caches[8].keys.shape) * 2 / 2**20:.0f} MiB）")

# %%
# 接下来是一步的耗时：先预热 2 轮，再计时 9 轮，每一轮把每种做法各调用一次
# （:func:`mha_ref.tutorial.bench.time_interleaved_spread`），这样机器负载的变化对它们的影响相同；
# 每行给出中位数，括号里是最快和最慢的一轮。请把从 8 个到 1 个键/值头的耗时与上面的缓存大小对照。
# 在单个 CPU 线程上，一步的时间大概主要花在对缓存做的两次矩阵乘法（算分数和加权求和）上，另有投影和
# 调用的固定开销：这是根据 FLOPs 数做的估计，本页没有做性能剖析。耗时随缓存缩小而下降，但并不与缓存大小成比例；两行的耗时范围互相重叠时（一行的最慢一轮
# 比另一行的最快一轮还慢），它们中位数的先后没有多少意义。在 GPU 上，一步解码受限于从显存读取缓存，所以那里键/值头
# 越少越快（Shazeer 2019；Ainslie 等 2023）；本站在 CPU 上的构建并没有测量这一点。

with torch.no_grad():
    spread = list(time_interleaved_spread(implementations, warmup=2, repeats=9, device=device).values())
seconds = [median for median, _, _ in spread]
for name, (s, fastest, slowest) in zip(implementations, spread, strict=True):
    print(f"[timing] 解码一步，{name}：中位数 {s * 1e3:.2f} ms（最快 {fastest * 1e3:.2f}，最慢 {slowest * 1e3:.2f}）")

fig = plot_benchmark(
    list(implementations),
    seconds,
    [p.peak_bytes for p in peaks],
    title=f"一步解码：batch={batch}，cached_len={cached_len}，num_heads={num_heads}，head_dim={head_dim}，设备 {env['device']}",
    time_label="每步的中位耗时（ms）",
    memory_label="这一步的峰值内存（MiB）",
    memory_reference_bytes=tensor_bytes(caches[8].keys.shape) * 2,
    memory_reference_label="8 个键/值头时缓存的 K 和 V",
)
plt.show()

# %%
# .. _ex15-what-a-decode-step-costs-on-a-gpu:
#
# 一步解码在 GPU 上的开销：算一算
# -------------------------------
# 上面的 CPU 耗时无法说明 GPU 上一步解码受什么限制，但 Shazeer（2019，第 2.4.1 节）的算术可以。这一层的
# 一步要把投影权重读一遍，再把每个序列每个缓存词元的键和值读一遍，而每读一个字节只做很少的运算：
# :func:`mha_ref.tutorial.head_count.decode_step_traffic` 统计两者（float16，``cached_len`` 个词元，
# 即上面的层）。如果一步的每字节 FLOPs（*运算强度*）远低于设备峰值 FLOP 速率除以带宽（它的 *屋脊点*），
# 这一步就受内存限制。设备取 NVIDIA H100 SXM 公布的数据（NVIDIA，“H100 Tensor Core GPU”数据手册）：
# 3.35 TB/s 的 HBM3 带宽，以及 989 TFLOP/s 的稠密 BF16 张量核心算力（手册中的 1,979 是稀疏时的数字）。
# 最后两列是按这个带宽读完这些字节所需的时间，以及按这个速率做完这些 FLOPs 所需的时间：都是下限，
# 不是测量值。

from mha_ref.tutorial.head_count import decode_step_traffic

gpu_name, gpu_bandwidth, gpu_flops = "NVIDIA H100 SXM", 3.35e12, 989e12  # 字节/秒，FLOP/秒（稠密 BF16）
ridge = gpu_flops / gpu_bandwidth
print(f"{gpu_name}: {gpu_bandwidth / 1e12:.2f} TB/s, {gpu_flops / 1e12:.0f} TFLOP/s, ridge point {ridge:.0f} FLOP/byte")
traffic_rows = []
for traffic_batch in (1, 64):
    for num_kv_heads in (8, 4, 2, 1):
        t = decode_step_traffic(traffic_batch, cached_len, embed_dim, num_heads, num_kv_heads)
        memory_us, compute_us = t["bytes"] / gpu_bandwidth * 1e6, t["flops"] / gpu_flops * 1e6
        traffic_rows.append((traffic_batch, num_kv_heads, f"{t['cache_bytes'] / 2**20:.1f}", f"{t['weight_bytes'] / 2**20:.1f}",
                             f"{t['flops'] / 1e6:.1f}", f"{t['intensity']:.1f}", f"{memory_us:.2f}", f"{compute_us:.3f}"))
print(text_table(["批大小", "num_kv_heads", "读取的 K/V（MiB）", "读取的权重（MiB）", "MFLOPs", "FLOP/字节", "内存时间（us）", "FLOP 时间（us）"], traffic_rows))

# %%
# 读这张表（数字以打印的为准）：每一行的运算强度都远低于屋脊点，所以在这块 GPU 上，这一层的一步解码会
# 受读取内存的限制，内存时间是 FLOP 时间的许多倍。键/值头更少时，缓存的字节数按组的大小缩小，注意力的
# FLOPs 却不变，于是运算强度上升；批很大时，读取的几乎全是缓存。这就是多查询和分组查询注意力的理由
# （Shazeer 2019；Ainslie 等 2023），也说明了为什么本页受其他因素限制的 CPU 耗时下降得比缓存少。

# %%
# .. _ex15-from-multi-head-to-grouped-query-mean-pooling:
#
# 从多头到分组查询注意力：取平均
# ------------------------------
# Ainslie 等人从训练好的多头模型构造分组查询模型：每个新键/值头的键（和值）投影，是它所在组里各个头的
# 投影的 **平均**；查询投影和输出投影保持不变。:func:`mha_ref.mha_to_gqa` 做的就是这件事。键/值头与
# 查询头一样多时，没有任何平均，转换后的层计算的是同一个函数（在 ``float64`` 下、带因果掩码核对：
# 多头层用 ``True`` 表示屏蔽的掩码，分组层用 ``is_causal=True``）。

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
print(text_table(["num_kv_heads", "k_proj.weight 的形状", "与多头层的最大绝对差"], conversion_rows))

# %%
# 键/值头更少时，取平均后的层是另一个函数，模型的准确率会下降；问题是追加训练能找回多少。在本站的
# 查表任务上（目标取决于前一个词元和再前一个词元：:mod:`mha_ref.tutorial.tasks`），
# :func:`mha_ref.tutorial.uptraining.gqa_uptraining` 先用 4 个多头训练小模型 200 步，再把它转换成 4、2、1
# 个键/值头，在固定的评估集上测量准确率：刚转换完时和再训练 100 步之后（``之前 -> 之后``）。对照组
# 仿照 Ainslie 等人的消融实验（第 2.1 节）：从同一个多头检查点出发，用同样的 100 步、同样的批次，只是
# 键/值头的初始值不同：取组内各头的平均、取组内的头 0，或随机初始化（查询投影和输出投影每次都保留）。
# 小模型的结果随种子变化，所以第二张表用三个种子把整个过程各跑一遍。固定随机种子，单线程。

results = {seed: gqa_uptraining(num_kv_heads=(4, 2, 1), steps=200, uptrain_steps=100, seed=seed) for seed in (0, 1, 2)}
result = results[0]
print(f"多头模型（4 个头），种子 0：准确率 {result.mha_accuracy:.3f}")
print(text_table(
    ["num_kv_heads", "K/V 取组内平均", "K/V 取组内头 0", "K/V 随机"],
    [(r.num_kv_heads, *(f"{r.converted_accuracy[init]:.3f} -> {r.uptrained_accuracy[init]:.3f}" for init in KV_INITS)) for r in result.rows],
))
print(text_table(
    ["num_kv_heads", "取平均：追加训练之后，种子 0 / 1 / 2", "取组内头 0", "随机"],
    [(rows[0].num_kv_heads, *(" / ".join(f"{r.uptrained_accuracy[init]:.3f}" for r in rows) for init in KV_INITS))
     for rows in zip(*(results[seed].rows for seed in (0, 1, 2)), strict=True)],
))
fig = plot_loss_curves(
    {f"num_kv_heads = {r.num_kv_heads}": r.uptrain_losses for r in result.rows},
    title="键/值头取平均之后的追加训练",
    xlabel="追加训练步数",
    ylabel="交叉熵损失（对数坐标）",
)
plt.show()

# %%
# 这算多少追加训练，以及它需要的对照。Ainslie 等人的追加训练只用预训练步数的 5%；下面一行给出本页的
# 比例。比较的另一方是 **从头训练** 的分组模型：不做任何转换，训练的总步数等于预训练加追加训练
# （:func:`mha_ref.tutorial.uptraining.gqa_from_scratch`：同样的模型、优化器、学习率、任务和评估集，
# 三个种子）；另外还有同一个模型从头训练、步数只等于追加训练的那一栏。

pre_steps, up_steps = 200, 100
print(
    f"追加训练的预算：{up_steps} 步，接在 {pre_steps} 步预训练之后，"
    f"为预训练的 {up_steps / pre_steps:.0%}（Ainslie 等 2023：5%）"
)
scratch = {seed: gqa_from_scratch((2, 1), steps=pre_steps + up_steps, seed=seed) for seed in (0, 1, 2)}
scratch_short = {seed: gqa_from_scratch((2, 1), steps=up_steps, seed=seed) for seed in (0, 1, 2)}  # 与追加训练步数相同
uptrained = {
    kv: [next(r for r in results[seed].rows if r.num_kv_heads == kv).uptrained_accuracy["mean"] for seed in (0, 1, 2)]
    for kv in (2, 1)
}
print(text_table(
    ["num_kv_heads", f"转换 + 追加训练（{pre_steps} + {up_steps} 步），种子 0 / 1 / 2", f"从头训练（{pre_steps + up_steps} 步）",
     f"从头训练（{up_steps} 步）"],
    [(kv, " / ".join(f"{a:.3f}" for a in uptrained[kv]), " / ".join(f"{scratch[seed][kv]:.3f}" for seed in (0, 1, 2)),
      " / ".join(f"{scratch_short[seed][kv]:.3f}" for seed in (0, 1, 2))) for kv in (2, 1)],
))
better = {kv: sum(scratch[seed][kv] > uptrained[kv][i] for i, seed in enumerate((0, 1, 2))) for kv in (2, 1)}
better_short = {kv: sum(scratch_short[seed][kv] > uptrained[kv][i] for i, seed in enumerate((0, 1, 2))) for kv in (2, 1)}
for kv in (2, 1):
    print(f"num_kv_heads={kv}：训练 {pre_steps + up_steps} 步时，从头训练在 {better[kv]} 个种子上（共 3 个）超过转换 + 追加训练；"
          f"训练 {up_steps} 步时，在 {better_short[kv]} 个种子上（共 3 个）")

# %%
# 把两张表放在一起读（数字以打印的为准）。转换之后，100 步追加训练让 2 个键/值头的分组模型在每个种子上
# 都恢复了；多查询模型（1 个键/值头）在每个种子上都远低于多头模型。从头训练那一栏说明，这并不是多查询
# 注意力在这个任务上的能力上限：从一开始就训练同样的 300 步，它在每个种子上都接近多头模型的准确率，
# 超过了先转换再追加训练。追加训练“划不划算”，要看拿它和哪一栏比。300 步那一栏把预训练也算进了成本
# （200 + 100 步对 300 步）。如果多头模型反正已经有了，它的预训练就是沉没成本，公平的比较是 100 步
# 追加训练对 100 步从头训练，即最后一栏：在那里，无论 2 个键/值头还是 1 个，先转换再追加训练在每个
# 种子上都领先（见打印的次数）。所以，把预训练算进去，在一个整个预训练只需几秒钟的小任务上，追加训练
# 并不划算，而且这里的预算（上面打印的比例）是论文的十倍；预训练若是沉没成本，它就划算。追加训练划算的场合是预训练本身很昂贵的时候，例如 Ainslie 等人的
# 大型检查点：那里几个百分点的算力远少于重新训练一个分组模型。这个小任务无法再现那种情形；它只展示了
# 决定这个问题的对照实验。

# %%
# .. _ex15-what-to-take-away:
#
# 要点
# ----
# * 一步解码为少量算术读取整个缓存；键/值头更少意味着要存的更少，而对于整组只读一次共享头的内核，
#   要读的也更少（在 GPU 上，这正是一步的瓶颈；在单个 CPU 线程上，耗时下降得比缓存少）。
# * 分组没有缩小的：查询头、它们的分数（每个查询头、每个缓存词元一个），以及输出投影。
# * 显式分组路径让每组查询直接与原样存放的键/值头相乘，既不重复也不为缩放而复制缓存；重复这些头
#   （``repeat_kv_heads``）会把缓存复制回多头时的大小。
# * 键/值头与查询头一样多时取平均是精确的，更少时是近似；请比较上面三种初始化，它们都从同一个检查点
#   出发、以同样的方式追加训练：平均保留了多少训练好的键/值头，体现在它与取头 0 和随机初始化的差距上；
#   几个种子则显示其中有多少是运气。
#
# 出处：Shazeer 2019，“Fast Transformer Decoding: One Write-Head is All You Need”，
# arXiv:1911.02150；Ainslie 等 2023，“GQA: Training Generalized Multi-Query Transformer
# Models from Multi-Head Checkpoints”，arXiv:2305.13245，第 2.1 节。

# %%
# .. _ex15-exercises:
#
# 练习
# ----
# **练习 1.** 一个 Llama 2 7B 形状的模型（32 层，32 个 ``head_dim = 128`` 的查询头）用 ``float16``
# 存放 KV 缓存。要让一个 8192 词元的序列的缓存不超过 1 GiB，``num_kv_heads`` （须整除 32）最大
# 可以取多少？先想一想：缓存随 ``num_kv_heads`` 怎样变化？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    缓存与 ``num_kv_heads`` 成正比：键/值头减半，缓存就减半；查询头的个数根本不出现在公式里。
#    所以从多头时的缓存出发，一路减半直到放得下为止。下表用 :func:`mha_ref.kv_cache_bytes_per_token`
#    逐个算出各个因数对应的大小：

budget_layers, budget_heads, budget_head_dim, budget_tokens = 32, 32, 128, 8192
budget_rows = []
for kv in (32, 16, 8, 4, 2, 1):
    cache_bytes = kv_cache_bytes_per_token(budget_layers, kv, budget_head_dim, torch.float16) * budget_tokens
    budget_rows.append((kv, budget_heads // kv, f"{cache_bytes / 2**30:.3f}", cache_bytes <= 2**30))
print(text_table(["num_kv_heads", "组大小", f"GiB（{budget_tokens} 个词元）", "不超过 1 GiB"], budget_rows))
print("放得下的最大 num_kv_heads：", max(kv for kv, _, _, fits in budget_rows if fits))

# %%
# **练习 2.** ``mha_to_gqa(mha, 4)`` 把 ``mha`` 的 8 个头中每 2 个头的键（和值）投影矩阵取平均，
# 得到一个键/值头。键/值头 1 来自哪两个头：头 1 和头 5，还是头 2 和头 3？转换后的层里，又是哪些
# 查询头使用键/值头 1？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    是相邻的头：分组是连续的，键/值头 ``j`` 是头 ``j * group`` 到 ``(j + 1) * group - 1`` 的平均；
#    同样的规则把查询头 ``i`` 分给键/值头 ``i // group``。代码先把两组候选各自的平均与转换后的层中
#    键/值头 1 的那几行比较；再对每个查询头，重新算出它与键/值头 1 配对时的注意力权重，列出在层里
#    注意力权重恰好如此的查询头：

gqa4 = mha_to_gqa(mha, 4)
key_rows = mha.in_proj_weight.detach()[embed_dim : 2 * embed_dim]  # (embed_dim, embed_dim)：键投影，逐头排列
kv_head_1 = gqa4.k_proj.weight.detach()[head_dim : 2 * head_dim]  # (head_dim, embed_dim)
for first, second in ((1, 5), (2, 3)):
    pooled = (key_rows[first * head_dim : (first + 1) * head_dim] + key_rows[second * head_dim : (second + 1) * head_dim]) / 2  # (head_dim, embed_dim)
    print(f"头 {first} 与头 {second} 的平均等于键/值头 1：{torch.allclose(pooled, kv_head_1)}")
with torch.no_grad():
    _, weights = gqa4(x, need_weights=True)  # (batch, num_heads, seq_len, seq_len)
    queries = split_heads(gqa4.q_proj(x), num_heads)  # (batch, num_heads, seq_len, head_dim)
    keys = split_heads(gqa4.k_proj(x), gqa4.num_kv_heads)  # (batch, num_kv_heads, seq_len, head_dim)
    with_kv_head_1 = torch.softmax(queries @ keys[:, 1:2].transpose(-2, -1) / head_dim**0.5, dim=-1)  # (batch, num_heads, seq_len, seq_len)
print("使用键/值头 1 的查询头：", [h for h in range(num_heads) if torch.allclose(with_kv_head_1[:, h], weights[:, h])])

# %%
# **练习 3.** 键/值头与查询头一样多时，取平均是精确的。把 ``mha`` 复制一份，让每个奇数头 ``h`` 使用
# 头 ``h - 1`` 的键投影和值投影（查询投影保持不变，所以这些头仍然各不相同）。对这份副本做
# ``mha_to_gqa``，取 4 个键/值头时是精确的吗？取 2 个呢？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    取 4 个键/值头时，每组是一对键投影和值投影相同的头：它们的平均就是这同一个投影，每个查询头
#    保留自己的查询投影和输出投影那几行，转换后的层计算的就是副本的函数，只差舍入误差。取 2 个时，
#    每组包含两对互不相同的头，平均又成了近似。取平均损失的是组内各头在键和值上的差别，而不是共享
#    一个头的头数。代码把副本和原来的 ``mha`` 分别与各自的转换结果比较：

twin = MultiHeadAttention(embed_dim, num_heads, batch_first=True, dtype=torch.float64).to(device).eval()
twin.load_state_dict(mha.state_dict())
with torch.no_grad():
    for h in range(1, num_heads, 2):  # 奇数头 h 取头 h - 1 的键投影和值投影那几行
        for start in (embed_dim, 2 * embed_dim):  # 先是 in_proj_weight 的键那一块，再是值那一块
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
print(text_table(["num_kv_heads", "成对相同的副本：最大绝对差", "原来的 mha：最大绝对差"], twin_rows))

# %%
# .. _ex15-summary:
#
# 小结
# ----
# * 一步解码为每个头的一个查询读取整个 KV 缓存；分组查询注意力和多查询注意力按组的大小缩小这个缓存，
#   显式分组路径从不复制它。
# * 按 Shazeer 2019 的算术（计算所得，不是测量），这样的一步每读一个字节只做几次运算，远低于 GPU 的屋脊点：
#   在 GPU 上它受内存限制，而减少键/值头缓解的正是这一点。
# * 对训练好的多头层取平均，只有在键/值头与查询头一样多时才是精确的。这里 100 步追加训练（预训练的 50%，
#   论文是 5%）让 2 个键/值头的模型恢复了，多查询模型却没有。
# * 在这个小任务上，起决定作用的是预算相同的对照：从头训练同样的 300 步，多查询模型学会了任务。
#   与只从头训练 100 步（与追加训练步数相同，预训练算作沉没成本）相比，先转换再追加训练在每个种子上都领先。
#   追加训练在预训练才是昂贵部分时才划算，那是 Ainslie 等人的情形，而一个几秒钟的小任务不是。
