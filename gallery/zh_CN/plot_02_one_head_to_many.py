"""
示例 2：从单头到多头
====================

单个因果注意力头为每个词元算出一组权重，分配给它自己以及它之前的词元。多头注意力让好几个
这样的头并排工作，每个头有自己的投影矩阵，最后把各头的输出拼接在一起。

本例在一个六词元的句子上分三步搭起来：一个 ``mha_ref.CausalAttention`` 单头；把多个头堆叠
起来的 ``mha_ref.MultiHeadAttentionWrapper``；以及一次算完所有头的
``mha_ref.CausalMultiHeadAttention``。最后验证：只要参数相同，封装类和批量模块算出的数完全一样。
"""

# %%
# .. _ex02-the-sentence:
#
# 例句
# ----
# 例句是英文的“Your journey starts with one step”，意思相当于“千里之行，始于足下”。
# 逐词对照：Your（你的）、journey（旅程）、starts（开始）、with（以）、one（一）、
# step（步）。六个词元各有一个 3 维嵌入（沿用本例所依据的教材中手选的小数值；教材是 S. Raschka 的
# *Build a Large Language Model (From Scratch)* 第 3 章）。
# 实际的批次里有多个序列，所以这里的批次是同一句话的两份副本，形状为
# ``(batch, num_tokens, d_in)``。

import matplotlib.pyplot as plt
import torch

from mha_ref import (
    CausalAttention,
    CausalMultiHeadAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    allowed_to_blocked,
    causal_mask,
    pick_device,
    scaled_dot_product_attention,
    wrapper_to_batched,
)
from mha_ref.tutorial.plotting import plot_heads

torch.manual_seed(0)
device = pick_device()

tokens = ["Your（你的）", "journey（旅程）", "starts（开始）", "with（以）", "one（一）", "step（步）"]
inputs = torch.tensor(
    [
        [0.43, 0.15, 0.89],  # Your（你的）
        [0.55, 0.87, 0.66],  # journey（旅程）
        [0.57, 0.85, 0.64],  # starts（开始）
        [0.22, 0.58, 0.33],  # with（以）
        [0.77, 0.25, 0.10],  # one（一）
        [0.05, 0.80, 0.55],  # step（步）
    ]
)  # (num_tokens, d_in)
batch = torch.stack((inputs, inputs), dim=0).to(device)  # (batch, num_tokens, d_in)
d_in = inputs.shape[1]
context_length = batch.shape[1]
print("inputs:", tuple(inputs.shape))
print("batch: ", tuple(batch.shape))


def rounded(row):
    """把张量的一行格式化输出，每个值保留 4 位小数（在任何设备上都相同）。"""
    return "[" + ", ".join(f"{v:7.4f}" for v in row.tolist()) + "]"


# %%
# .. _ex02-one-causal-head:
#
# 单个因果注意力头
# ----------------
# ``CausalAttention(d_in, d_out, context_length, dropout)`` 把每个词元投影成 ``d_out`` 维的
# 查询、键和值，并且每个词元只能关注它自己和它之前的词元。输出中每个词元有 ``d_out`` 个特征。
#
# 为了看到权重，我们用这个头自己的投影，通过
# ``mha_ref.scaled_dot_product_attention(..., is_causal=True, return_weights=True)``
# 重新计算一遍注意力，并核对输出与这个头的输出一致。

torch.manual_seed(123)
d_out = 2
head = CausalAttention(d_in, d_out, context_length, 0.0).to(device)

with torch.no_grad():
    context_vec = head(batch)  # (batch, num_tokens, d_out)
    queries = head.W_query(batch)  # (batch, num_tokens, d_out)
    keys = head.W_key(batch)  # (batch, num_tokens, d_out)
    values = head.W_value(batch)  # (batch, num_tokens, d_out)
    recomputed, head_weights = scaled_dot_product_attention(
        queries, keys, values, is_causal=True, return_weights=True
    )  # (batch, num_tokens, d_out), (batch, num_tokens, num_tokens)

print("单头的输出：", tuple(context_vec.shape))
print("权重：      ", tuple(head_weights.shape))
diff = (recomputed - context_vec).abs().max().item()
print(f"重新计算的输出 对比 该头的输出：最大绝对误差 {diff:.1e}，小于 1e-6：{diff < 1e-6}")

# %%
# 下图是因果权重：第 ``i`` 行是查询词元，第 ``j`` 列是键词元。对角线以上的格子是灰色的：
# 因果掩码屏蔽了它们（词元永远看不到后面的词），所以它们的权重严格为 0（``plot_heads`` 会检查：
# 灰色格子里若有权重，它就报错）。每一行之和为 1；第一个词元除了自己没有别的键可看，所以它的
# 权重全在自己身上。

