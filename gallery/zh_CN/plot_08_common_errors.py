"""
示例 8：逐一复现常见错误
========================

使用多头注意力时最常犯的几个错误，每一个都在本次构建中真实复现：先给出真实的报错信息（或者
更糟——悄无声息的错误结果），再运行修正后的代码。当 ``mha_ref`` 对同一个错误的报告方式与
PyTorch 不同时，两条信息都会列出。

错误由下面的小工具 ``expect_error`` 捕获：它像 Python 一样打印异常（过长的信息按页面宽度折行）；如果代码 **没有** 抛出
异常，它会直接报错。所以本页上的每一条报错信息，都是构建本页时真实抛出的。
"""

# %%
# .. _ex08-setup:
#
# 准备
# ----
# 沿用第一个示例的形状：2 个序列，每个 5 个词元，``embed_dim = 64``，8 个头。

import textwrap
import traceback
from contextlib import contextmanager

import matplotlib.pyplot as plt
import torch
from torch import nn

from mha_ref import (
    MultiHeadAttention,
    allowed_to_blocked,
    causal_mask,
    merge_heads,
    pick_device,
    scaled_dot_product_attention,
    split_heads,
)
from mha_ref.tutorial.plotting import plot_heads

torch.manual_seed(0)
device = pick_device()

batch, seq_len, embed_dim, num_heads = 2, 5, 64, 8
head_dim = embed_dim // num_heads
x = torch.randn(batch, seq_len, embed_dim).to(device)  # (batch, seq_len, embed_dim)


@contextmanager
def expect_error(*error_types):
    """像 Python 一样打印代码块中抛出的错误（折行）；如果没有抛出错误，就报错。"""
    try:
        yield
    except error_types as error:
        message = traceback.format_exception_only(error)[-1].strip()
        print(textwrap.fill(message, width=88, subsequent_indent="    ", break_long_words=False))
    else:
        raise AssertionError(f"预期抛出 {error_types}，但代码运行时没有出错")


def max_diff(a, b):
    return f"{(a - b).abs().max().item():.1e}"


# %%
# .. _ex08-1-embed-dim-not-divisible-by-num-heads:
#
# 1. ``embed_dim`` 不能被 ``num_heads`` 整除
# -------------------------------------------
# 每个头分到 ``embed_dim // num_heads`` 个特征，所以必须能整除。PyTorch 会以
# ``AssertionError`` 终止：

with expect_error(AssertionError):
    nn.MultiheadAttention(embed_dim, num_heads=7)

# %%
# ``mha_ref`` 抛出 ``ValueError``，点名两个参数，并列出所有可行的头数：

with expect_error(ValueError):
    MultiHeadAttention(embed_dim, num_heads=7)

# %%
# 修正：选一个 ``embed_dim`` 的约数。

mha = MultiHeadAttention(embed_dim, num_heads=8, batch_first=True).to(device).eval()
print("num_heads=8 可行：head_dim =", mha.head_dim)

# %%
# .. _ex08-2-forgetting-to-divide-by-sqrt-dk:
#
# 2. 忘记除以 sqrt(d_k)
# ---------------------
# 不会报任何错，只是训练变慢或不稳定。查询和键的方差为 1、``d_k = 64`` （原始 Transformer
# 的头宽）时，不缩放的 softmax 已经接近独热向量。``scale=1.0`` 表示不做除法。（示例
# “为什么要除以 sqrt(d_k)”对每个 ``d_k`` 都做了测量。）

q, k, v = torch.randn(3, batch, num_heads, seq_len, 64).to(device)  # 各为 (batch, num_heads, seq_len, d_k)
for label, scale in (("不缩放       ", 1.0), ("1 / sqrt(d_k)", None)):
    _, w = scaled_dot_product_attention(q, k, v, scale=scale, return_weights=True)  # (batch, num_heads, seq_len, seq_len)
    largest = w.max(dim=-1).values  # (batch, num_heads, seq_len)
    print(f"{label}：最大权重的均值 {largest.mean().item():.3f}，"
          f"存在大于 0.99 的权重的行：{(largest > 0.99).float().mean().item():.0%}")

