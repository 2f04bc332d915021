"""
示例 6：用多少个头？
====================

模型宽度 ``embed_dim`` （论文中的 :math:`d_{model}`）固定时，头数 ``h`` 只决定这份宽度怎么切分：
``head_dim = embed_dim // h``。本例测量这个选择会改变什么、不会改变什么：

* 参数量和矩阵乘法的 FLOPs（不变），
* 作用在注意力分数上的逐元素运算，以及注意力权重 ``(batch, h, seq_len, seq_len)`` 占用的内存
  （随 ``h`` 增长），
* 在构建本页的设备上一次前向传播的时间，分别在小模型的宽度和一个接近实际的宽度下测量，
* :ref:`示例 5 <sphx_glr_auto_examples_plot_05_what_heads_learn.py>` 的双关系小任务在多个随机
  种子下学得多快，以及训练收敛后学得多好，

并把已发表的结果放在旁边：Vaswani 等人 2017 年论文表 3 的 (A) 组。最后看现代模型里的另一种
头数——*键/值* 头的个数（分组查询注意力和多查询注意力）。
"""

# %%
# .. _ex06-costs-at-fixed-width:
#
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
    plot_relative_costs,
    width_costs,
)
from mha_ref.tutorial.learning_curves import (
    learning_curves,
    plot_learning_curves,
    plot_steps_to_threshold,
    summarize_curves,
)
from mha_ref.tutorial.plotting import plot_lines, text_table

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
# .. _ex06-time-on-this-device:
#
# 在本设备上的耗时
# ----------------
# 用 :func:`mha_ref.tutorial.bench.time_fn` 为同样的模块计时：先预热三次，再取十次的中位数；在 GPU 上，
# 每次读时钟前都会同步设备。``MultiHeadAttention`` 的显式路径会把注意力权重完整算出来，所以
# 可以预期它的耗时随权重张量增长；下图显示的是本设备的实际情况。耗时取决于机器，每次构建都会
# 不同，因此它们打印在以 ``[timing]`` 开头的行上，从不抄进正文。先打印运行环境。
#
# 请记住这是哪种情形：``embed_dim = 16`` 时矩阵乘法非常小（``h = 8`` 时每个头只处理 2 维的
# 向量），所以作用在 ``(batch, h, seq_len, seq_len)`` 分数上的逐元素运算占了大部分工作量，而它
# 随 ``h`` 增长。下一节在一个接近实际的宽度下重做这项测量。
#
# 读图时注意，有两对线互相重合：参数量和矩阵乘 FLOPs 都与 ``h`` 无关，是同一条水平线；softmax FLOPs
# 和注意力权重内存都与 ``h`` 成正比，也叠在一起（上表打印了它们的数值）。

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
    title=f"小宽度下的开销：embed_dim={embed_dim}，batch={batch}，seq_len={seq_len}",
    xlabel="头数 h",
    ylabel="相对于 h = 1 的倍数",
)
plt.show()

# %%
# .. _ex06-costs-at-a-realistic-width:
#
# 接近实际宽度下的开销
# --------------------
# 基础 Transformer 的 ``embed_dim = 512``。在这个宽度下，取 ``seq_len = 256``、一个序列，
# :func:`mha_ref.tutorial.head_count.width_costs` 为同一个模块的两条路径计时：**融合** 路径
# （``need_weights=False``：PyTorch 的 ``scaled_dot_product_attention``，不把注意力权重张量交还）
# 和 **显式** 路径（``need_weights=True``，每个头的注意力权重都完整算出并返回）。参数量和权重内存
# 的统计方式同上。
#
# 图中该看什么：此时投影的开销是 ``4 * 2 * seq_len * 512**2`` 次运算，与 ``h`` 无关，所以在
# ``h`` 达到某个值之前，耗时应该几乎不变；每条路径在本设备上从哪里开始增长（以及是否增长），
# 由图给出。图中是毫秒数，而不是相对于 ``h = 1`` 的倍数（与一个带噪声的基准相比，会放大它的
# 噪声）。耗时同样只打印在 ``[timing]`` 行上。
#
# 计时方法：运行本页的机器可能同时还在做别的工作，这种负载只会 *增加* 耗时。所以各次调用是交错进行的
# （每一轮把每个 ``h`` 的两条路径各计时一次，一段变慢的时间会同时落到所有配置上，而不是只落到某
# 一个 ``h`` 上），每种配置取各轮中的 **最小值** ：这是对代码在这台机器上能跑多快的最好估计。
# 中位数则会把机器当时有多忙也掺进来。

