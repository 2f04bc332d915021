"""
示例 12：窄头的低秩瓶颈
=======================

在 ``embed_dim`` 固定时，头越多，每个头就越窄：``head_dim = embed_dim / num_heads``。
Bhojanapalli 等人（2020）在“Low-Rank Bottleneck in Multi-head Attention Models”
（`arXiv:2002.07028 <https://arxiv.org/abs/2002.07028>`_，第 3 节）中指出了窄头失去的东西。
一个头在 ``L`` 个键上的分数是

.. math::

    S = \\frac{X W_Q (X W_K)^\\top}{\\sqrt{d_k}}, \\qquad W_Q, W_K \\in \\mathbb{R}^{d_{model} \\times d_k},

它是经过 ``head_dim`` （即 :math:`d_k`）列的乘积，所以 :math:`\\mathrm{rank}(S) \\le d_k`。softmax
不在乎每一行加上的常数，因此（在输入的秩为 :math:`L` 时）一个头能产生注意力模式 :math:`P`，
恰好是在存在一列逐行常数 :math:`c`，使 :math:`\\log P + c \\mathbf{1}^\\top` 的秩不超过 :math:`d_k`
的时候。他们的定理 1 把门槛定在 :math:`d_k = L`；逐行常数让门槛再低一。选取 :math:`c` 使每一行
居中后，每行之和都为零，这样的矩阵秩至多为 :math:`L - 1`。所以当 :math:`d_k \\ge L - 1` 时，
一个头能表达 *任何* 权重全为正的模式；当 :math:`d_k < L - 1` 时，大多数模式都无法表达。

本页测量这一点的影响有多大：对固定的输入和一组目标模式，为每种宽度拟合出最好的单个头，并报告
这个头的模式离目标还有多远。
"""

# %%
# .. _ex12-inputs-and-target-patterns:
#
# 输入与目标模式
# --------------
# 输入 ``X`` 是 ``L = 32`` 个固定的随机向量，宽度 ``embed_dim = 64``。目标是 32 个键上的随机
# 注意力模式：每一行是缩放后的高斯噪声经过 softmax 的结果，所以大部分权重落在少数几个键上，
# 就像一个专注的头那样。每个目标的每一行都各不相同；它们在构造上没有任何低秩结构。
#
# :func:`~mha_ref.tutorial.low_rank.low_rank_sweep` 为每个目标、每种 ``head_dim`` 拟合一个头，
# 分两步：先用闭式解（用 SVD 求目标中心化对数概率的最佳秩 ``head_dim`` 近似，再换算成 ``W_Q`` 和
# ``W_K``），再以它为起点，用 Adam 直接最小化 KL 散度。全部计算使用 float64、固定随机种子、单线程。

import matplotlib.pyplot as plt

from mha_ref.tutorial.low_rank import low_rank_sweep
from mha_ref.tutorial.plotting import plot_heads, plot_lines, text_table

sweep = low_rank_sweep(head_dims=(1, 2, 4, 8, 16, 31, 32, 64), seq_len=32, embed_dim=64)
targets = sweep.targets  # (num_targets, seq_len, seq_len)
print(f"目标：{tuple(targets.shape)}，embed_dim：{sweep.embed_dim}，L：{sweep.seq_len}")
print(f"每行最大注意力权重的平均值：{targets.amax(dim=-1).mean():.3f}")
print(f"每行最大的 3 个键上权重之和的平均值：{targets.topk(3, dim=-1).values.sum(-1).mean():.3f}")

# %%
# .. _ex12-kl-divergence-against-head-dim:
#
# KL 散度随 ``head_dim`` 的变化
# -----------------------------
# 对每种宽度，我们打印拟合出的分数矩阵的最大秩，以及 KL 散度
# :math:`\mathrm{KL}(P \,\|\, \mathrm{softmax}(S))` （单位为奈特，对所有行和目标取平均；
# 0 表示这个头精确地复现了目标）。``heads`` 列是 ``embed_dim = 64`` 能容纳多少个这种宽度的头
# （``head_dim`` 不能整除它时记为 ``-``：扫描中加入 ``L - 1`` 只是为了检验门槛）。要看的是：秩从不
# 超过 ``head_dim``，而且即使头更宽，秩也停在 ``L - 1``：闭式解拟合的是居中后的对数概率，它每行之和
# 为零，用不着更宽的头。KL 随 ``head_dim`` 增大而下降，在 ``head_dim = L - 1`` 时就已降到零；
# 在此之前，梯度下降找到的头比闭式解更好，但也无法做到精确。

rows = [
    [
        d,
        sweep.embed_dim // d if sweep.embed_dim % d == 0 else "-",
        sweep.score_rank[i],
        f"{sweep.kl_closed_form[i]:.3f}",
        f"{sweep.kl_descent[i]:.3f}",
    ]
    for i, d in enumerate(sweep.head_dims)
]
print(text_table(["head_dim", "heads", "S 的秩", "闭式解的 KL", "梯度下降的 KL"], rows))

