"""
示例 17：用干预看头做了什么
==============================

示例 16 在 SmolLM2-135M-Instruct（4 位量化文件；这里的每个数都是这次构建测出来的）里找到了一些注意力
*看起来像* 归纳的头。模式不等于功能：本页对头做消融，测量模型损失了什么。消融（*ablation*）一个头的意思是：
在它所在块的输出投影里，把它的输出换成零，或者换成它在一段真实文本上的平均值
（``mha_ref.tutorial.real_models.heads.ablate_heads``，一个用 ``with`` 语句临时挂上、退出时自动移除的钩子），和 Michel 等人
（2019，“Are Sixteen Heads Really Better than One?”，`arXiv:1905.10650
<https://arxiv.org/abs/1905.10650>`_）屏蔽头的做法一样。归纳头需要更早一个块里的前一词元头，这个论证来自
Elhage 等人（2021，“A Mathematical Framework for Transformer Circuits”）和 Olsson 等人（2022，
`arXiv:2209.11895 <https://arxiv.org/abs/2209.11895>`_）。路径修补（path patching）用来找出一个头通过
哪个输入读取另一个头，来自 Wang 等人（2022，“Interpretability in the Wild”，`arXiv:2211.00593
<https://arxiv.org/abs/2211.00593>`_）。
"""

# %%
# .. _ex17-the-top-induction-heads:
#
# 最强的几个归纳头：逐个消融与一起消融
# ------------------------------------
# 输入和示例 16 相同：两条由 50 个随机词元组成、各重复两遍的序列，以及那三段真实文本。对每种消融，
# 给出第二遍上的损失（复制能降低的那部分）和真实文本上的损失。均值消融用的平均值是在真实文本上求的，
# 这里却也用在随机词元上，而这类输入和求平均的那些输入并不相像：在重复序列上，它放进去的是普通文本上的
# 典型输出，而不是随机词元上的典型输出。（自己运行本页需要真实模型：下面打印三条安装命令。）

import matplotlib.pyplot as plt
import torch

from mha_ref.tutorial.fonts import use_cjk_font_for
from mha_ref.tutorial.plotting import text_table
from mha_ref.tutorial.real_models.heads import pearson, top_heads, top_k_overlap
from mha_ref.tutorial.real_models.path_patching import PATHS, path_patching_analysis
from mha_ref.tutorial.real_models.smollm2 import install_steps, load_smollm2
from mha_ref.tutorial.real_models.smollm2_heads import (
    OTHER_SEEDS,
    SWEEP_LAYERS,
    interventions_analysis,
)
from mha_ref.tutorial.real_models.texts import real_text

print("安装（按这个顺序）：", *install_steps(), sep="\n  ")
print("模型：SmolLM2-135M-Instruct，4 位（Q4_1）文件，反量化为 float32")
result = interventions_analysis()  # 设置了 MHA_REF_CACHE_DIR 时结果存入那个文件夹，再次运行直接读取
heads = result["induction_heads"]
clean_copy, clean_text = result["clean"]
MODES = {"zero": "零消融", "mean": "均值消融"}  # 打印用的名字
print(f"最强的归纳头（块，头）：{heads}")
print(f"不消融：第二遍损失 {clean_copy:.2f}，真实文本损失 {clean_text:.3f}")
for mode in ("zero", "mean"):
    rows = [[f"({block}, {h})", f"{c:.2f}", f"{t:.3f}"]
            for (block, h), (c, t) in result["single"][mode].items()]
    together_copy, together_text = result["together"][mode]
    rows.append(["三个一起", f"{together_copy:.2f}", f"{together_text:.3f}"])
    print(f"{MODES[mode]}：")
    print(text_table(["消融的头", "第二遍损失", "真实文本损失"], rows))

# %%
# 每个头单独消融都会抬高第二遍的损失；三个一起抬得多得多，而真实文本的损失只变动了零点零几奈特。
# 三个一起的效果是否大于各自单独效果之和？

for mode in ("zero", "mean"):
    singles = sum(c - clean_copy for c, _ in result["single"][mode].values())
    joint = result["together"][mode][0] - clean_copy
    print(f"{MODES[mode]}：单独效果之和 {singles:.2f} 奈特，三个一起 {joint:.2f} 奈特"
          f"（比值 {joint / singles:.2f}）；第二遍损失变为 ×{result['together'][mode][0] / clean_copy:.2f}")

