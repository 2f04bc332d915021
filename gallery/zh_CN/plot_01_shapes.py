"""
示例 1：逐步追踪张量形状
========================

多头注意力的输入是一批词元向量，形状为 ``(batch, seq_len, embed_dim)``，输出的形状与输入相同。
中间要经过这样几步：把向量投影成查询（query）、键（key）和值（value），拆分成 ``num_heads``
个更窄的头并行计算注意力，最后再合并回来。

本例让一小批数据走完每一步，并打印每一步的形状；最后验证手写的各个步骤、
``mha_ref.MultiHeadAttention``、``torch.nn.MultiheadAttention`` 以及一行调用的
``F.scaled_dot_product_attention`` 算出的是同样的数。

记号：``embed_dim`` 即论文中的 :math:`d_{model}`，``num_heads`` 即 :math:`h`，
``head_dim = embed_dim // num_heads`` 即 :math:`d_k` （:math:`= d_v`）。
"""

# %%
# .. _ex01-setup:
#
# 准备
# ----
# 一批 2 个序列，每个序列 5 个词元，每个词元 64 个特征，共 8 个头。随机输入充当词元嵌入。
# 有 GPU 时计算在 GPU 上进行；打印的每个数都经过舍入，不会因设备不同而变化。

import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from mha_ref import MultiHeadAttention, merge_heads, pick_device, split_heads
from mha_ref.tutorial.plotting import plot_heads

torch.manual_seed(0)
device = pick_device()

batch, seq_len, embed_dim, num_heads = 2, 5, 64, 8
head_dim = embed_dim // num_heads  # d_k = d_v
print(f"batch={batch}, seq_len={seq_len}, embed_dim={embed_dim}, num_heads={num_heads}")
print(f"head_dim = embed_dim // num_heads = {head_dim}")

x = torch.randn(batch, seq_len, embed_dim, device=device)  # (batch, seq_len, embed_dim)
print("x:", tuple(x.shape))

# %%
# .. _ex01-the-weights:
#
# 投影矩阵（参数）
# ----------------
# 我们直接借用一个 :class:`mha_ref.MultiHeadAttention` 的参数，这样最后就能把手写的步骤和模块
# 对比。和 ``torch.nn.MultiheadAttention`` 一样，它把三个输入投影打包存放在一个矩阵
# ``in_proj_weight`` 中，形状为 ``(3 * embed_dim, embed_dim)``：依次是 Q、K、V 的行。
# ``chunk(3)`` 把它们拆开。

mha = MultiHeadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()

W_q, W_k, W_v = mha.in_proj_weight.detach().chunk(3)  # 各为 (embed_dim, embed_dim)
b_q, b_k, b_v = mha.in_proj_bias.detach().chunk(3)  # 各为 (embed_dim,)
W_o = mha.out_proj.weight.detach()  # (embed_dim, embed_dim)
b_o = mha.out_proj.bias.detach()  # (embed_dim,)
print("in_proj_weight:", tuple(mha.in_proj_weight.shape))
print("W_q, W_k, W_v: ", tuple(W_q.shape), tuple(W_k.shape), tuple(W_v.shape))
print("W_o:           ", tuple(W_o.shape))

# %%
# .. _ex01-step-1-project-to-queries-keys-and-values:
#
# 第 1 步：投影出查询、键和值
# ---------------------------
# 每个投影只需一次矩阵乘法，就同时算出了所有头的查询：输出仍有 ``embed_dim`` 个特征，
# 可以看成 ``num_heads`` 组、每组 ``head_dim`` 个。

q = x @ W_q.T + b_q  # (batch, seq_len, embed_dim)
k = x @ W_k.T + b_k  # (batch, seq_len, embed_dim)
v = x @ W_v.T + b_v  # (batch, seq_len, embed_dim)
print("q, k, v:", tuple(q.shape), tuple(k.shape), tuple(v.shape))

# %%
# .. _ex01-step-2-split-the-heads:
#
# 第 2 步：拆分多头
# ---------------------
# ``view`` 把最后一维切成 ``(num_heads, head_dim)``；``transpose`` 把“头”这一维挪到批次维
# 旁边，这样一次批量矩阵乘法就能覆盖所有头。:func:`mha_ref.split_heads` 做的正是这两步。

q_heads = q.view(batch, seq_len, num_heads, head_dim).transpose(1, 2)  # (batch, num_heads, seq_len, head_dim)
k_heads = split_heads(k, num_heads)  # (batch, num_heads, seq_len, head_dim)
v_heads = split_heads(v, num_heads)  # (batch, num_heads, seq_len, head_dim)
print("q_heads:", tuple(q_heads.shape))
print("split_heads(q) 与 view + transpose 相同：", torch.equal(split_heads(q, num_heads), q_heads))

