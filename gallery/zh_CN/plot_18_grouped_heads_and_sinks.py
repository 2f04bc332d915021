"""
示例 18：真实模型中的分组查询头与注意力汇点
===========================================

SmolLM2-135M-Instruct（4 位量化文件；这里的每个数都是这次构建测出来的）使用分组查询注意力（Ainslie 等人
2023，`arXiv:2305.13245 <https://arxiv.org/abs/2305.13245>`_）：每个块的 9 个查询头共用 3 个键/值头，
查询头 ``3g``、``3g + 1`` 和 ``3g + 2`` 读取键/值头 ``g``。示例 6 和 15 在玩具模型上搭建了这种共享；这里
看它在一个训练好的模型里的样子。共用键并不强制模式相同（每个头有自己的查询，并用 RoPE 旋转，Su 等人
2021，`arXiv:2104.09864 <https://arxiv.org/abs/2104.09864>`_），那么同一组的头有多相像？后半部分讨论把
大部分权重放在首词元上的头，即 Xiao 等人（2023，`arXiv:2309.17453 <https://arxiv.org/abs/2309.17453>`_）
所说的 *注意力汇点*。
"""

# %%
# .. _ex18-heads-of-one-group-against-other-groups:
#
# 同组的头与别组的头
# ------------------
# 在示例 16 和 17 用过的真实文本（Python 语言参考中的三段话）上，两个头的相似度取它们注意力权重矩阵
# 的余弦（1 表示模式相同）。对每个块：同组的 9 对头的平均值，以及同一块中不同组的 27 对头的平均值。
# （自己运行本页需要真实模型：下面打印三条安装命令。）

import matplotlib.pyplot as plt

from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.heads import top_heads
from mha_ref.tutorial.real_models.sink_values import (
    first_token_scores_by_text,
    sink_values_analysis,
)
from mha_ref.tutorial.real_models.smollm2 import install_steps, load_smollm2
from mha_ref.tutorial.real_models.smollm2_heads import heads_analysis, sinks_analysis

print("安装（按这个顺序）：", *install_steps(), sep="\n  ")
print("模型：SmolLM2-135M-Instruct，4 位（Q4_1）文件，反量化为 float32")
config = load_smollm2().config
scores = heads_analysis()["scores"]  # 示例 16 的结果，每个都是 (num_layers, num_heads)
# 设置了 MHA_REF_CACHE_DIR 时结果存入那个文件夹，再次运行直接读取
result = sinks_analysis()
within, across = result["within"], result["across"]  # (num_layers,)，各一个
blocks = list(range(config.num_layers))
fig = plot_lines(
    blocks,
    {"同组": within.tolist(), "不同组": across.tolist()},
    xlabel="块",
    ylabel="模式的平均余弦相似度",
    title="共用一个键/值头的头与其他头相比",
)
plt.show()
print(f"同组的头比不同组的头更相像的块："
      f"{int((within > across).sum())} / {config.num_layers}")
print(f"对所有块取平均：同组 {within.mean():.3f}，不同组 {across.mean():.3f}")

# %%
# 许多头把大部分权重放在首词元上（见下文），两个这样的头不管别的方面做什么，都会彼此相像。差距是否
# 只来自这一点？把词元 0 从键和查询中去掉，再算一遍相似度：

within_rest, across_rest = result["within_no_first"], result["across_no_first"]  # (layers,)
print(f"去掉词元 0：同组更相像的块 {int((within_rest > across_rest).sum())} / "
      f"{config.num_layers}；平均 同组 {within_rest.mean():.3f}，不同组 "
      f"{across_rest.mean():.3f}")

