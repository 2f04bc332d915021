"""
示例 5：各个头学到了什么
========================

教程里常说，多头注意力的各个头会“分工”：一个头负责句法，另一个头负责指代，等等。在大规模
训练好的模型里这很难验证，因为没有人知道数据究竟需要哪些关系。这里我们构造一个 *已知* 答案的
任务：要预测目标，恰好需要两种关系——“前一个词元”和“再往前一个词元”。然后在构建本页的同时，
当场训练一个有四个头的小模型，并提出两个听起来相似、其实不同的问题：

* **每个头看向哪里？** 从它的注意力权重中读出来（*QK 回路*：查询与键的匹配决定注意力权重）；
* **每个头为模型做了什么？** 把它去掉，测量模型损失了多少（*OV 回路*：这个头从值中读取什么，
  又经过输出投影写出什么）。

第二个问题的答案不能从第一个问题的答案中读出来；本页就展示了一个这样读会得出错误结论的例子。

下面的一切都由 :mod:`mha_ref.tutorial` 计算；脚本只负责调用它，并打印或绘制它的返回值。
正文说明该看什么；打印出的结果说明本次构建实际发现了什么。
"""

# %%
# .. _ex05-the-task:
#
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
TOKEN_NAMES = list("甲乙丙丁山水火木金土石风云花鸟虫")  # 每个词元编号对应一个名字

table = make_table(vocab_size=16, seed=0)  # (16, 16)
tokens, targets = make_batch(1, 8, table, torch.Generator().manual_seed(0))  # (1, 8), (1, 8)
print("查找表：", tuple(table.shape))
print("词元：", " ".join(TOKEN_NAMES[i] for i in tokens[0].tolist()))
print("目标：", " ".join(TOKEN_NAMES[i] if i >= 0 else "-" for i in targets[0].tolist()))

# %%
# .. _ex05-the-model-and-its-training:
#
# 模型与训练
# ----------
# :class:`~mha_ref.tutorial.tasks.TinyAttentionModel` 由词元嵌入加可学习的位置嵌入、**一层**
# 因果 :class:`mha_ref.MultiHeadAttention` （``embed_dim=16``、``num_heads=4``，因此
# ``head_dim=4``）以及一个在每个位置给出预测的小型 MLP 组成。模型没有残差连接：它对其他词元的
# 全部了解，都必须经过注意力权重传过来。
#
# :func:`~mha_ref.tutorial.training.train` 在每步新生成的随机批次上运行 200 步 Adam。即使有 GPU，
# 它也有意在 CPU 上训练：模型太小，GPU 帮不上忙；而在单个 CPU 线程上使用确定性算子，每次构建
# 都得到相同的数字。准确率在一组固定的、全新的评估序列上测量。序列是新的，词元对却不是：
# 全部 16 x 16 种 ``(token[t - 1], token[t - 2])`` 组合在训练中都出现过，所以这里测的是查找表学得
# 多好，而不是对没见过的组合的泛化能力。

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
# .. _ex05-weights-of-each-head-on-one-sequence:
#
# 每个头在一个序列上的注意力权重
# ------------------------------
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
# .. _ex05-what-each-head-attends-to-measured:
#
# 测量每个头关注什么
# ------------------
# 单个序列可能有误导性，所以我们对整个探测批次（256 个序列）取平均。对每个头、每个偏移量
# （键位置减查询位置：``-1`` 表示前一个词元），计算平均权重，只统计有目标的查询位置。平均权重
# 最大的偏移量就是这个头学到的关系；如果这个头在该偏移上至少放了一半的权重，就称它是 *聚焦的*。
# 一行权重的熵表示它有多分散：0 奈特表示全部权重落在一个键上；虚线表示在所有可见的键上平均
# 分配权重的头。
#
# 该看什么：任务需要的每种关系（偏移 ``-1`` 和 ``-2``）是否都有一个聚焦的头？四个头、两种关系，
# 某个偏移上可能不止一个头。人们很容易把这样的头看作多余的“备份”。但注意力权重回答不了这个问题：
# 它只说明一个头看向哪里，不说明它传递了什么。下一节改为直接测量。下面的摘要是从注意力权重中
# 计算出来的，而不是事先假定的。

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
    print(head.describe("zh_CN"))
print("各头的熵（奈特）：", [round(float(e), 3) for e in result.entropy])
print(f"均匀分布的头的熵（奈特）：{result.max_entropy:.3f}")
print("任务需要的关系：    ", list(result.config["offsets"]))
print("各头中找到的关系：  ", result.relations_found())
print("没有头覆盖的关系：  ", result.relations_missing())

