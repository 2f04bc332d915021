"""
示例 4：掩码
============

掩码告诉注意力：一个查询可以使用哪些键。两种掩码能满足大部分需要：**因果** 掩码（词元不能看
后面的词元），以及 **填充** 掩码（谁都不能看那些为了让批次中各序列等长而补上的填充词元）。本例
画出这两种掩码，把它们组合起来，并演示用户最常踩的几个坑：

* PyTorch 的两套注意力 API 对布尔掩码的解释 **正好相反**；
* 由 0 和 1 组成的浮点掩码 **什么也没屏蔽**；
* 当一个查询的所有键都被屏蔽时，不同 API 给出的结果各不相同；
* 查询比键少时（用 KV 缓存解码），“因果”有两种对齐方式，而 PyTorch 的 ``is_causal``
  选的往往不是你想要的那一种。

在 ``mha_ref`` 中，所有构造掩码的函数都使用同一个约定：``True`` 表示可以关注。
"""

# %%
# .. _ex04-a-padded-batch:
#
# 一个带填充的批次
# ----------------
# 两个长度不同的句子，在右侧填充到 ``seq_len = 6`` 个词元。它们的嵌入是随机的，这里只关心掩码。
# ``padding_mask(lengths)`` 在真实词元处为 ``True``。

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from mha_ref import (
    MultiHeadAttention,
    allowed_to_additive,
    allowed_to_blocked,
    causal_mask,
    padding_mask,
    pick_device,
    scaled_dot_product_attention,
)
from mha_ref.tutorial.plotting import plot_heads, plot_masks, text_table

torch.manual_seed(0)
device = pick_device()

sentences = [
    ["千里", "之", "行", "始于", "足下", "<pad>"],
    ["我们", "迈出", "一小步", "<pad>", "<pad>", "<pad>"],
]
lengths = torch.tensor([5, 3])  # 每个句子的真实词元数
batch, seq_len, embed_dim, num_heads = 2, 6, 8, 2
x = torch.randn(batch, seq_len, embed_dim).to(device)  # (batch, seq_len, embed_dim)

is_real = padding_mask(lengths, max_len=seq_len).to(device)  # (batch, seq_len)
allowed_causal = causal_mask(seq_len, device=device)  # (seq_len, seq_len)
allowed_both = allowed_causal & is_real[:, None, :]  # (batch, seq_len, seq_len)
print("padding_mask:", tuple(is_real.shape), is_real.int().tolist())
print("causal_mask: ", tuple(allowed_causal.shape))
print("两者组合：   ", tuple(allowed_both.shape))

# %%
# 下图是第二个句子的三种掩码：行是查询，列是键，蓝色格子表示可以关注，浅灰色格子表示被屏蔽。填充掩码屏蔽的是填充的
# **键** （列）；填充位置上的查询（行）照样会算出结果，只是之后会被直接忽略。

fig = plot_masks(
    [allowed_causal, is_real[1].expand(seq_len, seq_len), allowed_both[1]],
    sentences[1],
    titles=["因果", "填充", "因果 & 填充"],
    legend=("可以关注", "被屏蔽"),
    xlabel="键",
    ylabel="查询",
)
plt.show()

# %%
# .. _ex04-what-the-masks-do-to-the-weights:
#
# 掩码对注意力权重的影响
# ----------------------
# ``mha_ref.MultiHeadAttention`` 接收掩码的方式与 ``torch.nn.MultiheadAttention`` 相同：
# 形状为 ``(seq_len, seq_len)`` 的 ``attn_mask`` 和形状为 ``(batch, seq_len)`` 的
# ``key_padding_mask``，两者都以 ``True`` 表示 **屏蔽**，所以我们的掩码要先经过
# ``allowed_to_blocked`` 转换。下图是第二个句子的头 0：灰色格子就是被掩码屏蔽的格子，
# 它们的权重严格为 0（``plot_heads`` 会检查这一点），每一行之和仍然为 1。

mha = MultiHeadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
blocked_causal = allowed_to_blocked(allowed_causal)  # (seq_len, seq_len)
blocked_padding = allowed_to_blocked(is_real)  # (batch, seq_len)

