"""
示例 23：滑动窗口与注意力汇点
=============================

滑动窗口层里，每个词元只关注最近的 ``window`` 个词元（Beltagy 等 2020）。Mistral 7B（v0.1）每一层都
用这样的窗口（Jiang 等 2023）；Gemma 2、Gemma 3 和 gpt-oss 则让滑动窗口层与完整注意力层穿插排列。掩码是对角线下方的一条带；这种层的 KV 缓存永远不需要超过 ``window`` 个词元，所以可以是一个
固定大小的环形缓冲区，而信息仍能逐层接力，传得比一个窗口更远。

本例构建带状掩码（:func:`mha_ref.sliding_window_mask`），核对用 :class:`mha_ref.RollingKVCache`
逐步解码等于带这个掩码的完整注意力，计算感受野随深度的增长和每个词元的内存，再在一个 **没有** 用窗口
训练过的模型上试用窗口：SmolLM2-135M-Instruct 读一段真实文本，比较只用窗口的缓存与窗口加上保留最初四个词元
（StreamingLLM，Xiao 等 2023），另加几个各只改一个因素的对照。
"""

# %%
# .. _ex23-the-banded-mask:
#
# 带状掩码
# --------
# ``allowed[i, j] = (i - window < j <= i)``：每个查询看到自己的键和它之前的 ``window - 1`` 个键。
# 第二个掩码还让最初两个词元始终可见，正如 StreamingLLM 的缓存那样。（要自己运行最后一节，需要真实
# 模型：下面打印三条安装命令。）

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

print("安装（按这个顺序）：", *install_steps(), sep="\n  ")
seq_len, window, num_sinks = 8, 3, 2
labels = [f"t{i}" for i in range(seq_len)]
fig = plot_masks(
    [sliding_window_mask(seq_len, window=window), window_mask(seq_len, window, num_sinks)],
    labels, labels,
    titles=[f"sliding_window_mask(window={window})", f"窗口 {window} + 最初 {num_sinks} 个词元"],
    xlabel="键", ylabel="查询", legend=("可以关注", "被屏蔽"),
)
plt.show()

# %%
# .. _ex23-a-ring-buffer-equals-masked-full-attention:
#
# 环形缓冲区等于带掩码的完整注意力
# --------------------------------
# ``window = 3`` 个槽位的 :class:`mha_ref.RollingKVCache` 把词元 ``t`` 写进槽位 ``t % 3``，覆盖
# 三步之前的词元。每一步一个查询，不带掩码地关注缓存里现有的内容。表中打印每一步之后缓存里的位置，
# 以及与带状掩码的完整注意力之差（``float64``）；最后一列对“始终保留最初两个词元”（``num_sinks=2``，
# 多两个槽位）做同样的核对。

torch.manual_seed(0)
batch, num_heads, head_dim = 2, 4, 8
query, key, value = (torch.randn(batch, num_heads, seq_len, head_dim, dtype=torch.float64) for _ in range(3))  # 各为 (batch, num_heads, seq_len, head_dim)
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
print(text_table(["步", "缓存中的位置（窗口 3）", "与带掩码完整计算之差", "缓存中的位置（+ 最初 2 个）", "与带掩码完整计算之差"], rows))

# %%
# .. _ex23-the-receptive-field-grows-with-depth:
#
# 感受野随深度增长
# ----------------
# 一层让词元 ``i`` 读到词元 ``i - window + 1 .. i``。第二层读的是第一层的输出，而每个输出已经概括了
# 一个窗口，所以经过 ``depth`` 层，词元 ``i`` 能接收到 ``depth * (window - 1)`` 个位置之前的信息
# （Mistral 7B，第 2 节）。下表把掩码逐层复合（每层一次布尔矩阵乘法，实验代码中的
# ``mha_ref.tutorial.windows.receptive_field``），取 64 个词元、窗口 4，打印最后一个词元能往回读多远。

rows = []
for depth in (1, 2, 4, 8, 16):
    reach = receptive_field(64, 4, depth)  # (64, 64) bool
    farthest = 63 - int(reach[63].nonzero().min())
    rows.append((depth, farthest, depth * (4 - 1)))
print(text_table(["层数", "最后一个词元读到的最远距离", "depth × (window - 1)"], rows))

# %%
# .. _ex23-memory-per-token:
#
# 每个词元的内存
# --------------
# 取 Mistral 7B 的形状（32 层，8 个 128 维的键/值头，窗口 4096，``bfloat16``）：完整缓存随文本增长，
# 滚动缓存到窗口大小就停住。滚动缓存一开始就按窗口分配全部 4096 个槽位，所以文本短于窗口时，它反而比
# 完整缓存大（表的第一行）。下面的字节数来自真实的 :class:`mha_ref.KVCache` 和
# :class:`mha_ref.RollingKVCache` 缓冲区（只建一层、一个键/值头，免得占用太多内存），再乘以头数和层数。