# %%
# .. _ex05-what-each-head-does-remove-and-measure:
#
# 每个头做了什么：去掉它，再测量
# ------------------------------
# 怎样设计实验来衡量一个注意力头的重要性？（这是 d2l.ai 多头注意力一节的习题之一。）答案是对这个
# 头进行干预，再测量模型；仍然使用前面那组固定的评估序列，不重新训练：
#
# * **置零消融** （头掩码，Michel 等 2019，arXiv:1905.10650）：把这个头在上下文中的那一段，
#   也就是它在输出投影 ``out_proj`` 之前的输出，乘以门控 :math:`\xi_h = 0`。这等价于删去
#   ``out_proj.weight`` 中属于这个头的那几列（按论文的记号
#   :math:`\mathrm{Concat}(\mathrm{head}_1, \ldots, \mathrm{head}_h) W^O`，是 :math:`W^O`
#   中属于它的那几行）；
# * **均值消融** ：把这一段替换为它在评估序列上的平均值。读出层收到的输入大小照常，只是不再依赖
#   具体的序列；
# * **梯度重要性** （Michel 等 2019，式 2）：损失对门控的导数，
#   :math:`I_h = \mathbb{E}_x |\partial \mathcal{L}(x) / \partial \xi_h|` （在 :math:`\xi = 1` 处），
#   只需一次反向传播。它是一阶的 *排序代理指标* ，而不是去掉这个头的代价：
#   像这里这样损失已接近零时，导数远小于去掉这个头实际造成的损失增量，重要性相近的头也可能被排错
#   顺序。表格在它旁边列出实测的损失增量；
# * 与它们并列的 **置信度** （Voita 等 2019，arXiv:1905.09418）：每个查询上该头最大的注意力权重，
#   对所有查询取平均。它和上面的摘要一样是从注意力权重中读出来的，所以只说明一个头看向哪里、
#   看得多确定，不说明它贡献了什么。
#
# 该看什么：是否有某个头，去掉它几乎没有损失，正如“多余”一说所预言的那样？把每个头消融后的准确率
# 与完整模型的准确率相比较。
#
# :func:`~mha_ref.tutorial.ablation.ablation_report` 用前向传播的一个带门控的副本
# （:func:`~mha_ref.tutorial.ablation.gated_forward`）计算这一切。这个副本用本包自己的
# ``split_heads``、``scaled_dot_product_attention`` 和 ``merge_heads`` 写成；所有门控取 1 时，
# 它的输出与模型本身的输出完全相同。

from mha_ref.tutorial.ablation import ablation_report, chance_accuracy, plot_pruning_curve
from mha_ref.tutorial.plotting import text_table

report = ablation_report(result)
ablation_rows = [
    (
        head.head,
        f"{head.offset:+d}",
        f"{report.confidence[head.head]:.3f}",
        f"{report.zero_ablation[head.head]:.3f}",
        f"{report.mean_ablation[head.head]:.3f}",
        f"{report.loss_increase[head.head]:.3f}",
        f"{report.importance[head.head]:.4f}",
    )
    for head in result.heads
]
print(f"完整模型的准确率：{report.accuracy:.3f}，损失：{report.loss:.4f}")
print(
    text_table(
        [
            "头",
            "偏移",
            "置信度",
            "置零消融后准确率",
            "均值消融后准确率",
            "损失增量",
            "梯度重要性",
        ],
        ablation_rows,
    )
)

# %%
# .. _ex05-two-heads-on-the-same-offset:
#
# 偏移相同的两个头
# ----------------
# 如果两个头看向同一个键，同时去掉两者，是否比只去掉一个损失更大？下面列出偏移相同的每一对头，
# 把它们一起去掉（置零消融）。

for offset in result.relations_found():
    same = [h.head for h in result.heads if h.focused and h.offset == offset]
    for i, first in enumerate(same):
        for second in same[i + 1 :]:
            alone = [report.zero_ablation[first], report.zero_ablation[second]]
            print(
                f"偏移 {offset:+d}：去掉头 {first}：{alone[0]:.3f}，"
                f"去掉头 {second}：{alone[1]:.3f}，"
                f"两个都去掉：{report.pairs[(first, second)]:.3f}"
            )

# %%
# .. _ex05-pruning-least-important-first:
#
# 剪枝：从最不重要的头开始
# ------------------------
# Michel 等人和 Voita 等人按重要性依次剪掉注意力头，观察质量如何下降。这里按梯度重要性做同样的事：
# 先去掉最不重要的头，再去掉下一个，直到一个不剩。没有头时，读出层得不到任何关于词元的信息，
# 最多只能总是预测最常见的目标（虚线）。在大型翻译模型中，这两篇论文发现许多头去掉后损失很小。
# 这里该看什么：曲线有没有平坦的地方？