# 下面两张因果权重热力图共用的标签和掩码
causal_heatmap = dict(
    colorbar_label="注意力权重",
    xlabel="键词元",
    ylabel="查询词元",
    blocked=~causal_mask(context_length),  # (num_tokens, num_tokens)，True 表示屏蔽
    blocked_label="被因果掩码屏蔽（权重为 0）",
)
fig = plot_heads(
    head_weights[0],
    tokens,
    titles=[f"单个因果注意力头（d_out = {d_out}）"],
    **causal_heatmap,
)
plt.show()

# %%
# .. _ex02-the-code-of-the-head:
#
# 这个头的代码
# ------------
# 下面是刚才运行的代码，直接从安装好的包里打印出来（所以它不会和实际运行的代码脱节），省略了文档字符串
# （文档字符串在 API 页面上）。``forward`` 的第一行检查输入，出错时报出的信息会指明是哪个参数。接下来依次是
# 三个投影、打分、因果掩码（用 ``masked_fill`` 把对角线以上填成 ``-inf``）、除以 :math:`\sqrt{d_{out}}`、
# softmax，以及对值的加权求和。

import ast
import inspect
import textwrap


def source_of(obj):
    """类或函数实际运行的源代码，去掉其中的文档字符串。"""
    lines = textwrap.dedent(inspect.getsource(obj)).splitlines()
    docstrings = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and ast.get_docstring(node):
            first = node.body[0]
            docstrings.update(range(first.lineno - 1, first.end_lineno))
    return "\n".join(line for i, line in enumerate(lines) if i not in docstrings)


print(source_of(CausalAttention))

# %%
# .. _ex02-stacking-heads-the-wrapper:
#
# 堆叠多个头：封装类
# ------------------
# ``MultiHeadAttentionWrapper`` 保存一个由 ``num_heads`` 个相互独立的 ``CausalAttention``
# 组成的列表，并把它们的输出沿最后一维拼接起来。``d_out=2``、两个头时，每个词元的输出有
# ``num_heads * d_out`` 个特征。批次里的两个序列是同一句话，所以它们的输出也相同。
#
# 和教材一样，随机种子紧挨着模块的构造语句设置，因此随机初始化的参数与教材相同，
# 下面这些数也就和教材一致。

torch.manual_seed(123)
wrapper = MultiHeadAttentionWrapper(d_in, d_out, context_length, 0.0, num_heads=2).to(device)

with torch.no_grad():
    context_vecs = wrapper(batch)  # (batch, num_tokens, num_heads * d_out)

print("封装类的输出：", tuple(context_vecs.shape))
print("两个序列的输出相同：", torch.equal(context_vecs[0], context_vecs[1]))
for token, row in zip(tokens, context_vecs[0], strict=True):
    print(rounded(row), token)

# %%
# 教材打印了第一行和最后一行。下面的检查把它们和这里算出的行逐一比较，精确到 4 位小数。
# 如果不一致，检查就会报错，本页也就无法构建：所以上面看到的这两行就是教材里的数。

textbook_rows = torch.tensor(
    [
        [-0.4519, 0.2216, 0.4772, 0.1063],  # 第一行（Your）
        [-0.5299, -0.1081, 0.5077, 0.3493],  # 最后一行（step）
    ]
)  # (2, num_heads * d_out)
torch.testing.assert_close(context_vecs[0, [0, -1]].cpu(), textbook_rows, rtol=0, atol=5e-5)
print("第一行和最后一行与教材一致（精确到 4 位小数）")

# %%
# 封装类的代码很短：一个由各个头组成的 ``nn.ModuleList``，再用 ``torch.cat`` 沿最后一维拼接。
# 这里没有输出投影；后面的模块才加上它。

print(source_of(MultiHeadAttentionWrapper))

# %%
# .. _ex02-two-meanings-of-d-out:
#
# ``d_out`` 的两种含义
# --------------------
# 同一个名字在两处表示不同的宽度，初学者很容易在这里弄混：
#
# * 在 ``CausalAttention`` 和 ``MultiHeadAttentionWrapper`` 中，``d_out`` 是 **单个头** 的宽度；
#   封装类返回 ``num_heads * d_out`` 个特征；
# * 在 ``CausalMultiHeadAttention`` 中，``d_out`` 是所有头加起来的 **总** 宽度；每个头分到
#   ``head_dim = d_out // num_heads`` 个特征，输出有 ``d_out`` 个特征。
#
# 所以教材里用 ``d_out=2``、两个头构造的批量模块，每个头只有一个特征宽，每个词元输出两个
# 特征，而不是四个：

