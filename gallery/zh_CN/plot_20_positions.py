"""
示例 20：注意力内部的位置
=========================

注意力本身不知道输入的先后顺序：每个分数都是一个查询与一个键的点积，其中没有任何东西说明两个词元
各在什么位置。因此每个语言模型都要加入位置信息，而在如今的模型里，它位于注意力层 *内部*，按头
进行：旋转位置编码（RoPE，Su 等人 2021，`arXiv:2104.09864 <https://arxiv.org/abs/2104.09864>`_）
旋转每个头的查询和键，ALiBi（Press 等人 2022，`arXiv:2108.12409
<https://arxiv.org/abs/2108.12409>`_）给每个头一个各自的距离惩罚。最初的 Transformer 则是给每个
词元加上一个学到的或正弦形式的向量（Vaswani 等人 2017，第 3.5 节）；因果模型甚至可以什么位置信息
都不加（Haviv 等人 2022，`arXiv:2203.16634 <https://arxiv.org/abs/2203.16634>`_）。

本页先用数字说明没有位置的注意力不管顺序，再看五种方案各自改变了分数的哪一部分，然后检验示例 10
留下的问题：它的归纳模型在两份副本离得比训练时更远时会失效，原因是不是学到的位置嵌入？我们用五种
方案逐一重新训练这个模型，每种五个种子，每次运行都训练到收敛或到同一个步数上限为止，并在使用位置
的那一层关掉位置，找出下降从哪里来。
"""

# %%
# .. _ex20-without-positions-order-does-not-matter:
#
# 没有位置，顺序就无关紧要
# ------------------------
# 取一个注意力层、8 个词元的随机输入，再取这些词元的一个打乱顺序。没有位置时，把输入打乱，输出
# 就以同样的方式被打乱，别的什么都不变：注意力是 *置换等变* 的。下表第一列测量这一点：“先打乱再
# 做注意力”与“先做注意力再打乱”之间的最大差异。之后每种方案把位置放在各自的地方：
#
# - **学到的** 和 **正弦** 位置：给每个词元的输入加上一个按位置而定的向量；
# - **RoPE**：每个头的查询和键按位置旋转一个与位置成正比的角度；
# - **ALiBi**：给查询 ``i`` 与键 ``j`` 的分数加上 ``-slope * |i - j|``；
# - 只有 **因果掩码**：查询 ``i`` 只能看到键 ``0 .. i``。
#
# 第二列把整条序列往后挪 5 个位置。只看两个词元之间距离的方案（*相对* 位置）输出不变；看每个词元
# 在哪里的方案（*绝对* 位置）输出会变。

import statistics

import matplotlib.pyplot as plt
import torch

from mha_ref import (
    GroupedQueryAttention,
    RotaryEmbedding,
    alibi_bias,
    alibi_slopes,
    causal_mask,
    scaled_dot_product_attention,
)
from mha_ref.tutorial.induction import (
    AttentionOnlyTransformer,
    accuracy_with_ablation,
    head_scores,
    make_repeated_batch,
    previous_token_score,
    sinusoidal_positions,
)
from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.positions import (
    SHORT_RECIPE,
    diagonal_spread,
    plot_score_maps,
    position_scores,
    position_study,
    positions_removed,
)

torch.manual_seed(0)
embed_dim, num_heads, seq_len, shift = 32, 2, 8, 5
head_dim = embed_dim // num_heads
plain = GroupedQueryAttention(embed_dim, num_heads, num_heads, dtype=torch.float64).eval()
rotary = GroupedQueryAttention(
    embed_dim, num_heads, num_heads, dtype=torch.float64, rope=RotaryEmbedding(head_dim, 64)
).eval()
rotary.load_state_dict(plain.state_dict())  # 参数相同，只差旋转
learned_table = torch.randn(64, embed_dim, dtype=torch.float64)  # 一张学到的表，这里是随机的
sine_table = sinusoidal_positions(64, embed_dim).double()  # (64, embed_dim)
x = torch.randn(1, seq_len, embed_dim, dtype=torch.float64)  # (1, seq_len, embed_dim)
order = torch.randperm(seq_len)


def attend(scheme, x, start):
    """把词元 ``x`` 放在位置 ``start, start + 1, ...`` 上时这一层的输出。"""
    where = torch.arange(start, start + x.shape[1])  # (seq_len,)
    if scheme == "无":
        return plain(x)[0]
    if scheme == "因果掩码":
        return plain(x, is_causal=True)[0]
    if scheme == "学到的":
        return plain(x + learned_table[where])[0]
    if scheme == "正弦":
        return plain(x + sine_table[where])[0]
    if scheme == "RoPE":
        return rotary(x, positions=where, key_positions=where)[0]
    bias = alibi_bias(num_heads, x.shape[1], dtype=torch.float64)  # (heads, seq_len, seq_len)
    return plain(x, attn_mask=bias)[0]  # ALiBi：无论序列从哪里开始，偏置都一样


