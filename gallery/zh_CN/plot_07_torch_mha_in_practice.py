"""
示例 7：实战 ``torch.nn.MultiheadAttention``
============================================

PyTorch 的多头注意力模块把前面几个示例中的步骤藏在了几个参数后面。本例逐一讲解其中最容易
让人意外的几个：默认的 ``(seq, batch, feature)`` 布局、它返回的注意力权重、三个投影如何打包进
一个矩阵、宽度不同的键和值，以及两个会增加键的选项（``add_bias_kv``、``add_zero_attn``）。
每一步都打印形状，并用 ``mha_ref.MultiHeadAttention`` 验证所说的内容——它与 PyTorch 模块
接口相同、``state_dict`` 也相同，因此参数可以在两者之间来回迁移。
"""

# %%
# .. _ex07-setup:
#
# 准备
# ----
# 一个小规模的自注意力问题：2 个序列，每个 4 个词元、8 个特征，共 2 个头。

import matplotlib.pyplot as plt
import torch
from torch import nn

from mha_ref import (
    MultiHeadAttention,
    merge_heads,
    pick_device,
    scaled_dot_product_attention,
    split_heads,
)
from mha_ref.tutorial.plotting import plot_heads, text_table

torch.manual_seed(0)
device = pick_device()

batch, seq_len, embed_dim, num_heads = 2, 4, 8, 2
head_dim = embed_dim // num_heads
x = torch.randn(batch, seq_len, embed_dim).to(device)  # (batch, seq_len, embed_dim)

torch_mha = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
print("x:", tuple(x.shape))


def max_diff(a, b):
    return f"{(a - b).abs().max().item():.1e}"


# %%
# .. _ex07-batch-first:
#
# ``batch_first``
# ---------------
# 默认情况下（``batch_first=False``），模块期望的输入是 ``(seq_len, batch, embed_dim)``，这是
# 早期 RNN 代码的布局。设 ``batch_first=True`` 后，它接收 ``(batch, seq_len, embed_dim)``。
# 参数完全相同，变的只是输入输出的布局。

seq_first = nn.MultiheadAttention(embed_dim, num_heads).to(device).eval()  # 即 batch_first=False
seq_first.load_state_dict(torch_mha.state_dict())
x_seq_first = x.transpose(0, 1)  # (seq_len, batch, embed_dim)

with torch.no_grad():
    out_bf, _ = torch_mha(x, x, x)  # (batch, seq_len, embed_dim)
    out_sf, _ = seq_first(x_seq_first, x_seq_first, x_seq_first)  # (seq_len, batch, embed_dim)

print("batch_first=True  输入/输出：", tuple(x.shape), tuple(out_bf.shape))
print("batch_first=False 输入/输出：", tuple(x_seq_first.shape), tuple(out_sf.shape))
print("转置之后数值相同：", max_diff(out_sf.transpose(0, 1), out_bf))

# %%
# .. _ex07-need-weights-and-average-attn-weights:
#
# ``need_weights`` 与 ``average_attn_weights``
# --------------------------------------------
# 模块返回 ``(attn_output, attn_weights)``。``need_weights=False`` 时不返回注意力权重（为 ``None``），
# PyTorch 因而可以使用融合算子。默认返回的注意力权重是 **各头的平均**，形状为
# ``(batch, seq_len, seq_len)``；``average_attn_weights=False`` 则为每个头各保留一个矩阵：
# ``(batch, num_heads, seq_len, seq_len)``。

with torch.no_grad():
    _, no_weights = torch_mha(x, x, x, need_weights=False)
    _, averaged = torch_mha(x, x, x)  # (batch, seq_len, seq_len)
    _, per_head = torch_mha(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)

print("need_weights=False:          ", no_weights)
print("默认（取平均）：             ", tuple(averaged.shape))
print("average_attn_weights=False:  ", tuple(per_head.shape))
print("各头的均值 == 平均权重：", max_diff(per_head.mean(dim=1), averaged))

# %%
# 下图把第一个序列各头的注意力权重和它们的平均并排放在一起。取平均会把各头混在一起：只有某一个头
# 才有的模式，在平均之后就被冲淡了。参数随机初始化、输入尺度为 1 时，每行注意力权重都接近均匀，没什么可
# 冲淡的；所以画这张图时把输入乘以 4（每个分数因此乘以这个倍数的平方），各头就变得尖锐，而且
# 彼此不同。

sharp = 4 * x  # (batch, seq_len, embed_dim)
with torch.no_grad():
    _, sharp_averaged = torch_mha(sharp, sharp, sharp)  # (batch, seq_len, seq_len)
    _, sharp_per_head = torch_mha(sharp, sharp, sharp, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)

fig = plot_heads(
    torch.cat([sharp_per_head[0], sharp_averaged[0:1]]),  # (num_heads + 1, seq_len, seq_len)
    [f"t{i}" for i in range(seq_len)],
    titles=[f"头 {h}" for h in range(num_heads)] + ["平均（默认）"],
    colorbar_label="注意力权重",
    xlabel="键",
    ylabel="查询",
)
plt.show()