wide = width_costs(
    [1, 2, 4, 8, 16, 32], embed_dim=512, seq_len=256, batch=1, device=device, repeats=10
)
wide_rows = [
    (r["h"], r["head_dim"], r["parameters"], f"{r['weight_bytes'] / 2**20:.2f}") for r in wide
]
print(text_table(["h", "head_dim", "参数量", "权重 MiB"], wide_rows))
for r in wide:
    fused_ms, explicit_ms = r["fused_s"] * 1e3, r["explicit_s"] * 1e3
    print(f"[timing] h={r['h']}：融合路径 {fused_ms:.2f} ms，显式路径 {explicit_ms:.2f} ms")

fig = plot_lines(
    [r["h"] for r in wide],
    {
        "融合路径（need_weights=False）": [r["fused_s"] * 1e3 for r in wide],
        "显式路径（need_weights=True）": [r["explicit_s"] * 1e3 for r in wide],
    },
    title="接近实际的宽度：embed_dim=512，batch=1，seq_len=256",
    xlabel="头数 h",
    ylabel="每次前向传播的毫秒数（各轮中最快的一次）",
    logx=True,
)
fig.axes[0].set_ylim(bottom=0)
plt.show()

# %%
# .. _ex06-learning-curves-on-the-tiny-task:
#
# 小任务上的学习曲线
# ------------------
# 开销只是问题的一半。每种头数把上一个示例的双关系任务学得怎样？在固定步数后比较，会把两个问题
# 混在一起：某个头数学得有多 *快*，以及它究竟 *能* 表示什么。所以我们把两者分开测量。
# :func:`mha_ref.tutorial.learning_curves.learning_curves` 用每种头数、三个随机种子训练模型
# （种子改变初始化和训练数据，评估集不变），宽度都是 ``embed_dim = 16``，所以 ``h = 8`` 时每个头
# 只剩 2 维。每 25 步在评估集上测一次准确率。一次训练在收敛后停止（连续 4 次评估的准确率都不低于
# 0.999），最多训练 1500 步。
#
# 每次训练给出两个数：**达到 0.99 的步数** （从这一步起，评估准确率一直不低于 0.99）衡量速度；
# **最终准确率** 衡量这个头数能达到的水平。

curves = learning_curves(
    head_counts,
    embed_dim=embed_dim,
    seeds=(0, 1, 2),
    steps=1500,
    eval_every=25,
    threshold=0.99,
    stop_accuracy=0.999,
    stop_patience=4,
)
summary = summarize_curves(curves)
curve_rows = [
    (
        row["num_heads"],
        row["head_dim"],
        "  ".join(str(s) for s in row["steps_to_threshold"]),
        row["median_steps"],
        "  ".join(f"{a:.3f}" for a in row["final_accuracy"]),
    )
    for row in summary
]
print(text_table(["h", "head_dim", "达到 0.99 的步数", "中位数", "最终准确率"], curve_rows))
converged = sum(all(a >= 0.999 for a in c.accuracy[-4:]) for c in curves)
print(f"满足停止条件的训练：{converged} / {len(curves)}")
print("训练 200 步后各种子的准确率：")
for h in head_counts:
    at_200 = [c.accuracy_at(200) for c in curves if c.num_heads == h]
    print(f"  h={h}：" + "  ".join(f"{a:.3f}" for a in at_200))

