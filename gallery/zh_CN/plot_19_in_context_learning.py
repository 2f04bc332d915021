"""
示例 19：真实模型中的上下文学习
===============================

如果一个语言模型对某个词元的预测随着前文变长而变好，就说它在 *上下文中学习*。Olsson 等人（2022，
“In-context Learning and Induction Heads”，`arXiv:2209.11895 <https://arxiv.org/abs/2209.11895>`_）用
*上下文学习分数* 来衡量它：上下文靠后处的损失减去靠前处的损失（他们用位置 500 上的词元对比位置 50 上的；
分数为负，说明模型在上下文中学到了东西），并论证归纳头承担了其中很大一部分。他们的直接证据，即在测试时
敲掉归纳头、看分数怎样变化，来自只有注意力层的小模型；对带 MLP 的较大模型，他们的证据是相关性的（主要是
上下文学习在训练中变好的时刻，正是归纳头形成的时刻）。本页在 SmolLM2-135M-Instruct（4 位量化文件；这里
的每个数都是这次构建在四段文本的窗口上测出来的）里测量这个分数，在它上面做消融检验，并如实报告结果，包括
三次对照抽取无法判定的地方。
"""

# %%
# .. _ex19-loss-against-the-position:
#
# 长文本中损失随位置的变化
# ------------------------
# 随软件包提供的 Python 语言参考中的四个长节（执行模型、import 语句、try 语句、赋值语句），切成 512 个
# 词元的窗口，每隔 384 个词元开始一个新窗口（``icl_windows``），所以相邻两个窗口共有 128 个词元。模型
# 单独读每个窗口，从它的第一个词元读起。对窗口中的每个位置，给出预测下一个词元的损失，对各个窗口和若干
# 位置区间取平均。（自己运行本页需要真实模型：下面打印三条安装命令。）

from collections import Counter

import matplotlib.pyplot as plt

from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.smollm2 import install_steps, load_smollm2
from mha_ref.tutorial.real_models.smollm2_heads import (
    EARLY,
    ICL_STRIDE,
    ICL_TEXTS,
    LATE,
    icl_analysis,
    icl_scores,
    mean_and_standard_error,
)

print("安装（按这个顺序）：", *install_steps(), sep="\n  ")
print("模型：SmolLM2-135M-Instruct，4 位（Q4_1）文件，反量化为 float32")
# threshold：归纳分数高于此值的头被消融。设置了 MHA_REF_CACHE_DIR 时，结果存入它指定的文件夹，
# 再次运行时直接读取。
result = icl_analysis(threshold=0.3)
clean = result["clean"]  # (windows, 511)，单位奈特；第 t 项是第 t + 1 个词元的损失
per_text = Counter(name for name, _ in result["windows"])
print(f"窗口：{clean.shape[0]} 个，每个 {clean.shape[1] + 1} 个词元，每隔 {ICL_STRIDE} 个词元一个；"
      + "，".join(f"{name}：{per_text[name]}" for name in ICL_TEXTS))
bins = [(0, 5), (5, 10), (10, 20), (20, 40), (40, 60), (60, 100), (100, 200), (200, 300),
        (300, 400), (400, 511)]


def binned(losses):
    """每个位置区间上的平均损失（对各个窗口取平均）：每个区间一个浮点数。"""
    return [float(losses[:, a:b].mean()) for a, b in bins]


centres = [(a + b) / 2 for a, b in bins]


def label_bins(fig):
    """用各区间的位置范围标注横轴，斜着写，免得标签互相重叠。"""
    ax = fig.axes[0]
    ax.set_xticks(centres, labels=[f"{a}-{b - 1}" for a, b in bins], rotation=60, ha="right",
                  rotation_mode="anchor")


fig = plot_lines(
    centres,
    {"不消融": binned(clean)},
    xlabel="在窗口中的位置（词元）",
    ylabel="损失（每个词元的奈特数）",
    title="损失随上下文位置的变化",
    logx=True,
)
label_bins(fig)
plt.show()
rows = [[f"{a}-{b - 1}", f"{loss:.2f}"] for (a, b), loss in zip(bins, binned(clean), strict=True)]
print(text_table(["位置", "平均损失"], rows))

