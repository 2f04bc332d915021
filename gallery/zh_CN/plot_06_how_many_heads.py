"""
用多少个头？
============

模型宽度 ``embed_dim`` （论文中的 d_model）固定时，头数 ``h`` 只决定这份宽度怎么切分：
``head_dim = embed_dim // h``。本例测量这个选择会改变什么、不会改变什么：

* 参数量和矩阵乘法的 FLOPs（不变），
* 作用在注意力分数上的逐元素运算，以及注意力权重 ``(batch, h, seq_len, seq_len)`` 占用的内存
  （随 ``h`` 增长），
* 在构建本页的设备上一次前向传播的时间，
* 在 :ref:`上一个示例 <sphx_glr_auto_examples_plot_05_what_heads_learn.py>` 的双关系小任务上、
  多个随机种子下的准确率，

并把已发表的结果放在旁边：Vaswani 等人 2017 年论文表 3 的 (A) 组。最后看现代模型里的另一种
头数——*键/值* 头的个数（分组查询注意力和多查询注意力）。
"""

# %%
# 固定宽度下的开销
# ----------------
# 我们使用小任务的宽度 ``embed_dim = 16``，在一批 8 个、每个 128 个词元的序列上统计开销，
# 这时注意力矩阵已大到不可忽略。参数量在真实的 :class:`mha_ref.MultiHeadAttention` 模块上清点。
# FLOPs 来自 :func:`mha_ref.tutorial.head_count.attention_flops` 中的解析公式（一次乘加算 2 次运算）：
# 四个投影和两次注意力乘积都是矩阵乘法，规模与 ``h`` 无关；softmax 则要处理全部
# ``batch * h * seq_len**2`` 个分数。权重内存就是这个张量在 float32 下的大小。

import matplotlib.pyplot as plt
import torch

from mha_ref import GroupedQueryAttention, MultiHeadAttention, pick_device
from mha_ref.tutorial.bench import environment, time_fn
from mha_ref.tutorial.head_count import (
    attention_flops,
    attention_weight_bytes,
    head_count_sweep,
    plot_head_count_sweep,
    plot_relative_costs,
)
from mha_ref.tutorial.plotting import text_table

torch.manual_seed(0)
device = pick_device()

embed_dim, batch, seq_len = 16, 8, 128
head_counts = [1, 2, 4, 8]

costs = []
for h in head_counts:
    module = MultiHeadAttention(embed_dim, h, batch_first=True)
    flops = attention_flops(batch, seq_len, embed_dim, h)
    costs.append(
        {
            "h": h,
            "head_dim": embed_dim // h,
            "parameters": sum(p.numel() for p in module.parameters()),
            "matmul_mflops": (flops["total"] - flops["softmax"]) / 1e6,
            "softmax_mflops": flops["softmax"] / 1e6,
            "weight_mib": attention_weight_bytes(batch, seq_len, h) / 2**20,
        }
    )

cost_rows = [
    (
        c["h"],
        c["head_dim"],
        c["parameters"],
        f"{c['matmul_mflops']:.1f}",
        f"{c['softmax_mflops']:.1f}",
        f"{c['weight_mib']:.1f}",
    )
    for c in costs
]
print(
    text_table(
        ["h", "head_dim", "参数量", "矩阵乘 MFLOPs", "softmax MFLOPs", "权重 MiB"], cost_rows
    )
)

# %%
# 在本设备上的耗时
# ----------------
# 用 :func:`mha_ref.tutorial.bench.time_fn` 为同样的模块计时：先预热三次，再取十次的中位数；在 GPU 上，
# 每次读时钟前都会同步设备。``MultiHeadAttention`` 的显式路径会把注意力权重完整算出来，所以
# 可以预期它的耗时随权重张量增长；下图显示的是本设备的实际情况。耗时取决于机器，每次构建都会
# 不同，因此它们打印在以 ``[timing]`` 开头的行上，从不抄进正文。先打印运行环境。

env = environment(device)
print(f"torch {env['torch']}，设备：{env['device']}，线程数：{env['threads']}")

x = torch.randn(batch, seq_len, embed_dim, device=device)  # (batch, seq_len, embed_dim)
seconds = []
for h in head_counts:
    module = MultiHeadAttention(embed_dim, h, batch_first=True).to(device).eval()
    with torch.no_grad():
        seconds.append(time_fn(lambda m=module: m(x, x, x), warmup=3, repeats=10, device=device))
for h, s in zip(head_counts, seconds, strict=True):
    print(f"[timing] h={h}：每次前向传播 {s * 1e3:.2f} ms")

fig = plot_relative_costs(
    head_counts,
    {
        "参数量": [c["parameters"] for c in costs],
        "矩阵乘 FLOPs": [c["matmul_mflops"] for c in costs],
        "softmax FLOPs": [c["softmax_mflops"] for c in costs],
        "注意力权重内存": [c["weight_mib"] for c in costs],
        f"本设备上的耗时：{env['device']}": seconds,
    },
    title=f"开销：embed_dim={embed_dim}，batch={batch}，seq_len={seq_len}",
    xlabel="头数 h",
    ylabel="相对于 h = 1 的倍数",
)
plt.show()

# %%
# 小任务上的准确率
# ----------------
# 开销只是问题的一半。:func:`mha_ref.tutorial.head_count.head_count_sweep` 用每种头数、三个随机种子
# 训练上一个示例中的双关系模型（种子改变初始化和训练数据，评估集不变），宽度都是
# ``embed_dim = 16``，所以 ``h = 8`` 时每个头的查询和键只剩 2 维。图中画出均值和一个标准差的
# 误差棒，每个单独的种子画成一个点。

