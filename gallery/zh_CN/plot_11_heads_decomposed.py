"""
示例 11：拆开每个头的输出，头看向哪里不等于它写下什么
=====================================================

多头注意力把各个头的输出拼接起来，再乘以 :math:`W^O`
（Vaswani 等人 2017，`arXiv:1706.03762 <https://arxiv.org/abs/1706.03762>`_，第 3.2.2 节）。
Elhage 等人（2021）在“A Mathematical Framework for Transformer Circuits”
（`transformer-circuits.pub/2021/framework <https://transformer-circuits.pub/2021/framework/index.html>`_）
中换了一种读法：把 :math:`W^O` 按头切成每块 ``head_dim`` 行，输出就变成 **各个头互相独立的项之和**，
每个头一项：

.. math::

    \\mathrm{MultiHead}(X) = \\sum_{h} \\big(A^h X W_V^h W_O^h + \\mathbf{1}\\, b_V^h W_O^h\\big) + b^O,
    \\qquad A^h = \\mathrm{softmax}\\Big(\\frac{(X W_Q^h + \\mathbf{1}\\, b_Q^h)
    (X W_K^h + \\mathbf{1}\\, b_K^h)^\\top}{\\sqrt{d_k}}\\Big).

其中 :math:`\\mathbf{1}` 是全 1 的列向量，:math:`b_Q^h, b_K^h, b_V^h` 是输入投影偏置中属于这个头
的那一段；由于 :math:`A^h` 每行之和为 1，值偏置在每个位置加上的都是同一个向量 :math:`b_V^h W_O^h`。
下面的矩阵只是不含偏置的部分：PyTorch（以及 :class:`mha_ref.MultiHeadAttention`）把所有偏置都
初始化为零，所以在新建的模块上它们就是这个头的全部；训练过的模块的偏置会加上上面那些项（下面验证
的求和包含了它们）。

于是，除去偏置，每个头就是两个 ``embed_dim x embed_dim`` 的矩阵。**QK** 矩阵 :math:`W_Q^h {W_K^h}^\\top`
决定注意力模式 :math:`A^h`，也就是 *头看向哪里*；**OV** 矩阵 :math:`W_V^h W_O^h` 决定它从所看的
词元那里 *写下什么*。本页先在一个真实的模块上验证这个求和，测量两个矩阵的秩，再用实验把一个头的
这两半分开。
"""

# %%
# .. _ex11-the-output-is-a-sum-over-heads:
#
# 输出是各个头之和
# ----------------
# 我们用固定的随机种子构造一个 :class:`mha_ref.MultiHeadAttention`，``embed_dim=8``、
# ``num_heads=2`` （因此 ``head_dim=4``），并使用 float64，这样两种算法之间只差舍入误差。
# :func:`~mha_ref.tutorial.circuits.head_outputs` 根据模块的参数逐步算出每个头的那一项：它的
# 上下文向量乘以它自己那几行 :math:`W^O`。把这些项加起来再加上输出偏置，必须等于模块的输出。

import matplotlib.pyplot as plt
import torch

from mha_ref import MultiHeadAttention, causal_mask
from mha_ref.tutorial.circuits import (
    argmax_copying_fraction,
    composition_scores,
    copy_qk,
    eigenvalue_copying_score,
    head_contexts,
    head_outputs,
    ov_matrix,
    plot_matrices,
    qk_matrix,
    random_composition_baseline,
    rank,
    token_ov_circuit,
)
from mha_ref.tutorial.induction import (
    composition_ablation,
    corrupt_first_copy,
    head_scores,
    patched_logits,
)
from mha_ref.tutorial.induction_training import train_induction
from mha_ref.tutorial.plotting import plot_heads, text_table

torch.manual_seed(0)
module = MultiHeadAttention(embed_dim=8, num_heads=2, batch_first=True).double().eval()
x = torch.randn(1, 5, 8, dtype=torch.float64)  # (batch, seq_len, embed_dim)
blocked = ~causal_mask(5)  # (seq_len, seq_len)，True 表示被屏蔽

with torch.no_grad():
    output, _ = module(x, x, x, attn_mask=blocked)  # (batch, seq_len, embed_dim)
    terms = head_outputs(module, x, x, x, blocked)  # (batch, num_heads, seq_len, embed_dim)
    summed = terms.sum(dim=1) + module.out_proj.bias  # (batch, seq_len, embed_dim)