schemes = ["无", "因果掩码", "学到的", "正弦", "RoPE", "ALiBi"]
rows = []
with torch.no_grad():
    for scheme in schemes:
        shuffled = (attend(scheme, x[:, order], 0) - attend(scheme, x, 0)[:, order]).abs().max()
        moved = (attend(scheme, x, shift) - attend(scheme, x, 0)).abs().max()
        rows.append([scheme, f"{shuffled:.1e}", f"{moved:.1e}"])
print(text_table(["位置", "打乱词元：变化", f"整体后移 {shift}：变化"], rows))

# %%
# 只有既没有位置、也没有掩码的那一层不管顺序（它的差异只是 float64 的舍入误差）。单单一个因果掩码
# 就打破了这种对称，每种方案也都打破了它。学到的向量和正弦向量在整条序列后移时还会改变输出；
# RoPE 和 ALiBi 不会：它们只看距离。
#
# .. _ex20-a-causal-model-can-count:
#
# 因果模型会数数
# --------------
# Haviv 等人发现，完全不用位置信息训练的因果语言模型仍然学会了每个词元在哪里，困惑度也接近有位置
# 信息的模型。因果掩码就够了：一个把权重平均分给它能看到的所有键的头，在位置 ``t`` 输出 ``t + 1``
# 个值的平均，而参与平均的值越多，平均值就越小。下面取许多条随机序列，查询全为零（于是每个允许的键
# 得到相同的权重），列出每个位置上输出的大小，旁边是 ``t + 1`` 个独立标准正态向量之平均应有的
# ``sqrt(head_dim / (t + 1))``：

values = torch.randn(4000, 1, 20, head_dim, dtype=torch.float64)  # (sequences, 1 head, 20, 16)
zeros = torch.zeros_like(values)  # 所有分数都是 0：在允许的键上权重相等
means = scaled_dot_product_attention(zeros, zeros, values, is_causal=True)  # (4000, 1, 20, 16)
size = means.norm(dim=-1).pow(2).mean(dim=(0, 1)).sqrt()  # (20,) 均方根大小
rows = [[t, f"{size[t]:.3f}", f"{(head_dim / (t + 1)) ** 0.5:.3f}"] for t in (0, 1, 3, 7, 15, 19)]
print(text_table(["位置 t", "输出的大小", "sqrt(head_dim / (t + 1))"], rows))

# %%
# 输出的大小随位置下降，与公式一致，所以后面的层能从中读出“我在序列里走了多远”。这是模型自己造出来
# 的位置信息；造它要用掉一层。
#
# .. _ex20-what-each-scheme-adds-to-the-scores:
#
# 每种方案给分数加了什么
# ----------------------
# 下面的热力图针对示例 10 的模型（:class:`~mha_ref.tutorial.induction.AttentionOnlyTransformer`，
# 尚未训练，每种方案的初始参数都相同）第一层的两个头，画出位置给分数加上的部分：在一条重复同一个
# 词元的序列上，有位置时的分数减去没有位置时的分数，再对所有词元取平均
# （:func:`~mha_ref.tutorial.positions.position_scores`）。内容处处相同，剩下的就只来自位置。行是
# 查询，列是键；灰色格子被因果掩码屏蔽。要看的是：
#
# - **学到的** （训练前是一张随机表）和 **正弦**：沿每条对角线变化的图案，因为它取决于每个词元
#   在哪里；
# - **RoPE** 和 **ALiBi**：每条对角线上只有一个值，因为加上的部分只取决于距离 ``i - j``；ALiBi 的
#   是一个固定的斜坡，头 0 的更陡；
# - **无**：什么都没有。
#
# 每张图按自己的尺度画（除以它自己的最大绝对值，图下的表格给出这个值）。表格还测量了前两点：任意
# 一条对角线上的最大极差，占整张图极差的比例（0 表示这张图只取决于 ``i - j``）。

TOY = dict(vocab_size=24, seq_len=20, embed_dim=32, num_heads=2)  # 示例 10 的尺寸
SCHEMES = ["learned", "sinusoidal", "rope", "alibi", "none"]
NAMES = {"learned": "学到的", "sinusoidal": "正弦", "rope": "RoPE", "alibi": "ALiBi",
         "none": "无"}
maps, titles, rows = [], [], []
for position in SCHEMES:
    torch.manual_seed(0)  # 每种方案的初始参数都相同
    untrained = AttentionOnlyTransformer(**TOY, position=position)
    added = position_scores(untrained)  # (heads, 20, 20)，被屏蔽处为 NaN
    spread = diagonal_spread(added)  # (heads,)
    for head in range(2):
        maps.append(added[head])
        titles.append(f"{NAMES[position]}，头 {head}")
    largest = added.nan_to_num(0.0).abs().amax(dim=(-2, -1))  # (heads,)
    rows.append([NAMES[position], f"{largest[0]:.3f}", f"{largest[1]:.3f}", f"{spread[0]:.3f}",
                 f"{spread[1]:.3f}"])