torch.manual_seed(123)
batched_small = CausalMultiHeadAttention(d_in, d_out, context_length, 0.0, num_heads=2).to(device)

with torch.no_grad():
    small_out = batched_small(batch)  # (batch, num_tokens, d_out)

print(f"封装类：d_out={d_out} 是每个头的宽度，共 {len(wrapper.heads)} 个头 -> 输出", tuple(context_vecs.shape))
print(f"批量模块：d_out={batched_small.d_out} 是总宽度，head_dim={batched_small.head_dim} -> 输出", tuple(small_out.shape))
for token, row in zip(tokens, small_out[0], strict=True):
    print(rounded(row), token)

# %%
# .. _ex02-same-computation-batched:
#
# 同一个计算，批量完成
# --------------------
# 要得到与封装类相同的结果，批量模块的总宽度需要 ``d_out = num_heads * 2``。``wrapper_to_batched``
# 构造这样一个模块并复制参数：它把各头的投影矩阵上下堆叠，于是头 ``i`` 占据批量投影中
# 编号为 ``i`` 的一段（编号从 0 开始）；再把输出投影设为单位矩阵（封装类没有输出投影）。现在每种投影只需一次矩阵
# 乘法，就同时算出了两个头的投影。

batched = wrapper_to_batched(wrapper)

with torch.no_grad():
    batched_out = batched(batch)  # (batch, num_tokens, num_heads * d_out)

print("封装类头 0 的 W_query.weight：    ", tuple(wrapper.heads[0].W_query.weight.shape))
print("批量模块的 W_query.weight：       ", tuple(batched.W_query.weight.shape))
print(f"批量模块：d_out={batched.d_out}，num_heads={batched.num_heads}，head_dim={batched.head_dim}")
print("批量模块的输出：", tuple(batched_out.shape))
diff = (batched_out - context_vecs).abs().max().item()
print(f"批量模块 对比 封装类：最大绝对误差 {diff:.1e}，小于 1e-6：{diff < 1e-6}")

# %%
# .. _ex02-the-pytorch-style-module-with-is-causal:
#
# 带 ``is_causal`` 的 PyTorch 风格模块
# -------------------------------------
# ``mha_ref.MultiHeadAttention`` 的构造函数和 ``forward`` 与 ``torch.nn.MultiheadAttention``
# 相同：输入宽度 ``embed_dim`` 同时也是输出宽度。这里 ``embed_dim = 3`` （嵌入的维度），
# 所以三个头各只有一个特征宽。只需传入 ``is_causal=True``，它就会自己构造因果掩码。
# 设 ``average_attn_weights=False`` 时，它为每个头各返回一个权重矩阵：三个都是下三角。

torch.manual_seed(123)
mha = MultiHeadAttention(embed_dim=d_in, num_heads=3, batch_first=True).to(device).eval()

with torch.no_grad():
    mha_out, mha_weights = mha(batch, batch, batch, is_causal=True, average_attn_weights=False)  # (batch, num_tokens, embed_dim), (batch, num_heads, num_tokens, num_tokens)

print("输出：", tuple(mha_out.shape))
print("权重：", tuple(mha_weights.shape))
above_diagonal = mha_weights[..., ~causal_mask(context_length, device=device)]  # (batch, num_heads, num_blocked)
print("对角线以上的最大权重：", above_diagonal.abs().max().item())

fig = plot_heads(
    mha_weights[0],
    tokens,
    titles=[f"头 {h}" for h in range(mha.num_heads)],
    suptitle="mha_ref.MultiHeadAttention，is_causal=True",
    **causal_heatmap,
)
plt.show()

# %%
# 三个头看起来几乎一样：每个头只有 1 维（``embed_dim = 3`` 分给三个头），六个词元向量又彼此相近，
# 这么窄的头没有多少余地彼此不同。
#
# ``torch.nn.MultiheadAttention`` 只把 ``is_causal`` 当作一个提示：掩码本身必须放进
# ``attn_mask``，而且要用它自己的约定——``True`` 表示 **屏蔽**。``allowed_to_blocked`` 把
# ``causal_mask`` （``True`` 表示可以关注）翻转成这种约定。``to_torch`` 把我们的模块
# 连同参数复制成一个 PyTorch 模块。