# %%
# 这个块数是否超出偶然？9 个头分成 3 组、每组 3 个，有许多种分法，任何一种分法里都会有\ *碰巧*\ 相像的
# 头对。下面的零假设取遍所有这样的分法，在每个块里算出它的"组内减组间"差距（去掉词元 0），然后问两件
# 事：随机分组在多少个块里也会显得"组内更相像"（这是要超过的块数）；按键/值头分的真实分组在多少个块里
# 落在所有分法中最相像的 5 % 里（每个块一次单侧置换检验，没有对 30 个块做多重比较校正）。

null = result["null_no_first"]
significant = (null["p_value"] <= 0.05).nonzero().flatten().tolist()
print(f"把 {config.num_heads} 个头分成 {config.num_kv_heads} 组的全部分法："
      f"{null['groupings']} 种；随机分组平均在 "
      f"{null['chance_more_alike'].sum():.1f} / {config.num_layers} 个块里组内更相像")
print(f"（每个块用同一种分法时）组内更相像的块数不少于键/值分组的分法所占比例："
      f"{null['count_p_value']:.4f}")
print(f"键/值分组落在最相像的 5 % 分法之内的块：{len(significant)} / "
      f"{config.num_layers}：{significant}")
print(f"其中在 5 % 错误发现率下保留的块（对 {config.num_layers} 个块做 Benjamini-Hochberg 校正）："
      f"{len(null['fdr_blocks'])}：{null['fdr_blocks']}")
smallest_p = 1 / null["groupings"]  # 分组查询注意力的分法本身就是其中之一
bonferroni = 0.05 / config.num_layers  # Bonferroni 校正下每个块的阈值
print(f"一个块能有的最小 p 值：1 / {null['groupings']} = {smallest_p:.4f}；"
      f"Bonferroni 阈值：0.05 / {config.num_layers} = {bonferroni:.4f}")
at_floor = (null["p_value"] * null["groupings"]).round() == 1  # (num_layers,)，p = 1 / 280
print(f"p 值正是这个最小值的块：{int(at_floor.sum())}："
      f"{at_floor.nonzero().flatten().tolist()}")

# %%
# 不论算不算首词元，在大多数块里，共用键和值的头都比不共用的更相像，但差距很小：键是共用的，三个查询
# 仍然可以看向不同的地方。这个块数超出了偶然：零假设的第二行是能达到它的分法在全部分法中所占的比例（分组
# 查询注意力的分法本身就是其中之一，所以这个比例至少是打印出的分法总数分之一）。逐个块看，检验就弱一些：
# 列出的块通过了未经校正的 5 % 检验，下一行保留其中经过错误发现率校正仍然通过的块；两个列表里都没有的块，
# 并不说明它与随机分组没有差别。没有哪个块能通过像 Bonferroni 那样严格的校正：分法只有 280 种，一个块
# 能有的最小 p 值 0.0036 已经高于 30 个块的 Bonferroni 阈值 0.0017（倒数第二行）。有 6 个块的 p 值正是
# 这个下限（最后一行）：在这些块里，键/值分组的组内相像程度高于其他每一种分法，这已经是只有 280 种分法
# 的检验所能显示的极限。有一组显示了同组的头能分开多远：最强归纳头所在的那一组。

layer, head = top_heads(scores["induction"], 1)[0]
group = head // (config.num_heads // config.num_kv_heads)
size = config.num_heads // config.num_kv_heads
rows = [[f"({layer}, {h})", f"{scores['induction'][layer, h]:.3f}",
         f"{scores['first'][layer, h]:.3f}", f"{scores['previous'][layer, h]:.3f}"]
        for h in range(group * size, (group + 1) * size)]
print(f"块 {layer}，键/值头 {group}：")
print(text_table(["头", "归纳", "首词元", "前一词元"], rows))