fig = plot_score_maps(
    [maps[i] for i in range(0, 10, 2)] + [maps[i] for i in range(1, 10, 2)],
    [titles[i] for i in range(0, 10, 2)] + [titles[i] for i in range(1, 10, 2)],
    ncols=5,
    suptitle="位置给第 1 层分数加上的部分（训练前）",
    xlabel="键的位置 j",
    ylabel="查询的位置 i",
    colorbar_label="加上的分数 / 它的最大绝对值",
)
plt.show()
header = ["位置", "最大绝对值，头 0", "头 1", "沿对角线的极差，头 0",
          "头 1"]
print(text_table(header, rows))

# %%
# .. _ex20-why-alibi-and-no-positions-should-fail:
#
# ALiBi 和无位置为什么应当失败，训练又显示了什么
# ----------------------------------------------
# 示例 10 的回路需要第 1 层有一个 *前一词元头*：它给每个查询紧挨着的前一个词元的权重，要远大于给
# 其他任何键的权重。（和示例 10 一样，这个只有注意力的两层模型的层用序数称呼：第 1 层、第 2 层即
# 代码中的 ``layers[0]``、``layers[1]``；真实模型的块则和代码一样从 0 编号，见术语表的“块”。）
# 对 ALiBi 和“无”来说，第 1 层的输入只有词元嵌入，于是分数中的内容部分只取决于两个词元是什么，
# 与它们在哪里无关。两个存着同一个词元的键，得到的权重之比就是固定的：没有位置时
# 是 1，ALiBi 时是 ``exp(slope * 两者之间的距离)``。在一条序列上测量，同一个词元位于位置 4 和 11，
# 从查询 15 看过去：

probe = torch.arange(20)[None] % 24  # (1, 20) 互不相同的词元 0 .. 19
probe[0, 11] = probe[0, 4]  # 位置 4 和 11 上是同一个词元
slopes = alibi_slopes(2)  # (2,) 论文给两个头的斜率
rows = []
for position in ("alibi", "none"):
    torch.manual_seed(0)
    untrained = AttentionOnlyTransformer(**TOY, position=position)
    with torch.no_grad():
        weights = untrained(probe)[1][0][0]  # (heads, 20, 20) 第 1 层
    for head in range(2):
        expected = torch.exp(slopes[head] * 7) if position == "alibi" else torch.tensor(1.0)
        ratio = weights[head, 15, 11] / weights[head, 15, 4]
        rows.append([NAMES[position], head, f"{ratio:.4f}", f"{float(expected):.4f}"])
print(text_table(["位置", "头", "键 11 的权重 / 键 4 的权重", "exp(slope × 7)"], rows))

# %%
# 所以在这两种方案里，前一个词元要胜过再往前的那个键，只能靠近一个词元：ALiBi 给它多一个
# ``exp(slope)`` 的倍数，没有位置时什么也不多。前一个词元是随机的，它的内容帮不上忙。如果内容给出的
# 注意力分数（softmax 之前）分不出这些键，权重就只由位置决定。下面的代码把这样的权重交给
# :func:`~mha_ref.tutorial.induction.previous_token_score`，也就是后面训练好的模型所得的分数：放在键
# ``t - 1`` 上的权重，对从 1 到 19 的每个查询 ``t`` 取平均，每个查询看它的键 ``0 .. t``。靠前的查询
# 键少，给前一个词元的权重比靠后的查询多。内容唯一能单独认出的键是查询自己的键（它存着查询自己的
# 词元）；最后一列让这个键的权重为零，这是此时内容最多能让前一个词元多得的：

allowed = causal_mask(20)  # (20, 20) True：键 j <= 查询 i
own_key = torch.eye(20, dtype=torch.bool)  # (20, 20) True：每个查询自己的键
own_key[0, 0] = False  # 查询 0 没有别的键；分数不算它


def positions_only_score(bias, without_own_key):
    """权重只由 ``bias`` 决定的头的前一词元分数，每个头一个。"""
    blocked = ~allowed | own_key if without_own_key else ~allowed  # (20, 20)
    weights = torch.softmax(bias.masked_fill(blocked, -torch.inf), dim=-1)  # (heads, 20, 20)
    return previous_token_score(weights[None])  # (heads,) 与训练好的模型算法相同


biases = {
    "ALiBi": alibi_bias(2, 20, dtype=torch.float64),  # (2, 20, 20) -slope * |i - j|
    "无": torch.zeros(2, 20, 20, dtype=torch.float64),  # (2, 20, 20) 什么也不加
}
blind = {name: positions_only_score(bias, without_own_key=False) for name, bias in biases.items()}
rows = []
for name, bias in biases.items():
    ceiling = positions_only_score(bias, without_own_key=True)  # (heads,)
    for head in range(bias.shape[0]):
        slope = f"{float(slopes[head]):.5f}" if name == "ALiBi" else "0"
        rows.append([name, head, slope, f"{blind[name][head]:.3f}", f"{ceiling[head]:.3f}"])
header = ["位置", "头", "斜率", "内容分数都相等", "自己的键权重为零"]
print(text_table(header, rows))