fig = plot_learning_curves(
    curves,
    threshold=0.99,
    title=f"训练过程中的评估准确率（embed_dim={embed_dim}，3 个种子）",
    xlabel="训练步数",
    ylabel="评估集上的准确率",
    heads_label="h = {}",
    threshold_label="0.99",
)
plt.show()

# %%
# 该读出什么：如果每次训练都满足了停止条件（上面那一行给出本次构建的结果），那么在这个学习率下
# 每种头数都 *能* 表示这个任务，表中的差别是 **学习速度** 的差别。在固定步数上取一个快照，例如
# 上面打印的训练 200 步后的准确率，衡量的也是这种速度。这是不是全部，取决于学习率，而上面每次
# 训练用的都是同一个学习率（``1e-2``，即 :func:`~mha_ref.tutorial.training.train` 的默认值）。
# 下一节只改变这一个因素。

# %%
# .. _ex06-three-times-the-learning-rate:
#
# 同样的训练，学习率提高到三倍
# ----------------------------
# 只改变一个因素：学习率，从本页的 ``1e-2`` 改为 ``3e-2``。其余都和上面一样：同样的头数、同样
# 的三个种子、同样的评估集和停止条件，并且 **每次训练的预算都是同样的** ``budget`` **步**
# （数值见下面的打印）。为了让本页运行得快，这个预算比上面的 1500 步短。``1e-2`` 那一行没有
# 重新训练：训练是确定性的，提前停止也只看已经做过的评估，所以上面那些训练的前 ``budget`` 步
# *就是* ``budget`` 步的训练（:func:`~mha_ref.tutorial.learning_curves.truncate_curve`）。最终
# 准确率不低于 0.9 的训练算作学会了任务。作为参照，在评估集上算出两条下限：总是预测最常见的目标，
# 以及只知道两个词元之一时任何读出所能达到的最好准确率
# （:func:`~mha_ref.tutorial.ablation.one_token_accuracy`）。

from mha_ref.tutorial.ablation import chance_accuracy, one_token_accuracy
from mha_ref.tutorial.heads import plot_offset_bars
from mha_ref.tutorial.learning_curves import learned_counts, plot_rate_sweep, truncate_curve
from mha_ref.tutorial.training import evaluation_set, train

budget, page_lr, high_lr, learned = 400, 1e-2, 3e-2, 0.9
high = learning_curves(
    head_counts,
    embed_dim=embed_dim,
    seeds=(0, 1, 2),
    steps=budget,
    eval_every=25,
    threshold=0.99,
    stop_accuracy=0.999,
    stop_patience=4,
    lr=high_lr,
)
sweep = {page_lr: [truncate_curve(c, budget, 0.99) for c in curves], high_lr: high}
sweep_rows = learned_counts(sweep, learned)
print(f"预算：每次训练 {budget} 步；学会 = 最终准确率 >= {learned}")
print(
    text_table(
        ["学习率", "h", "各种子的最终准确率", "学会的种子数"],
        [
            (
                f"{r['lr']:g}",
                r["num_heads"],
                "  ".join(f"{a:.3f}" for a in r["final_accuracy"]),
                f"{r['learned']} / {r['seeds']}",
            )
            for r in sweep_rows
        ],
    )
)
probe = train(num_heads=1, embed_dim=embed_dim, seed=0, steps=1)  # 只用来取得任务的配置
eval_tokens, eval_targets = evaluation_set(probe.config, probe.table)  # (N, L), (N, L)
print(f"总是预测最常见的目标：{chance_accuracy(eval_targets):.3f}")
for offset in probe.config["offsets"]:
    bound = one_token_accuracy(eval_tokens, eval_targets, offset)
    print(f"只知道偏移 {offset:+d} 处词元时的最好读出：{bound:.3f}")

fig = plot_rate_sweep(
    sweep_rows,
    learned=learned,
    title=f"训练 {budget} 步后的最终准确率（embed_dim={embed_dim}，3 个种子）",
    heads_label="头数 h",
    accuracy_label="最终准确率",
    rate_label="学习率 = {:g}",
    learned_label="学会：{:.2f}",
)
plt.show()