layers, kv_heads, kv_dim, mistral_window = 32, 8, 128, 4096
per_token = kv_cache_bytes_per_token(layers, kv_heads, kv_dim, torch.bfloat16)
rolling_one = RollingKVCache(1, 1, mistral_window, kv_dim, dtype=torch.bfloat16).nbytes()  # 一个头、一层
rows = []
for n in (1024, 4096, 16384, 32768):
    full_one = KVCache(1, 1, n, kv_dim, dtype=torch.bfloat16).nbytes()  # 一个头、一层
    rows.append((n, f"{full_one * kv_heads * layers / 2**20:.0f}", f"{per_token * n / 2**20:.0f}",
                 f"{rolling_one * kv_heads * layers / 2**20:.0f}"))
print(text_table(["词元数", "完整缓存（MiB）", "公式（MiB）", "滚动缓存，窗口 4096（MiB）"], rows))

# %%
# .. _ex23-a-window-on-a-model-trained-without-one:
#
# 在没有用窗口训练过的模型上加窗口
# --------------------------------
# SmolLM2-135M-Instruct 是用完整因果注意力训练的。取一段随包提供的文本（Python 参考手册讲赋值语句的一章）的
# 前 512 个词元，让模型跑七遍：完整注意力；每个块都用 64 个词元的窗口；同样的窗口再保留最初 4 个词元；
# 然后是四个对照。68 个词元的普通窗口与 64 + 4 的缓存一样大，但多出的槽位放的是最近的词元，而不是最初的
# 词元；64 个词元的窗口只加词元 0，则只保留第一个词元；64 个词元的窗口只加词元 16，或只加词元 32，和加
# 词元 0 一样多出一个槽位，但保留的不是第一个词元：如果随便哪个一直保留的旧词元都有帮助，它们的帮助应该
# 一样大。这里用掩码来模拟缓存：上面环形缓冲区的等式对这个模型
# 同样成立，见下面输出的第一行。那里把文本开头逐个词元解码，每个块用一个环形缓冲区保存最近的 16 个词元
# 和最初的 4 个（``rolling_decode_logits``），再与带掩码的前向计算比较。位置用词元自己的位置，所以 RoPE
# 看到的是真实距离。StreamingLLM 则按词元在缓存
# 中的位置重新编号（Xiao 等 2023，第 3.2 节），这里没有这样做。困惑度是第一个窗口之后各词元平均损失的
# ``exp``，每次运行统计的都是这些词元。最后一列是：只用窗口时比完整注意力多出的困惑度中，这次运行消除的
# 比例。

check = rolling_decode_check("assignment_statements", 48, 16, 4)  # 设置了 MHA_REF_CACHE_DIR 时结果存入那个文件夹，再次运行直接读取
print(f"每个块一个 {check['slots']} 个槽位的环形缓冲区，逐个解码 {check['num_tokens']} 个词元，"
      f"与带掩码的前向计算相比：logit 的最大差"
      f"{'小于' if check['max_abs_diff'] < 1e-3 else '大于'} 1e-3（logit 最大约 "
      f"{check['max_abs_logit']:.0f}）；{check['num_tokens']} 个位置中有 {check['same_choice']} "
      f"个位置选出的最可能的下一个词元相同")

text_window, text_sinks = 64, 4
result = streaming_losses("assignment_statements", 512, text_window, text_sinks)
losses = result["losses"]
ppl = {key: losses[key][text_window:].mean().exp().item() for key in losses}
runs = (("完整因果", "full", None), (f"窗口 {text_window}", "window", text_window),
        (f"窗口 {text_window + text_sinks}（不保留最初词元）", "wide_window", text_window + text_sinks),
        (f"窗口 {text_window} + 最初 1", "first_token", text_window + 1),
        *((f"窗口 {text_window} + 只加词元 {p}", f"token_{p}", text_window + 1)
          for p in KEPT_CONTROLS),
        (f"窗口 {text_window} + 最初 {text_sinks}", "sinks", text_window + text_sinks))
rows = [(name, "全部" if key == "full" else slots, f"{ppl[key]:.2f}",
         f"{(ppl['window'] - ppl[key]) / (ppl['window'] - ppl['full']):.2f}") for name, key, slots in runs]
print(f"文本：{result['tokens'].numel()} 个词元；困惑度统计词元 {text_window + 1}..{result['tokens'].numel() - 1}")
print(text_table(["注意力", "缓存中的词元", "困惑度", "消除的多出部分的比例"], rows))
sink_weight = result["sink_weight"]  # (num_layers,)
print(f"完整注意力：窗口之后的查询给词元 0 的平均权重，逐块统计：最小 {sink_weight.min():.3f}，"
      f"中位数 {sink_weight.median():.3f}，最大 {sink_weight.max():.3f}；"
      f"超过 0.1 的块：{int((sink_weight > 0.1).sum())} / {sink_weight.numel()}")