torch_mha = mha.to_torch()
blocked = allowed_to_blocked(causal_mask(context_length, device=device))  # (num_tokens, num_tokens)

with torch.no_grad():
    torch_out, _ = torch_mha(batch, batch, batch, attn_mask=blocked, is_causal=True)  # (batch, num_tokens, embed_dim)

diff = (torch_out - mha_out).abs().max().item()
print(f"torch.nn.MultiheadAttention 对比 mha_ref：最大绝对误差 {diff:.1e}，小于 1e-6：{diff < 1e-6}")

# %%
# .. _ex02-multi-head-attention-from-scratch:
#
# 从零写一个多头注意力模块
# ------------------------
# 现在只用 PyTorch 本身，把整个模块写在一屏之内：四个 ``nn.Linear`` 投影（查询、键、值和输出）；
# ``split_heads`` 把投影结果变形为 ``(batch, num_heads, seq_len, head_dim)``；调用一次
# ``torch.nn.functional.scaled_dot_product_attention`` 同时算出所有头；再把各头的输出并排合并，
# 经过输出投影。

import torch.nn.functional as F
from torch import nn


class MultiHeadAttentionFromScratch(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} 必须整除 embed_dim={embed_dim}，不能有余数")
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)  # 所有头的 W^Q 并排放在一起
        self.k_proj = nn.Linear(embed_dim, embed_dim)  # W^K
        self.v_proj = nn.Linear(embed_dim, embed_dim)  # W^V
        self.out_proj = nn.Linear(embed_dim, embed_dim)  # W^O

    def split_heads(self, x):  # (batch, seq_len, embed_dim)
        batch, seq_len, _ = x.shape
        x = x.view(batch, seq_len, self.num_heads, self.head_dim)  # (batch, seq_len, num_heads, head_dim)
        return x.transpose(1, 2)  # (batch, num_heads, seq_len, head_dim)

    def forward(self, x, is_causal=False):  # x 的形状：(batch, seq_len, embed_dim)
        batch, seq_len, embed_dim = x.shape
        q = self.split_heads(self.q_proj(x))  # (batch, num_heads, seq_len, head_dim)
        k = self.split_heads(self.k_proj(x))  # (batch, num_heads, seq_len, head_dim)
        v = self.split_heads(self.v_proj(x))  # (batch, num_heads, seq_len, head_dim)
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)  # (batch, num_heads, seq_len, head_dim)
        merged = heads.transpose(1, 2).reshape(batch, seq_len, embed_dim)  # (batch, seq_len, num_heads * head_dim)
        return self.out_proj(merged)  # (batch, seq_len, embed_dim)


# %%
# 它算得对吗？``torch.nn.MultiheadAttention`` 把三个输入投影打包存放在一个矩阵 ``in_proj_weight``
# 里（先是查询的各行，然后是键的，最后是值的）。把我们的参数复制进去，在同一个随机批次上分别运行两者，
# 不加掩码和加因果掩码各比较一次。

torch.manual_seed(0)
embed_dim, num_heads, seq_len = 8, 2, 6
scratch = MultiHeadAttentionFromScratch(embed_dim, num_heads).to(device)
reference = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True).to(device)
with torch.no_grad():
    reference.in_proj_weight.copy_(torch.cat([scratch.q_proj.weight, scratch.k_proj.weight, scratch.v_proj.weight]))  # (3 * embed_dim, embed_dim)
    reference.in_proj_bias.copy_(torch.cat([scratch.q_proj.bias, scratch.k_proj.bias, scratch.v_proj.bias]))  # (3 * embed_dim,)
    reference.out_proj.load_state_dict(scratch.out_proj.state_dict())

x = torch.randn(2, seq_len, embed_dim, device=device)  # (batch, seq_len, embed_dim)
blocked = allowed_to_blocked(causal_mask(seq_len, device=device))  # (seq_len, seq_len)，True 表示屏蔽
with torch.no_grad():
    ours = scratch(x)  # (batch, seq_len, embed_dim)
    theirs, _ = reference(x, x, x, need_weights=False)  # (batch, seq_len, embed_dim)
    ours_causal = scratch(x, is_causal=True)  # (batch, seq_len, embed_dim)
    theirs_causal, _ = reference(x, x, x, attn_mask=blocked, need_weights=False)  # (batch, seq_len, embed_dim)

print("输出：", tuple(ours.shape), " head_dim：", scratch.head_dim)
for label, a, b in [("不加掩码", ours, theirs), ("因果掩码", ours_causal, theirs_causal)]:
    diff = (a - b).abs().max().item()
    print(f"{label}：从零实现 对比 torch.nn.MultiheadAttention：最大绝对误差 {diff:.1e}，小于 1e-6：{diff < 1e-6}")