# %%
# .. _ex06-why-the-single-head-fails:
#
# 单头为什么失败：它的偏移分布
# ----------------------------
# 这个任务需要偏移 ``-1`` 和 ``-2`` 处的词元。下面是单头放在每个偏移上的平均权重（在每次训练
# 结束时于一批固定的探测序列上测得），分别来自本页学习率下的训练（上面那些 1500 步的训练，收敛
# 之后）和 ``3e-2`` 下的训练，并附上它各行的平均熵，单位为奈特（0 表示全部权重落在一个键上）。

single = {
    lr: [c for c in runs if c.num_heads == 1]
    for lr, runs in ((page_lr, curves), (high_lr, high))
}
bars = {}
for lr, runs in single.items():
    for c in runs:
        row = c.offset_profile[0]
        print(
            f"h=1，学习率={lr:g}，种子 {c.seed}：准确率 {c.final_accuracy:.3f}，"
            f"熵 {c.entropy[0]:.3f}，偏移 0/-1/-2 上的权重："
            + " / ".join(f"{w:.2f}" for w in row[:3])
        )
        if c.seed == 0:
            bars[f"学习率={lr:g}，种子 0（熵 {c.entropy[0]:.3f}）"] = row
four = [c for c in high if c.num_heads == 4]
for c in four:
    print(
        f"h=4，学习率={high_lr:g}，种子 {c.seed}：准确率 {c.final_accuracy:.3f}，各头的熵 "
        + " ".join(f"{e:.3f}" for e in c.entropy)
        + "，各头最大权重所在的偏移："
        + " ".join(f"{-max(range(len(p)), key=p.__getitem__):+d}" for p in c.offset_profile)
    )
fig = plot_offset_bars(
    bars,
    title="单头（h = 1）：权重落在哪里",
    offset_label="偏移（键的位置 − 查询的位置）",
    weight_label="平均注意力权重",
)
plt.show()

# %%
# 这次扫描说明了什么（仅限这个任务和这些种子，次数以表格为准）：在本页的学习率下，每种头数在每个
# 种子上都在预算之内学会了任务。在 ``3e-2`` 下，单头在三个种子上一次也没有学会：它停在只知道两个
# 词元之一时所能达到的准确率附近，并不更好。它的权重几乎全部塌缩到了一个偏移上（熵接近 0），
# 而在预算之内，训练没有把权重挪回来。一个可能的原因（本页没有检验）是在那里 softmax 对分数的
# 梯度消失了（:ref:`示例 3 <sphx_glr_auto_examples_plot_03_scaling.py>` 测量过这一点）。在本页的学习率下，单头只能靠把权重 *柔和而不均匀
# 地分给* 两个键（熵明显大于 0）来解决任务。多个头不需要这种折中：在 ``3e-2`` 下，4 头模型的每个头
# 都很尖锐（熵接近 0），合起来覆盖了两个偏移。
#
# 所以，一个头 *能* 表示这个任务，但只能用两个词元的一种未饱和的混合，这种解更难找到，在较高的
# 学习率下还会丢失；多个头则可以各自尖锐地关注一个关系。这正是 Vaswani 等人（2017，第 3.2.2 节）
# 所说的“只有一个注意力头时，平均会抑制这一点”，在一个小任务上测了出来。这次扫描只有两个学习率和
# 一个预算；多头训练在其他学习率或更长预算下失败得有多频繁，本页没有测量，它也不能给 ``h = 2``、
# ``4`` 和 ``8`` 排出先后。