# %%
# 三个头读取同样的键和值，而在真实文本上，三个头都把大部分权重放在首词元上（首词元分数大于 0.5，也就是
# 下文判定汇点头的规则）：(18, 6) 是重复序列上最强的归纳头，在真实文本上也把 0.755 的权重放在首词元上；
# (18, 8) 是纯粹的汇点头（首词元分数 1.000，归纳分数 0.000）；(18, 7) 在真实文本上几乎把全部权重都放在首词元上，在重复序列
# 上却也是归纳头。一个头的注意力像归纳头那样分布，还是停在首词元上，既取决于这个头，也取决于输入；
# 共用的键容许这两种模式，一个头呈现哪一种，由它的查询决定，因为同组的头共用键。
#
# .. _ex18-attention-sinks-by-block:
#
# 各块中的注意力汇点
# ------------------
# 一个头的首词元分数是它放在词元 0 上的平均权重（示例 16）。每个块中有多少个头把一半以上的权重
# 放在那里：

is_sink_here = scores["first"] > 0.5  # (num_layers, num_heads)
sinks_per_block = is_sink_here.sum(dim=1)  # (num_layers,)
fig = plot_lines(
    blocks,
    {"首词元分数 > 0.5 的头": sinks_per_block.tolist()},
    xlabel="块",
    ylabel="头数（共 9 个）",
    title="主要关注首词元的头",
)
plt.show()
print(f"块 0-3 中：{int(sinks_per_block[:4].sum())}；块 4-29 中："
      f"{int(sinks_per_block[4:].sum())}；共 {config.num_layers * config.num_heads} 个头")
first_sink_block = int(sinks_per_block.nonzero()[0])  # 第一个有汇点头的块
print(f"第一个有汇点头的块：块 {first_sink_block}")

# %%
# 这个计数只来自一段文本。下面在每段随包文本的前 256 个词元上（本页的文本更短，取全文；实验代码
# :func:`~mha_ref.tutorial.real_models.sink_values.first_token_scores_by_text`）做同样的计数，并给出
# 每段文本的汇点头中有多少在本页文本上也是汇点头：

by_text = first_token_scores_by_text()  # 文本名 -> (num_layers, num_heads)
rows = []
for name, text_scores in by_text.items():
    text_sinks = text_scores > 0.5  # (num_layers, num_heads)
    rows.append([name, int(text_sinks[:4].sum()), int(text_sinks[4:].sum()),
                 int((text_sinks & is_sink_here).sum())])
print(text_table(["文本（前 256 个词元）", "块 0-3 中的汇点头", "块 4-29 中的汇点头",
                  "在本页文本上也是汇点头"], rows))

# %%
# 这张表只支持一个方向：本页的汇点头大多在其他每段文本上也是汇点头（最后一列对比本页文本自己那一行）。
# 反过来并不成立：其他每段文本的汇点头都比本页文本多，其中相当一部分在本页文本上不是汇点头。在每段文本
# 上，几乎所有汇点头都在块 4-29 中。在本页文本上，第一个有汇点头的块（上面打印的块号）比块 4 靠后得多，它之前的块一个汇点头
# 也没有；但前四个块并非在每段文本上都没有汇点头：在有的文本上有几个（见表）。

# %%
# .. _ex18-why-a-softmax-makes-sinks:
#
# 为什么 softmax 会产生汇点
# -------------------------
# softmax 的权重之和为 1：一个头不能 *什么都不* 关注。一个头在某个位置上没有东西可加，也必须把权重放在
# 某处，最省事的地方是一个值向量贡献很小的词元。示例 7 的 ``add_zero_attn=True`` 正好给
# :class:`torch.nn.MultiheadAttention` 提供了这样一个地方（一个全零的键和值）；没有它的训练模型会自己造
# 一个，而每个查询都能看到的首词元是最自然的选择（Xiao 等人 2023，第 3.1 节）。如果一个头用首词元是为了
# 什么都不加，那么有两样东西会很小：词元 0 的值，以及这个头经过输出投影 ``W^O`` 之后从它那里写出的
# 东西。两者都在同一段文本上测量（实验代码
# :func:`~mha_ref.tutorial.real_models.sink_values.sink_values_analysis`）。先看每个键/值头里词元 0 的值有多大，
# 与其他词元的值大小的中位数相比（1 表示和一个典型词元的值一样大）：