# %%
# 在每个窗口最初的一百个词元里，随着主题和风格变得明确，损失急剧下降（从位置 0-4 的 5.92 降到
# 60-99 的 2.51）。此后它不再一直下降：后面几段的均值在 2.41 和 2.65 之间时升时降，最后一段最低。
# 对各窗口取平均，靠后的位置比位置 50 附近预测得更好。
#
# .. _ex19-the-in-context-learning-score:
#
# 上下文学习分数与归纳头
# ----------------------
# 每个窗口的分数是它在位置 ``LATE`` 上的平均损失减去在 ``EARLY`` 上的平均损失（``icl_scores``；取一段
# 位置窗口以平均掉单个词元的噪声：靠前的窗口以 Olsson 等人的位置 50 为中心，靠后的窗口在他们的位置 500
# 之后结束）。分数为负表示越往后预测得越好（模型在上下文中学到了东西），越负学到的越多。表中给出各窗口的
# 平均分数及其标准误（``mean_and_standard_error``：各窗口间的标准差除以窗口数的平方根）。然后消融归纳头
# 再算一次：示例 16 中归纳分数高于 0.3 的所有头，一起做均值消融（示例 17 的方式）；作为对照，从同样的块中
# 随机抽三组同样数量的其他头，用同样方式消融。最后一列是 *配对* 的变化：每个窗口消融后的分数减去它自己
# 不消融时的分数，再求这些差值的平均和标准误。配对去掉了“这个窗口本来就比那个容易”的差别，而各窗口分数
# 的离散大多来自这种差别。

config = load_smollm2().config  # 示例 16 打分的模型（只加载一次）
num_blocks, num_heads = config.num_layers, config.num_heads
print(f"模型：{num_blocks} 个块，每块先是注意力（{num_heads} 个查询头），再是 MLP")
print(f"靠前位置 {EARLY[0]}-{EARLY[1] - 1}，靠后位置 {LATE[0]}-{LATE[1] - 1}")
print(f"消融的归纳头（{len(result['induction_heads'])} 个）：{result['induction_heads']}")
runs = {"不消融": clean, "消融归纳头": result["ablated"]}
for i, losses in enumerate(result["control_losses"]):
    runs[f"对照 {i + 1}"] = losses
clean_scores = icl_scores(clean)  # (windows,)，奈特
changes = {}
rows = []
for name, losses in runs.items():
    scores = icl_scores(losses)  # (windows,)，奈特
    early = float(losses[:, EARLY[0] : EARLY[1]].mean())
    late = float(losses[:, LATE[0] : LATE[1]].mean())
    mean, se = mean_and_standard_error(scores)
    row = [name, f"{early:.3f}", f"{late:.3f}", f"{mean:+.3f} ± {se:.3f}",
           f"{int((scores < 0).sum())} / {scores.numel()}"]
    if name == "不消融":
        row.append("")
    else:
        changes[name] = mean_and_standard_error(scores - clean_scores)  # 逐窗口配对
        row.append(f"{changes[name][0]:+.3f} ± {changes[name][1]:.3f}")
    rows.append(row)
print(text_table(["运行", "靠前损失", "靠后损失", "上下文学习分数 ± 标准误", "分数 < 0 的窗口",
                  "分数的变化 ± 标准误（配对）"], rows))
change, change_se = changes["消融归纳头"]
control_changes = [changes[name][0] for name in changes if name != "消融归纳头"]
print(f"消融归纳头带来的变化，以标准误计：{change / change_se:+.1f}；"
      f"各组对照的变化从 {min(control_changes):+.3f} 到 "
      f"{max(control_changes):+.3f}")

increase = {name: binned(losses - clean) for name, losses in runs.items() if name != "不消融"}
fig = plot_lines(
    centres,
    increase,
    xlabel="在窗口中的位置（词元）",
    ylabel="相对不消融的损失增加（奈特）",
    title="各种消融在各位置上的代价",
    logx=True,
)
label_bins(fig)
plt.show()
rows = [[f"{a}-{b - 1}", *[f"{cost[i]:+.3f}" for cost in increase.values()]]
        for i, (a, b) in enumerate(bins)]
rows.append(["全部", *[f"{float((runs[name] - clean).mean()):+.3f}" for name in increase]])
print("相对不消融的损失增加（奈特），按位置：")
print(text_table(["位置", *increase], rows))

# %%
# 这次构建测到的是：不消融时，平均分数为负，绝对值超过它的标准误的两倍，而且在大多数窗口里为负（分数
# 表）：在这些窗口上，模型在上下文中学习，靠后的词元比位置 50 附近的词元预测得更好。就这两个位置窗口而言，
# 对归纳头做均值消融，靠前和靠后的损失抬高得差不多（损失增加表中 40-59 和 400-510 两行），所以分数几乎
# 不动：它的配对变化小于自己的标准误（分数表下面那一行），并且落在三组对照的变化之间，而对照消融的是
# 同样块中同样数量的其他头。
#
# “靠前和靠后抬高得差不多”只对这两个位置窗口成立。上图和损失增加表显示，消融归纳头在位置 0-4 和 5-9
# 上反而降低了损失，在 100-199 上抬高得最多；对照 2 在 0-4 到 10-19 上也降低了损失。所以分数的变化取决于
# 比较的是哪两个位置窗口。下面给出同样的配对变化，靠后的位置窗口固定为 400-510，只移动靠前的位置窗口，
# 使相邻两行之间只有一个因素不同：第一行是本页的 40-59，其余几行的靠前位置窗口更接近窗口开头：