# %%
# .. _ex06-which-heads-matter-during-training:
#
# 训练过程中哪些头重要
# --------------------
# Michel 等人 2019 年的论文 "Are Sixteen Heads Really Better than One?"（arXiv:1905.10650）在每个
# 头的输出上放一个门 :math:`\xi_h = 1`，把 :math:`I_h = \mathbb{E}_x |\partial\mathcal{L}/
# \partial\xi_h|` 称为该头的重要性（第 4.1 节），并除以同一层所有头上的 l2 范数。第 6 节逐个
# epoch 跟踪按它能剪掉多少头，发现重要的头在训练早期就确定了，但不是一开始就确定。这里直接跟踪
# 重要性本身，用的是学习曲线的 4 头模型（本页的学习率 ``1e-2``，3 个种子，200 步）：
# :func:`~mha_ref.tutorial.importance_curves.importance_curves` 重复这次训练，每 25 步在评估集上
# 测量每个头的重要性和准确率。4 个头、范数为 1 时，重要性完全相等意味着每个头都是 0.5。

import math

from mha_ref.tutorial.ablation import accuracy_without
from mha_ref.tutorial.importance_curves import importance_curves, plot_importance_curves

gates = importance_curves(num_heads=4, embed_dim=embed_dim, seeds=(0, 1, 2), steps=200,
                          eval_every=25, lr=page_lr)
for run in gates:
    for step, acc, row in zip(run.steps, run.accuracy, run.importance, strict=True):
        if step in (25, 50, 100, 150, 200):
            print(f"种子 {run.seed}，第 {step} 步：准确率 {acc:.3f}，各头重要性 "
                  + " ".join(f"{v:.2f}" for v in row))
smallest = min(min(row) for run in gates for row in run.importance)
largest = max(max(row) for run in gates for row in run.importance)
print(f"任一头、任一步、任一种子上归一化重要性的最小值 / 最大值："
      f"{smallest:.2f} / {largest:.2f}")
def top_two(row):
    return set(sorted(range(len(row)), key=row.__getitem__)[-2:])
same = sum(top_two(run.importance[1]) == top_two(run.importance[-1]) for run in gates)
print(f"第 50 步最重要的两个头与第 200 步相同的种子：{same} / "
      f"{len(gates)}")


for run in gates:
    print(f"种子 {run.seed}，各测量步上重要性的原始 l2 范数："
          + " ".join(f"{n:.3f}" for n in run.raw_norm))


def settled_at(run):
    """从哪个测量步起，最重要的两个头一直是结束时的那两个。"""
    final, first = top_two(run.importance[-1]), len(run.steps) - 1
    while first > 0 and top_two(run.importance[first - 1]) == final:
        first -= 1
    return run.steps[first]


print("从哪个测量步起，最重要的两个头一直是结束时的那两个："
      + "，".join(f"种子 {run.seed}：第 {settled_at(run)} 步" for run in gates)
      + f"（从 4 个头里随机取一对，恰好是结束时那一对的概率为 1/{math.comb(4, 2)}）")

# 真正去掉头：把训练好的模型（第 200 步）的每个头依次置零
for run in gates:
    trained = train(num_heads=4, embed_dim=embed_dim, seed=run.seed, steps=200, eval_every=25,
                    lr=page_lr)
    tokens, targets = evaluation_set(trained.config, trained.table)  # (N, L), (N, L)
    model = trained.model()
    without = [accuracy_without(model, tokens, targets, (h,)) for h in range(4)]
    print(f"种子 {run.seed}：准确率 {trained.accuracy:.3f}；把头 0、1、2、3 分别置零后："
          + " ".join(f"{a:.3f}" for a in without)
          + f"（总是猜最常见的目标：{chance_accuracy(targets):.3f}）")

fig = plot_importance_curves(
    gates,
    title=f"训练过程中的头重要性 |dL/d 门|（h = 4，embed_dim={embed_dim}）",
    xlabel="训练步数",
    importance_label="重要性（按头做 l2 归一化）",
    accuracy_label="准确率（虚线）",
    seed_label="种子 {}",
    head_label="头 {}",
)
plt.show()