# %%
# 每层两个头时，ALiBi 的斜率是 ``1/16`` 和 ``1/256``：太平缓，挑不出单独一个键。内容分数都相等时，
# 前一个词元分别得到 0.156 和 0.138 的权重，几乎不比无位置时的 0.137 多；即使查询自己的键权重为零，
# 也最多 0.214。由此得出预测：
# 这两种方案都无法在第 1 层给出示例 10 的回路赖以搭建的前一词元头，因而都不应形成这个回路。这是
# 推理，不是测量：模型也许能找到更弱的或别的办法完成任务。下面的训练来检验它。（练习里讨论头更多的
# ALiBi。）
#
# .. _ex20-example-10-model-retrained-with-each-scheme:
#
# 示例 10 的模型，逐一换用每种方案重新训练
# ----------------------------------------
# 现在回到示例 10 的问题：它的归纳模型在两份副本离得比训练时更远时会失效。该怪学到的绝对位置嵌入
# 吗？旋转位置编码只看距离，所以它就是对照：同一个模型、同样的数据、每个种子同样的初始参数，只把
# 学到的位置换成 RoPE。正弦位置是第二种绝对位置方案；ALiBi 和无位置则检验上面的预测。
#
# 每种方案都用同一个训练配方（``mha_ref.tutorial.positions.SHORT_RECIPE``：示例 10 的模型，批次
# 更小、学习率更高），各训练五个种子（:func:`~mha_ref.tutorial.positions.position_study`）。各方案
# 学得快慢不同，固定步数就会拿已经收敛的模型去和只训练了一半的模型比。所以每次运行都训练到
# *收敛* 为止，每种方案用同一条规则、同一个上限
# （:func:`~mha_ref.tutorial.induction_training.stopping_step`）：每 20 步算一次评估，即最近 20 个
# 训练批次上第二份副本的平均准确率（每次都是新序列，在模型从中学习之前打分），连续三次评估都达到
# 0.9 时停止。始终达不到的运行在上限处停止。方案之间只有位置不同。表中给出每次运行收敛于第几步、
# 相变所在的步数（与示例 10 相同；None 表示训练中没有相变）、新序列上第二份副本的准确率，以及第 1
# 层各头中最高的前一词元分数。表下面几行按方案汇总；对跑到上限的运行，比较它们最后两段各 100 步的
# 训练准确率：是否还在上升？

SEEDS = (0, 1, 2, 3, 4)
study = position_study(positions=SCHEMES, seeds=SEEDS, **SHORT_RECIPE)
recipe = SHORT_RECIPE
print(f"训练配方：步数上限 {recipe['steps']}，批大小 {recipe['batch_size']}，"
      f"学习率 {recipe['lr']}；连续 {recipe['stop_evaluations']} 次评估"
      f"达到 {recipe['stop_accuracy']} 即停止（每 {recipe['stop_window']} 步评估一次："
      f"最近 {recipe['stop_window']} 个批次的平均准确率）")
rows = [
    [NAMES[run.position], run.seed,
     "上限内未达到" if run.converged_step is None else run.converged_step,
     run.phase_change, f"{run.accuracy:.3f}", f"{run.previous_token:.3f}"]
    for run in study.runs
]
print(text_table(["位置", "种子", "收敛于第几步", "相变", "准确率", "前一词元分数"], rows))
for position in SCHEMES:
    runs, done = study.of(position), study.converged(position)
    steps = [run.converged_step for run in done]
    when = (f"，中位数为第 {statistics.median(steps):g} 步（{min(steps)} 到 {max(steps)}）"
            if done else "")
    formed = sum(run.phase_change is not None for run in runs)
    accurate = sum(run.accuracy > 0.9 for run in runs)
    scores = [run.previous_token for run in runs]
    print(f"{NAMES[position]}：在 {len(done)} / {len(runs)} 个种子上收敛"
          f"{when}；{formed} 次出现相变，准确率高于 0.9 的有 {accurate} 次，"
          f"前一词元分数 {min(scores):.3f} 到 {max(scores):.3f}")
cap = SHORT_RECIPE["steps"]
for position in SCHEMES:
    capped = [run for run in study.of(position) if run.converged_step is None]
    if capped:  # 到上限时，它们的训练准确率还在上升吗？
        before = [sum(run.accuracy_curve[cap - 200 : cap - 100]) / 100 for run in capped]
        last = [sum(run.accuracy_curve[cap - 100 :]) / 100 for run in capped]
        rising = sum(b > a for a, b in zip(before, last, strict=True))
        print(f"{NAMES[position]}：{len(capped)} 次运行跑到上限；训练批次准确率 "
              f"{min(before):.3f} 到 {max(before):.3f}（第 {cap - 199} 到 {cap - 100} 步），"
              f"{min(last):.3f} 到 {max(last):.3f}（第 {cap - 99} 到 {cap} 步）；{rising} 次运行"
              f"在后一段更高")