chance = chance_accuracy(result.eval_batch()[1])
print("按重要性从低到高排列的头：", report.order)
print("去掉 0、1、2……个头后的准确率：", [f"{a:.3f}" for a in report.pruning])
print(f"总是预测最常见目标的准确率：{chance:.3f}")
fig = plot_pruning_curve(
    report,
    chance=chance,
    title="逐个剪掉注意力头后的准确率（按梯度重要性排序）",
    xlabel="去掉的头数（从最不重要的开始）",
    ylabel="评估集上的准确率",
    head_label="头 {}",
    chance_label="总是预测最常见的目标",
)
plt.show()

# %%
# .. _ex05-a-larger-model-heads-that-can-go:
#
# 更大的模型：有些头可以去掉
# --------------------------
# “没有哪个头可以去掉”是 *这个* 模型的性质，而不是注意力头的普遍性质。下面用同一个任务、同样的
# 训练和同一个随机种子，换一个既更宽、头又更多的模型：``embed_dim=64``、``num_heads=8``
# （``head_dim=8``）。该看什么：这个模型的剪枝曲线在去掉前几个头时，是否仍贴近完整模型的准确率
# （正如 Michel 等人在翻译模型中的发现），而小模型去掉第一个头就下跌？这一步同时改变了两个因素
# （宽度和头数），下一节把它们分开。

wide = train(num_heads=8, embed_dim=64, seed=0)
wide_report = ablation_report(wide)
wide_chance = chance_accuracy(wide.eval_batch()[1])
print(f"宽模型（embed_dim=64，8 个头）：准确率 {wide_report.accuracy:.3f}")
print(
    "宽模型，置零消融每个头后的准确率：",
    [f"{a:.3f}" for a in wide_report.zero_ablation],
)
print("宽模型，按重要性从低到高排列的头：", wide_report.order)
print("窄模型，剪枝曲线：", [f"{a:.3f}" for a in report.pruning])
print("宽模型，剪枝曲线：", [f"{a:.3f}" for a in wide_report.pruning])
fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
curves = {
    "embed_dim=16，4 个头": report.pruning,
    "embed_dim=64，8 个头": wide_report.pruning,
}
for name, curve in curves.items():
    ax.plot(range(len(curve)), curve, marker="o", label=name)
ax.axhline(wide_chance, color="grey", linestyle="--", label="总是预测最常见的目标")
ax.set_title("小模型与大模型的剪枝曲线")
ax.set_xlabel("去掉的头数（从最不重要的开始）")
ax.set_ylabel("评估集上的准确率")
ax.set_ylim(0, 1.05)
ax.legend()
plt.show()

# %%
# .. _ex05-width-or-head-count:
#
# 是宽度还是头数？一次只改一个因素
# --------------------------------
# 上一步同时改变了 ``embed_dim`` 和 ``num_heads``，所以说不清是哪一个让头变得可以去掉。
# :func:`mha_ref.tutorial.ablation.width_heads_grid` 训练 ``embed_dim`` 为 16 或 64、头数为 4 或 8
# 的四个格子，每个用三个种子，训练方式都与上面相同（200 步，同样的学习率）：同一行里只有头数不同，
# 同一列里只有 ``embed_dim`` 不同。对每次训练，统计单独去掉（置零消融）后准确率下降不到完整模型
# 0.01 的头有几个（:func:`~mha_ref.tutorial.ablation.removable_heads`）。

from mha_ref.tutorial.ablation import width_heads_grid

cells = ((16, 4), (16, 8), (64, 4), (64, 8))
grid = width_heads_grid(cells, seeds=(0, 1, 2), tolerance=0.01)
grid_rows = []
for embed, heads in cells:
    runs = [r for r in grid if (r["embed_dim"], r["num_heads"]) == (embed, heads)]
    grid_rows.append(
        (
            embed,
            heads,
            embed // heads,
            "  ".join(f"{r['accuracy']:.3f}" for r in runs),
            "  ".join(str(len(r["removable"])) for r in runs),
        )
    )
print(
    text_table(
        ["embed_dim", "头数", "head_dim", "各种子的准确率", "各种子可以去掉的头数"],
        grid_rows,
    )
)

