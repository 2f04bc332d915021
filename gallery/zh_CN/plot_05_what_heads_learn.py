"""
各个头学到了什么
================

教程里常说，多头注意力的各个头会“分工”：一个头负责句法，另一个头负责指代，等等。在大规模
训练好的模型里这很难验证，因为没有人知道数据究竟需要哪些关系。这里我们构造一个 *已知* 答案的
任务：要预测目标，恰好需要两种关系——“前一个词元”和“再往前一个词元”。然后在构建本页的同时，
当场训练一个有四个头的小模型，再从训练好的注意力权重中读出每个头实际在做什么。

下面的一切都由 :mod:`mha_ref.tutorial` 计算；脚本只负责调用它，并打印或绘制它的返回值。
正文说明该看什么；打印出的结果说明本次构建实际发现了什么。
"""

# %%
# 任务
# ----
# 每个序列有 8 个随机词元，词表大小为 16。位置 ``t`` 的目标是
# ``table[token[t - 1], token[t - 2]]``，其中 ``table`` 是一张固定的 16 x 16 随机查找表。
# 这张表不对称，所以模型不仅要找到这两个词元，还要分清哪个是哪个。前两个位置没有目标
# （记为 ``-``）。
#
# 词元本是 0 到 15 的编号；为了让图更好读，我们给每个词元起一个单字的名字（见下面的 ``TOKEN_NAMES``）。

import matplotlib.pyplot as plt
import torch

from mha_ref import causal_mask
from mha_ref.tutorial.heads import plot_head_profiles
from mha_ref.tutorial.plotting import plot_heads
from mha_ref.tutorial.tasks import make_batch, make_table
from mha_ref.tutorial.training import plot_loss_curves, train

torch.manual_seed(0)
LANGUAGE = "zh_CN"  # 打印各头摘要所用的语言
TOKEN_NAMES = list("甲乙丙丁山水火木金土石风云花鸟虫")  # 每个词元编号对应一个名字

table = make_table(vocab_size=16, seed=0)  # (16, 16)
tokens, targets = make_batch(1, 8, table, torch.Generator().manual_seed(0))  # (1, 8), (1, 8)
print("查找表：", tuple(table.shape))
print("词元：", " ".join(TOKEN_NAMES[i] for i in tokens[0].tolist()))
print("目标：", " ".join(TOKEN_NAMES[i] if i >= 0 else "-" for i in targets[0].tolist()))

# %%
# 模型与训练
# ----------
# :class:`~mha_ref.tutorial.tasks.TinyAttentionModel` 由词元嵌入加可学习的位置嵌入、**一层**
# 因果 :class:`mha_ref.MultiHeadAttention` （``embed_dim=16``、``num_heads=4``，因此
# ``head_dim=4``）以及一个在每个位置给出预测的小型 MLP 组成。模型没有残差连接：它对其他词元的
# 全部了解，都必须经过注意力权重传过来。
#
# :func:`~mha_ref.tutorial.training.train` 在每步新生成的随机批次上运行 200 步 Adam。即使有 GPU，
# 它也有意在 CPU 上训练：模型太小，GPU 帮不上忙；而在单个 CPU 线程上使用确定性算子，每次构建
# 都得到相同的数字。准确率在一组固定的、全新的评估序列上测量。

result = train(num_heads=4, embed_dim=16, seed=0)
print(f"参数量：{result.num_parameters}（其中注意力层：{result.attention_parameters}）")
print(f"损失：第一步 {result.loss_curve[0]:.3f}，最后一步 {result.loss_curve[-1]:.4f}")
print(f"评估集上的准确率：{result.accuracy:.3f}")

fig = plot_loss_curves(
    {"4 个头": result.loss_curve},
    title="训练损失",
    xlabel="训练步数",
    ylabel="交叉熵损失（对数坐标）",
)
plt.show()