changes = [run.phase_change for run in study.runs if run.phase_change is not None]
print(f"最晚的相变：第 {max(changes)} 步；上限：{cap} 步")
LEARNERS = [p for p in SCHEMES if study.converged(p)]
print("有收敛运行的方案：", "、".join(NAMES[p] for p in LEARNERS))
for position in ("alibi", "none"):  # 内容分数都相等时的水平，见上文
    runs = study.of(position)
    scores = [run.previous_token for run in runs]
    levels = sorted({f"{blind[NAMES[position]][run.previous_head]:.3f}" for run in runs})
    print(f"{NAMES[position]}：第 1 层的前一词元分数 {min(scores):.3f} 到 {max(scores):.3f}；"
          f"同样的头在内容分数都相等时：{'、'.join(levels)}")

# %%
# 学到的位置、正弦位置和旋转位置编码各自在 5 个种子中的 5 个上收敛，而且每次运行都形成了回路：
# 有相变，准确率高于 0.9，第 1 层有一个前一词元分数不低于 0.656 的头。RoPE 各次运行的收敛步数差别
# 最大：在第 240 到 400 步收敛，学到的位置是第 240 到 320 步，正弦位置是第 300 到 320 步。最慢的运行
# （第 400 步收敛）和最晚的相变（第 287 步）都出自 RoPE；600 步的上限是它的两倍多，所以上限并没有
# 限制这些运行中的任何一次。
#
# 对 ALiBi 和无位置的预测在这个预算内成立：没有一次运行收敛或出现相变，第 1 层也没有哪个头成为
# 前一词元头。它们的前一词元分数正处在内容分数都相等时的水平（输出的最后两行）：ALiBi 是 0.157 到
# 0.160，对应 0.156；无位置是 0.138 到 0.141，对应 0.137。不过它们用别的办法学会了任务的一部分：
# 表中准确率分别是 0.394 到 0.473（ALiBi）和 0.315 到 0.343（无位置），而且每次运行最后 100 步的
# 训练准确率都比之前 100 步高。
# 所以本页并不是说它们永远学不会这个任务，而是说：在另外三种方案每个种子都能收敛的预算内，它们
# 没有收敛，而它们学到的东西也不经过前一词元头。
#
# 训练把这个头里的位置变成了什么样？下面针对收敛的三种方案，和前面一样画出位置给它的注意力分数
# （softmax 之前）加上的部分（每种方案第一个收敛的种子），并对每次收敛的运行列出每个偏移 ``i - j``
# 上加上的平均分数（0：查询自己的键，1：前一个词元）。用 RoPE 时每条对角线只有一个值；用学到的表和
# 正弦表时它沿对角线变化。

maps, titles, rows, top_offsets = [], [], [], []
runs_shown = [run for p in LEARNERS if p != "none" for run in study.converged(p)]
for run in runs_shown:
    added = position_scores(study.model(run.position, run.seed))[run.previous_head]  # (20, 20)
    by_offset = [float(added.diagonal(offset=-offset).mean()) for offset in range(20)]
    top_offsets.append(max(range(20), key=lambda offset: by_offset[offset]))
    rows.append([NAMES[run.position], run.seed, run.previous_head]
                + [f"{value:.1f}".replace("-0.0", "0.0") for value in by_offset[:6]])
    if run is study.converged(run.position)[0]:  # 每种方案一张图：它第一个收敛的种子
        maps.append(added)
        titles.append(f"{NAMES[run.position]}，种子 {run.seed}，头 {run.previous_head}")
fig = plot_score_maps(
    maps,
    titles,
    ncols=len(maps),
    suptitle="位置给训练后的前一词元头的分数加上的部分",
    xlabel="键的位置 j",
    ylabel="查询的位置 i",
    colorbar_label="加上的分数 / 它的最大绝对值",
)
plt.show()
print(text_table(["位置", "种子", "头"] + [f"偏移 {o}" for o in range(6)], rows))
for position in [p for p in LEARNERS if p != "none"]:
    tops = [top for run, top in zip(runs_shown, top_offsets, strict=True)
            if run.position == position]
    print(f"{NAMES[position]}：加上的平均分数在偏移 1 处最大的，{tops.count(1)} / "
          f"{len(tops)} 个种子")

# %%
# 最后几行数出：在多少次运行中，位置让前一个词元（偏移 1）的注意力分数（softmax 之前）比其他任何
# 偏移提高得都多。学到的位置和旋转位置编码是每个种子都如此：在这个头里，位置在偏移 1 处加上的分数
# 最多。正弦位置在哪个种子上都不是这样：它在每个种子上给偏移 0 和 1 加上的分数都差不多（见上表），
# 所以单看加上的分数，分不出前一个词元和查询自己的键。
#
# 加上的分数表只说明位置在哪里提高了分数，不说明这个头是否需要位置才能找到前一个词元。这要靠干预：
# 第 1 层的查询和键不带位置计算（:func:`~mha_ref.tutorial.positions.positions_removed`，作用于
# ``layers[0]``；学到的位置和正弦位置：输入中不含位置嵌入；RoPE：不旋转）。第 1 层的值和第 2 层照旧
# 计算。在 512 条新序列上，对每次收敛的运行，比较它的前一词元头的分数和第二份副本的准确率，第 1 层的
# 搜索带位置和不带位置各一次：