# %%
# .. _ex01-step-3-scores-and-weights:
#
# 第 3 步：注意力分数与权重
# -------------------------
# 每个头把每个查询和每个键逐一比较，得到一个 ``(seq_len, seq_len)`` 的矩阵，再除以
# sqrt(head_dim)（原因见 :ref:`sphx_glr_auto_examples_plot_03_scaling.py`）。
# 沿键的方向做 softmax，每一行就变成非负、且和为 1 的权重。

scores = q_heads @ k_heads.transpose(-2, -1) / math.sqrt(head_dim)  # (batch, num_heads, seq_len, seq_len)
weights = scores.softmax(dim=-1)  # (batch, num_heads, seq_len, seq_len)
row_sums = weights.sum(dim=-1)  # (batch, num_heads, seq_len)
print("scores: ", tuple(scores.shape))
print("weights:", tuple(weights.shape))
print("所有权重 >= 0：", bool((weights >= 0).all()))
row_error = (row_sums - 1).abs().max().item()
print(f"每行之和为 1：max |row_sum - 1| = {row_error:.1e}，小于 1e-6：{row_error < 1e-6}")

# %%
# 下图是第一个序列的注意力权重，每个头一张热力图：第 ``i`` 行表示查询位置 ``i``
# 从各个键位置分别取了多少。现在的参数是随机初始化的，各头之间的差别只是随机噪声；训练之后各头是否分工，见示例 5。

fig = plot_heads(
    weights[0],
    [f"位置 {i}" for i in range(seq_len)],
    titles=[f"头 {h}" for h in range(num_heads)],
    suptitle="序列 0 的注意力权重（逐头）",
    annotate=False,
    colorbar_label="注意力权重",
    xlabel="键的位置",
    ylabel="查询的位置",
)
plt.show()

# %%
# .. _ex01-step-4-weighted-sum-merge-output-projection:
#
# 第 4 步：对值加权求和、合并各头、输出投影
# -----------------------------------------
# 每个头用自己的权重把自己的值混合起来。然后把各头重新并排拼接（先 ``transpose`` 回去，再
# ``reshape``；转置后的张量在内存中不再连续，所以 ``reshape`` 会复制一份），最后由输出投影
# ``W_o`` 把各头的结果混合在一起。

head_out = weights @ v_heads  # (batch, num_heads, seq_len, head_dim)
merged = head_out.transpose(1, 2).reshape(batch, seq_len, embed_dim)  # (batch, seq_len, embed_dim)
out = merged @ W_o.T + b_o  # (batch, seq_len, embed_dim)
print("head_out:", tuple(head_out.shape))
print("merged:  ", tuple(merged.shape))
print("merge_heads(head_out) 与 transpose + reshape 相同：", torch.equal(merge_heads(head_out), merged))
print("out:     ", tuple(out.shape), "与 x 形状相同：", out.shape == x.shape)

# %%
# .. _ex01-same-numbers-four-ways:
#
# 四种实现，结果相同
# ------------------
# 接下来用三种方式重做同一个计算：我们的模块；载入同一组参数的 PyTorch 模块（两者
# ``state_dict`` 的键名相同）；以及作用在我们拆分好的头上的 PyTorch 融合函数。float32
# 运算的顺序不同，最后几位就会有差别，所以我们打印最大绝对误差，以及它是否小于 1e-5。

with torch.no_grad():
    ours_out, ours_weights = mha(x, x, x, average_attn_weights=False)  # (batch, seq_len, embed_dim), (batch, num_heads, seq_len, seq_len)

    torch_mha = torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
    torch_mha.load_state_dict(mha.state_dict())
    torch_out, _ = torch_mha(x, x, x)  # (batch, seq_len, embed_dim)

    fused_heads = F.scaled_dot_product_attention(q_heads, k_heads, v_heads)  # (batch, num_heads, seq_len, head_dim)


def report(label, a, b):
    diff = (a - b).abs().max().item()
    print(f"{label}：最大绝对误差 {diff:.1e}，小于 1e-5：{diff < 1e-5}")


report("mha_ref.MultiHeadAttention 对比手写步骤", ours_out, out)
report("mha_ref 的权重 对比第 3 步的权重", ours_weights, weights)
report("torch.nn.MultiheadAttention 对比手写步骤", torch_out, out)
report("F.scaled_dot_product_attention 对比第 4 步各头", fused_heads, head_out)