# %%
# 一起消融的代价大于各部分之和（超可加）。这 *提示* 存在冗余：消融一个头时，其余的头仍能复制它原来
# 复制的很多内容，所以单独消融低估了每个头的份额。但这 *不能证明* 冗余：这些头的输出还要经过后面每
# 一个块，而这些块不是线性的，单独效果之和可能漏掉任何一种相互作用。它也说明不了这里没有消融的其余
# 267 个头。
#
# .. _ex17-the-previous-token-head-that-feeds-them:
#
# 为它们提供输入的前一词元头
# --------------------------
# 归纳头之所以能找到“上次出现处之后的词元”，是因为更早的一个头已经在每个位置写下了它前面是哪个词元。
# 归纳头可以通过自己的查询、键或值读到这个信息（Elhage 等人所说的 Q 组合、K 组合和 V 组合）；它用的是
# 哪一个，下文用路径修补来测。在所有最强归纳头之前的块中，取前一词元分数最高的头，做零消融；作为
# 对照，从同一块里随机抽三个别的头，各自单独消融。对每一种，给出第二遍损失和上面三个头的归纳分数。

previous = result["previous_head"]
rows = [["不消融", f"{clean_copy:.2f}", *(f"{s:.3f}" for s in result["clean_induction"])]]
for head, (copy_loss, induction) in result["feeding"].items():
    kind = "前一词元头" if head == previous else "对照"
    rows.append([f"{head} ({kind})", f"{copy_loss:.2f}", *(f"{s:.3f}" for s in induction)])
print(text_table(["消融的头", "第二遍损失", *(f"归纳 {h}" for h in heads)], rows))

# %%
# 消融这个前一词元头，后面那些头的归纳模式大部分消失了（其中两个的归纳分数降到接近 0，第三个降到原来的
# 四分之一左右），第二遍损失升得比消融三个归纳头还多；同一块里的对照头两者都没有改变。归纳头依赖这个头：这是干预显示的，不是从热力图上读出来的。
#
# .. _ex17-the-same-on-other-random-sequences:
#
# 换几组随机序列再看
# ------------------
# 上面用的都是同一次抽出的随机词元（种子 0）。下面在另外两个种子抽出的同样大小的序列上，把关键的零消融
# 再做一遍：三个归纳头的超可加比值，以及消融前一词元头后的第二遍损失。

rows = []
for seed, run in [(0, None), *result["seeds"].items()]:
    if run is None:  # 种子 0：就是上面的测量
        run = {"clean": clean_copy, "together": result["together"]["zero"][0],
               "single": {h: c for h, (c, _) in result["single"]["zero"].items()},
               "previous": result["feeding"][previous][0]}
    singles = sum(c - run["clean"] for c in run["single"].values())
    joint = run["together"] - run["clean"]
    rows.append([str(seed), f"{run['clean']:.2f}", f"{singles:.2f}", f"{joint:.2f}",
                 f"{joint / singles:.2f}", f"{run['previous']:.2f}"])
print(text_table(["种子", "不消融", "单独效果之和", "三个一起", "比值", f"{previous} 消融后"], rows))
print(f"种子：0（上面）和 {list(OTHER_SEEDS)}")

# %%
# 每个种子上，三个一起的代价都大于各自单独效果之和（比值大于 1），消融前一词元头都会让第二遍损失
# 升到不消融时的三倍左右或更多：这两个发现都不是只靠一次抽样得出的。
#
# .. _ex17-which-input-reads-the-previous-token-head-path-patching:
#
# 哪个输入读取前一词元头：路径修补
# --------------------------------
# 消融前一词元头，会同时改变后面每个头的每个输入，所以上面的消融说不出归纳头是通过查询、键还是值读到
# 它的。路径修补（``mha_ref.tutorial.real_models.path_patching``）把这三者分开：另跑一次前一词元头被零
# 消融的前向传播，只让三个归纳头的\ **一个**\ 输入（先是键，再是查询，再是值）读取这次运行的残差流；它们
# 的其他输入读取干净的残差流，模型的其余部分照常运行。三个输入都换掉时，每个归纳头算出的正好就是它在
# 消融运行里算出的东西。度量和上面相同，即第二遍损失，用三个种子的随机序列，和完整消融并排给出。

