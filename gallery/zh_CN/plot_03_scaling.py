"""
示例 3：为什么要除以 sqrt(d_k)
==============================

注意力分数是查询和键的点积 ``q . k``，两者各有 ``d_k`` 个特征。缩放点积注意力在 softmax
之前先把分数除以 sqrt(d_k)。本例测量不做这一步除法时，随着 ``d_k`` 增大会发生什么：分数越来越
分散，softmax 几乎把全部注意力权重压到一个键上，softmax 的梯度趋近于零，产生这些分数的投影矩阵就学不动了。做了除法之后，
这三项指标对任何 ``d_k`` 都基本不变。
"""

# %%
# .. _ex03-the-measurement:
#
# 测量方法
# --------
# 如果 ``q`` 和 ``k`` 的各个特征相互独立、均值为 0、方差为 1，那么 ``q . k`` 是 ``d_k`` 个
# 方差为 1 的乘积之和，方差就是 ``d_k``；除以 sqrt(d_k) 后方差回到 1。训练后网络中的查询和键
# 未必方差为 1，但结论并不依赖这一点：各特征相互独立且方差相同时，这个和的方差是单个乘积方差的
# ``d_k`` 倍（无论单个乘积的方差是多少），而除以 sqrt(d_k) 正好去掉了这个 ``d_k`` 倍。
#
# 对每个 ``d_k``，我们用固定种子的生成器抽取 1000 个查询，并为每个查询抽取 ``seq_len = 16``
# 个键（在 CPU 上生成，保证任何设备看到的都是同一组数），然后用
# ``mha_ref.scaled_dot_product_attention`` 计算权重：一次传 ``scale=1.0`` （不做除法），
# 一次用默认的缩放 ``1 / sqrt(d_k)``。计算使用 float64，打印的数字因此与设备无关。
#
# 对每个查询所在的行，我们记录：
#
# * 最大的权重（权重均匀时为 ``1 / seq_len``，一个键独占全部权重时为 1）；
# * 权重的熵（均匀时为 ``log(seq_len)``，一个键独占时为 0）；
# * softmax 梯度的大小：``p = softmax(s)`` 对分数 ``s`` 的雅可比矩阵是
#   ``diag(p) - p p^T``，我们取它的 Frobenius 范数。当某个权重趋近 1 时，这个范数趋近 0。

import math

import matplotlib.pyplot as plt
import torch

from mha_ref import pick_device, scaled_dot_product_attention
from mha_ref.tutorial.plotting import plot_lines, text_table

torch.manual_seed(0)
device = pick_device()
generator = torch.Generator().manual_seed(0)

head_dims = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
num_queries, seq_len = 1000, 16


def softmax_stats(weights):
    """对形状为 (num_queries, seq_len) 的每一行，求最大权重、熵和 softmax 雅可比矩阵的范数。"""
    largest = weights.max(dim=-1).values  # (num_queries,)
    entropy = -(weights * weights.clamp_min(1e-300).log()).sum(dim=-1)  # (num_queries,)
    jacobian = torch.diag_embed(weights) - weights[:, :, None] * weights[:, None, :]  # (num_queries, seq_len, seq_len)
    grad_norm = jacobian.flatten(1).norm(dim=-1)  # (num_queries,)
    return largest.mean().item(), entropy.mean().item(), grad_norm.median().item()


results = {"var": [], "var_scaled": [], "largest": [], "largest_scaled": [],
           "entropy": [], "entropy_scaled": [], "grad": [], "grad_scaled": []}
for d_k in head_dims:
    q = torch.randn(num_queries, 1, d_k, generator=generator, dtype=torch.float64).to(device)  # (num_queries, 1, d_k)
    k = torch.randn(num_queries, seq_len, d_k, generator=generator, dtype=torch.float64).to(device)  # (num_queries, seq_len, d_k)
    v = torch.zeros(num_queries, seq_len, 1, dtype=torch.float64, device=device)  # (num_queries, seq_len, 1)，用不到
    scores = (q @ k.transpose(-2, -1)).squeeze(1)  # (num_queries, seq_len)
    results["var"].append(scores.var().item())
    results["var_scaled"].append((scores / math.sqrt(d_k)).var().item())
    for scale, suffix in ((1.0, ""), (None, "_scaled")):
        _, weights = scaled_dot_product_attention(q, k, v, scale=scale, return_weights=True)  # (num_queries, 1, seq_len)
        largest, entropy, grad = softmax_stats(weights.squeeze(1))
        results["largest" + suffix].append(largest)
        results["entropy" + suffix].append(entropy)
        results["grad" + suffix].append(grad)