def scores_between(losses, early, late):
    """每个窗口在位置 late 上的平均损失减去在位置 early 上的平均损失，两者都是 (start, stop) 范围：
    即任意两段位置上的 icl_scores（icl_scores 用的是 EARLY 和 LATE）。"""
    late_loss = losses[:, late[0] : late[1]].mean(dim=1)  # (windows,)
    early_loss = losses[:, early[0] : early[1]].mean(dim=1)  # (windows,)
    return late_loss - early_loss  # (windows,)


def with_se(values):
    """每个窗口一个值时的“平均 ± 标准误”。"""
    mean, se = mean_and_standard_error(values)
    return f"{mean:+.3f} ± {se:.3f}"


early_ranges = [EARLY, (20, 40), (10, 20), (5, 10)]  # 每一行的靠后位置窗口都是 LATE
controls = [name for name in runs if name.startswith("对照")]
rows, differences = [], []
for early in early_ranges:
    label = f"{early[0]}-{early[1] - 1}"
    clean_pair = scores_between(clean, early, LATE)  # (windows,)
    pair_change = {name: scores_between(runs[name], early, LATE) - clean_pair
                   for name in runs if name != "不消融"}  # 每个 (windows,)，逐窗口配对
    rows.append([label, with_se(clean_pair), *[with_se(c) for c in pair_change.values()]])
    induction = pair_change["消融归纳头"]  # (windows,)
    differences.append([label, *[with_se(induction - pair_change[name]) for name in controls]])
print(f"分数的变化 ± 标准误（配对），按所比较的靠前位置窗口"
      f"（每一行的靠后位置窗口都是 {LATE[0]}-{LATE[1] - 1}）：")
print(text_table(["靠前位置窗口", "分数，不消融", "消融归纳头", *controls],
                 rows))
print("消融归纳头的变化减去各组对照的变化，逐窗口配对，± 标准误：")
print(text_table(["靠前位置窗口", *[f"归纳头 - {name}" for name in controls]], differences))

# %%
# 用本页的位置窗口时（第一行，与分数表中的数相同），消融归纳头带来的变化在它的标准误之内。靠前的位置
# 窗口越靠前，消融把分数推向 0 就越多：在最后两行超过它的标准误的两倍，因为在那里消融在靠前处代价很小
# （10-19），甚至降低了损失（5-9），而在靠后处代价很大。所以变化的大小取决于靠前的位置窗口。对照 2 一直
# 跟得上：在前三行，它让分数变化得和消融归纳头一样多或更多，在最后一行略少；每个窗口消融归纳头的变化
# 减去它消融对照 2 的变化，在每一行都在 0 的大约一个标准误之内（差值表）。与对照 1 和对照 3 相比，这个差
# 在每一行都为正，并随靠前的位置窗口移向窗口开头而变大，到最后一行达到大约两个标准误或更多。只有在这
# 一行，消融归纳头的变化是四组中最大的。
#
# 三次对照抽取能说明多少？如果归纳分数高的头与同块的其他头没有区别，消融归纳头就只是各次对照抽取之外的
# 又一次抽取，它的变化单凭偶然成为最大的机会与其他任何一组相同。于是，按各组之间的排名所能给出的最小
# p 值是：

sets = len(controls) + 1  # 归纳头那一组，加上各次对照抽取
print(f"在 {sets} 组之间排名所能给出的最小 p 值：1/{sets} = {1 / sets:.2f}")

# %%
# 所以三次抽取对哪一方都是很弱的证据：它们不能说明归纳头比同块的其他头更重要（即使在消融归纳头排第一的
# 最后一行也不能），而一次效果差不多的抽取也不能说明它们并不更重要。消融论证（消融归纳头后，负的分数
# 趋近 0，即上下文学习变弱）是 Olsson 等人在只有注意力层的小模型上做的；在这里拿一个 30 块、带 MLP 的
# 模型来检验，这个论证因此没有得到证实：只有三次对照抽取时，按均值消融归纳分数高于 0.3 的头，与消融同块
# 同样数量的其他头区分不开（有一次抽取，即对照 2，在每一行让分数变化得都差不多）。这些运行能说明的仅此
# 而已。它们并不说明归纳头不参与上下文学习：别的头可能做着同样的事；而且测量的只是一个阈值、一种消融
# （在一段短文本上的均值）、一个小模型，以及出自同一份文档的窗口。
#
# 分数因文本而异；下面是每段文本的各个窗口，不消融和消融归纳头时的情况：