# 设置了 MHA_REF_CACHE_DIR 时结果存入那个文件夹，再次运行直接读取
values = sink_values_analysis()
ratio = values["value_first"] / values["value_median"]  # (num_layers, num_kv_heads)
fig = plot_lines(
    blocks,
    {**{f"键/值头 {g}": ratio[:, g].tolist() for g in range(config.num_kv_heads)},
     "与典型的值一样大": [1.0] * config.num_layers},
    xlabel="块",
    ylabel="|词元 0 的值| / |值| 的中位数",
    title="首词元的值与其他词元的值相比",
    logy=True,
    styles={"与典型的值一样大": {"ls": "--", "marker": "", "color": "0.5"}},
)
fig.axes[0].set_ylim(0.05, 8)  # 在曲线上方给图例留出位置
fig.axes[0].legend(fontsize=8, ncol=2, loc="upper center")
plt.show()
is_sink = scores["first"] > 0.5  # (num_layers, num_heads)
has_sink = is_sink.any(dim=1)  # (num_layers,)
print(f"词元 0 的值 / 值的中位数，共 {ratio.numel()} 个（块, 键/值头）组合：")
print(f"  低于 1 的个数 {int((ratio < 1).sum())}，低于 0.5 的个数 {int((ratio < 0.5).sum())}")
print(f"  中位数 {ratio.median():.3f}；在 {int(has_sink.sum())} 个含有首词元分数 > 0.5 的头的块上："
      f"{ratio[has_sink].median():.3f}")

# %%
# 一个小的值仍可能被 ``W^O`` 放大，而一个头的输出还包含它从其他键读到的东西。所以把每个头经过 ``W^O``
# 之后的输出拆成两部分（:func:`~mha_ref.tutorial.real_models.sink_values.split_by_first_token`）：来自词元 0 的
# 部分（它放在词元 0 上的权重，乘以词元 0 的值经过该头在 ``W^O`` 中那几列的结果），以及来自其他键的
# 部分；两部分相加就是输出。下表给出在文本各位置上的平均范数，再按首词元分数的区间对其中的头取平均：

weight = values["weight_first"]  # (num_layers, num_heads)，即首词元分数
ranges = [("<= 0.5", weight <= 0.5), ("0.5 - 0.7", (weight > 0.5) & (weight <= 0.7)),
          ("0.7 - 0.9", (weight > 0.7) & (weight <= 0.9)), ("> 0.9", weight > 0.9)]
rows = [[name, int(m.sum()), f"{weight[m].mean():.3f}", f"{values['output'][m].mean():.2f}",
         f"{values['from_first'][m].mean():.2f}", f"{values['from_rest'][m].mean():.2f}"]
        for name, m in ranges]  # 每个 m：(num_layers, num_heads)
print(text_table(["首词元分数", "头数", "词元 0 上的平均权重", "|输出|",
                  "|来自词元 0 的部分|", "|来自其他键的部分|"], rows))
output = values["output"]  # (num_layers, num_heads)，每个头的平均 |输出|
pure = (weight > 0.9).nonzero().tolist()  # [[layer, head], ...]
print("首词元分数 > 0.9 的头："
      + "，".join(f"({layer}, {head}) |输出| {output[layer, head]:.2f}" for layer, head in pure))

# %%
# 上表给出的是每一行里各头的平均值。逐个头看首词元分数在 0.5 到 0.9 之间的头：有多少个从其他键写出的比
# 从词元 0 写出的多，以及其余的头：

from_first, from_rest = values["from_first"], values["from_rest"]  # (num_layers, num_heads)
middle = (weight > 0.5) & (weight <= 0.9)  # (num_layers, num_heads)
more_from_rest = middle & (from_rest > from_first)  # (num_layers, num_heads)
print(f"首词元分数在 0.5 - 0.9 之间、从其他键写出的更多的头："
      f"{int(more_from_rest.sum())} / {int(middle.sum())}；其余的头：")