table = [
    [d_k, f"{results['var'][i]:.1f}", f"{results['var_scaled'][i]:.3f}",
     f"{results['largest'][i]:.3f}", f"{results['largest_scaled'][i]:.3f}",
     f"{results['entropy'][i]:.3f}", f"{results['entropy_scaled'][i]:.3f}",
     f"{results['grad'][i]:.1e}", f"{results['grad_scaled'][i]:.1e}"]
    for i, d_k in enumerate(head_dims)
]
print(text_table(["d_k", "方差 q.k", "缩放后", "最大权重", "缩放后", "熵", "缩放后", "梯度", "缩放后"], table))

# %%
# .. _ex03-the-scores-spread-out:
#
# 分数越来越分散
# --------------
# 在对数坐标下，原始分数的方差落在 ``方差 = d_k`` 这条直线上；缩放后的分数对任何 ``d_k``
# 方差都保持为 1。

fig = plot_lines(
    head_dims,
    {
        "q . k（不缩放）": results["var"],
        "q . k / sqrt(d_k)": results["var_scaled"],
        "参考线：d_k": head_dims,
    },
    styles={"参考线：d_k": {"ls": "--", "marker": "", "color": "grey", "lw": 7, "alpha": 0.35, "zorder": 0}},
    xlabel="d_k（每个头的特征数，对数坐标）",
    ylabel="分数的方差（对数坐标）",
    title="不缩放时，分数的方差随 d_k 线性增长",
    logx=True,
    logy=True,
)
plt.show()

# %%
# .. _ex03-the-softmax-saturates:
#
# softmax 饱和
# ------------
# 分数越分散，softmax 的结果越接近独热向量：不缩放时，随着 ``d_k`` 增大，最大权重向 1 攀升，
# 熵向 0 下降。缩放之后，无论 ``d_k`` 多大，两者都停留在同一水平。虚线表示权重完全均匀的情况。

fig, (ax_top, ax_entropy) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
plot_lines(
    head_dims,
    {
        "不缩放": results["largest"],
        "除以 sqrt(d_k)": results["largest_scaled"],
        "均匀（1 / seq_len）": [1 / seq_len] * len(head_dims),
    },
    styles={"均匀（1 / seq_len）": {"ls": "--", "marker": "", "color": "grey"}},
    xlabel="d_k（每个头的特征数，对数坐标）",
    ylabel="每行的最大权重（平均）",
    title="不缩放时，一个键几乎独占全部权重",
    logx=True,
    ax=ax_top,
)
plot_lines(
    head_dims,
    {
        "不缩放": results["entropy"],
        "除以 sqrt(d_k)": results["entropy_scaled"],
        "均匀（log seq_len）": [math.log(seq_len)] * len(head_dims),
    },
    styles={"均匀（log seq_len）": {"ls": "--", "marker": "", "color": "grey"}},
    xlabel="d_k（每个头的特征数，对数坐标）",
    ylabel="每行权重的熵（平均，单位：奈特）",
    title="不缩放时，权重越来越集中",
    logx=True,
    ax=ax_entropy,
)
ax_top.set_ylim(0, 1.05)
ax_entropy.set_ylim(0, 1.15 * math.log(seq_len))
plt.show()

# %%
# .. _ex03-the-gradient-vanishes:
#
# 梯度消失
# --------
# 饱和的 softmax 几乎不把梯度传回分数，于是产生这些分数的查询和键在训练中几乎不再变化。
# 下图是雅可比矩阵范数在所有查询上的中位数（对数坐标）：不缩放时，它随 ``d_k`` 增大下降好几个
# 数量级；缩放之后，它保持平稳。