rows = []
for text in ICL_TEXTS:
    rows_of_text = [i for i, (name, _) in enumerate(result["windows"]) if name == text]
    text_clean = clean_scores[rows_of_text]  # (该文本的窗口数,)
    text_ablated = icl_scores(result["ablated"][rows_of_text])  # (该文本的窗口数,)
    rows.append([text, len(rows_of_text), f"{float(text_clean.mean()):+.3f}",
                 f"{float(text_clean.min()):+.3f} 到 {float(text_clean.max()):+.3f}",
                 f"{float((text_ablated - text_clean).mean()):+.3f}"])
print(text_table(["文本", "窗口数", "上下文学习分数，平均", "上下文学习分数，范围",
                  "消融归纳头带来的变化，平均"], rows))

# %%
# 各段文本并不相同：有一段文本的窗口平均分数高于零；在大多数文本里，单个窗口的分数从明显为负到为正都
# 有。有两点让上面的标准误只可能偏小：相邻窗口共有 128 个词元，而且所有窗口都出自同一份文档的四个节。
# 配对变化在零的一个标准误之内（本页的位置窗口），或在对照 2 的变化的大约一个标准误之内（每个靠前的
# 位置窗口），就在噪声之内：归纳头对分数的影响是否超出同块的其他头，既没有得到证实，也没有被排除。
#
# 为什么相变在示例 10 的合成任务上展示，而不是在真实文本上：Olsson 等人看到归纳头在预训练中形成，
# 所需的词元远多于一台普通电脑能训练的量；示例 10 的合成任务很小，在 CPU 上训练一会儿就能形成归纳头。
#
# .. _ex19-exercises:
#
# 练习
# ----
# **练习 1.** Olsson 等人比较位置 500 和位置 50 上的词元。如果这里把靠前的位置窗口换成位置 0-9，分数
# 会是多少？
#
# .. dropdown:: 答案
#    :class-container: mha-answer
#
#    会是很大的负数：最前面的词元是所有位置中预测得最差的。这样的分数主要衡量模型多快弄清自己在读哪一类
#    文本：

late = float(clean[:, LATE[0] : LATE[1]].mean())
print(f"靠后 - 位置 0-9：{late - float(clean[:, 0:10].mean()):+.3f} 奈特")

# %%
# **练习 2.** 对照取的是“同样块中同样数量的头”。为什么不取模型中任意位置的同样数量的头？
#
# .. dropdown:: 答案
#    :class-container: mha-answer
#
#    不同块的头对模型有多重要，差别可能来自与归纳无关的原因。让块保持一致，就只改变一个因素：消融的是
#    这些块中的哪些头。三次对照抽取的平均损失，与不消融和消融归纳头时的并列：

rows = [[name, f"{float(losses.mean()):.3f}", f"{float((losses - clean).mean()):+.3f}"]
        for name, losses in runs.items()]
print(text_table(["运行", "平均损失（奈特）", "相对不消融的增加"], rows))

# %%
# .. _ex19-summary:
#
# 小结
# ----
# - 在 SmolLM2-135M-Instruct（4 位文件）里，在四段真实文本的 512 个词元的窗口上，损失在最初一百个
#   词元里急剧下降，此后的起伏不超过四分之一奈特，最后一段最低；上下文学习分数（靠后的位置对比位置
#   50 附近）平均为负，绝对值超过它的标准误的两倍：模型在上下文中学习，只是各窗口、各文本之间差别很大。
# - 对归纳分数高于 0.3 的头做均值消融，把分数推向 0 多少，取决于比较的位置窗口：靠后的位置窗口取
#   400-510 时，靠前的取 40-59 小于它的标准误，取 10-19 或 5-9 超过它的两倍。对每个靠前的位置窗口，
#   三组同块、同数量的对照中都有一组（对照 2）的效果差不多：Olsson 等人在只有注意力层的小模型上做的
#   消融论证，在这个 30 块、带 MLP 的模型上、就这种消融而言，没有得到证实。三次对照抽取对哪一方都是
#   很弱的证据（按四组之间的排名所能给出的最小 p 值是 1/4）；归纳头的影响并没有被排除。
# - 归纳头形成时的相变在示例 10 的合成任务上展示。