# %%
# 一次只看一个因素（个数以表格为准）。**只改宽度**：4 个头，``embed_dim`` 从 16 到 64。窄模型在每个
# 种子上都没有哪个头可以去掉；宽模型每个头的宽度是它的四倍，也最多只有一个头可以去掉。**在**
# ``embed_dim`` **为 64 时只改头数**：从 4 个头到 8 个头，8 头模型在每个种子上可以去掉的头都更多，
# 尽管它每个头只有一半宽。**在** ``embed_dim`` **为 16 时只改头数**：8 个宽度为 2 的头同样没有哪个
# 可以去掉，而且连其他格子达到的准确率都达不到（见表中的准确率）。所以这两个因素相互作用：在这个
# 任务里，只有头数多于两个关系所需、*并且* 每个头至少 8 宽时（``(64, 8)`` 这个格子），头才变得可以
# 去掉。这只是三个种子、一个任务；在别处是否成立，本页没有测量。

# %%
# .. _ex05-where-a-head-looks-is-not-what-it-does:
#
# 看向哪里不等于做了什么
# ----------------------
# 热力图和偏移分布描述的是每个头的 **QK 回路** ：它的查询选中了哪个键。偏移相同的两个头选中的是
# 同一个词元。选中之后传递什么，由它的 **OV 回路** 决定：值投影读取这个词元的某些特征，
# ``out_proj.weight`` 中属于它的那几列再把这些特征写进输出。偏移相同的头可以传递同一个词元的不同特征；
# 去掉其中每一个的代价，上面的表格已经测出。只有干预才能测量一个头的贡献；单看注意力权重永远不行，
# 置信度那一列也不行，因为它同样是从注意力权重中算出来的。
#
# 所以 d2l 那道习题的答案是：**通过干预来衡量重要性**。对一个头做掩码（置零消融或均值消融），
# 在留出的数据上测量准确率的下降；用损失对各头门控的梯度，一次给所有头排序（这是一阶代理指标，损失接近零时会低估这种下降）；按重要性依次
# 剪枝，看曲线在哪里下跌。检查答案是否依赖模型的宽度和头数，并且一次只改一个。并且报告测得的数字，而不是对热力图的解读。
# :ref:`下一个示例 <sphx_glr_auto_examples_plot_06_how_many_heads.py>` 研究头数如何影响这个任务
# 学得多快、学得多好。

# %%
# .. _ex05-exercises:
#
# 练习
# ----
# **练习 1.** 上文“成对去掉头”的结果给出了去掉看向偏移 ``-1`` 的两个头之后的准确率；看向偏移
# ``-2`` 的头仍在工作（门控只把一个头的输出置零，不改变其他头看向哪里）。如果读出层只知道往前数
# 第二个词元，它 *最多* 能达到多高的准确率？说说该怎样算出这个上限，再判断消融后的模型是接近它，
# 还是明显低于它。反过来，去掉看向偏移 ``-2`` 的头，再回答一遍。这说明置零消融测的到底是什么？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    只知道一个词元时，对它的每个取值，最好的猜法是和它一起出现次数最多的那个目标；在评估集上数一
#    数，就能准确得到这个上限。消融后的模型低于上限（低多少取决于模型：换一个种子重新训练，比较一
#    下）：它的读出层是为组合两个词元而训练的，去掉头之后也没有重新训练。置零消融测的是
#    *这个训练好的模型* 损失了多少，而不是剩下的头还能携带多少信息。

eval_tokens, eval_targets = result.eval_batch()  # (N, seq_len), (N, seq_len)
vocab_size, seq_len = result.config["vocab_size"], eval_tokens.shape[1]
first = -min(result.config["offsets"])  # 第一个有目标的位置


def best_accuracy_knowing(offset):
    """只凭偏移 ``offset`` 处的词元猜每个目标，最好能达到的准确率。"""
    known = eval_tokens[:, first + offset : seq_len + offset].flatten()  # (n,)
    target = eval_targets[:, first:].flatten()  # (n,)
    counts = torch.zeros(vocab_size, vocab_size)  # 行：已知的词元，列：目标
    counts.index_put_((known, target), torch.ones(len(known)), accumulate=True)
    return (counts.amax(dim=1).sum() / counts.sum()).item()


for offset in result.relations_found():
    removed = tuple(h.head for h in result.heads if h.focused and h.offset == offset)
    (kept,) = [o for o in result.config["offsets"] if o != offset]
    print(
        f"去掉头 {removed}（偏移 {offset:+d}）：准确率 {report.pairs[removed]:.3f}；"
        f"只凭偏移 {kept:+d} 处的词元，最好能达到 {best_accuracy_knowing(kept):.3f}"
    )
print(f"总是猜最常见的目标：{chance:.3f}")