print("模块输出：", tuple(output.shape))
print("每个头一项：", tuple(terms.shape))
print(f"max |各头之和 + 偏置 - 模块输出|：{(summed - output).abs().max():.1e}")

# %%
# .. _ex11-each-head-qk-and-ov-matrices:
#
# 每个头的 QK 矩阵和 OV 矩阵，以及它们的秩
# ----------------------------------------
# 两个矩阵都是 ``embed_dim x embed_dim``，但都是经过该头 ``head_dim`` 列的乘积，所以秩至多为
# ``head_dim``。一个头只能沿着 ``embed_dim`` 维空间中的一个 ``head_dim`` 维子空间去看、去写。
# 下面的秩由 :func:`~mha_ref.tutorial.circuits.rank` 用 float64 计算。

with torch.no_grad():
    qk = [qk_matrix(module, h) for h in range(2)]  # 每个为 (embed_dim, embed_dim)
    ov = [ov_matrix(module, h) for h in range(2)]  # 每个为 (embed_dim, embed_dim)
print(f"embed_dim：{module.embed_dim}，head_dim：{module.head_dim}")
rows = [[f"头 {h}", tuple(qk[h].shape), rank(qk[h]), rank(ov[h])] for h in range(2)]
print(text_table(["头", "形状", "QK 的秩", "OV 的秩"], rows))

fig = plot_matrices(
    qk + ov,
    ["头 0：QK", "头 1：QK", "头 0：OV", "头 1：OV"],
    suptitle="每个头的两个矩阵（固定种子的模块）",
    ncols=2,
)
plt.show()

# %%
# .. _ex11-same-attention-pattern-different-output:
#
# 注意力模式相同，输出不同
# ------------------------
# 如果 QK 和 OV 互相独立，那么一个头的注意力模式就无法告诉我们它写下什么。我们直接检验这一点：
# :func:`~mha_ref.tutorial.circuits.copy_qk` 把头 0 的查询和键参数复制给头 1，而头 1 的值和输出
# 参数保持不变。这样两个头的 QK 矩阵相同，因而在任何输入上的注意力权重都相同，但 OV 矩阵不同。
# 要看的是：下面两张热力图是同一幅图，而两个头在输出中的那一项却不是同一组向量。

copy_qk(module, source=0, target=1)
with torch.no_grad():
    _, weights = head_contexts(module, x, x, x, blocked)  # (batch, num_heads, seq_len, seq_len)
    terms = head_outputs(module, x, x, x, blocked)  # (batch, num_heads, seq_len, embed_dim)
    same_qk = (qk_matrix(module, 0) - qk_matrix(module, 1)).abs().max()
    ov_gap = (ov_matrix(module, 0) - ov_matrix(module, 1)).abs().max()
print(f"max |头 0 的 QK - 头 1 的 QK|：{same_qk:.1e}")
print(f"max |头 0 的注意力权重 - 头 1 的注意力权重|：{(weights[0, 0] - weights[0, 1]).abs().max():.1e}")
print(f"max |头 0 的 OV - 头 1 的 OV|：{ov_gap:.3f}")
print(f"max |头 0 的项 - 头 1 的项|：{(terms[0, 0] - terms[0, 1]).abs().max():.3f}")

fig = plot_heads(
    weights[0],
    titles=["头 0", "头 1（QK 复制自头 0）"],
    suptitle="QK 相同，注意力权重也相同",
    colorbar_label="注意力权重",
    xlabel="键的位置",
    ylabel="查询的位置",
    blocked=blocked,
    blocked_label="被因果掩码屏蔽（权重为 0）",
)
plt.show()