with torch.no_grad():
    _, w_none = mha(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
    _, w_causal = mha(x, x, x, attn_mask=blocked_causal, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
    _, w_padding = mha(x, x, x, key_padding_mask=blocked_padding, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
    _, w_both = mha(x, x, x, attn_mask=blocked_causal, key_padding_mask=blocked_padding, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)

blocked_per_panel = torch.stack([  # (4, seq_len, seq_len), True 表示屏蔽
    torch.zeros_like(allowed_causal),  # 无掩码
    ~allowed_causal,  # 因果
    ~is_real[1].expand(seq_len, seq_len),  # 填充：填充词元所在的键
    ~allowed_both[1],  # 因果 & 填充
])
fig = plot_heads(
    torch.stack([w_none[1, 0], w_causal[1, 0], w_padding[1, 0], w_both[1, 0]]),  # (4, seq_len, seq_len)
    sentences[1],
    titles=["无掩码", "因果", "填充", "因果 & 填充"],
    suptitle="第二个句子，头 0",
    ncols=2,
    colorbar_label="注意力权重",
    xlabel="键",
    ylabel="查询",
    blocked=blocked_per_panel,
    blocked_label="被掩码屏蔽（权重为 0）",
)
plt.show()
print("被屏蔽格子上的最大权重：", round(w_both[~allowed_both[:, None].expand_as(w_both)].max().item(), 4))
print("每行之和为 1：", torch.allclose(w_both.sum(-1), torch.ones(()), atol=1e-6))

# %%
# .. _ex04-one-mask-two-meanings:
#
# 同一个掩码，两种含义
# --------------------
# ``torch.nn.functional.scaled_dot_product_attention`` 把布尔掩码的 ``True`` 理解为可以关注；
# ``torch.nn.MultiheadAttention`` 则把 ``attn_mask`` 和 ``key_padding_mask`` 的 ``True``
# 理解为屏蔽。浮点掩码没有极性之分：它被 **加** 到分数上，``0`` 保留该键，``-inf`` 去掉该键，
# 两套 API 都是如此。所以我们先用浮点掩码（``allowed_to_additive``）算出参考结果，再把两种
# 极性的布尔掩码分别交给每个 API，与参考结果比较。极性用反时不会报任何错，只是输出不同。

# sphinx_gallery_mha_ref_expected_nan
q, k, v = torch.randn(3, batch, num_heads, seq_len, embed_dim // num_heads).to(device)  # 各为 (batch, num_heads, seq_len, head_dim)
allowed = allowed_both[:, None]  # (batch, 1, seq_len, seq_len)，在头维上广播
torch_mha = mha.to_torch()
additive_causal = allowed_to_additive(allowed_causal)  # (seq_len, seq_len)，取值 0 或 -inf
additive_padding = allowed_to_additive(is_real)  # (batch, seq_len)，取值 0 或 -inf


def max_diff(a, b):
    return f"{(a - b).abs().max().item():.1e}"


with torch.no_grad():
    ref_sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed_to_additive(allowed))  # (batch, num_heads, seq_len, head_dim)
    ref_mha, _ = torch_mha(x, x, x, attn_mask=additive_causal, key_padding_mask=additive_padding)  # (batch, seq_len, embed_dim)
    rows = [
        ("F.scaled_dot_product_attention", "True = 可以关注",
         max_diff(F.scaled_dot_product_attention(q, k, v, attn_mask=allowed), ref_sdpa)),
        ("F.scaled_dot_product_attention", "True = 屏蔽",
         max_diff(F.scaled_dot_product_attention(q, k, v, attn_mask=~allowed), ref_sdpa)),
        ("mha_ref.scaled_dot_product_attention", "True = 可以关注",
         max_diff(scaled_dot_product_attention(q, k, v, attn_mask=allowed), ref_sdpa)),
        ("mha_ref.scaled_dot_product_attention", "True = 屏蔽",
         max_diff(scaled_dot_product_attention(q, k, v, attn_mask=~allowed), ref_sdpa)),
        ("torch.nn.MultiheadAttention", "True = 屏蔽",
         max_diff(torch_mha(x, x, x, attn_mask=blocked_causal, key_padding_mask=blocked_padding)[0], ref_mha)),
        ("torch.nn.MultiheadAttention", "True = 可以关注",
         max_diff(torch_mha(x, x, x, attn_mask=allowed_causal, key_padding_mask=is_real)[0], ref_mha)),
        ("mha_ref.MultiHeadAttention", "True = 屏蔽",
         max_diff(mha(x, x, x, attn_mask=blocked_causal, key_padding_mask=blocked_padding)[0], ref_mha)),
        ("mha_ref.MultiHeadAttention", "True = 可以关注",
         max_diff(mha(x, x, x, attn_mask=allowed_causal, key_padding_mask=is_real)[0], ref_mha)),
    ]

print(text_table(["API", "传入的布尔掩码", "与浮点掩码结果的最大差"], rows))

# %%
# 每个 API 在用它自己的极性时都是对的（差别只在舍入误差量级），用反了就错。表中的 ``nan``
# 表示极性用反后，有的查询一个键也不剩——下一节专门讨论这种情况。

# %%
# .. _ex04-a-float-mask-masks-nothing:
#
# 由 0 和 1 组成的浮点掩码什么也没屏蔽
# ------------------------------------
# ``allowed.float()`` 看上去像个掩码，但作为浮点数它是被加到分数上的：允许的键加 ``+1``，
# 被屏蔽的键加 ``+0``，被屏蔽的键依然保有相当大的权重。而 ``allowed_to_additive`` 生成的
# 加性掩码（``0`` / ``-inf``）让它们的权重严格为 0。

with torch.no_grad():
    _, w_float01 = scaled_dot_product_attention(q, k, v, attn_mask=allowed.float(), return_weights=True)  # (batch, num_heads, seq_len, seq_len)
    _, w_additive = scaled_dot_product_attention(q, k, v, attn_mask=allowed_to_additive(allowed), return_weights=True)  # (batch, num_heads, seq_len, seq_len)
    torch_float01 = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed.float())  # (batch, num_heads, seq_len, head_dim)
    ours_float01 = scaled_dot_product_attention(q, k, v, attn_mask=allowed.float())  # (batch, num_heads, seq_len, head_dim)

blocked_cells = ~allowed.expand_as(w_float01)  # (batch, num_heads, seq_len, seq_len)
print("被屏蔽键上的最大权重，0/1 浮点掩码：   ", round(w_float01[blocked_cells].max().item(), 4))
print("被屏蔽键上的最大权重，0/-inf 浮点掩码：", round(w_additive[blocked_cells].max().item(), 4))
print("PyTorch 对 0/1 浮点掩码的理解与此相同（最大绝对误差）：", max_diff(torch_float01, ours_float01))

# %%
# .. _ex04-queries-with-no-key-left:
#
# 一个键也不剩的查询
# ------------------
# 做生成时，序列常常在 **左侧** 填充。再叠加因果掩码，填充位置上的查询只能看它之前的键，而那些
# 键全是填充：这一行没有任何允许的键，softmax 就会出现 0 除以 0。下表列出各个 API 对这种行
# 返回什么，以及其余各行是否仍然都是有限值。最后三行是同一个 PyTorch 模块走了不同的内部路径。

left_real = is_real.flip(-1)  # (batch, seq_len)，填充在左侧
allowed_left = allowed_causal & left_real[:, None, :]  # (batch, seq_len, seq_len)
empty = ~allowed_left.any(dim=-1)  # (batch, seq_len)，查询没有任何允许的键时为 True
print("第二个句子（左侧填充）：", left_real[1].int().tolist())
print("没有任何允许键的查询：  ", empty.int().tolist())


def describe(out):
    """没有键的行里是什么，以及其余各行是否都是有限值。"""
    rows_empty, rows_other = out[empty], out[~empty]  # (num_empty, ...), (num_other, ...)
    if rows_empty.isnan().any():
        empty_text = "NaN"
    elif (rows_empty == 0).all():
        empty_text = "全零"
    else:
        empty_text = "普通数值"
    return empty_text, bool(rows_other.isfinite().all())


mask_sdpa = allowed_left[:, None]  # (batch, 1, seq_len, seq_len)
mha_kwargs = {"attn_mask": blocked_causal, "key_padding_mask": allowed_to_blocked(left_real)}
with torch.no_grad():
    results = [
        ("F.scaled_dot_product_attention", describe(F.scaled_dot_product_attention(q, k, v, attn_mask=mask_sdpa).transpose(1, 2))),
        ("mha_ref.scaled_dot_product_attention", describe(scaled_dot_product_attention(q, k, v, attn_mask=mask_sdpa).transpose(1, 2))),
        ("mha_ref.MultiHeadAttention", describe(mha(x, x, x, **mha_kwargs)[0])),
        ("torch.nn.MultiheadAttention，need_weights=True", describe(torch_mha(x, x, x, **mha_kwargs)[0])),
    ]
    with torch.inference_mode():
        results.append(("torch.nn.MultiheadAttention，inference_mode，need_weights=False",
                        describe(torch_mha(x, x, x, need_weights=False, **mha_kwargs)[0])))
with torch.enable_grad():
    results.append(("torch.nn.MultiheadAttention，开启自动求导，need_weights=False",
                    describe(torch_mha(x, x, x, need_weights=False, **mha_kwargs)[0].detach())))

print(text_table(["API", "没有键的行", "其余各行均为有限值"],
                 [(api, empty_text, finite) for api, (empty_text, finite) in results]))

# %%
# NaN 不会老老实实待在自己那一行：下一层会把各行混合起来，而损失一旦变成 NaN，训练就停摆了。
# ``mha_ref`` 给这样的行全 0 的权重（于是注意力输出为 0，模块在该处返回 ``out_proj.bias``；
# 新建模块的偏置为 0，所以表中是“全零”）。
# 更好的做法是根本不制造空行：在右侧填充，或者让填充位置上的查询关注它自己。
#
# .. _ex04-fewer-queries-than-keys-two-alignments:
#
# 查询比键少：两种对齐方式
# ------------------------
# 模型用 KV 缓存生成文本时，只把最新的词元作为查询送入，而键保存着到目前为止的整个序列。
# 这里 6 个词元中的最后 2 个是查询。``causal_mask(2, 6, alignment=...)`` 提供了两种摆放
# 三角形的方式：
#
# * ``"top_left"``：查询 0 只能看到键 0，好像这些查询是序列的开头。
#   ``F.scaled_dot_product_attention`` 的 ``is_causal=True`` 就是这种含义。
# * ``"bottom_right"``：最后一个查询能看到所有键，这才是序列末尾的词元应有的样子。

kv_tokens = ["你的", "旅程", "始于", "脚下", "这", "一步"]
num_new = 2
top_left = causal_mask(num_new, seq_len, alignment="top_left", device=device)  # (num_new, seq_len)
bottom_right = causal_mask(num_new, seq_len, alignment="bottom_right", device=device)  # (num_new, seq_len)

fig = plot_masks(
    [top_left, bottom_right],
    kv_tokens[-num_new:],
    kv_tokens,
    titles=['alignment="top_left"\n（即函数 SDPA 的 is_causal=True）', 'alignment="bottom_right"\n '],
    legend=("可以关注", "被屏蔽"),
    xlabel="键",
    ylabel="查询",
)
plt.show()

# %%
# 新词元的正确结果，就是对全部 6 个词元做完整因果注意力时最后 2 行的结果。右下角对齐的掩码
# 能复现它；左上角对齐的掩码则不能；``F.scaled_dot_product_attention`` 的 ``is_causal=True`` 用的正是左上角对齐。

with torch.no_grad():
    full = scaled_dot_product_attention(q, k, v, is_causal=True)  # (batch, num_heads, seq_len, head_dim)
    q_new = q[:, :, -num_new:]  # (batch, num_heads, num_new, head_dim)
    out_top_left = scaled_dot_product_attention(q_new, k, v, attn_mask=top_left)  # (batch, num_heads, num_new, head_dim)
    out_bottom_right = scaled_dot_product_attention(q_new, k, v, attn_mask=bottom_right)  # (batch, num_heads, num_new, head_dim)
    out_is_causal = F.scaled_dot_product_attention(q_new, k, v, is_causal=True)  # (batch, num_heads, num_new, head_dim)

print("bottom_right 对比 完整因果注意力的最后几行：", max_diff(out_bottom_right, full[:, :, -num_new:]))
print("top_left     对比 完整因果注意力的最后几行：", max_diff(out_top_left, full[:, :, -num_new:]))
print("F.scaled_dot_product_attention(is_causal=True) 对比 top_left：", max_diff(out_is_causal, out_top_left))

# %%
# .. _ex04-exercises:
#
# 练习
# ----
# **练习 1.** 第二个句子的 6 个词元里只有 3 个是真实词元。同时使用因果掩码和填充掩码时，它的 6 个查询
# 各能关注几个键？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    查询 ``i`` 能看到键 ``0 .. i`` （因果），其中又只有真实词元可以看（填充）：所以是 ``min(i + 1, 3)``。
#    填充位置上的查询仍然能看到那 3 个真实的键，只是它们的输出以后会被忽略。从掩码里数出来：

print("第二个句子，每个查询可以关注的键数：", allowed_both[1].sum(dim=-1).tolist())

# %%
# **练习 2.** 如果把填充掩码的极性弄反，写成 ``key_padding_mask=is_real`` （真实词元处为 ``True``）
# 传给 ``mha``，会发生什么？会报错吗？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    不会报错。``nn.MultiheadAttention`` 的约定是 ``True`` 表示屏蔽，于是真实词元反而被屏蔽，
#    第二个句子的每个查询都只关注填充位置：

with torch.no_grad():
    _, w_wrong = mha(x, x, x, key_padding_mask=is_real, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
real_keys = is_real[1]  # (seq_len,)
print(f"第二个句子，真实键上的注意力权重之和：{w_wrong[1][..., real_keys].sum(-1).max().item():.3f}")
print(f"第二个句子，填充键上的注意力权重之和：{w_wrong[1][..., ~real_keys].sum(-1).min().item():.3f}")

# %%
# **练习 3.** ``torch.ones(L, L, dtype=torch.bool).tril()`` 和
# ``torch.ones(L, L, dtype=torch.bool).triu(1)``：哪一个是 ``F.scaled_dot_product_attention``
# 的因果掩码，哪一个是 ``nn.MultiheadAttention`` 的？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    ``tril()`` 在对角线及其下方为 ``True``：表示每个查询 **可以** 看的键，这是
#    ``F.scaled_dot_product_attention`` （以及 ``mha_ref.causal_mask``）的约定。``triu(1)`` 在对角线上方为
#    ``True``：表示 **被屏蔽** 的键，这是 ``nn.MultiheadAttention`` 的约定。两者互为取反：

tril = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()  # (seq_len, seq_len)
triu1 = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)  # (seq_len, seq_len)
print("tril() 等于 causal_mask：                 ", torch.equal(tril, allowed_causal))
print("triu(1) 等于 allowed_to_blocked(causal)： ", torch.equal(triu1, blocked_causal))
print("triu(1) 等于 ~tril()：                    ", torch.equal(triu1, ~tril))

# %%
# .. _ex04-summary:
#
# 小结
# ----
# - ``mha_ref`` 的掩码构造函数与 ``F.scaled_dot_product_attention`` 的布尔掩码一样，``True`` 表示
#   可以关注；``torch.nn.MultiheadAttention`` 的 ``attn_mask`` 和 ``key_padding_mask`` 则是 ``True``
#   表示屏蔽（用 ``allowed_to_blocked`` 转换）。极性弄反不会报错，只是输出错了。
# - 浮点掩码是加到分数上的：``0`` 保留一个键，``-inf`` 去掉它。由 1 和 0 组成的浮点掩码什么也屏蔽不了。
# - 一个键也看不到的查询（左侧填充再加因果掩码）在 PyTorch 的某些计算路径上得到 NaN；``mha_ref``
#   给它全零的权重。更好的办法是不让这样的行出现。
# - 查询少于键时（例如使用 KV 缓存），新词元需要右下角对齐的因果掩码；
#   ``F.scaled_dot_product_attention`` 的 ``is_causal=True`` 是左上角对齐的。