# %%
# **练习 2.** 梯度重要性是损失对某个头的门控的斜率（取绝对值后平均），在 :math:`\xi_h = 1` 处
# 求得。取去掉后损失增加最多的那个头。假如门控从 1 降到 0 的过程中，损失沿着以这个斜率上升的
# 直线变化，去掉这个头的代价会是多少？预测一下：真实的损失会留在这条直线下方，还是升到它上方？
# 一路上哪一段升得最快？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    用 :func:`~mha_ref.tutorial.ablation.gated_forward` 把门控一级一级调低，逐级测量。在
#    :math:`\xi_h = 1` 附近，训练好的模型以很大的余量答对，轻轻推一下，损失几乎不变：那里的斜率
#    很小。门控越小，余量越少，代价越积越多，每一级都比上一级涨得多，所以损失最终远远高于那条
#    直线。这就是表格把损失增量和重要性并列的原因：梯度只在一阶意义上给头排序，并不衡量去掉一个头
#    的代价。

from mha_ref.tutorial.ablation import gated_forward
from mha_ref.tutorial.tasks import IGNORE_INDEX

head = max(range(len(result.heads)), key=lambda h: report.loss_increase[h])
slope = report.importance[head]
narrow_model = result.model()
has_target = eval_targets != IGNORE_INDEX  # (N, seq_len)
print(f"头 {head}：梯度重要性 {slope:.4f}，完整模型的损失 {report.loss:.4f}")
for gate_value in [1.0, 0.75, 0.5, 0.25, 0.0]:
    gate = torch.ones(len(result.heads))  # (num_heads,)
    gate[head] = gate_value
    with torch.no_grad():
        logits, _ = gated_forward(narrow_model, eval_tokens, gate)  # (N, seq_len, vocab_size)
    loss = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), eval_targets, ignore_index=IGNORE_INDEX
    )
    accuracy = (logits.argmax(dim=-1) == eval_targets)[has_target].double().mean()
    line = report.loss + slope * (1 - gate_value)
    print(
        f"门控 {gate_value:.2f}：直线 {line:.4f}，实测损失 {loss.item():.4f}，"
        f"准确率 {accuracy.item():.3f}"
    )

# %%
# **练习 3.** Voita 等人的置信度只需一次前向传播，不做任何干预。按置信度给宽模型的头剪枝，最不
# 确定的先去掉，而不是按梯度重要性。预测一下：这条曲线比上面打印的按重要性剪枝的曲线跌得更早、
# 更晚，还是差不多？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    在这个模型里，这个便宜的代理指标做得差不多一样好：两种顺序的前一半是同一批头，两条曲线一直靠得
#    很近，直到只剩下少数几个头（换一个种子，两种顺序可能差得更多，不妨试试）。这种一致本身也是测量
#    的结果：只有真的做了剪枝才知道。置信度说明一个头看得多集中，不说明它写出了什么；宽模型的每个头
#    都看得很集中，而消融发现其中有些头可以去掉。代理指标在别的模型里排得准不准，仍然要靠干预来回
#    答。

from mha_ref.tutorial.ablation import pruning_curve

wide_tokens, wide_targets = wide.eval_batch()  # (N, seq_len), (N, seq_len)
by_confidence = sorted(range(len(wide.heads)), key=lambda h: (wide_report.confidence[h], h))
confidence_curve = pruning_curve(wide.model(), wide_tokens, wide_targets, by_confidence)
print("宽模型，各头的置信度：", [f"{c:.3f}" for c in wide_report.confidence])
print("按置信度从低到高排列的头：", by_confidence)
print("按重要性从低到高排列的头：", wide_report.order)
print("剪枝曲线，按置信度顺序：", [f"{a:.3f}" for a in confidence_curve])
print("剪枝曲线，按重要性顺序：", [f"{a:.3f}" for a in wide_report.pruning])

# %%
# .. _ex05-summary:
#
# 小结
# ----
# * 一个头看向哪里（它的偏移分布）可以从权重上读出；它贡献了什么，只能靠干预来测量：置零或均值
#   消融、门控梯度重要性、剪枝。
# * 在小模型（``embed_dim`` 16，4 个头）里，三个种子上都没有哪个头可以去掉。
# * 一次只改一个因素：只加宽模型（4 个头），最多一个头可以去掉；``embed_dim`` 为 64 时用 8 个头代替
#   4 个，每个种子上可以去掉的头都更多，``embed_dim`` 为 16 时一个也没有（而且没有完全学会任务）。
#   在这里，让头变得可以去掉的是足够宽的多余的头；单靠其中任何一个因素都不行。
# * 廉价的代理指标（置信度、梯度重要性）可以给头排序；它排得好不好，只有运行了剪枝才知道。