# %%
# .. _ex01-exercises:
#
# 练习
# ----
# 下面的辅助函数换一个头数把整条流水线跑一遍，并打印各个形状。它还打印两项开销：参数量与
# ``num_heads`` 无关；而注意力权重的个数 ``batch * num_heads * seq_len * seq_len`` 随
# ``num_heads`` 增长——这是多头注意力要额外付出的内存。


def trace_shapes(num_heads):
    head_dim = embed_dim // num_heads
    module = MultiHeadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
    W_q = module.in_proj_weight.detach().chunk(3)[0]  # (embed_dim, embed_dim)
    b_q = module.in_proj_bias.detach().chunk(3)[0]  # (embed_dim,)
    q_heads = split_heads(x @ W_q.T + b_q, num_heads)  # (batch, num_heads, seq_len, head_dim)
    with torch.no_grad():
        out, weights = module(x, x, x, average_attn_weights=False)  # (batch, seq_len, embed_dim), (batch, num_heads, seq_len, seq_len)
    params = sum(p.numel() for p in module.parameters())
    print(f"num_heads={num_heads}：head_dim={head_dim}")
    print("  q_heads:", tuple(q_heads.shape))
    print("  weights:", tuple(weights.shape), " 单个头：", tuple(weights[0, 0].shape))
    print("  输出：  ", tuple(out.shape))
    print(f"  参数量：{params}，存储的注意力权重个数：{weights.numel()}")


# %%
# **练习 1.** 保持 ``embed_dim = 64``，把头数从 8 减到 4。现在 ``head_dim`` 是多少？
# ``q_heads`` 和注意力权重的形状是什么？输出的形状会变吗？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    ``head_dim = embed_dim // num_heads`` 从 8 翻倍到 16。``q_heads`` 和权重在“头”这一维上减半，
#    而每个头自己的 ``(seq_len, seq_len)`` 权重矩阵形状不变。输出形状仍是
#    ``(batch, seq_len, embed_dim)``：头数只改变内部怎么切分，不改变对外的接口。
#    下面是构建时打印的形状。

trace_shapes(8)
trace_shapes(4)

# %%
# **练习 2.** 两个极端：``num_heads = 1`` （只有一个和模型一样宽的头），以及
# ``num_heads = embed_dim`` （每个头只有 1 维）。形状会是什么样？``head_dim = 1``
# 的头能算出什么？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    只有一个头时，``q_heads`` 的“头”维大小为 1，所有特征共用同一个 ``(seq_len, seq_len)``
#    权重矩阵。当 ``num_heads = embed_dim`` 时，每个头的查询和键都只是一个数，分数就是两数之积：
#    对某个查询而言，权重只能随键的那个数单调上升（或单调下降），所以这样的头无法挑中
#    “中间”的某个键；除以 sqrt(1) 也等于没有缩放。两种情况的参数量相同，而第二种情况要存储的
#    注意力权重是第一种的 ``embed_dim`` 倍。下面是构建时打印的结果。

trace_shapes(1)
trace_shapes(embed_dim)

# %%
# **练习 3.** ``embed_dim = 64`` 能分成 6 个头吗？先预测构造模块时会发生什么，再展开答案。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    不能：每个头的特征数必须是同一个整数，而 64 不是 6 的倍数。构造函数会拒绝，报错信息里写明了
#    这两个参数，并列出可以用的头数：

try:
    MultiHeadAttention(embed_dim, 6, batch_first=True)
except ValueError as error:
    print(f"{type(error).__name__}: {error}")

# %%
# .. _ex01-summary:
#
# 小结
# ----
# - 多头注意力把 ``(batch, seq_len, embed_dim)`` 映射为同样形状的张量。中间依次是：投影出查询、键和值；
#   拆分成 ``(batch, num_heads, seq_len, head_dim)``；每个查询与每个键打分，得到
#   ``(batch, num_heads, seq_len, seq_len)``，再除以 sqrt(head_dim)；对键做 softmax，使每一行之和为 1；
#   对值加权求和；合并各头；输出投影。
# - ``view`` 和 ``transpose`` 负责拆分多头；合并回去要用 ``reshape``，它会复制数据，因为转置后的张量
#   不再连续。
# - 手写的各步、:class:`mha_ref.MultiHeadAttention`、载入同一组参数的 ``torch.nn.MultiheadAttention``
#   以及 ``F.scaled_dot_product_attention`` 算出的数相同，只差 float32 的舍入误差。