rows = [[f"({layer}, {head})", f"{weight[layer, head]:.3f}", f"{from_first[layer, head]:.2f}",
         f"{from_rest[layer, head]:.2f}"]
        for layer, head in (middle & ~more_from_rest).nonzero().tolist()]
print(text_table(["头", "首词元分数", "|来自词元 0 的部分|", "|来自其他键的部分|"], rows))

# %%
# 再看从词元 0 写出的部分最大的那个头，并与所有头的输出大小相比：

big_layer, big_head = top_heads(from_first, 1)[0]
print(f"|来自词元 0 的部分| 在全部 {output.numel()} 个头中最大的头：({big_layer}, {big_head})，"
      f"{from_first[big_layer, big_head]:.2f}；它的首词元分数 "
      f"{weight[big_layer, big_head]:.3f}；它的 |输出| {output[big_layer, big_head]:.2f}，"
      f"大于其中 {int((output < output[big_layer, big_head]).sum())} 个头的 |输出|；"
      f"所有头 |输出| 的中位数 {output.median():.2f}")

# %%
# 这张图和这张表说明的是：在大多数（块, 键/值头）组合里，词元 0 的值比典型词元的值小，其中大多数还不到
# 一半（见表上方打印的计数）。最后一行只有两个头，(18, 7) 和 (18, 8)（打印在表下；(18, 7)
# 在重复序列上也是归纳头，见上文）：在这段文本上，它们写出的平均输出是表中最小的，几乎全部来自
# 词元 0，而且每一个都小于其他每一行的平均值。两个头太少，不足以把这一点推广到所有几乎纯粹的汇点头。
# 首词元分数在 0.5 到 0.9 之间的头，虽然大部分权重在词元 0 上，但平均而言来自其他键的部分比来自词元 0
# 的部分大，逐个头看大多数也是如此（59 / 63）。（范数比较的是两部分的大小；两部分不一定互相垂直，所以
# 它们不是输出中所占的份额。）但并非全部：列出的其余头来自词元 0 的部分更大，而且首词元分数高的头并不
# 都是什么也不加。(24, 6) 的首词元分数是 0.619，它从词元 0 写出的部分
# 是所有头中最大的，为 38.43；它的整个输出 63.23 大于 270 个头中 268 个头的输出（中位数 8.39）。把
# 首词元分数高于 0.5 的所有头放在一起取平均，会把这几类头混在一起，几乎说明不了词元 0 的值；列出的头
# 之一 (15, 6) 也在下文消融的汇点头里。

# %%
# .. _ex18-what-the-sink-heads-are-worth:
#
# 汇点头值多少
# ------------
# 上面那一组正好说明了陷阱所在：首词元分数最高的头里有归纳头，消融它们测到的是它们的复制作用，而不是
# 汇点作用。所以这里消融的 *汇点头*，是归纳分数（示例 16）不超过 0.3 的头中首词元分数最高的九个。把它们
# 一起消融，分别用零消融和均值消融（示例 17 的两种方式），并与三组对照比较：每组九个头，从同样的块中
# 首词元分数不超过 0.5、归纳分数不超过 0.3 的头里随机抽取。作为比较，再消融不论归纳分数、首词元分数
# 最高的九个头，以及其中的归纳头本身。真实文本上的损失：

print(f"汇点头（归纳分数 <= 0.3）：{result['sinks']}")
print(f"首词元分数最高的九个头：{result['top_first']}；其中的归纳头："
      f"{result['top_first_induction']}")