# %%
# 每个头在一个序列上的权重
# ------------------------
# 现在输入一个新序列（固定探测批次中的第一个，与训练数据分开生成），画出每个头的注意力权重：
# 行是查询位置，列是键位置，每行之和为 1。灰色的上三角是因果掩码屏蔽的部分。跟随“前一个词元”的
# 头会点亮主对角线正下方的那条对角线；跟随“往前两个词元”的头会点亮再下面一条。前两行比较特殊：
# 位置 0 只能关注自己，位置 1 往前没有第二个词元。

# sphinx_gallery_thumbnail_number = 2
probe_labels = [f"{t}:{TOKEN_NAMES[i]}" for t, i in enumerate(result.probe_tokens[0].tolist())]
weights = result.probe_weights[0]  # (num_heads, seq_len, seq_len)
print("探测权重：", tuple(weights.shape))
# 探测序列的两张热力图共用的标签和掩码
probe_heatmap = dict(
    annotate_min=0.01,
    colorbar_label="注意力权重",
    xlabel="键（位置:词元）",
    ylabel="查询（位置:词元）",
    blocked=~causal_mask(len(probe_labels)),  # (seq_len, seq_len)，True 表示屏蔽
    blocked_label="被因果掩码屏蔽（权重为 0）",
)
fig = plot_heads(
    weights,
    probe_labels,
    titles=[f"头 {h}" for h in range(weights.shape[0])],
    suptitle="每个头的注意力权重（一个探测序列）",
    ncols=2,
    **probe_heatmap,
)
plt.show()

# %%
# 测量每个头关注什么
# ------------------
# 单个序列可能有误导性，所以我们对整个探测批次（256 个序列）取平均。对每个头、每个偏移量
# （键位置减查询位置：``-1`` 表示前一个词元），计算平均权重，只统计有目标的查询位置。平均权重
# 最大的偏移量就是这个头学到的关系；如果这个头在该偏移上至少放了一半的权重，就称它是 *聚焦的*。
# 一行权重的熵表示它有多分散：0 奈特表示全部权重落在一个键上；虚线表示在所有可见的键上平均
# 分配权重的头。
#
# 该看什么：任务需要的每种关系（偏移 ``-1`` 和 ``-2``）是否都有一个聚焦的头？四个头、两种关系，
# 总有头无事可做：如果两个头的偏移相同，其中一个就是冗余的。下面的摘要是从权重中计算出来的，
# 而不是事先假定的。

fig = plot_head_profiles(
    result,
    title="各头在各偏移上的平均权重（探测批次）",
    offset_label="偏移（键位置 - 查询位置）",
    head_label="头 {}",
    entropy_title="各头的平均熵",
    entropy_label="熵（奈特）",
    uniform_label="在可见键上均匀分布",
    colorbar_label="平均注意力权重",
)
plt.show()

for head in result.heads:
    print(head.describe(LANGUAGE))
print("各头的熵（奈特）：", [round(float(e), 3) for e in result.entropy])
print(f"均匀分布的头的熵（奈特）：{result.max_entropy:.3f}")
print("任务需要的关系：    ", list(result.config["offsets"]))
print("各头中找到的关系：  ", result.relations_found())
print("没有头覆盖的关系：  ", result.relations_missing())

# %%
# 只有一个头会怎样？
# ------------------
# 同样的模型取 ``num_heads=1`` （于是 ``head_dim=16``），每个位置只有一行 softmax。要同时看到
# 两个相关词元，它必须把这一行的权重分给两个键，而读出层收到的是两者的加权 *平均*，还得从中把
# 它们区分开。把它的摘要和准确率与上面四个头的模型比较：一个头能否应付、应付得多好，以本次构建
# 的测量为准。:ref:`下一个示例 <sphx_glr_auto_examples_plot_06_how_many_heads.py>` 会在多种头数
# 和多个随机种子上重复这个实验。

single = train(num_heads=1, embed_dim=16, seed=0)
print(f"1 个头的准确率：{single.accuracy:.3f}")
print(f"4 个头的准确率：{result.accuracy:.3f}")
for head in single.heads:
    print(head.describe(LANGUAGE))

fig = plot_heads(
    single.probe_weights[0],
    probe_labels,
    titles=["唯一的头"],
    suptitle="只有一个头，同一个探测序列",
    **probe_heatmap,
)
plt.show()