# %%
# 这些训练说明了什么：在这个小任务上，没有哪个头变得不重要。在每个种子、每个测量步上，四个头的
# 归一化重要性都落在上面打印的最小值和最大值之间，没有一个接近 0。绝对值是按每个序列取的，与论文
# 的公式一致；梯度的符号随序列而变，如果先对梯度求平均再取绝对值，有些头会接近 0。这里的重要性是
# 去掉一个头会带来多大损失的一阶估计，并不是真的去掉了头；最后几行把训练好的模型的每个头依次去掉，
# 那里打印的准确率才是测量结果，可与完整模型的准确率和“总是猜最常见的目标”的准确率对照。重要性的
# 排序是否很早就定下，看那两个计数：第 50 步（准确率见上面第 50 步那一行）最重要的两个头与结束时
# 的是否相同，以及每个种子从哪个测量步起一直保持结束时的那一对，可与随机一对的 1/6 对照。原始梯度
# 的大小（已打印）在模型学习时增大，在准确率到达 1 之前达到峰值，准确率接近 1 时减小，所以结束时
# 的归一化数值描述的是一个损失几乎为零的模型。一个小任务、一种宽度、三个种子：这并没有检验论文在
# 翻译模型上的发现。

# %%
# .. _ex06-what-the-paper-measured:
#
# 论文的测量结果
# --------------
# Vaswani 等人 2017 年的论文 "Attention Is All You Need"（arXiv:1706.03762）表 3 的 (A) 组在
# 保持计算量不变（``d_k = d_v = 512 / h``）的前提下改变 ``h``，报告了英德翻译开发集
# newstest2013 上的 BLEU 和困惑度（PPL）。按基础模型的训练安排（10 万步），每行一个数字，
# 论文没有报告方差，所以零点几个 BLEU 的差别可能在两次训练之间的波动之内。下面的数字抄自该表；由它们推出的一切都由代码计算。
#
# 这是两种不同的测量。论文的各行是 ``d_model = 512`` 的翻译模型按基础训练安排训练后的 BLEU；小任务的
# 数字则是 ``d_model = 16`` 的模型在一个人造任务上达到阈值所需的训练步数。小任务既不能证实、也
# 不能否定论文中各头数的排序；它能说明的是：即使每种头数最终达到同样的准确率，头数也会改变模型
# 学得多快，所以在固定的训练量之后测到的差距，本身并不等于能力上的差距。
#
# 本站的素材之一、中文教程《Transformer为什么使用多个注意力头？》（见 :ref:`references-seeds`）声称，
# 在 WMT 2014 英德翻译上 8 个头比单头高出
# “超过 2 BLEU”。论文的表格并不支持这个说法：实际差距是下面打印的数值，而且是在开发集上。论文还
# 报告了另一面：头太多（``d_k`` 因而很小）时，它那一行的分数又低了一些。右图的纵轴不从 0 开始，
# 只截取了 BLEU 的一小段，点与点之间的距离看上去会比实际差距大；各点旁标出了数值，差距以下面打印的为准。

TABLE_3A = [
    {"h": 1, "d_k": 512, "d_v": 512, "bleu": 24.9, "ppl": 5.29},
    {"h": 4, "d_k": 128, "d_v": 128, "bleu": 25.5, "ppl": 5.00},
    {"h": 8, "d_k": 64, "d_v": 64, "bleu": 25.8, "ppl": 4.92},  # 基础模型
    {"h": 16, "d_k": 32, "d_v": 32, "bleu": 25.8, "ppl": 4.91},
    {"h": 32, "d_k": 16, "d_v": 16, "bleu": 25.4, "ppl": 5.01},
]
print("Vaswani 等人 2017，表 3 (A)，英德 newstest2013（开发集），每行一个数字，没有报告方差")
paper_rows = [(r["h"], r["d_k"], r["d_v"], f"{r['bleu']:.1f}", f"{r['ppl']:.2f}") for r in TABLE_3A]
print(text_table(["h", "d_k", "d_v", "BLEU", "PPL"], paper_rows))