rows = head_count_sweep(head_counts, embed_dim=embed_dim, seeds=(0, 1, 2))
accuracy_rows = [
    (
        row.num_heads,
        row.head_dim,
        "  ".join(f"{a:.3f}" for a in row.accuracies),
        f"{row.accuracy_mean:.3f}",
        f"{row.accuracy_std:.3f}",
    )
    for row in rows
]
print(text_table(["h", "head_dim", "各种子的准确率", "均值", "标准差"], accuracy_rows))
top_accuracy = max(row.accuracy_mean for row in rows)
top_heads = [row.num_heads for row in rows if row.accuracy_mean == top_accuracy]
print(f"本次构建的最高平均准确率：{top_accuracy:.3f}（h = {top_heads}）")

# %%
# 论文的测量结果
# --------------
# Vaswani 等人 2017 年的论文 "Attention Is All You Need"（arXiv:1706.03762）表 3 的 (A) 组在
# 保持计算量不变（``d_k = d_v = 512 / h``）的前提下改变 ``h``，报告了英德翻译开发集
# newstest2013 上的 BLEU 和困惑度（PPL）。下面的数字抄自该表；由它们推出的一切都由代码计算。
#
# 一篇流传很广的中文教程（本站的素材之一）声称，在 WMT 2014 英德翻译上 8 个头比单头高出
# “超过 2 BLEU”。论文的表格并不支持这个说法：实际差距是下面打印的数值，而且是在开发集上。表格还
# 显示了另一面：头太多（``d_k`` 因而很小）时，质量又会下降。

TABLE_3A = [
    {"h": 1, "d_k": 512, "d_v": 512, "bleu": 24.9, "ppl": 5.29},
    {"h": 4, "d_k": 128, "d_v": 128, "bleu": 25.5, "ppl": 5.00},
    {"h": 8, "d_k": 64, "d_v": 64, "bleu": 25.8, "ppl": 4.92},  # 基础模型
    {"h": 16, "d_k": 32, "d_v": 32, "bleu": 25.8, "ppl": 4.91},
    {"h": 32, "d_k": 16, "d_v": 16, "bleu": 25.4, "ppl": 5.01},
]
print("Vaswani 等人 2017，表 3 (A)，英德 newstest2013（开发集）")
paper_rows = [(r["h"], r["d_k"], r["d_v"], f"{r['bleu']:.1f}", f"{r['ppl']:.2f}") for r in TABLE_3A]
print(text_table(["h", "d_k", "d_v", "BLEU", "PPL"], paper_rows))

top_bleu = max(r["bleu"] for r in TABLE_3A)
by_heads = {r["h"]: r for r in TABLE_3A}
print(f"最高 BLEU：{top_bleu:.1f}（h = {[r['h'] for r in TABLE_3A if r['bleu'] == top_bleu]}）")
print(f"h=1 比最好的低 {top_bleu - by_heads[1]['bleu']:.1f} BLEU（而不是“超过 2 BLEU”）")
print(f"h=32 比最好的低 {top_bleu - by_heads[32]['bleu']:.1f} BLEU：头太多也有害")

fig = plot_head_count_sweep(
    rows,
    TABLE_3A,
    heads_label="头数 h",
    accuracy_label="准确率（均值 ± 标准差）",
    seeds_label="单个种子",
    accuracy_title=f"小任务，embed_dim={embed_dim}（本次构建）",
    bleu_label="BLEU，英德 newstest2013",
    bleu_title="Vaswani 等人 2017，表 3 (A)",
    base_heads=8,
    base_label="基础模型（h = 8）",
)
plt.show()

# %%
# 键和值的头数：MHA、GQA、MQA
# ----------------------------
# 模型生成文本时，要保存之前每个词元的键和值（KV 缓存）。普通多头注意力（MHA）每个词元、每层
# 需要 ``2 * h * head_dim = 2 * embed_dim`` 个数。分组查询注意力（GQA）让一组查询头共用一个
# 键/值头；多查询注意力（MQA）让所有查询头共用同一个。查询头的个数不变，注意力权重张量也就不变；
# 缓存缩小为原来的 ``num_kv_heads / h``。
#
# 下面使用基础模型的形状（``embed_dim = 512``、``h = 8``），由
# :class:`mha_ref.GroupedQueryAttention` 计算每个词元的缓存大小。字节数按 float16 计算；最后一列
# 是多层解码器在长上下文下的整个缓存（具体尺寸先打印出来）。当 ``num_kv_heads = h`` 时，该模块
# 的参数量与普通多头注意力完全相同。

model_dim, num_heads, context_len, num_layers = 512, 8, 4096, 6
kv_variants = [("MHA", 8), ("GQA", 4), ("GQA", 2), ("MQA", 1)]
print(f"embed_dim={model_dim}，h={num_heads}，上下文 {context_len} 个词元，{num_layers} 层")
kv_rows = []
for name, kv_heads in kv_variants:
    gqa = GroupedQueryAttention(model_dim, num_heads, kv_heads)
    numbers = gqa.kv_cache_size_per_token()
    parameters = sum(p.numel() for p in gqa.parameters())
    mib = numbers * 2 * context_len * num_layers / 2**20
    kv_rows.append((name, kv_heads, parameters, numbers, numbers * 2, f"{mib:.1f}"))
print(
    text_table(
        ["变体", "键值头数", "参数量", "每词元每层缓存的数值个数", "字节（fp16）", "缓存 MiB"],
        kv_rows,
    )
)
mha_parameters = sum(p.numel() for p in MultiHeadAttention(model_dim, num_heads).parameters())
print(f"作为对照，MultiHeadAttention({model_dim}, {num_heads}) 的参数量：{mha_parameters}")