config = study.config
tokens, periods = make_repeated_batch(
    512, config["seq_len"], config["vocab_size"], torch.Generator().manual_seed(2),
    config["min_period"], config["max_period"],
)  # (512, 20), (512,) 新序列
for position in [p for p in LEARNERS if p != "none"]:
    scores, scores_without, accuracy, accuracy_without = [], [], [], []
    for run in study.converged(position):
        model = study.model(run.position, run.seed)
        previous = head_scores(model, tokens, periods)[0]  # (layers, heads)
        scores.append(float(previous[0, run.previous_head]))
        accuracy.append(accuracy_with_ablation(model, tokens, periods))
        with positions_removed(model, [0]):  # layers[0]：第 1 层只按内容搜索
            previous = head_scores(model, tokens, periods)[0]  # (layers, heads)
            scores_without.append(float(previous[0, run.previous_head]))
            accuracy_without.append(accuracy_with_ablation(model, tokens, periods))
    print(f"{NAMES[position]}，{len(scores)} 次收敛的运行：前一词元分数 "
          f"{min(scores):.3f} 到 {max(scores):.3f}，第 1 层不带位置时 "
          f"{min(scores_without):.3f} 到 {max(scores_without):.3f}；准确率 "
          f"{min(accuracy):.3f} 到 {max(accuracy):.3f}，不带位置时 "
          f"{min(accuracy_without):.3f} 到 {max(accuracy_without):.3f}")
equal_level = float(blind[NAMES["none"]][0])  # 头 0；无位置时两个头一样
own_key_level = float(positions_only_score(biases[NAMES["none"]], without_own_key=True)[0])
print(f"只靠内容的水平（无位置，取自上面的表）：内容分数都相等 "
      f"{equal_level:.3f}，自己的键权重为零 {own_key_level:.3f}")

# %%
# 搜索中没有了位置，这个头在三种方案的每次收敛运行上都丢掉了前一个词元：它的分数从不低于 0.659 降到
# 最多 0.183，落在只靠内容能给出的两个水平之间（输出的最后一行：内容分数都相等时 0.137，查询自己的
# 键权重为零时 0.187）；准确率最多只剩 0.266。所以在这三种方案里，第 1 层的这个头都是靠位置找到
# 前一个词元的，正弦位置也不例外。用正弦位置时，去掉位置后的分数是 0.181 到 0.183，大约就是自己的键
# 权重为零时的水平；这提示没有位置时，内容几乎不给查询自己的键权重。而带着正弦位置时，是什么把
# 前一个词元和查询自己的键区分开，这里没有测量。

# %%
# .. _ex20-further-apart-than-in-training:
#
# 比训练时离得更远
# ----------------
# 再做一次示例 10 的练习 2，这次在每次收敛的运行上（没有收敛的运行不计入：它的下降会把距离的影响
# 和没训练完混在一起）：所有序列的周期都是 5；第一份副本每次往前挪两个位置，空当用无关词元补上，
# 于是两份副本之间的距离从 5 增加到 15，而训练只见过 3 到 10 的距离。每个格子给出该方案收敛运行的
# 平均准确率，方括号里是最低和最高（表上面一行写明每个格子平均了几次运行）。“第 2 层不带位置”的列
# 对同样的模型做一次干预（:func:`~mha_ref.tutorial.positions.positions_removed`）：第 2 层的查询和
# 键不带位置计算（学到的位置和正弦位置：输入中去掉位置嵌入；RoPE：不旋转）。它的值，以及第 1 层
# 写下的一切，都保留。


def over_converged(position, field):
    """收敛的运行在每个距离上的平均 [最低, 最高]：每个距离一个字符串。"""
    runs = study.converged(position)
    cells = []
    for i in range(len(study.gaps)):
        values = [getattr(run, field)[i] for run in runs]
        cells.append(f"{sum(values) / len(values):.2f} [{min(values):.2f}, {max(values):.2f}]")
    return cells


columns = {}
for position in LEARNERS:
    columns[NAMES[position]] = over_converged(position, "gaps")
    if position != "none":
        columns[f"{NAMES[position]}，第 2 层不带位置"] = over_converged(
            position, "gaps_without_positions"
        )
rows = [[d] + [column[i] for column in columns.values()] for i, d in enumerate(study.distances)]
print(f"训练中的距离：{study.config['min_period']} 到 {study.config['max_period']}")
print("每个格子平均的收敛运行数："
      + "，".join(f"{NAMES[p]} {len(study.converged(p))}" for p in LEARNERS))
print(text_table(["距离", *columns], rows))

# %%
# 同样的数字画成曲线，取收敛运行的平均（灰色带是训练中的距离）：


def mean_of(position, field):
    runs = study.converged(position)
    return [sum(getattr(run, field)[i] for run in runs) / len(runs) for i in range(len(study.gaps))]