# %%
# .. _ex11-the-heads-of-the-induction-model:
#
# 归纳模型的各个头
# ----------------
# 反过来：看向不同位置的头，写下的东西是否也不同？我们取
# :ref:`示例 10 <sphx_glr_auto_examples_plot_10_induction_heads.py>` 中训练的两层模型（若那个
# 示例先运行，就直接从缓存读取），把每个头的 OV 矩阵从词元一直读到 logits：
# :math:`W_E W_V^h W_O^h W_U^\top` （:func:`~mha_ref.tutorial.circuits.token_ov_circuit`）。
# 第 ``i`` 行表示头注意词元 ``i`` 时哪些 logits 会升高。一个 *复制* 型的头会把每一行的最大值放在
# 对角线上。有两个数概括这一点：**argmax 复制比例**，即头把自身 logit 提得最高的词元所占的比例
# （:func:`~mha_ref.tutorial.circuits.argmax_copying_fraction`）；以及 Elhage 等人由回路特征值定义的
# **复制分数** :math:`\sum_i \lambda_i / \sum_i |\lambda_i|`
# （:func:`~mha_ref.tutorial.circuits.eigenvalue_copying_score`；把每个词元映射到自身的头得 +1，把词元
# 映射离开自身的头得 -1）。那个示例根据“看向哪里”找出了第 1 层的前一词元头和第 2 层的归纳头；这里比较
# 它们写下什么。
#
# 读表时要注意一点：这个回路是 *直接路径* ，从嵌入经过这个头直接到反嵌入。第 2 层的头写向
# logits，对它们来说这正是起作用的路径。第 1 层的头的输出在别处起作用：它写进第 2 层要搜索的键里
# （K 组合）。它的复制比例和复制分数说明的是，假如它的输出直接送到 logits 会写下什么，而不是它为模型做了什么。

induction_model = train_induction(seed=0).model().double()
token_names = list("ABCDEFGHIJKLMNOPQRSTUVWX")  # 每个词元编号对应一个名字
with torch.no_grad():
    circuits = {
        (layer, head): token_ov_circuit(induction_model, layer, head)  # (vocab, vocab)
        for layer in range(2)
        for head in range(2)
    }
rows = [
    [
        f"层 {layer + 1} 头 {head}",
        rank(qk_matrix(induction_model.layers[layer], head)),
        rank(ov_matrix(induction_model.layers[layer], head)),
        f"{argmax_copying_fraction(circuit):.3f}",
        f"{eigenvalue_copying_score(circuit):+.3f}",
    ]
    for (layer, head), circuit in circuits.items()
]
print(f"head_dim：{induction_model.layers[0].head_dim}")
print(
    text_table(
        ["头", "QK 的秩", "OV 的秩", "argmax 复制比例", "复制分数（特征值）"],
        rows,
    )
)

fig = plot_matrices(
    [circuits[(1, 0)], circuits[(1, 1)]],
    ["层 2 头 0", "层 2 头 1"],
    suptitle="第 2 层的头写下什么：从词元到 logits",
    xlabel="输出 logit 对应的词元",
    ylabel="被注意的词元",
    tick_labels=token_names,
)
plt.show()

# %%
# .. _ex11-where-the-layer-1-head-output-is-used:
#
# 第 1 层的头的输出用在哪里
# -------------------------
# 直接路径看不出前一词元头做了什么，干预却可以。第 2 层从残差流中读三次：读出查询、键和值。下面每次
# 只从 *其中一个* 输入里去掉第 1 层的这个头
# （:func:`~mha_ref.tutorial.induction.composition_ablation`），其余一切，包括通向 logits 的路径，
# 都保留它。该看什么：去掉哪个输入会让第二份副本上的准确率下跌。如果是键，这个头就是通过 K 组合
# 起作用：它把“前一个词元”写进每个位置，供第 2 层搜索。

eval_tokens, eval_periods = train_induction(seed=0).evaluation_batch()  # (N, L), (N,)
previous_head = int(head_scores(induction_model, eval_tokens, eval_periods)[0][0].argmax())
composition = composition_ablation(induction_model, eval_tokens, eval_periods, previous_head)
print(f"第 1 层头 {previous_head}（前一词元头），第二份副本上的准确率：")
print(f"  完整模型：                 {composition['none']:.3f}")
print(f"  从第 2 层的查询中去掉它：  {composition['Q']:.3f}")
print(f"  从第 2 层的键中去掉它：    {composition['K']:.3f}")
print(f"  从第 2 层的值中去掉它：    {composition['V']:.3f}")