# %%
# .. _ex08-3-view-with-a-wrong-shape:
#
# 3. ``view`` 的形状写错
# ----------------------
# 用 ``view`` 拆分多头时，``batch * seq_len * num_heads * head_dim`` 必须等于元素总数。一个
# 典型的笔误是把 ``head_dim`` 的位置写成了 ``embed_dim``：

q = x  # (batch, seq_len, embed_dim)，代替投影后的查询
with expect_error(RuntimeError):
    q.view(batch, seq_len, num_heads, embed_dim)

# %%
# ``mha_ref.split_heads`` 检查唯一可能出错的地方——头数，并给出可行的取值：

with expect_error(ValueError):
    split_heads(q, 7)

# %%
# 修正：用 ``-1`` 让 ``view`` 自己推断最后一维，或者直接调用 ``split_heads``。

q_heads = q.view(batch, seq_len, num_heads, -1).transpose(1, 2)  # (batch, num_heads, seq_len, head_dim)
print("view(..., -1):", tuple(q_heads.shape), " split_heads:", tuple(split_heads(q, num_heads).shape))

# %%
# .. _ex08-4-view-after-transpose:
#
# 4. ``transpose`` 之后直接 ``view``
# ----------------------------------
# 合并多头是拆分多头的逆过程：先 ``transpose(1, 2)``，再 ``view``。但 ``transpose`` 只改变步长
# （stride），不搬动内存，而 ``view`` 要求内存按顺序排列：

head_out = scaled_dot_product_attention(q_heads, q_heads, q_heads)  # (batch, num_heads, seq_len, head_dim)
with expect_error(RuntimeError):
    head_out.transpose(1, 2).view(batch, seq_len, embed_dim)

# %%
# 修正：用 ``reshape`` （必要时会复制）、``contiguous().view(...)``，或者 ``merge_heads``。

merged = head_out.transpose(1, 2).reshape(batch, seq_len, embed_dim)  # (batch, seq_len, embed_dim)
print("reshape:", tuple(merged.shape), " 与 merge_heads 相同：", torch.equal(merge_heads(head_out), merged))

# %%
# .. _ex08-5-batch-first-confusion:
#
# 5. 搞混 ``batch_first``
# -----------------------
# ``torch.nn.MultiheadAttention`` 默认 ``batch_first=False``，按 ``(seq_len, batch, embed_dim)``
# 读取输入。给它 ``(batch, seq_len, embed_dim)`` 时，它 **不会** 报错：它把 2 个序列当成
# 2 个词元、把 5 个词元当成 5 个序列，返回的张量形状却和预期一模一样。只有权重的形状露出了马脚。

seq_first = nn.MultiheadAttention(embed_dim, num_heads).to(device).eval()  # 即 batch_first=False
right = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
right.load_state_dict(seq_first.state_dict())

with torch.no_grad():
    wrong_out, wrong_w = seq_first(x, x, x)  # x 是 (batch, seq_len, embed_dim)：被读错了
    right_out, right_w = right(x, x, x)  # (batch, seq_len, embed_dim), (batch, seq_len, seq_len)

print("输出形状：错误", tuple(wrong_out.shape), " 正确", tuple(right_out.shape))
print("权重形状：错误", tuple(wrong_w.shape), " 正确", tuple(right_w.shape))
print("两个输出的最大绝对差：", max_diff(wrong_out, right_out))

# %%
# ``mha_ref.MultiHeadAttention`` 也猜不出布局：默认设置相同，算出的也是同样的错误结果。
# 一旦传入形状为 ``(batch, seq_len)`` 的 ``key_padding_mask``，错误才会暴露。PyTorch 报的是：