curves, styles = {}, {}
for index, position in enumerate(LEARNERS):
    curves[NAMES[position]] = mean_of(position, "gaps")
    styles[NAMES[position]] = {"color": f"C{index}"}
    if position != "none":
        label = f"{NAMES[position]}，第 2 层不带位置"
        curves[label] = mean_of(position, "gaps_without_positions")
        styles[label] = {"ls": "--", "color": f"C{index}"}
fig = plot_lines(
    study.distances,
    curves,
    xlabel="两份副本之间的距离（词元数）",
    ylabel="第二份副本的准确率（收敛运行的平均）",
    title="两份副本离得越来越远时的准确率",
    styles=styles,
)
fig.axes[0].axvspan(
    study.config["min_period"], study.config["max_period"], color="grey", alpha=0.15
)
plt.show()

# %%
# 有多少次收敛的运行一致：比较最大的距离（15，第一份副本位于序列开头）和训练范围内的距离 9：

far, inside = len(study.gaps) - 1, study.distances.index(9)
for position in [p for p in LEARNERS if p != "none"]:
    runs = study.converged(position)
    falls = sum(run.gaps[far] < run.gaps[inside] - 0.05 for run in runs)
    helped = sum(run.gaps_without_positions[far] > run.gaps[far] for run in runs)
    flatter = sum(
        run.gaps_without_positions[inside] - run.gaps_without_positions[far]
        < run.gaps[inside] - run.gaps[far]
        for run in runs
    )
    near, last = study.distances[inside], study.distances[far]
    print(f"{NAMES[position]}：下降超过 0.05（从距离 {near} 到 {last}）的收敛运行："
          f"{falls} / {len(runs)}；第 2 层不带位置时在距离 {last} 上更高的："
          f"{helped}，从 {near} 到 {last} 下降更少的：{flatter}")

# %%
# .. _ex20-longer-than-in-training:
#
# 比训练时更长
# ------------
# 另一种没见过的长度：在两份副本前面放更多无关词元，让副本落在训练中从没见过的位置上，而距离仍是
# 训练中的（3 到 10）。学到的表没有位置 19 之后的行：那个模型连这些序列都运行不了。正弦位置对每个
# 位置都有公式，所以那个模型可以运行。只列收敛的运行；最后几行给出每种方案的平均值，以及它平均了
# 几次运行。

header = ["位置", "种子"] + [f"{length} 个词元" for length in study.longer_lens]
rows = [
    [NAMES[run.position], run.seed]
    + ["无法运行" if acc is None else f"{acc:.3f}" for acc in run.longer]
    for position in LEARNERS
    for run in study.converged(position)
]
print(text_table(header, rows))
for position in LEARNERS:
    runs = study.converged(position)
    means = [
        f"{length} 个词元 {sum(run.longer[i] for run in runs) / len(runs):.3f}"
        for i, length in enumerate(study.longer_lens)
        if runs[0].longer[i] is not None
    ]
    print(f"{NAMES[position]}，{len(runs)} 次收敛运行的平均："
          + ("，".join(means) if means else "无法运行"))

# %%
# .. _ex20-what-this-shows:
#
# 这说明了什么
# ------------
# 把这些表放在一起看。五种方案里有两种，即两个头的 ALiBi 和无位置，在上限内的任何种子上都没有
# 形成前一词元头，也没有收敛，与推理的预测一致；它们用别的办法学会了任务的一部分，到上限时还在
# 学。另外三种方案每个种子都收敛了，却没有一种躲过示例 10 的下降：两份副本离得比训练时更远时，
# 学到的位置、正弦位置和旋转位置编码都会下降，各自 5 次收敛运行中的 5 次都是。所以这种下降并不需要
# 学到的位置嵌入：只看距离的旋转位置编码同样下降（用本页的训练配方重新训练，而不是示例 10 的配方）。
# 三者的共同点是第 2 层的搜索用到了
# 位置：让它的查询和键不带位置计算，每次收敛的运行上，从训练范围内往外的下降都更少，最大距离上的
# 准确率也更高，代价是最短的几个距离上有些损失。只在 3 到 10 的距离上训练，归纳头就会偏爱这些
# 距离；没有什么迫使它只按内容搜索。
#
# RoPE 做到了学到的位置做不到的事：它能运行比训练时任何序列都长的序列，在 30 个词元时保留了大部分
# 准确率（5 次收敛运行平均 0.874，最低 0.814），40 个词元时少一些（平均 0.720，有一次只有
# 0.582）。正弦位置也能运行这些序列，但在 30 个词元时就失去了大部分准确率（5 次平均 0.333），
# 每次运行都是。能运行更长的序列，并不让结果就对：在 40 个词元时，旋转的头会遇到训练中从未有过的
# 查询-键距离，而因果层自己的位置信号（上文因果平均的大小）也会超出训练时的范围；准确率的损失来自
# 两者中的哪一个，这里没有测量。