# %%
# .. _ex11-elhage-et-al-composition-scores:
#
# Elhage 等人的组合分数，以及它们是否与消融一致
# ---------------------------------------------
# Elhage 等人还只用权重来衡量组合：对第 1 层头的 OV 矩阵 :math:`OV_1` 和第 2 层某个头的矩阵，
# **组合分数** 为 :math:`\|M_1 M_2\|_F / (\|M_1\|_F \|M_2\|_F)`，其中 Q 组合取
# :math:`M_1 M_2 = OV_1 QK_2`，K 组合取 :math:`OV_1 QK_2^\top`，V 组合取 :math:`OV_1 OV_2`
# （:func:`~mha_ref.tutorial.circuits.composition_scores`）。这个分数只有和形状相同、彼此无关的头的
# 分数相比才有意义：即随机高斯头的平均值
# （:func:`~mha_ref.tutorial.circuits.random_composition_baseline`）。基线里的两个矩阵各是一个乘积
# ``A @ B``，``A`` 和 ``B`` 的元素取自标准正态分布，形状为 ``(embed_dim, head_dim)`` 和
# ``(head_dim, embed_dim)``：与真实头的 QK 或 OV 矩阵大小相同，秩也同为 ``head_dim``。分数要除以两个
# 范数，所以元素的尺度无关紧要；基线是 200 对这样的矩阵的平均值。权重只能提示，上面的消融才是测量。
# 所以问题在于两者是否一致，而且不只在一个模型上：下面用同样的配方、以种子 0、1、2 训练（种子 0 就是
# 上面的模型）。对每个种子，消融找到的组合是：去掉后准确率损失最大的那一路第 2 层输入；如果对第 2 层的
# 两个头而言，这种组合的分数都是三者中最大的，并且高于随机基线，就算分数与消融一致。

layer_1 = induction_model.layers[0]
baseline_draws = 200
baseline = random_composition_baseline(layer_1.embed_dim, layer_1.head_dim, draws=baseline_draws, seed=0)
print(f"随机基线（embed_dim={layer_1.embed_dim}，head_dim={layer_1.head_dim}，{baseline_draws} 对的平均）：{baseline:.3f}")
evidence_rows, agreed, seed_runs = [], 0, {}
for seed in (0, 1, 2):
    run = train_induction(seed=seed)
    seed_model = run.model().double()
    seed_tokens, seed_periods = run.evaluation_batch()  # (N, L), (N,)
    prev = int(head_scores(seed_model, seed_tokens, seed_periods)[0][0].argmax())
    seed_runs[seed] = (seed_model, seed_tokens, seed_periods, prev)
    ablated = composition_ablation(seed_model, seed_tokens, seed_periods, prev)
    by_ablation = min("QKV", key=lambda c: ablated[c])
    scores = [composition_scores(seed_model.layers[0], prev, seed_model.layers[1], h) for h in range(2)]
    agree = all(max("QKV", key=s.get) == by_ablation and s[by_ablation] > baseline for s in scores)
    agreed += agree
    evidence_rows.append(
        (
            seed,
            prev,
            " / ".join(f"{ablated[c]:.3f}" for c in "QKV"),
            by_ablation,
            *(" / ".join(f"{s[c]:.3f}" for s in scores) for c in "QKV"),
            "是" if agree else "否",
        )
    )
print(
    text_table(
        [
            "种子",
            "前一词元头",
            "从 Q / K / V 去掉它后的准确率",
            "消融结论",
            "Q 分数（层 2 头 0 / 头 1）",
            "K 分数",
            "V 分数",
            "一致",
        ],
        evidence_rows,
    )
)
print(f"分数与消融一致的种子数：{agreed} / 3")

# %%
# 该读出什么（数字以表格为准）：在每个种子上，把前一词元头从第 2 层的键里去掉才会损失准确率；它与第 2 层
# 每个头的 K 组合分数都高于随机基线，而 Q 和 V 分数都低于基线。在最后一列为“是”的种子上，只看权重的
# 度量和干预讲的是同一件事。单靠分数是不够的：它是权重的性质，并不说明模型是否用到了这条路径；消融才说明。

# %%
# .. _ex11-activation-patching:
#
# 激活修补：哪些位置承载着这个回路
# --------------------------------
# 消融是去掉一个头；**激活修补** （activation patching）问的是：预测所需的信息在哪里。做两次运行：
# 干净的序列，以及一个被破坏的序列——把 *第一份* 副本中位置 ``c`` 上的一个词元换成序列里没有的词元
# （:func:`~mha_ref.tutorial.induction.corrupt_first_copy`）。在 ``q = c + period`` 处，同一个词元在
# 第二份副本里再次出现，干净的模型会预测第一次出现时跟在它后面的词元 ``tokens[c + 1]``；在被破坏的
# 运行中，这个匹配没有了。然后再运行一次被破坏的序列，但其中 *一个* 激活取自干净的运行
# （:func:`~mha_ref.tutorial.induction.patched_logits`）：某一个头在所有位置上的输出，或者第 1 层之后
# 某一个位置上的整个残差流。表中的数是在 ``q`` 处的预测重新变成干净答案的序列所占的比例。该看什么：
# 哪个头、哪个位置能把答案找回来。种子 0、1、2，同上。