# %%
# .. _ex07-in-proj-weight:
#
# ``in_proj_weight``：一个矩阵装下三个投影
# -----------------------------------------
# 当查询、键和值宽度相同时，参数列表里找不到 ``q_proj_weight``：三个矩阵被上下堆叠在
# ``in_proj_weight`` 中，形状为 ``(3 * embed_dim, embed_dim)``，第 ``[0, E)`` 行是 Q，
# ``[E, 2E)`` 行是 K，``[2E, 3E)`` 行是 V（``in_proj_bias`` 同理）。把它们切出来、手工重做
# 每一步，得到的就是模块的输出。

print("参数：", [(name, tuple(p.shape)) for name, p in torch_mha.named_parameters()])

W = torch_mha.in_proj_weight.detach()  # (3 * embed_dim, embed_dim)
b = torch_mha.in_proj_bias.detach()  # (3 * embed_dim,)
W_q, W_k, W_v = W[:embed_dim], W[embed_dim:2 * embed_dim], W[2 * embed_dim:]  # 各为 (embed_dim, embed_dim)
b_q, b_k, b_v = b[:embed_dim], b[embed_dim:2 * embed_dim], b[2 * embed_dim:]  # 各为 (embed_dim,)

with torch.no_grad():
    q = split_heads(x @ W_q.T + b_q, num_heads)  # (batch, num_heads, seq_len, head_dim)
    k = split_heads(x @ W_k.T + b_k, num_heads)  # (batch, num_heads, seq_len, head_dim)
    v = split_heads(x @ W_v.T + b_v, num_heads)  # (batch, num_heads, seq_len, head_dim)
    heads, weights = scaled_dot_product_attention(q, k, v, return_weights=True)  # (batch, num_heads, seq_len, head_dim), (batch, num_heads, seq_len, seq_len)
    out_by_hand = torch_mha.out_proj(merge_heads(heads))  # (batch, seq_len, embed_dim)

print("W_q, W_k, W_v:", tuple(W_q.shape), tuple(W_k.shape), tuple(W_v.shape))
print("手算输出 对比 模块输出：", max_diff(out_by_hand, out_bf))
print("手算权重 对比 模块权重：", max_diff(weights, per_head))

# %%
# .. _ex07-kdim-and-vdim:
#
# ``kdim`` 与 ``vdim``：宽度不同的键和值
# --------------------------------------
# 在交叉注意力中，键和值可能来自另一个宽度不同的模型。``kdim`` 和 ``vdim`` 设定它们的宽度；
# 打包的矩阵装不下三种不同的形状，于是 ``in_proj_weight`` 为 ``None``，改用三个独立的矩阵。
# 输出的形状与查询相同，注意力权重的形状为 ``(batch, query_len, key_len)``。

kdim, vdim, key_len = 5, 3, 7
cross = nn.MultiheadAttention(embed_dim, num_heads, kdim=kdim, vdim=vdim, batch_first=True).to(device).eval()
memory_k = torch.randn(batch, key_len, kdim).to(device)  # (batch, key_len, kdim)
memory_v = torch.randn(batch, key_len, vdim).to(device)  # (batch, key_len, vdim)

with torch.no_grad():
    out_cross, w_cross = cross(x, memory_k, memory_v)  # (batch, seq_len, embed_dim), (batch, seq_len, key_len)

print("in_proj_weight:", cross.in_proj_weight)
print("q_proj_weight:", tuple(cross.q_proj_weight.shape))
print("k_proj_weight:", tuple(cross.k_proj_weight.shape))
print("v_proj_weight:", tuple(cross.v_proj_weight.shape))
print("输出：", tuple(out_cross.shape), " 注意力权重：", tuple(w_cross.shape))

# %%
# .. _ex07-add-bias-kv-and-add-zero-attn:
#
# ``add_bias_kv`` 与 ``add_zero_attn``：额外的键
# ----------------------------------------------
# ``add_bias_kv=True`` 在每个序列末尾追加一个可学习的键和值（``bias_k``、``bias_v``）；
# ``add_zero_attn=True`` 追加一个全零的键和值（在切分多头之后）。每个选项都会让注意力权重多出一列：
# 查询可以把一部分权重放在“不特指任何词元”的位置上。全零的键得到的分数是 0，所以它总能分到
# 一些权重。

rows = []
for add_bias_kv in (False, True):
    for add_zero_attn in (False, True):
        module = nn.MultiheadAttention(embed_dim, num_heads, add_bias_kv=add_bias_kv,
                                       add_zero_attn=add_zero_attn, batch_first=True).to(device).eval()
        with torch.no_grad():
            _, w = module(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len + extra)
        extra = w.shape[-1] - seq_len
        on_extra = round(w[..., seq_len:].sum(dim=-1).mean().item(), 4) if extra else "-"
        rows.append((add_bias_kv, add_zero_attn, tuple(w.shape), extra, on_extra))

print("bias_k, bias_v:", tuple(module.bias_k.shape), tuple(module.bias_v.shape))
print(text_table(["add_bias_kv", "add_zero_attn", "权重形状", "额外的键数",
                  "额外键上的平均权重"], rows))