patching = path_patching_analysis(previous, heads)  # 有缓存：{种子: 运行结果}，3 个种子
names = {"key": "只换键", "query": "只换查询", "value": "只换值",
         "all three": "三个输入都换"}
print(f"消融：{previous}；修补进这些归纳头的输入：{heads}")
print("第二遍损失（括号里：它的上升占完整消融上升的比例）")
rows = []
for seed, run in patching.items():
    full = run["ablated"] - run["clean"]  # 完整消融的效果，单位奈特
    shares = {path: (run["patched"][path] - run["clean"]) / full for path in PATHS}
    rows.append([str(seed), f"{run['clean']:.2f}", f"{run['ablated']:.2f}",
                 *(f"{run['patched'][path]:.2f} ({shares[path]:.0%})" for path in PATHS)])
print(text_table(["种子", "不消融", f"{previous} 消融", *names.values()], rows))

runs = list(patching.values())  # 每个种子一个
all_three = torch.tensor([run["patched"]["all three"] - run["clean"] for run in runs])  # (种子数,)
rows = []
for path in PATHS:
    effect = torch.tensor([run["patched"][path] - run["clean"] for run in runs])  # (种子数,)
    share = effect / all_three  # (种子数,)
    rows.append([names[path], f"{effect.mean():.2f} ({effect.min():.2f} 到 {effect.max():.2f})",
                 f"{share.min():.0%} 到 {share.max():.0%}"])
print(text_table(["修补进", "损失上升，均值（最小到最大）", "占三个都换时上升的比例"],
                 rows))

# %%
# 同样这些运行，在归纳头本身上读：它们的归纳分数，取三个种子的均值（括号里是最小到最大）。


def spread(values: list[float]) -> str:
    """各种子上的均值，以及最小值和最大值。"""
    values = torch.tensor(values)  # (种子数,)
    return f"{values.mean():.3f} ({values.min():.3f} 到 {values.max():.3f})"


rows = [["不修补", *(spread([run["clean_induction"][h] for run in runs]) for h in heads)]]
for path in PATHS:
    rows.append([names[path], *(spread([run["induction"][path][h] for run in runs])
                                for h in heads)])
print(text_table(["修补进", *(f"归纳 {h}" for h in heads)], rows))

# %%
# 在每个种子上，只换键让第二遍损失上升得几乎和三个输入都换一样多，也让三个头的归纳分数降得差不多一样
# 低；只换查询或只换值，损失都只上升一点。值根本动不了注意力模式：它那一行和不修补时的分数相同，本该
# 如此。归纳头是通过自己的键读取前一词元头的：这就是 Elhage 等人所说的 K 组合，现在由一次干预把它和
# Q 组合、V 组合区分开了。这个结果有两点局限。第一，三个头的输入加起来，只占完整消融效果的一部分
# （比例见第一张表）：别的头也读取前一词元头的输出，而它们没有被修补。第二，修补进去的残差流带着这次
# 消融经过的所有路径抵达这几个头所在的块（前一词元头所在块的 MLP，以及中间的块），而不只是它的直接
# 路径。
#
# .. _ex17-every-head-exact-sweep-and-attribution-patching:
#
# 所有头：精确扫描与归因修补
# --------------------------
# 把 270 个头逐个单独消融，每个头要一次前向传播。归因修补（attribution patching）只用 **一次** 反向
# 传播就估计出全部 270 个效果：损失的变化取一阶近似，等于损失对头输出的梯度乘以这个输出的变化
# （``mha_ref.tutorial.real_models.heads.attribution_effects``）。为了看这个估计有多好，也算出了精确
# 效果，用的是更短的输入（一条 20 个随机词元重复两遍的序列），并且只扫描最强几个头所在的块。