patch_rows = []
for seed, (seed_model, seed_tokens, seed_periods, prev) in seed_runs.items():
    corrupted, changed, query = corrupt_first_copy(seed_tokens, seed_periods, seed_model.unembed.out_features)
    batch_index = torch.arange(len(seed_tokens))  # (N,)
    answer = seed_tokens[batch_index, changed + 1]  # (N,) 干净运行在 q 处的预测

    def restored(logits, batch_index=batch_index, query=query, answer=answer):
        """在 q 处的预测等于干净答案的序列所占的比例。"""
        return (logits[batch_index, query].argmax(dim=-1) == answer).double().mean().item()

    with torch.no_grad():
        row = [seed, prev, f"{restored(seed_model(seed_tokens)[0]):.3f}", f"{restored(seed_model(corrupted)[0]):.3f}"]
    row += [f"{restored(patched_logits(seed_model, seed_tokens, corrupted, head=(0, h))):.3f}" for h in (prev, 1 - prev)]
    row += [f"{restored(patched_logits(seed_model, seed_tokens, corrupted, position=p)):.3f}" for p in (changed, changed + 1, query)]
    patch_rows.append(row)
print(
    text_table(
        [
            "种子",
            "前一词元头",
            "干净",
            "被破坏",
            "修补前一词元头",
            "修补另一个层 1 头",
            "修补位置 c",
            "修补 c + 1",
            "修补 q",
        ],
        patch_rows,
    )
)

# %%
# 结合回路来读（数字以表格为准）。修补前一词元头的干净输出在每个种子上都能把答案找回来；修补第 1 层的
# 另一个头找回的要少得多（每个种子上都只找回一小部分，种子 1 上最多）。三个位置中，能找回答案的是 ``c + 1``，既不是被改动的词元所在的 ``c``，也不是查询位置 ``q``：
# 第 1 层之后，“我前面的词元是 ``tokens[c]``”这条信息位于 ``c + 1``，是前一词元头写在那里的，而第 2 层
# 的归纳头匹配的正是这个键。在第 1 层之后修补 ``c`` 已经太晚：位置 ``c + 1`` 早已在那里读到了被破坏的
# 词元。这就是按位置定位出来的 K 组合。

# %%
# .. _ex11-what-this-shows:
#
# 这说明了什么
# ------------
# 这个分解是精确的：打印出的差值只在 float64 舍入误差的量级。一个头的 QK 矩阵和 OV 矩阵都是低秩
# 的，而且彼此独立：复制 QK 让两个头看向同样的词元，它们写下的向量却依然不同；而在训练好的模型
# 里，第 2 层的归纳头把它所注意的词元复制到 logits 上，这正是它们的任务需要的 OV 行为。第 1 层
# 前一词元头的分数测量的是一条它并不使用的路径：它的贡献写进第 2 层的键里，上面的干预正是在这条路径上
# 测出了它。
# 所以注意力权重的热力图只说明一个头从哪里读，从不说明它往输出里加了什么；要断言一个头贡献了
# 什么，需要看它的 OV 一侧，或者做消融。

# %%
# .. _ex11-exercises:
#
# 练习
# ----
# **练习 1.** 在这个固定种子模块的一个副本上，把头 0 的查询投影（它在 :math:`W^Q` 和查询偏置中的那几
# 行）乘以 2；在另一个副本上，改为对它的值投影做同样的事。对每种改动分别预测：头 0 的注意力权重会变
# 吗？头 0 的那一项是正好乘以 2、以别的方式改变，还是不变？头 1 的那一项会变吗？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    查询投影属于 QK 一侧：它把头 0 的每个分数都乘以 2，softmax 变得更尖锐，注意力权重随之改变；那一
#    项也跟着变，却不是乘以 2，尽管 OV 矩阵和原来一样。值投影属于 OV 一侧：注意力权重纹丝不动，而那
#    一项是值向量的加权和，于是正好乘以 2。头 1 在每个投影中都有自己的那几行，所以两种改动都碰不到它
#    的那一项：

import copy