fig = plot_lines(
    head_dims,
    {"不缩放": results["grad"], "除以 sqrt(d_k)": results["grad_scaled"]},
    xlabel="d_k（每个头的特征数，对数坐标）",
    ylabel="d softmax / d s 的 Frobenius\n范数中位数（对数坐标）",
    title="不缩放时，softmax 的梯度消失",
    logx=True,
    logy=True,
)
plt.show()

# %%
# 多头注意力把 ``embed_dim`` 切成若干个头，每个头有 ``head_dim = embed_dim // num_heads``
# 个特征，所以每个头的 ``d_k`` 比模型宽度小。但除法依然必要：上面的效应在 ``d_k = 64``
# （原始 Transformer 的头宽）时已经很明显。``mha_ref.scaled_dot_product_attention``、
# ``mha_ref.MultiHeadAttention`` 和 PyTorch 默认都除以 sqrt(head_dim)；``scale`` 参数可以
# 覆盖这个默认值。

# %%
# .. _ex03-exercises:
#
# 练习
# ----
# **练习 1.** 除以 :math:`\sqrt{d_k}` 的前提是 ``q`` 和 ``k`` 的各个特征方差为 1。假如两者的方差都是 4
# （每个特征放大到两倍），``d_k = 64`` 时 ``q . k`` 的方差是多少？除以之后又是多少？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    两个独立特征的乘积现在方差为 4 x 4 = 16，``d_k`` 个这样的乘积相加，方差为 ``16 * d_k``，
#    除以之后约为 16，而不是 1。缩放消除的是对 ``d_k`` 的依赖，而不是对输入大小的依赖。下面是在
#    ``num_queries`` 个样本上的测量结果，所以只是近似相等：

d_k = 64
q4 = 2 * torch.randn(num_queries, d_k, generator=generator, dtype=torch.float64)  # (num_queries, d_k)，方差为 4
k4 = 2 * torch.randn(num_queries, d_k, generator=generator, dtype=torch.float64)  # (num_queries, d_k)，方差为 4
dots = (q4 * k4).sum(dim=-1)  # (num_queries,)
print(f"d_k={d_k}，方差为 4：var(q.k) = {dots.var().item():.0f}，16 * d_k = {16 * d_k}")
print(f"除以 sqrt(d_k) 之后：{(dots / math.sqrt(d_k)).var().item():.1f}")

# %%
# **练习 2.** ``scaled_dot_product_attention`` 有一个 ``scale`` 参数。取什么值等于默认值
# （``scale=None``）？取什么值得到上面“不缩放”曲线所用的原始分数？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    分数乘以 ``scale``：默认值是 ``1 / sqrt(d_k)``，``scale=1.0`` 则不做缩放（上面的曲线就是这样画的）。
#    与手写的 softmax 对照检查：

q1 = torch.randn(1, 4, d_k, generator=generator, dtype=torch.float64)  # (1, num_tokens, d_k)
k1 = torch.randn(1, 4, d_k, generator=generator, dtype=torch.float64)  # (1, num_tokens, d_k)
v1 = torch.randn(1, 4, d_k, generator=generator, dtype=torch.float64)  # (1, num_tokens, d_k)
for scale in (1 / math.sqrt(d_k), 1.0):
    by_hand = torch.softmax(q1 @ k1.transpose(-2, -1) * scale, dim=-1) @ v1  # (1, num_tokens, d_k)
    default = scaled_dot_product_attention(q1, k1, v1)  # (1, num_tokens, d_k)
    given = scaled_dot_product_attention(q1, k1, v1, scale=scale)  # (1, num_tokens, d_k)
    print(f"scale={scale:.3f}：与手写的 softmax 相等：{torch.allclose(given, by_hand)}，"
          f"与默认值相等：{torch.allclose(given, default)}")

# %%
# .. _ex03-summary:
#
# 小结
# ----
# - 特征相互独立、方差为 1 时，未缩放的分数 ``q . k`` 的方差是 ``d_k``；除以 sqrt(d_k) 后，无论
#   ``d_k`` 多大，方差都回到 1。
# - 不做除法时，``d_k`` 越大，softmax 越接近独热向量：最大权重趋向 1，熵趋向 0，softmax 传回的梯度
#   下降好几个数量级。做了除法，这三者都保持平稳。
# - ``mha_ref`` 和 PyTorch 默认都除以 sqrt(head_dim)；``scale`` 参数可以改掉它。