exact = result["exact"]  # (num_swept, num_heads)，单位奈特，num_swept 是扫描的块数
estimate = result["attribution"][list(SWEEP_LAYERS)]  # (num_swept, num_heads)，扫描的块 x 头
print(f"短输入：第一遍损失 {result['short_clean'][0]:.2f}，第二遍 "
      f"{result['short_clean'][1]:.2f}；扫描的块 {list(SWEEP_LAYERS)} "
      f"（{exact.numel()} 个头）")
print(f"精确效果与归因估计的皮尔逊相关系数：{pearson(exact, estimate):.3f}")
for k in (3, 6):
    print(f"前 {k} 个头中两者共有的：{top_k_overlap(exact, estimate, k)} / {k}")
rows = []
for row, head in top_heads(exact, 6):
    rows.append([f"({SWEEP_LAYERS[row]}, {head})", f"{exact[row, head]:.3f}",
                 f"{estimate[row, head]:.3f}", f"{estimate[row, head] / exact[row, head]:.2f}"])
print(text_table(["头", "精确效果（奈特）", "归因估计", "估计 / 精确"], rows))

labels = {
    "diagonal": "估计 = 精确",
    "x": "消融的精确效果（奈特）",
    "y": "归因修补的估计（奈特）",
    "title": f"零消融，每次一个头，块 {SWEEP_LAYERS[0]}-{SWEEP_LAYERS[-1]}",
}
use_cjk_font_for(*labels.values())  # 中文页的标签需要 CJK 字体
fig, ax = plt.subplots(figsize=(5.0, 4.0), layout="constrained")
ax.scatter(exact.flatten(), estimate.flatten(), s=14)
low = float(min(exact.min(), estimate.min()))
high = float(max(exact.max(), estimate.max()))
ax.plot([low, high], [low, high], color="grey", linewidth=0.8, label=labels["diagonal"])
ax.set_xlabel(labels["x"])
ax.set_ylabel(labels["y"])
ax.set_title(labels["title"], fontsize=10)
ax.legend()
plt.show()

largest = exact.flatten().argmax()  # 精确效果最大的那个头
rest = torch.ones(exact.numel(), dtype=torch.bool)
rest[largest] = False
print(f"去掉精确效果最大的那个头后：皮尔逊相关系数 "
      f"{pearson(exact.flatten()[rest], estimate.flatten()[rest]):.3f}")
signs = (exact.sign() == estimate.sign()).float().mean()
print(f"估计与精确效果符号相同的头：{signs:.0%}")

whole = result["attribution"]  # (num_layers, num_heads)
print(f"全部 270 个头中归因估计最大的："
      f"{[(h, round(float(whole[h]), 2)) for h in top_heads(whole, 5)]}")

# %%
# 估计恰好在上一节认为最重要的那个头上失败了：消融前一词元头的代价是所有头里最大的，估计却给了它一个
# 负的效果。是梯度错了吗？梯度是穿过后面每一个块（包括 softmax）反向传播得到的，所以已经包含了后面
# 各头注意力模式的一阶变化。检验的办法：在同一条短输入上，把这个头的输出乘以一个系数 ``alpha``
# （1 表示不动，0 就是零消融；``scale_heads``），测量第二遍损失的变化。

scaling = result["scaling"]  # {alpha: 第二遍损失的变化（奈特）}，短输入上
print(f"{previous} 的输出乘以 alpha，第二遍损失的变化（短输入）：")
print(text_table(["alpha", "损失变化（奈特）"],
                 [[f"{alpha:g}", f"{change:+.3f}"] for alpha, change in scaling.items()]))
print(f"alpha 0.99 时的损失变化除以 0.01：{scaling[0.99] / 0.01:+.3f}；{previous} 的归因估计："
      f"{float(result['attribution'][previous]):+.3f}")