top_bleu = max(r["bleu"] for r in TABLE_3A)
by_heads = {r["h"]: r for r in TABLE_3A}
print(f"最高 BLEU：{top_bleu:.1f}（h = {[r['h'] for r in TABLE_3A if r['bleu'] == top_bleu]}）")
print(f"h=1 比最好的低 {top_bleu - by_heads[1]['bleu']:.1f} BLEU（而不是“超过 2 BLEU”）")
print(
    f"论文报告 h=32 比最好的低 {top_bleu - by_heads[32]['bleu']:.1f} BLEU"
    "（每行一个数字，没有报告方差）"
)

fig = plot_steps_to_threshold(
    summary,
    TABLE_3A,
    heads_label="头数 h",
    steps_label="达到并保持 0.99 所需的步数",
    seeds_label="单个种子",
    median_label="各种子的中位数",
    steps_title=f"小任务，embed_dim={embed_dim}：学习速度",
    bleu_label="BLEU，英德 newstest2013",
    bleu_title="Vaswani 等人 2017，表 3 (A)\n每行一个数字，10 万步，开发集",
    base_label="基础模型（h = 8）",
)
plt.show()

# %%
# .. _ex06-heads-for-keys-and-values-mha-gqa-mqa:
#
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

# %%
# .. _ex06-exercises:
#
# 练习
# ----
# **练习 1.** 开销表固定了 ``embed_dim``，所以加头只是把宽度切得更细。许多模型系列的做法相反：
# 固定 ``head_dim``，再增加头数，于是 ``embed_dim = num_heads * head_dim`` 随头数一起变大。取
# ``head_dim = 4`` （小模型的取值），预测从 ``h = 1`` 到 ``h = 8``，注意力层的参数量如何增长：
# 不变、与 ``h`` 成正比，还是与 ``h**2`` 成正比？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    这一层有四个形状为 ``(embed_dim, embed_dim)`` 的投影矩阵，外加它们的偏置，共
#    ``4 * (embed_dim**2 + embed_dim)`` 个参数。由于 ``embed_dim = h * head_dim``，平方项占了
#    大头，所以参数量差不多按 ``h**2`` 增长：这样每加一个头，每个投影矩阵都变宽又变高。固定
#    ``embed_dim`` 时，头只是切分宽度；固定 ``head_dim`` 时，加头就是加宽。

fixed_head_dim = 4
widths = [h * fixed_head_dim for h in head_counts]
counts = [
    sum(p.numel() for p in MultiHeadAttention(width, h, batch_first=True).parameters())
    for width, h in zip(widths, head_counts, strict=True)
]
for h, width, count in zip(head_counts, widths, counts, strict=True):
    print(
        f"h={h}：embed_dim={width}，参数量 {count}，"
        f"等于 4 * (embed_dim**2 + embed_dim)：{count == 4 * (width**2 + width)}，"
        f"与 h=1 时的参数量之比：{count / counts[0]:.1f}（h**2 = {h**2}）"
    )

# %%
# **练习 2.** 开销表显示，softmax 的 FLOPs 随 ``h`` 增长，矩阵乘法的 FLOPs 不变。这种增长要紧吗？
# 猜一猜：在小宽度、``h = 8`` 时（``embed_dim = 16``，一批 8 个序列，每个 128 个词元），softmax
# 占全部 FLOPs 的比例是多少？在头数很多的真实宽度下，``h = 32`` 时（``embed_dim = 512``，一个
# 256 个词元的序列）又是多少？哪个比例更大？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    :func:`~mha_ref.tutorial.head_count.attention_flops` 能给出两者。矩阵乘法随 ``embed_dim`` 增长
#    （投影部分与 ``embed_dim`` 的平方成正比）；softmax 则与 ``h`` 成正比、与 ``seq_len`` 的平方成正比，
#    和 ``embed_dim`` 无关。``embed_dim = 16`` 时矩阵
#    乘法很小，逐元素的 softmax 在总工作量里占了很大一块；``embed_dim = 512``、256 个词元时，投影远
#    远压过它。这里序列短和宽度大同样要紧：注意力的两次矩阵乘法也随 ``seq_len`` 的平方增长，只与它们
#    相比，softmax 的开销是 ``6 * h / (4 * embed_dim) = 1.5 / head_dim``。所以在长序列上，让 softmax
#    占比保持很小的是宽的头，而不是宽的模型：最后一行保持真实宽度和 ``h = 32``
#    （``head_dim = 16``），换成 4096 个词元，占比就变大了。同样随 ``h`` 增长的，还有注意力权重占用
#    的内存（在把它们完整存下来的那条路径上）。