factor = 2.0
head0 = slice(0, module.head_dim)  # 头 0 在每个输入投影中的那几行
rows = []
for name, which in (("查询", 0), ("值", 2)):
    changed = copy.deepcopy(module)
    with torch.no_grad():
        changed.projection_weights()[which][head0] *= factor  # (head_dim, embed_dim)
        changed.projection_biases()[which][head0] *= factor  # (head_dim,)
        _, new_weights = head_contexts(changed, x, x, x, blocked)  # (batch, num_heads, seq_len, seq_len)
        new_terms = head_outputs(changed, x, x, x, blocked)  # (batch, num_heads, seq_len, embed_dim)
    rows.append(
        [
            f"头 0 的{name}投影 x {factor:g}",
            f"{(new_weights[0, 0] - weights[0, 0]).abs().max():.1e}",
            f"{(new_terms[0, 0] - factor * terms[0, 0]).abs().max():.1e}",
            f"{(new_terms[0, 1] - terms[0, 1]).abs().max():.1e}",
        ]
    )
print("max |新 - 旧| （头 0 的那一项：max |新 - 系数 x 旧|）：")
print(text_table(["改动", "头 0 的注意力权重", "头 0 的那一项", "头 1 的那一项"], rows))

# %%
# **练习 2.** 反嵌入是线性的，所以归纳模型的 logits 是若干项之和：嵌入、第 1 层每个头的那一项、
# 第 2 层每个头的那一项，以及各个偏置。只保留其中一部分，预测第二份副本上的准确率：只保留第 2 层
# 两个头的项；只保留其中一个头的项；保留 *除了* 这两项之外的一切。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    第 2 层的头看向当前词元上一次出现之后紧跟的那个词元（归纳头示例测量了它们看向哪里），而它们
#    的 OV 回路把所注意的词元复制到这个词元自己的 logit 上（见上面的复制比例和复制分数）。所以单靠它们的项就
#    应当足以作出预测，单个头的项也一样；去掉它们之后剩下的部分，应当不比瞎猜好。这些项由
#    :func:`~mha_ref.tutorial.circuits.head_outputs` 在第 1 层之后的残差流上算出；只保留这些项时，
#    不加反嵌入的偏置：

from mha_ref.tutorial.induction import second_copy_accuracy

seq_len = eval_tokens.shape[1]
causal_blocked = ~causal_mask(seq_len)  # (seq_len, seq_len), True = 被屏蔽
first, second = induction_model.layers
w_u = induction_model.unembed.weight  # (vocab_size, embed_dim)
with torch.no_grad():
    embedded = induction_model.token_embedding(eval_tokens)  # (N, seq_len, embed_dim)
    x0 = embedded + induction_model.position_embedding(torch.arange(seq_len))  # (N, seq_len, embed_dim)
    x1 = x0 + first(x0, x0, x0, attn_mask=causal_blocked)[0]  # (N, seq_len, embed_dim) 第 1 层之后
    layer2 = head_outputs(second, x1, x1, x1, causal_blocked)  # (N, num_heads, seq_len, embed_dim)
    logits = {  # 每个都是 (N, seq_len, vocab_size)
        "完整模型": induction_model(eval_tokens)[0],
        "只保留第 2 层两个头的项": layer2.sum(dim=1) @ w_u.T,
        "只保留层 2 头 0 的项": layer2[:, 0] @ w_u.T,
        "只保留层 2 头 1 的项": layer2[:, 1] @ w_u.T,
        "除第 2 层两个头的项之外的一切": induction_model.unembed(x1 + second.out_proj.bias),
    }
rows = [[name, f"{second_copy_accuracy(z, eval_tokens, eval_periods):.3f}"] for name, z in logits.items()]
rows.append(["（均匀瞎猜）", f"{1 / w_u.shape[0]:.3f}"])
print(text_table(["logits 的来源", "第二份副本的准确率"], rows))

# %%
# .. _ex11-summary:
#
# 小结
# ----
# * 一层的输出恰好是每个头各一项之和，每一项经过它自己的 QK 矩阵（看向哪里）和 OV 矩阵（写下什么）；
#   两者的秩都不超过 ``head_dim``。
# * 在归纳模型中，第 2 层的头在复制：它们的 argmax 复制比例和 Elhage 等人的特征值复制分数都接近最大值。
# * 前一词元头通过第 2 层的键起作用：组合消融、相对于随机基线的组合分数和激活修补在三个种子上一致
#   （一致的种子数见表格）。激活修补把这个回路定位在位置 ``c + 1``，也就是前一词元头写入的地方。
# * 权重只能提示（热力图、分数）；干预（消融、修补）才是测量。