# %%
# .. _ex07-from-pytorch-to-mha-ref-and-back:
#
# 从 PyTorch 到 ``mha_ref``，再回到 PyTorch
# -----------------------------------------
# ``mha_ref.MultiHeadAttention`` 的构造参数和 ``state_dict`` 键名都与 PyTorch 相同，所以
# ``load_state_dict`` 可以双向迁移参数。``from_torch`` 和 ``to_torch`` 一步完成同样的事，
# 连配置一起复制。下表针对上面的几种配置，比较 PyTorch 与 ``mha_ref`` 的输出和逐头注意力权重，
# 以及转换回 PyTorch 之后的模块的输出。

configs = {
    "默认": {},
    "kdim=5，vdim=3": {"kdim": kdim, "vdim": vdim},
    "add_bias_kv": {"add_bias_kv": True},
    "add_zero_attn": {"add_zero_attn": True},
    "无偏置": {"bias": False},
}
ours = MultiHeadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
ours.load_state_dict(torch_mha.state_dict())
print("state_dict 键名相同：", list(ours.state_dict()) == list(torch_mha.state_dict()))

rows = []
for name, kwargs in configs.items():
    theirs = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True, **kwargs).to(device).eval()
    ours = MultiHeadAttention.from_torch(theirs)  # 从 torch 到 mha_ref
    back = ours.to_torch()  # 从 mha_ref 回到 torch
    key, value = (memory_k, memory_v) if "kdim" in kwargs else (x, x)
    with torch.no_grad():
        out_t, w_t = theirs(x, key, value, average_attn_weights=False)  # (batch, seq_len, embed_dim), (batch, num_heads, seq_len, S)
        out_o, w_o = ours(x, key, value, average_attn_weights=False)  # (batch, seq_len, embed_dim), (batch, num_heads, seq_len, S)
        out_b, _ = back(x, key, value)  # (batch, seq_len, embed_dim)
    rows.append((name, max_diff(out_o, out_t), max_diff(w_o, w_t), max_diff(out_b, out_t)))

print(text_table(["配置", "输出：mha_ref 对比 torch", "权重：mha_ref 对比 torch",
                  "输出：转回 torch 后"], rows))

# %%
# .. _ex07-exercises:
#
# 练习
# ----
# **练习 1.** ``torch_mha.in_proj_weight`` 的哪几行是头 1 （头从 0 开始编号）的键投影？
# 先根据 ``embed_dim`` 和 ``head_dim`` 自己算一算。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    键的那一块排在 ``embed_dim`` 行查询之后；在这一块里，头 ``h`` 占从 ``h * head_dim`` 开始的
#    ``head_dim`` 行。只用这几行算出的键，正是完整键投影中属于头 1 的那一段：

h = 1
rows = slice(embed_dim + h * head_dim, embed_dim + (h + 1) * head_dim)
W, b = torch_mha.in_proj_weight.detach(), torch_mha.in_proj_bias.detach()
k_all = x @ W[embed_dim : 2 * embed_dim].T + b[embed_dim : 2 * embed_dim]  # (batch, seq_len, embed_dim)
k_head = x @ W[rows].T + b[rows]  # (batch, seq_len, head_dim)
print(f"头 {h} 的键投影所在的行：{rows.start}:{rows.stop}")
print("与完整键投影中对应的一段相等：", torch.allclose(k_head, k_all[..., h * head_dim : (h + 1) * head_dim], atol=1e-6))

# %%
# **练习 2.** 同时设 ``add_bias_kv=True`` 和 ``add_zero_attn=True`` 时，``x`` 的逐头注意力权重是什么形状？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    每个选项都给每个序列多加一个键（和值）：前者是学到的偏置，后者是零向量。所以每个查询能看到
#    ``seq_len + 2`` 个键：

both_extra = nn.MultiheadAttention(embed_dim, num_heads, add_bias_kv=True, add_zero_attn=True, batch_first=True).to(device).eval()
with torch.no_grad():
    _, w_extra = both_extra(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len + 2)
print("x：", tuple(x.shape), " 逐头注意力权重：", tuple(w_extra.shape))

# %%
# .. _ex07-summary:
#
# 小结
# ----
# - ``batch_first`` 只改变输入和输出的布局；默认布局是 ``(seq_len, batch, embed_dim)``。
# - 返回的权重默认对各头取平均，除非传入 ``average_attn_weights=False``；``need_weights=False``
#   不返回权重，让 PyTorch 可以使用融合内核。
# - 查询、键和值宽度相同时，三个输入投影打包在 ``in_proj_weight`` 里（依次是 Q、K、V 的行）；
#   ``kdim`` 和 ``vdim`` 则换成三个独立的矩阵。
# - ``add_bias_kv`` 和 ``add_zero_attn`` 各自增加一个所有查询都能关注的键。
# - :class:`mha_ref.MultiHeadAttention` 的参数和 ``state_dict`` 的键都相同：``load_state_dict``、
#   ``from_torch`` 和 ``to_torch`` 可以在两边来回搬运模块，表格逐个配置对照了它与 PyTorch 的输出和
#   各头的权重。