fig = plot_lines(
    sweep.head_dims,
    {"闭式解（SVD）": sweep.kl_closed_form, "梯度下降": sweep.kl_descent},
    xlabel="head_dim",
    ylabel="KL(目标 || 头)，单位：奈特",
    title="单个头与目标模式的差距（L = 32 个键）",
    logx=True,
)
fig.axes[0].axvline(sweep.seq_len - 1, color="grey", linestyle="--", linewidth=1)
fig.axes[0].annotate(
    "head_dim = L - 1 ", (sweep.seq_len - 1, max(sweep.kl_closed_form)), fontsize=8, ha="right"
)
ticks = [d for d in sweep.head_dims if d != sweep.seq_len]  # L - 1 和 L 的刻度会重叠
fig.axes[0].set_xticks(ticks, [str(d) for d in ticks])
fig.axes[0].minorticks_off()
plt.show()

# %%
# .. _ex12-what-a-narrow-head-gets-wrong:
#
# 窄头错在哪里
# ------------
# 第一个目标，旁边是三种宽度下最好的头。太窄的头保留了模式的大致轮廓，却把它弄模糊了：它无法
# 为每个查询各自挑出一组不同的键。

# sphinx_gallery_thumbnail_number = 2
shown = [2, 8, 32]  # 要画出的拟合头的 head_dim
fig = plot_heads(
    [targets[0]] + [sweep.fitted[d] for d in shown],
    titles=["目标"] + [f"单个头，head_dim = {d}" for d in shown],
    suptitle="目标模式与各宽度下最好的头",
    ncols=2,
    colorbar_label="注意力权重",
    xlabel="键的位置",
    ylabel="查询的位置",
)
plt.show()

# %%
# .. _ex12-what-this-means-for-the-number-of-heads:
#
# 这对头的数量意味着什么
# ----------------------
# 把固定的 ``embed_dim`` 分给更多的头，每个头就更窄。一旦 ``head_dim`` 小于序列长度减一，无论怎样
# 训练，每个头能表达的注意力模式都会变少：上表测出了在这些目标上的代价。头多了，能并排表达的
# 模式就多，但每个都更弱。Bhojanapalli 等人认为，这是头太多反而有害的原因之一（可对照
# :ref:`示例 6 <sphx_glr_auto_examples_plot_06_how_many_heads.py>` 中 Vaswani 等人表 3 的
# ``h = 32`` 一行），并提出把两者解耦：无论有几个头，都把 ``head_dim`` 设为序列长度，代价是更多的
# 参数。这里的目标是随机的，其中没有任何结构能帮窄头的忙；在训练好的模型真正需要的模式上，这个
# 瓶颈代价有多大是另一个问题，本页并不测量。

# %%
# .. _ex12-exercises:
#
# 练习
# ----
# **练习 1.** 在注意力模式的每一行里，把权重最大的那个键称为这一行 *最受关注的键*。在第一个目标的
# 各个查询中，有许多不同的键当过最受关注的键。对 ``head_dim = 1`` 的最佳头，无论目标是什么，它的
# 模式里最多能有几个不同的最受关注的键？写出秩为 1 的分数矩阵的各个元素，从中推理。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    秩为 1 的分数矩阵是 :math:`S_{ij} = a_i b_j`：每个查询一个数，乘以每个键一个数。对
#    :math:`a_i > 0` 的查询，最大的分数落在 :math:`b_j` 最大的键上；对 :math:`a_i < 0` 的查询，落在
#    :math:`b_j` 最小的键上。所以无论怎样训练，每个查询最受关注的键都只能是同样两个键中的一个。
#    更宽的头有更多方向可以把键区分开：

patterns = {"目标 0": targets[0]}  # 每个都是 (seq_len, seq_len)
patterns |= {f"单个头，head_dim = {d}": sweep.fitted[d] for d in sweep.head_dims}
rows = [[name, len(pattern.argmax(dim=-1).unique())] for name, pattern in patterns.items()]
print(f"查询数：{sweep.seq_len}")
print(text_table(["模式", "不同的最受关注的键"], rows))