positions = list(range(text_window, result["tokens"].numel() - 1, 32))
curves = {label: [losses[key][p : p + 32].mean().item() for p in positions] for label, key in
          (("完整因果", "full"), (f"窗口 {text_window}", "window"), (f"窗口 + 最初 {text_sinks}", "sinks"))}
fig = plot_lines(positions, curves, xlabel="位置（每段 32 个词元）", ylabel="平均损失（奈特）", title="SmolLM2-135M-Instruct，一段随包文本的前 512 个词元")
plt.show()

# %%
# 只用窗口的那次运行丢掉了最初的词元，而完整模型把很大一部分注意力放在它们上面（见上面打印的权重）；
# 保留其中四个，就消除了只用窗口时多出的大部分困惑度（比例见上），但没有全部消除。前两个对照把这四个
# 词元带来的两样东西分开了。多给四个最近的槽位（68 个词元的窗口，缓存一样大）只消除了多出部分的一小
# 部分，而单单保留词元 0 消除的几乎和保留最初四个一样多：在这段文本上，起作用的是第一个词元，而不是
# 多出的槽位。而且起作用的正是第一个词元本身：同样多出一个槽位，但一直保留的是词元 16 或词元 32 而不是
# 词元 0，消除不了多出的部分（上面打印的比例接近零，甚至略低于零）。挽救窗口的是词元 0，即汇点词元，而不是随便哪个被保留
# 下来的旧词元。保留词元 0 既保留了它的内容，也保留了它的位置；这些运行没有把两者分开。这只是一段文本、一个窗口、一个模型；这些干预说明第一个词元对窗口很重要，并不说明模型
# 为什么依赖它。

# %%
# .. _ex23-exercises:
#
# 练习
# ----
# **练习 1.** Mistral 7B 有 32 层，窗口 4096 个词元。理论上，它最后一层在词元 ``i`` 处的输出最远能
# 追溯到多远？用掩码乘积在窗口 3、5 层的情形下验证规则 ``depth * (window - 1)``。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    每一层多出 ``window - 1`` 个位置，所以 32 层能往回读 ``32 * 4095`` 个词元（论文约为 131K）。
#    掩码乘积在小例子上给出同样的数：

print(f"Mistral 7B：往回 {32 * (4096 - 1)} 个词元")
small = receptive_field(32, 3, 5)  # (32, 32) bool
print(f"窗口 3、5 层：最后一个词元往回读到 {31 - int(small[31].nonzero().min())} 个位置；规则：{5 * (3 - 1)}")

# %%
# **练习 2.** 一个 ``window = 4``、``num_sinks = 1`` 的 :class:`mha_ref.RollingKVCache` 已经收下了
# 10 个词元。它保存了哪些位置、各在哪个槽位？``head_dim = 16``、``float32`` 时每个头占多少字节？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    槽位 0 始终保存词元 0；槽位 1 到 4 组成的环保存最后四个词元 6 到 9，词元 ``p`` 在槽位
#    ``1 + (p - 1) % 4``。5 个槽位的键和值，每个 16 个数、每个数 4 字节：``2 * 5 * 16 * 4`` 字节，
#    与词元数无关。代码填满一个缓存并打印它保存的内容：

exercise = RollingKVCache(1, 1, 4, 16, num_sinks=1)
for _ in range(10):
    exercise.append(torch.zeros(1, 1, 1, 16), torch.zeros(1, 1, 1, 16))
print(f"各槽位的位置：{exercise.positions.tolist()}；字节数：{exercise.nbytes()}")


# %%
# .. _ex23-summary:
#
# 小结
# ----
# * 滑动窗口就是带状的因果掩码；``window`` 个槽位的环形缓冲区能精确地解码它（表中打印了差值），而
#   缓存不再增长。
# * 经过 ``depth`` 层，一个词元能读到 ``depth * (window - 1)`` 个位置之前，掩码乘积打印了这一点。
# * 在没有用窗口训练过的 SmolLM2-135M-Instruct 上，只用窗口时困惑度远高于完整注意力；保留最初四个词元
#   消除了多出部分的大部分，但没有全部消除。槽位数相同但不保留最初词元的窗口只消除了一小部分，只加
#   词元 0 的窗口消除的几乎一样多：起作用的是第一个词元；在这段文本上，只加词元 16 或词元 32 的窗口什么也
#   没有消除：起作用的是第一个词元本身（汇点词元），而不是随便哪一个多保留的旧词元（它的内容和位置是
#   一起保留的，这些运行没有把两者分开）。
#
# 出处：Beltagy 等 2020，“Longformer: The Long-Document Transformer”，arXiv:2004.05150，第 3.1 节；
# Jiang 等 2023，“Mistral 7B”，arXiv:2310.06825，第 2 节（滑动窗口、滚动缓冲缓存、模型形状）；
# Xiao 等 2023，“Efficient Streaming Language Models with Attention Sinks”，arXiv:2309.17453，
# 第 3 节；Allal 等 2025，arXiv:2502.02737（SmolLM2）。