ours_seq_first = MultiHeadAttention.from_torch(seq_first)
padding = torch.zeros(batch, seq_len, dtype=torch.bool, device=device)  # (batch, seq_len)，没有任何填充
with expect_error(AssertionError):
    seq_first(x, x, x, key_padding_mask=padding)

# %%
# ``mha_ref`` 报的是：

with expect_error(ValueError):
    ours_seq_first(x, x, x, key_padding_mask=padding)

# %%
# 仔细看两条信息里的形状：模块期望的是 ``seq_len`` 个序列，因为它把序列维当成了批次维；
# ``mha_ref`` 的报错信息点明了这一点，并首先提示检查布局。修正：数据是
# ``(batch, seq_len, embed_dim)`` 时设 ``batch_first=True``，或者把输入转置成
# ``(seq_len, batch, embed_dim)``。

with torch.no_grad():
    fixed_out, fixed_w = ours_seq_first(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))  # (seq_len, batch, embed_dim), (batch, seq_len, seq_len)
print("转置输入 对比 batch_first=True：", max_diff(fixed_out.transpose(0, 1), right_out))

# %%
# .. _ex08-6-averaged-weights-for-per-head-weights:
#
# 6. 把平均注意力权重误当作逐头注意力权重
# ---------------------------------------
# 默认返回的权重是 **各头的平均**，形状为 ``(batch, seq_len, seq_len)``。``weights[:, h]``
# 取到的不是头 ``h``，而是查询 ``h``。而且从平均值里也无法还原出各个头：

print("默认权重：", tuple(right_w.shape), " weights[:, 0]:", tuple(right_w[:, 0].shape))
with expect_error(RuntimeError):
    right_w.view(batch, num_heads, seq_len, seq_len)

# %%
# 修正：用 ``average_attn_weights=False`` 直接要逐头权重。