# %%
# **练习 2.** 保持一个 ``head_dim = 4`` 的头，键有 ``L = 5`` 个。这时 ``head_dim >= L - 1``，按本页
# 开头的门槛，只要输入的秩为 ``L``，这个头就能精确匹配每一种注意力模式。扫描用的输入，特征比键多；现
# 在让特征少一些：``embed_dim = 4``，和头一样窄（头从来不会比它的输入更宽）。这个头还能匹配每一种模
# 式吗？数一数分数能取决于多少个数，一个模式又需要多少个数。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    不能。无论 :math:`W_Q` 和 :math:`W_K` 取什么，分数都是 :math:`S = X M X^\top`，其中
#    :math:`M = W_Q W_K^\top / \sqrt{d_k}` 是一个 ``embed_dim`` 行 ``embed_dim`` 列的矩阵（两个投影矩阵里的数更多，但分数只通过
#    :math:`M` 用到它们）：可选的数
#    最多 ``embed_dim**2`` 个，softmax 不在乎的每行常数再添 ``L`` 个。一个模式的对数概率有 ``L**2``
#    个数，而 ``embed_dim = L - 1`` 时，可选的数比这少。所以能达到的矩阵
#    :math:`X M X^\top + c \mathbf{1}^\top` 只铺满所有 ``L`` 行 ``L`` 列矩阵中的一个子空间，随机目标
#    的对数概率几乎必然落在它外面。这样，无论怎样训练，都没有哪个头能精确匹配这个目标：
#    :math:`\mathrm{softmax}(S) = P` 就意味着 :math:`\log P` 落在这个子空间里。输入的秩为 ``L`` 时，
#    :math:`X M X^\top` 可以是任意矩阵，开头的门槛才适用。下表把两方面都测了出来：先是每个目标居中后
#    的对数概率到最近的 :math:`X M X^\top + c \mathbf{1}^\top` 的距离（用最小二乘投影求得，相对于对
#    数概率本身的大小，再对各个目标取平均；这里允许 :math:`M` 是任意矩阵，而不只是秩不超过
#    ``head_dim`` 的矩阵），再是宽度为 4 的头的拟合结果，做法与扫描相同。输入最窄时，梯度下降比闭式
#    解好，但到不了零；距离一列说明，怎样训练都到不了。（真实注意力层的投影还带偏置，偏置相当于多一
#    个恒为 1 的输入特征；有了它，宽度为 ``L - 1`` 的输入就够了。）

import torch

from mha_ref.tutorial.low_rank import (
    fit_closed_form,
    fit_descent,
    head_scores,
    kl_divergence,
    make_inputs,
    make_targets,
)

head_dim, seq_len, steps = 4, 5, 300
small_targets = make_targets(8, seq_len)  # (8, seq_len, seq_len)
log_p = small_targets.log()  # (8, seq_len, seq_len)
centred = log_p - log_p.mean(dim=-1, keepdim=True)  # (8, seq_len, seq_len)
flat = centred.flatten(1).T  # (seq_len * seq_len, 8) 每个目标一列
row_constants = torch.kron(torch.eye(seq_len, dtype=flat.dtype), torch.ones(seq_len, 1, dtype=flat.dtype))
rows = []
for embed_dim in (4, 5, 6, 8):
    x = make_inputs(seq_len, embed_dim)  # (seq_len, embed_dim)
    # 展平后的 X M X^T + c 1^T 对 (M, c) 是线性的：M 和 c 的每个元素各占一列
    basis = torch.cat([torch.kron(x, x), row_constants], dim=1)  # (seq_len**2, embed_dim**2 + seq_len)
    nearest = basis @ torch.linalg.pinv(basis) @ flat  # (seq_len**2, 8)
    distance = ((flat - nearest).norm(dim=0) / flat.norm(dim=0)).mean()
    w_q, w_k = fit_closed_form(x, small_targets, head_dim)  # 两个都是 (8, embed_dim, head_dim)
    closed = kl_divergence(small_targets, head_scores(x, w_q, w_k)).mean()
    w_q, w_k = fit_descent(x, small_targets, w_q, w_k, steps=steps)  # 两个都是 (8, embed_dim, head_dim)
    descent = kl_divergence(small_targets, head_scores(x, w_q, w_k)).mean()
    rows.append(
        [
            embed_dim,
            int(torch.linalg.matrix_rank(x)),
            embed_dim**2 + seq_len,
            f"{distance:.3f}",
            f"{closed.clamp(min=0):.4f}",
            f"{descent.clamp(min=0):.4f}",
        ]
    )
print(f"head_dim：{head_dim}，L：{seq_len}，log P 中数的个数：L**2 = {seq_len**2}，Adam 步数：{steps}")
print(
    text_table(
        ["embed_dim", "X 的秩", "embed_dim**2 + L", "log P 的距离", "KL（闭式解）", "KL（梯度下降）"],
        rows,
    )
)

# %%
# .. _ex12-summary:
#
# 小结
# ----
# - 一个头的分数矩阵是经过 ``head_dim`` 列的乘积，所以它的秩不超过 ``head_dim``；拟合出的头的秩从未
#   超过它。
# - 对这些随机目标，KL 散度随 ``head_dim`` 增大而下降，在 ``head_dim = L - 1`` 时降到零；更窄的头保留了
#   模式的轮廓，但把它抹模糊了。
# - ``embed_dim`` 固定时，头越多，每个头越窄，能表达的模式越少。这在训练好的模型真正需要的模式上代价
#   多大，本页没有测量。