# %%
# .. _ex02-exercises:
#
# 练习
# ----
# **练习 1.** 一个 ``MultiHeadAttentionWrapper`` 有三个头、``d_out = 2``；一个
# ``CausalMultiHeadAttention`` 的 ``d_out = 6``、也有三个头。两者的输出各有多宽？各自的一个头有多宽？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    封装类的 ``d_out`` 是单个头的宽度，所以它输出 ``num_heads * d_out`` 个特征；批量模块的
#    ``d_out`` 是总宽度，每个头分到 ``d_out // num_heads``。这里两者的输出一样宽，头的宽度也一样：

torch.manual_seed(123)
wrapper3 = MultiHeadAttentionWrapper(d_in, 2, context_length, 0.0, num_heads=3).to(device)
batched3 = CausalMultiHeadAttention(d_in, 6, context_length, 0.0, num_heads=3).to(device)
with torch.no_grad():
    print("封装类，3 个头，d_out=2：", tuple(wrapper3(batch).shape), " 一个头：", wrapper3.heads[0].d_out)
    print("批量模块，d_out=6，3 个头：", tuple(batched3(batch).shape), " 一个头：", batched3.head_dim)

# %%
# **练习 2.** 在上面的 ``forward`` 里，如果合并各头时漏掉了转置，直接写
# ``heads.reshape(batch, seq_len, embed_dim)``，会出什么问题？从形状上看得出来吗？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    形状不变，所以不会报错，但数值错了。``heads`` 的布局是 ``(batch, num_heads, seq_len, head_dim)``：
#    不转置的话，``reshape`` 按这个顺序读取，会把同一个头里不同词元的行拼成一个词元的向量。
#    只有比较数值才能发现：

with torch.no_grad():
    q = scratch.split_heads(scratch.q_proj(x))  # (batch, num_heads, seq_len, head_dim)
    k = scratch.split_heads(scratch.k_proj(x))  # (batch, num_heads, seq_len, head_dim)
    v = scratch.split_heads(scratch.v_proj(x))  # (batch, num_heads, seq_len, head_dim)
    heads = F.scaled_dot_product_attention(q, k, v)  # (batch, num_heads, seq_len, head_dim)
    wrong = scratch.out_proj(heads.reshape(len(x), seq_len, embed_dim))  # (batch, seq_len, embed_dim)，各行被打乱
print("错误输出的形状：", tuple(wrong.shape), " 与正确输出的形状相同：", wrong.shape == ours.shape)
print("与正确输出相等：", torch.allclose(wrong, ours, atol=1e-6))

# %%
# **练习 3.** ``MultiHeadAttentionFromScratch(8, num_heads)`` 在 1、2、4、8 个头时各有多少个参数？
# 先根据四个 ``nn.Linear`` 层自己算一算。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    无论有几个头，四个投影都各是一个 ``embed_dim x embed_dim`` 的矩阵加一个长度为 ``embed_dim``
#    的偏置：头只是把同样的矩阵切成几段。所以参数个数总是 ``4 * (embed_dim**2 + embed_dim)``：

for h in [1, 2, 4, 8]:
    module = MultiHeadAttentionFromScratch(embed_dim, h)
    print(f"num_heads={h}：head_dim={module.head_dim}，参数 {sum(p.numel() for p in module.parameters())} 个")
print("4 * (embed_dim**2 + embed_dim) =", 4 * (embed_dim**2 + embed_dim))

# %%
# .. _ex02-summary:
#
# 小结
# ----
# - 因果注意力头让每个词元只对自己和之前的词元分配权重：对角线以上的权重恰好为 0，每一行之和为 1。
# - ``MultiHeadAttentionWrapper`` 运行几个相互独立的头，把它们的输出拼接起来：每个词元得到
#   ``num_heads * d_out`` 个特征，没有输出投影。
# - 在 ``CausalAttention`` 和封装类里，``d_out`` 是一个头的宽度；在 ``CausalMultiHeadAttention`` 里，
#   它是所有头加起来的宽度。
# - 把各头的投影矩阵堆叠起来之后，批量计算的模块算出的结果与封装类相同，而每个投影只需一次矩阵乘法。
# - ``torch.nn.MultiheadAttention`` 需要显式传入因果掩码，并且 ``True`` 表示屏蔽；从零写出的模块无论
#   有没有掩码，都给出与它相同的输出。