# %%
# .. _ex20-exercises:
#
# 练习
# ----
# **练习 1.** ALiBi 是为头更多的模型设计的：8 个头时它的斜率从 ``1/2`` 到 ``1/256``。在示例 10 的
# 模型第 1 层，它最陡的那个头能成为前一词元头吗？用和上面一样的上界。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    单靠位置不能。斜率为 ``1/2`` 时，近一个词元的键得到 ``exp(1/2)`` 倍的权重，所以最陡的头给
#    前一个词元的份额最大：按前一词元分数的方式平均，内容分数都相等时是 0.254，查询自己的键权重
#    为零时最多 0.451。这低于上面每一个训练出来的前一词元头（不低于 0.656）；但这里没有训练 8 个头
#    的 ALiBi 模型，所以它是否足以形成回路并没有检验。ALiBi 让头偏爱附近的词元，而不是某一个偏移；
#    ALiBi 模型（有 MLP 和许多层）要靠网络自己搭出更尖锐的位置模式：

slopes_8 = alibi_slopes(8)  # (8,)
bias_8 = alibi_bias(8, 20, dtype=torch.float64)  # (8, 20, 20)
blind_8 = positions_only_score(bias_8, without_own_key=False)  # (8,)
ceiling_8 = positions_only_score(bias_8, without_own_key=True)  # (8,)
rows = [
    [head, f"{float(slopes_8[head]):.5f}", f"{blind_8[head]:.3f}", f"{ceiling_8[head]:.3f}"]
    for head in range(8)
]
print(text_table(["头", "斜率", "内容分数都相等", "自己的键权重为零"], rows))

# %%
# **练习 2.** 一个检查点按一种布局存放 RoPE 的头（特征 ``2i`` 和 ``2i + 1`` 一起旋转，GGUF 文件就是
# 这样），而你用另一种布局运行它（特征 ``i`` 和 ``i + head_dim / 2`` 一起旋转，Hugging Face 的
# ``rotate_half`` 就是这样）。模型还能运行吗？算的还是同样的东西吗？怎么修正？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    能运行，但算的是别的东西：同样的参数，却按另一组特征配对来旋转。用
#    :func:`mha_ref.rope_pairing_permutation` 重排每个头的查询行和键行，两种布局就计算同样的注意力
#    （两个向量按同样方式重排，点积不变）：

from mha_ref import rope_pairing_permutation

torch.manual_seed(0)
adjacent = GroupedQueryAttention(
    embed_dim, num_heads, num_heads, dtype=torch.float64,
    rope=RotaryEmbedding(head_dim, 64, pairing="adjacent"),
).eval()
half = GroupedQueryAttention(
    embed_dim, num_heads, num_heads, dtype=torch.float64,
    rope=RotaryEmbedding(head_dim, 64, pairing="half"),
).eval()
half.load_state_dict(adjacent.state_dict())  # 同样的数字，按另一种布局来读
with torch.no_grad():
    wrong = (half(x, is_causal=True)[0] - adjacent(x, is_causal=True)[0]).abs().max()
    perm = rope_pairing_permutation(head_dim)  # (head_dim,)
    for proj in (half.q_proj, half.k_proj):  # 每个头的行按 perm 重排
        reordered = proj.weight.view(num_heads, head_dim, -1)[:, perm]  # (heads, head_dim, E)
        proj.weight.copy_(reordered.reshape_as(proj.weight))
        proj.bias.copy_(proj.bias.view(num_heads, head_dim)[:, perm].reshape_as(proj.bias))
    fixed = (half(x, is_causal=True)[0] - adjacent(x, is_causal=True)[0]).abs().max()
print(f"另一种布局、同样的参数：最大差异 {wrong:.3f}")
print(f"重排查询行和键行之后：{fixed:.1e}")

# %%
# .. _ex20-summary:
#
# 小结
# ----
# - 没有位置、也没有因果掩码时，注意力是置换等变的：它看不见顺序。单单因果掩码就打破了这一点，
#   因果的一层还能数数。
# - 学到的位置和正弦位置加在输入上，是绝对位置；RoPE 旋转每个头的查询和键，ALiBi 加上每个头的距离
#   惩罚：两者都是相对位置，序列从哪里开始都一样。
# - 在示例 10 的两层模型里，两个头的 ALiBi 和完全没有位置按推理不应在第 1 层形成前一词元头，而
#   示例 10 的回路正是靠这个头搭建的。按收敛规则训练、上限 600 步，两者在 5 个种子上都没有形成
#   这个头，也都没有收敛；它们用别的办法学会了任务的一部分，到上限时仍在进步。
# - 学到的位置、正弦位置和旋转位置编码各自在 5 个种子中的 5 个上收敛并形成了回路（RoPE 各次运行的收敛
#   步数差别最大，在第 240 到 400 步），而三者在训练距离之外每次收敛的运行都会下降：旋转位置编码
#   治不好示例 10 的下降。第 2 层的搜索用到了位置：让它不带位置运行，这三种方案每次收敛的运行上的
#   下降都更少。
# - RoPE 能运行比训练时更长的序列，在 30 个词元时保留了大部分准确率；正弦位置能运行，但失去了大部分
#   准确率；学到的位置运行不了。