# %%
# ``alpha = 1`` 处的斜率和估计一致：导数没有错。错的是“沿直线外推”。把这个头的输出稍稍调小，损失反而
# *下降* （一直到 ``alpha = 0.75``）；再往下调，损失才上升，而且升得很陡，一直升到 ``alpha = 0`` 处的
# 精确效果。
# 损失对这个头的输出远不是线性的（它通过归纳头的注意力模式起作用，上面消融它就改变了这些模式），所以
# 从 ``alpha = 1`` 出发的任何一阶估计都到不了 0 处的值。不计这个头，估计和精确效果大体成线性关系
# （上面打印的皮尔逊相关系数），但对效果最强的几个头，估计只有精确效果的一半到三分之二左右（表的最后
# 一列）。
#
# 什么时候信哪一个：归因修补一次反向传播就覆盖所有头，适合给输出被较直接读取的头排序（这里就是归纳头
# 本身），但不适合估计效果的大小；一个靠改变后面的头看向哪里而起作用的头可能被漏掉，甚至符号都会错。
# 关于单个头的结论要靠精确消融。在扫描的块之外，上面的估计没有和精确消融核对过。
#
# .. _ex17-exercises:
#
# 练习
# ----
# **练习 1.** 均值消融把头的输出换成它在真实文本上的平均值，而不是零。为什么零消融可能夸大一个头的
# 贡献？这里两种方式有分歧吗？
#
# .. dropdown:: 答案
#    :class-container: mha-answer
#
#    一个头的平均输出可能离零很远，而它后面的各个块是在这个平均值存在的情况下训练出来的：置零把平均值
#    也去掉了，这是模型从没见过的情况，代价可能超过这个头携带的信息。均值消融保留平均值，只去掉随输入
#    变化的部分。这里两种方式相差不过零点几奈特，而且均值消融的代价略大，所以零消融并没有夸大这三个
#    头：

for (block, h), (c, _) in result["single"]["zero"].items():
    print(f"({block}, {h})：零消融 {c - clean_copy:+.2f}，均值消融 "
          f"{result['single']['mean'][(block, h)][0] - clean_copy:+.2f} 奈特（第二遍）")

# %%
# **练习 2.** 消融三个归纳头几乎不改变真实文本的损失。这是否说明在真实文本上上下文复制无关紧要？
#
# .. dropdown:: 答案
#    :class-container: mha-answer
#
#    不是。这段真实文本是三段短文：复制只能降低这样一些词元的损失——它们重复了前一个词元早先出现时
#    紧随其后的词元，下面数了有多少个；而且别的头也有归纳模式（示例 16；正如超可加效果所提示的，头之间
#    可能有冗余）。对所有词元取平均，会掩盖只发生在这些词元上的效果，本页没有测量它。这个数目，以及
#    平均值的变化：

text = load_smollm2().tokenizer.encode(real_text("statements")).tolist()  # 真实文本的词元 id
followed = {}  # 词元 -> 到目前为止紧跟在它后面出现过的词元
copyable = 0  # 重复了前一个词元早先出现时紧随其后的词元的词元个数
for before, token in zip(text[:-1], text[1:], strict=True):  # consecutive pairs
    copyable += token in followed.get(before, set())
    followed.setdefault(before, set()).add(token)
print(f"真实文本：{len(text)} 个词元，其中 {copyable} 个可以靠复制预测")
for mode in ("zero", "mean"):
    print(f"{MODES[mode]}：真实文本损失 {clean_text:.3f} -> {result['together'][mode][1]:.3f}")

# %%
# .. _ex17-summary:
#
# 小结
# ----
# - 把 SmolLM2-135M-Instruct（4 位文件）最强的三个归纳头一起消融，重复随机词元第二遍的损失升到不消融
#   时的两倍多，超过它们单独效果之和（在三个种子的随机词元上都是如此），而真实文本的损失几乎不变。
# - 消融它们之前的前一词元头，会去掉它们大部分的归纳模式和复制能力；同一块里的三个对照头不会。
# - 在三个种子上做路径修补：把前一词元头被消融后的残差流只送进归纳头的键，代价几乎和送进它们全部三个
#   输入一样大；只送进查询或值，代价很小：经过这三个头，前一词元头主要通过 K 组合起作用。这三个头的
#   输入合起来只承接它全部效果的大约一半（路径修补的第一张表），其余经过这里没有修补的路径（别的头、
#   后面的 MLP、直达 logits 的路径）。
# - 归因修补用一次反向传播给头排序；它和精确扫描的吻合程度打印在上面。它的导数是对的，但损失对前一
#   词元头的输出远不是线性的，所以它把这个头的符号弄错了；对效果最强的几个头，它只给出精确效果的一半
#   到三分之二左右。关于单个头的结论要靠精确消融。