print(f"不消融：{result['clean']:.3f}")
MODES = {"zero": "零消融", "mean": "均值消融"}  # 打印用的名字
rows = []
for mode in ("zero", "mean"):
    controls = result["control_losses"][mode]
    rows.append([MODES[mode], f"{result['ablated'][mode]:.3f}",
                 ", ".join(f"{loss:.3f}" for loss in controls),
                 f"{result['top_first_ablated'][mode]:.3f}",
                 f"{result['top_first_induction_ablated'][mode]:.3f}"])
print(text_table(["方式", "汇点头", "对照（3 次抽取）", "首词元分数最高的九个", "其中的归纳头"],
                 rows))

# %%
# 这九个汇点头有多纯粹？它们的首词元分数，以及上面拆分出的输出的两部分：

rows = [[f"({layer}, {head})", f"{weight[layer, head]:.3f}", f"{from_first[layer, head]:.2f}",
         f"{from_rest[layer, head]:.2f}"] for layer, head in result["sinks"]]
print(text_table(["汇点头", "首词元分数", "|来自词元 0 的部分|",
                  "|来自其他键的部分|"], rows))
impure = [(layer, head) for layer, head in result["sinks"] if weight[layer, head] <= 0.9]
rest_larger = [(layer, head) for layer, head in impure
               if from_rest[layer, head] > from_first[layer, head]]
print(f"首词元分数 > 0.9 的汇点头：{len(result['sinks']) - len(impure)}；其余 "
      f"{len(impure)} 个中来自其他键的部分更大的：{len(rest_larger)}")

# %%
# 再看首词元分数最高的九个头的代价从何而来。每个代价都是损失减去不消融时的损失；"其余"是这九个头的
# 代价中，超出其中归纳头单独的代价与九个汇点头单独的代价之和的部分；九个汇点头包含了这九个头里其余的头：

others = [lh for lh in result["top_first"] if lh not in result["top_first_induction"]]
print(f"首词元分数最高的九个头中不是归纳头的：{len(others)}；其中属于汇点头的："
      f"{sum(lh in result['sinks'] for lh in others)}")
rows = []
for mode in ("zero", "mean"):
    sinks_cost = result["ablated"][mode] - result["clean"]
    top_cost = result["top_first_ablated"][mode] - result["clean"]
    induction_cost = result["top_first_induction_ablated"][mode] - result["clean"]
    rest = top_cost - induction_cost - sinks_cost
    rows.append([MODES[mode], f"{sinks_cost:.3f}", f"{top_cost:.3f}",
                 f"{induction_cost:.3f} ({induction_cost / top_cost:.0%})",
                 f"{rest:.3f} ({rest / top_cost:.0%})"])
print(text_table(["方式", "汇点头", "首词元分数最高的九个",
                  "其中的归纳头单独", "其余"], rows))

# %%
# 一个几乎把全部权重都放在词元 0 上的头，会在每个位置加上几乎相同的向量，即词元 0 的值经过该头在
# ``W^O`` 中那几列的结果；上面的拆分测量了它，首词元分数高于 0.9 的那两个头，每一个写出的都小于其他
# 每一行的平均值。把九个汇点头一起消融，代价很小：零消融时约零点零二奈特（0.019，最后一张表的
# "汇点头"一列），比每一组对照都小；均值消融（保留每个头的平均输出）时更小，落在各组对照的范围之内。
# 九个头中只有一个几乎是纯粹的：(18, 8)，首词元分数 1.000，几乎不从其他键写出东西；对它来说，用平均
# 输出替换它的输出，由构造决定几乎什么也不改变。其余八个的首词元分数在 0.690 到 0.805 之间，其中 7 个
# 来自其他键的部分比来自词元 0 的部分大（只有 (15, 6) 例外）：对它们，均值消融确实检验了一些东西，而
# 消融这一组的代价仍然很小。首词元分数最高的九个头代价更大，均值消融时比每一组对照都大。其中超过
# 一半，63%，是只消融它的三个归纳头时就有的；它的另外六个头全都属于汇点头，而汇点头单独消融时，均值
# 消融下的代价几乎为零（0.005）；其余的 30% 超出了这两项单独代价之和，是一种交互作用（那六个头只在九个
# 汇点头中一起消融过，从没有单独消融）。零消融时，汇点头单独的代价更大，
# 其余的部分更小（第一行）。汇点头从词元 0 写出的东西有什么用，以及首词元本身值多少（去掉它，或者像 StreamingLLM 的
# 滑动窗口那样去掉汇点的模式），是另外的干预，这里没有做。
#
# .. _ex18-exercises:
#
# 练习
# ----
# **练习 1.** 分组查询注意力每块只存 3 个键/值头，而不是 9 个。从打印出的相似度看，共用键会让同组的
# 头彼此复制吗？
#
# .. dropdown:: 答案
#    :class-container: mha-answer
#
#    不会。在大多数块里，同组的头只比不同组的头稍微相像一点；而在最强归纳头所在的组里，两个头在重复
#    序列上是归纳头，第三个是纯粹的汇点头。逐块看差距：