with torch.no_grad():
    _, per_head = right(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
print("逐头权重：", tuple(per_head.shape), " 它们的均值就是默认权重：", max_diff(per_head.mean(dim=1), right_w))

# %%
# .. _ex08-7-mask-polarity:
#
# 7. 掩码极性
# -----------
# ``causal_mask`` （和 ``F.scaled_dot_product_attention`` 一样）以 ``True`` 表示可以关注；
# ``torch.nn.MultiheadAttention`` 的 ``attn_mask`` 则以 ``True`` 表示屏蔽。原样传进去，因果
# 掩码就会让每个词元看不到它自己和它之前的所有词元。不会报错：最后一个词元一个键也不剩，
# PyTorch 在该处返回 NaN。``mha_ref`` 则让这个查询的权重全为 0，所以该处的注意力输出为 0，
# 模块返回的是输出投影的偏置（新建的模块中它本身就是 0）。而其余各行无论如何都是错的。

allowed = causal_mask(seq_len, device=device)  # (seq_len, seq_len)，True 表示可以关注
ours_right = MultiHeadAttention.from_torch(right)
with torch.no_grad():
    torch_wrong, _ = right(x, x, x, attn_mask=allowed)  # (batch, seq_len, embed_dim)
    ours_wrong, _ = ours_right(x, x, x, attn_mask=allowed)  # (batch, seq_len, embed_dim)
    fixed, _ = right(x, x, x, attn_mask=allowed_to_blocked(allowed))  # (batch, seq_len, embed_dim)

print("出现 NaN 的查询位置，torch：  ", torch_wrong.isnan().any(dim=-1)[0].nonzero().flatten().tolist())
print("出现 NaN 的查询位置，mha_ref：", ours_wrong.isnan().any(dim=-1)[0].nonzero().flatten().tolist())
print("mha_ref 最后一个位置的输出 减去 out_proj.bias：", max_diff(ours_wrong[:, -1], ours_right.out_proj.bias))
print(f"mha_ref 错误结果 对比 正确结果，前 {seq_len - 1} 个位置：", max_diff(ours_wrong[:, :-1], fixed[:, :-1]))

# %%
# 从权重上看得更清楚。原样传入掩码时，每个查询只能看到它之后的键，最后一个查询什么也看不到：
# PyTorch 在这一行给出的权重是 NaN，和被屏蔽的格子一样画成灰色。

with torch.no_grad():
    _, weights_wrong = right(x, x, x, attn_mask=allowed, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
    _, weights_fixed = right(x, x, x, attn_mask=allowed_to_blocked(allowed), average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)

fig = plot_heads(
    torch.stack([weights_wrong[0, 0], weights_fixed[0, 0]]),  # (2, seq_len, seq_len)
    titles=["错误：True 表示可以关注", "正确：True 表示屏蔽"],
    suptitle="torch.nn.MultiheadAttention，序列 0、头 0",
    colorbar_label="注意力权重",
    xlabel="键位置",
    ylabel="查询位置",
    blocked=torch.stack([allowed, ~allowed]),  # (2, seq_len, seq_len)：每个 attn_mask 屏蔽的位置
    blocked_label="被屏蔽（attn_mask 中为 True）",
)
plt.show()

# %%
# 修正：把掩码交给 ``torch.nn.MultiheadAttention`` 之前先用 ``allowed_to_blocked(mask)``
# （即 ``~mask``）转换；或者对 ``mha_ref.MultiHeadAttention`` 使用 ``is_causal=True``，
# 它会自己构造正确的掩码。

with torch.no_grad():
    ours_causal, _ = ours_right(x, x, x, is_causal=True)  # (batch, seq_len, embed_dim)
print("is_causal=True 对比 修正后的掩码：", max_diff(ours_causal, fixed))
print("还有 NaN 吗：", bool(fixed.isnan().any()))

# %%
# .. _ex08-8-wrong-mask-dtype-or-shape:
#
# 8. 掩码的 dtype 或形状不对
# --------------------------
# 掩码只能是 ``bool`` 或浮点类型，形状也是固定的。常见的错误有三种。第一种是整数 0/1 掩码：
# ``torch.nn.MultiheadAttention`` 拒绝它；``mha_ref`` 同样拒绝，并说明原因：

blocked = allowed_to_blocked(allowed)  # (seq_len, seq_len)，True 表示屏蔽
with expect_error(AssertionError):
    right(x, x, x, attn_mask=blocked.long())
with expect_error(TypeError):
    ours_right(x, x, x, attn_mask=blocked.long())

# %%
# 第二种是每个序列一个掩码，即 ``(batch, seq_len, seq_len)``。三维的 ``attn_mask`` 必须为每个
# 序列的 *每个头* 各给一个掩码，即 ``(batch * num_heads, seq_len, seq_len)``。PyTorch 的报错
# 取决于调用走哪条路径：开启求导时，它会写出期望的形状；在推理快速路径中（``torch.no_grad()``
# 之下）则不会。

per_sequence = blocked.expand(batch, seq_len, seq_len)  # (batch, seq_len, seq_len)
with expect_error(RuntimeError):
    right(x, x, x, attn_mask=per_sequence)
with expect_error(RuntimeError), torch.no_grad():
    right(x, x, x, attn_mask=per_sequence)
with expect_error(ValueError):
    ours_right(x, x, x, attn_mask=per_sequence)

# %%
# 第三种不会报错：0/1 的 *浮点* 掩码。浮点掩码是 **加** 到分数上的，所以“被屏蔽”的键得到
# ``+1``，权重反而更大。没有任何报错；把本该被屏蔽的键上的权重，和完全不加掩码时的同一组权重
# 放在一起比一比就知道了：

with torch.no_grad():
    _, weights_float01 = right(x, x, x, attn_mask=blocked.float())  # (batch, seq_len, seq_len)
    _, weights_no_mask = right(x, x, x)  # (batch, seq_len, seq_len)
print(f"不加掩码时，本该屏蔽的键上的平均权重：    {weights_no_mask.masked_select(blocked).mean().item():.3f}")
print(f"0/1 浮点掩码下，本该屏蔽的键上的平均权重：{weights_float01.masked_select(blocked).mean().item():.3f}")
print(f"0/1 浮点掩码下，被屏蔽的键上的最大权重：{weights_float01.masked_select(blocked).max().item():.2f}")

# %%
# 修正：整数掩码和 0/1 浮点掩码用 ``.bool()`` 转换；每个序列一个掩码时，用
# ``repeat_interleave(num_heads, dim=0)`` 为每个头复制一份。现在每一种都给出第 7 节的因果结果。

per_head = per_sequence.repeat_interleave(num_heads, dim=0)  # (batch * num_heads, seq_len, seq_len)
with torch.no_grad():
    from_long, _ = right(x, x, x, attn_mask=blocked.long().bool())  # (batch, seq_len, embed_dim)
    from_float, weights_bool = right(x, x, x, attn_mask=blocked.float().bool())  # (batch, seq_len, embed_dim)
    from_per_head, _ = right(x, x, x, attn_mask=per_head)  # (batch, seq_len, embed_dim)
print("整数掩码 .bool() 对比 第 7 节：", max_diff(from_long, fixed))
print("浮点掩码 .bool() 对比 第 7 节：", max_diff(from_float, fixed))
print("逐头的 3 维掩码 对比 第 7 节： ", max_diff(from_per_head, fixed))
print(f"bool 掩码下，被屏蔽的键上的最大权重：{weights_bool.masked_select(blocked).max().item():.2f}")

# %%
# .. _ex08-exercises:
#
# 练习
# ----
# **练习 1.** 有人用 ``x.view(batch, num_heads, seq_len, head_dim)`` 拆分多头，没有报错。结果对吗？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    不对。元素个数相同，``view`` 无从报错，但它按错误的顺序切分每个序列在内存里的数据：一个“头”
#    拿到的是几个完整的词元，而不是每个词元特征中的一段。形状对，数值不对：

wrong_split = x.view(batch, num_heads, seq_len, head_dim)  # 形状对，内容错
right_split = split_heads(x, num_heads)  # (batch, num_heads, seq_len, head_dim)
print("形状相同：", wrong_split.shape == right_split.shape, " 数值相同：", torch.equal(wrong_split, right_split))

# %%
# **练习 2.** ``nn.MultiheadAttention(embed_dim, num_heads)`` 的 ``batch_first`` 保持默认值，
# 输入 ``x`` 的形状是 ``(batch, seq_len, embed_dim)``。它把哪个尺寸当作批大小，哪个当作序列长度？
# 先预测它返回的注意力权重的形状。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    它把 ``x`` 读成 ``(seq_len, batch, embed_dim)``：批大小被当成了序列长度，序列长度被当成了批大小。
#    返回的权重（在模块看来是 ``(batch, L, S)``）暴露了这一点：

default_layout = nn.MultiheadAttention(embed_dim, num_heads).to(device).eval()  # batch_first 取默认值 False
with torch.no_grad():
    _, w_default = default_layout(x, x, x)  # 用我们的名字写是 (seq_len, batch, batch)
print("x：", tuple(x.shape), "-> 注意力权重：", tuple(w_default.shape))

# %%
# .. _ex08-summary:
#
# 小结
# ----
# - 有些错误会报错：头数不能整除 ``embed_dim``，``view`` 的形状不对或用在 ``transpose`` 之后，
#   整数掩码，形状不对的三维掩码。``mha_ref`` 的报错信息会指出是哪个参数，以及怎样修正。
# - 另一些错误不报错，只给出错误的数：没有除以 sqrt(d_k)，弄混 ``batch_first`` （直到传入
#   ``key_padding_mask`` 才暴露），把取过平均的权重当成各头的权重来索引，掩码极性弄反，由 0 和 1
#   组成的浮点掩码。
# - 所以要检查输出 *和* 权重的形状、所调用 API 的掩码约定，以及每个掩码的数据类型。