for label, (n, length, width, h) in {
    "小宽度": (batch, seq_len, embed_dim, 8),
    "真实宽度": (1, 256, 512, 32),
    "真实宽度，长序列": (1, 4096, 512, 32),
}.items():
    flops = attention_flops(n, length, width, h)
    share = flops["softmax"] / flops["total"]
    against_products = flops["softmax"] / (flops["scores"] + flops["weighted_sum"])
    print(
        f"{label}：embed_dim={width}，h={h}，seq_len={length}："
        f"softmax {flops['softmax'] / 1e6:.1f} MFLOPs，总计 {flops['total'] / 1e6:.1f} MFLOPs，"
        f"占比 {share:.3f}；只与注意力的两次矩阵乘法相比 {against_products:.3f}"
        f"（1.5 / head_dim = {1.5 / (width // h):.3f}）"
    )

# %%
# **练习 3.** 在最后一张表里，有 2 个键/值头的 GQA 参数比 MHA 少，尽管两者都有 8 个查询头。四个
# 投影中哪几个少了参数？它们的矩阵现在是什么形状？一共省下多少参数？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    每个查询头都还在，也都还经过输出投影写出结果，所以 ``q_proj`` 和 ``out_proj`` 仍是
#    ``(embed_dim, embed_dim)`` 的矩阵。只有键和值的投影缩小了：各从 ``embed_dim`` 行缩到
#    ``num_kv_heads * head_dim`` 行。每去掉一行，就少了 ``embed_dim`` 个参数和 1 个偏置参数，K 和 V
#    各去掉 ``embed_dim - num_kv_heads * head_dim`` 行，所以一共省下
#    ``2 * (embed_dim - num_kv_heads * head_dim) * (embed_dim + 1)`` 个参数（下面打印了这个数，并与
#    两个模块的参数之差核对）；KV 缓存缩小的倍数与这些行数缩小的倍数相同。

kv_counts = {}
for kv_heads in (num_heads, 2):
    gqa = GroupedQueryAttention(model_dim, num_heads, kv_heads)
    kv_counts[kv_heads] = sum(p.numel() for p in gqa.parameters())
    shapes = {name: tuple(p.shape) for name, p in gqa.named_parameters() if name.endswith("weight")}
    print(f"num_kv_heads={kv_heads}：", shapes)
rows_dropped = (num_heads - 2) * (model_dim // num_heads)  # 每个投影去掉的行数，K 和 V 相同
print(
    f"省下的参数：{kv_counts[num_heads] - kv_counts[2]}，"
    f"2 × 去掉的行数 × (embed_dim + 1)：{2 * rows_dropped * (model_dim + 1)}"
)

# %%
# .. _ex06-summary:
#
# 小结
# ----
# * ``embed_dim`` 固定时，头数不改变参数量和矩阵乘法的 FLOPs；它成倍增加的是分数上的逐元素运算和
#   权重占用的内存。
# * 在本页的学习率下，每种头数都学会了这个双关系任务；一个头学得最慢（见学习曲线的表格）。
# * 学习率提高到三倍、预算不变时，单头在三个种子上一次也没有学会，而这里的每次多头训练都学会了
#   （见扫描的表格）：单头必须在两个键之间保持柔和的分配，在较高的学习率下却塌缩到了其中一个上。
#   多个头可以各自尖锐地关注。这就是 Vaswani 等人所说的“平均会抑制这一点”，在小任务上测了出来。
# * 论文表 3 (A) 每行只有一个数字，没有报告方差；单头与最好设置的差距是上面打印的数值，而不是
#   “超过 2 BLEU”。