gap = within - across  # (num_layers,)，同组减不同组
print(f"最大差距 {gap.max():.3f}（块 {int(gap.argmax())}）；最小 {gap.min():.3f}"
      f"（块 {int(gap.argmin())}）")

# %%
# **练习 2.** 设置 ``add_zero_attn=True`` （示例 7）后，一个头可以把权重放在一个全零的值上。你会预期
# 这样的模型首词元汇点更少吗？
#
# .. dropdown:: 答案
#    :class-container: mha-answer
#
#    可以预期会更少：它有了另一个放权重的地方，不必再把首词元当作汇点；Xiao 等人（2023，第 3.3 节）
#    出于这个原因在预训练时加入一个可学习的汇点词元，并报告模型随后把它当作汇点。本站没有测量这一点：
#    本页只测量了一个没有这种设置的模型，而示例 24 的小实验里，头并没有用上提供给它的汇点。下面打印的
#    只是这个模型里主要关注首词元的头数：

print(f"{int(is_sink.sum())} / {config.num_layers * config.num_heads} 个头")

# %%
# .. _ex18-summary:
#
# 小结
# ----
# - 在 SmolLM2-135M-Instruct（4 位文件）里，大多数块中共用一个键/值头的头比不同组的头更相像，但差距
#   很小，算不算首词元都是如此；有一组里，最强的归纳头、另一个归纳头和一个纯粹的汇点头在真实文本上
#   都把大部分权重放在首词元上。
# - 许多头把大部分权重放在首词元上：在本页文本上，上面打印的第一个有汇点头的块之前的各块里一个也没有；
#   在其他随包文本上，前四个块中没有或只有几个；本页文本的汇点头大多在其他每段文本上也是汇点头，但其他每段文本的汇点头
#   都更多，并非都是本页文本上的汇点头。在大多数块里，首词元的值比典型词元的值小；几乎只停在它上面的
#   那两个头，每一个写出的都小于其他每一行的平均值，而且几乎全部来自词元 0；只把部分权重放在那里的头，
#   大多数来自其他键的部分比来自词元 0 的部分大，但并非全部：其中一个头从词元 0 写出的向量是所有头中
#   最大的。
# - 把九个最强的、不是归纳头的汇点头一起消融，代价很小：零消融时约零点零二奈特，比消融同样块中同样
#   数量的其他头还小；均值消融时更小，落在这些对照的范围之内。九个头中只有 (18, 8) 几乎只停在词元 0
#   上；对其余八个，均值消融检验了一些东西，而代价仍然很小。首词元分数最高的九个头代价更大：超过一半
#   来自其中三个归纳头单独；汇点头单独消融在均值消融下几乎没有代价，其余的部分超出了两项单独代价之和
#   （见上面的打印）。
# - softmax 必须把权重放在某处；``add_zero_attn`` （示例 7）给了它一个地方，训练好的模型用的是首词元。
