"""
示例 14：KV 缓存，一次生成一个词元
==================================

语言模型一次生成一个词元：预测下一个词元，把它接到末尾，再运行一遍。在因果注意力里，一个词元从不
关注它之后的词元，所以新词元到来时，已有词元的键和值 **不会改变**。每一步都重新计算它们是白费力气；
*KV 缓存* 把它们存下来，每一步只为新词元计算查询、键和值。

本例用一个不断增长的缓存逐步生成（:meth:`mha_ref.GroupedQueryAttention.decode`、
:class:`mha_ref.KVCache`），并核对输出等于对整个序列做完整因果注意力的结果；说明新词元需要哪种
因果掩码（*右下角对齐* 的那种）；最后计算几种模型形状下缓存每个词元占用的内存。
"""

# %%
# .. _ex14-decode-step-by-step:
#
# 逐步解码，并与整个序列比较
# --------------------------
# 一个注意力层，``embed_dim = 64``，8 个头，每个头都有自己的键/值头（``num_kv_heads = num_heads``：
# 普通的多头注意力），用 ``float64`` 计算，这样任何超过舍入误差的差异都会显露出来。参考结果是把这一层
# 在 12 个词元的整个序列上用 ``is_causal=True`` 运行一次。然后让同样的词元经过 ``decode``：先一次送入
# 5 个词元的提示（“预填充”），再每步一个词元。每次调用都把新的键和值追加到缓存里，并关注缓存中的全部内容。

import matplotlib.pyplot as plt
import torch

from mha_ref import (
    GroupedQueryAttention,
    KVCache,
    causal_mask,
    kv_cache_bytes_per_token,
    pick_device,
    scaled_dot_product_attention,
    split_heads,
)
from mha_ref.tutorial.plotting import plot_lines, plot_masks, text_table

torch.manual_seed(0)
device = pick_device()

batch, seq_len, embed_dim, num_heads, prompt_len = 2, 12, 64, 8, 5
layer = GroupedQueryAttention(embed_dim, num_heads, num_kv_heads=num_heads, dtype=torch.float64).to(device).eval()
x = torch.randn(batch, seq_len, embed_dim, dtype=torch.float64, device=device)  # (batch, seq_len, embed_dim)

with torch.no_grad():
    full, _ = layer(x, is_causal=True)  # (batch, seq_len, embed_dim)
    cache = layer.new_cache(batch, max_len=seq_len)
    print("空缓存：keys", tuple(cache.keys.shape), "= (batch, num_kv_heads, cached_len, head_dim)")
    steps, pieces, start = [], [], 0
    for stop in [prompt_len, *range(prompt_len + 1, seq_len + 1)]:
        out = layer.decode(x[:, start:stop], cache)  # (batch, new_len, embed_dim)
        diff = (out - full[:, start:stop]).abs().max().item()
        steps.append((f"{start}..{stop - 1}", stop - start, tuple(cache.keys.shape), f"{diff:.0e}"))
        pieces.append(out)
        start = stop
print(text_table(["词元", "new_len", "缓存中键的形状", "与完整计算的最大绝对差"], steps))
generated = torch.cat(pieces, dim=1)  # (batch, seq_len, embed_dim)
print("各步合起来等于完整的因果输出：", torch.allclose(generated, full, rtol=0, atol=1e-12))

# %%
# 省下的投影：没有缓存时，第 ``t`` 步要把全部 ``t`` 个词元重新投影成键和值。有了缓存，每个词元只投影一次。

with_cache = seq_len
without_cache = prompt_len + sum(range(prompt_len + 1, seq_len + 1))
print(f"键/值投影次数，共 {seq_len} 个词元：有缓存 {with_cache} 次，无缓存 {without_cache} 次")

# %%
# .. _ex14-which-causal-mask-the-new-tokens-need:
#
# 新词元需要哪种因果掩码
# ----------------------
# 几个新词元同时到来时（提示，或提示的一段），它们的查询是序列的 *最后* 几行：``new_len`` 个查询对全
# 部的键，包括缓存中的和新来的，共 ``total`` 个（下面的代码就这样称呼它），且 ``new_len <= total``。
# 正确的掩码让最后一个查询对准最后一个键：**右下角对齐** 的因果三角。``decode`` 先把新的键追加进缓
# 存，这时缓存的 ``cached_len`` 就是这个总数，再用
# ``causal_mask(new_len, cached_len, alignment="bottom_right")`` 构造它。PyTorch 的
# ``is_causal=True`` 指的是 *左上角* 对齐，只有 ``new_len == total``，也就是之前什么都没有缓存时，才
# 正确。参见 :ref:`masks-kv-cache` 和 :ref:`sphx_glr_auto_examples_plot_04_masks.py`。
#
# 下面，缓存里已有 4 个词元时来了 3 个新词元。右下角对齐的掩码重现了完整因果注意力的最后 3 行；
# 左上角对齐的掩码则不然。

new_len, total = 3, 7
q, k, v = (split_heads(torch.randn(batch, total, embed_dim, dtype=torch.float64, device=device), num_heads) for _ in range(3))  # 各 (batch, num_heads, total, head_dim)
top_left = causal_mask(new_len, total, alignment="top_left", device=device)  # (new_len, total)
bottom_right = causal_mask(new_len, total, alignment="bottom_right", device=device)  # (new_len, total)
reference = scaled_dot_product_attention(q, k, v, is_causal=True)[:, :, -new_len:]  # (batch, num_heads, new_len, head_dim)
for name, mask in (("bottom_right（右下角）", bottom_right), ("top_left（左上角，is_causal=True）", top_left)):
    out = scaled_dot_product_attention(q[:, :, -new_len:], k, v, attn_mask=mask)  # (batch, num_heads, new_len, head_dim)
    print(f"{name}：与完整因果注意力最后几行的最大绝对差 = {(out - reference).abs().max().item():.1e}")

fig = plot_masks(
    [top_left, bottom_right],
    [f"t{i}" for i in range(total - new_len, total)],
    [f"t{i}" for i in range(total)],
    titles=['alignment="top_left"（is_causal=True）', 'alignment="bottom_right"'],
    legend=("可以关注", "被屏蔽"),
    xlabel="缓存中的键",
    ylabel="新的查询",
)
plt.show()

# %%
# .. _ex14-what-the-cache-costs:
#
# 缓存的代价
# ----------
# 每个词元，缓存为每一层的每个键/值头保存一个键向量和一个值向量，各 ``head_dim`` 个数：
# :func:`mha_ref.kv_cache_bytes_per_token`。它与 *查询* 头的个数无关。下表用三个模型公开的形状
# （层数、查询头数、键/值头数、head_dim）；最后一行是 70B 的形状但键/值头与查询头一样多，
# 也就是分组查询注意力在那里省下的部分。

models = {
    "GPT-2 small": (12, 12, 12, 64),
    "Llama 2 7B": (32, 32, 32, 128),
    "Llama 2 70B（GQA）": (80, 64, 8, 128),
    "Llama 2 70B 的形状，64 个 KV 头": (80, 64, 64, 128),
}
context = 4096
rows = []
for name, (layers, heads, kv_heads, head_dim) in models.items():
    for dtype in (torch.float32, torch.float16):
        per_token = kv_cache_bytes_per_token(layers, kv_heads, head_dim, dtype)
        rows.append((name, layers, heads, kv_heads, head_dim, str(dtype).removeprefix("torch."),
                     f"{per_token / 2**10:.0f}", f"{per_token * context / 2**30:.2f}"))
print(text_table(["模型", "层数", "头数", "KV 头数", "head_dim", "dtype", "每词元 KiB",
                  f"GiB（{context} 个词元）"], rows))
print("本例这一层，每词元：", kv_cache_bytes_per_token(1, layer.num_kv_heads, layer.head_dim, torch.float64), "字节；预分配的缓存：", cache.nbytes(), "字节")

# %%
# 缓存随序列长度（以及批大小）线性增长：下面是 70B 形状、``float16``、单个序列的情形，
# 键/值头从 64 减到 8 再减到 1。

lengths = [512, 1024, 2048, 4096, 8192]
curves = {
    f"num_kv_heads = {kv}": [kv_cache_bytes_per_token(80, kv, 128, torch.float16) * n / 2**30 for n in lengths]
    for kv in (64, 8, 1)
}
fig = plot_lines(lengths, curves, xlabel="缓存中的词元数", ylabel="KV 缓存（GiB）", title="80 层，head_dim 128，float16，单个序列")
plt.show()

# %%
# 出处：Shazeer 2019，“Fast Transformer Decoding: One Write-Head is All You Need”，
# arXiv:1911.02150，第 2.4 节；Pope 等 2022，“Efficiently Scaling Transformer Inference”，
# arXiv:2211.05102；模型形状取自 Radford 等 2019（GPT-2）和 Touvron 等 2023，
# arXiv:2307.09288（Llama 2）。

# %%
# .. _ex14-exercises:
#
# 练习
# ----
# **练习 1.** 某个模型有 24 层，每层 16 个 ``head_dim = 64`` 的键/值头，缓存用 ``bfloat16`` 存放。
# 它的 KV 缓存每个词元占多少 KiB？一批 8 个序列、每个 2048 个词元，又占多少 MiB？请从缓存为每个
# 词元存了什么推算出来。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    每个词元、每一层，缓存为每个键/值头存一个键向量和一个值向量，各 ``head_dim`` 个数；再乘以
#    层数，以及一个 ``bfloat16`` 数的字节数（最先打印）。整批则再乘以序列数和每个序列的词元数。
#    代码还用真实的缓冲区核对这个公式：为整批建一层的 :class:`mha_ref.KVCache`，按层数累计。

num_layers, kv_heads, kv_head_dim, cache_dtype = 24, 16, 64, torch.bfloat16
cache_batch, cache_len = 8, 2048
per_token = kv_cache_bytes_per_token(num_layers, kv_heads, kv_head_dim, cache_dtype)
one_layer = KVCache(cache_batch, kv_heads, cache_len, kv_head_dim, dtype=cache_dtype)  # 缓冲区 (batch, num_kv_heads, max_len, head_dim)
itemsize = torch.empty((), dtype=cache_dtype).element_size()
print("一个 bfloat16 数的字节数：", itemsize)
print(f"每个词元：2（键和值）× {num_layers} 层 × {kv_heads} 个头 × {kv_head_dim} 个数 × {itemsize} 字节 = {per_token} 字节 = {per_token / 2**10:.0f} KiB")
print(f"{cache_batch} 个序列 × {cache_len} 个词元：按公式 {per_token * cache_batch * cache_len / 2**20:.0f} MiB，实际分配 "
      f"{num_layers * one_layer.nbytes() / 2**20:.0f} MiB（{num_layers} 层 KVCache 缓冲区）")

# %%
# **练习 2.** 生成时每一步只把 **一个** 新词元交给 ``decode``，这时它根本不传掩码。为什么这样是对的？
# 如果这一步改传 ``is_causal=True``，这个查询能看到哪些缓存的键？它的输出会是什么？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    新词元是序列的最后一个位置，所以每个缓存的词元（包括它自己）都在它之前或就是它：单个查询的
#    右下角对齐掩码允许所有键，与不加掩码一样。``is_causal=True`` 则把三角按左上角对齐：它把这个
#    查询放在位置 0，只能看到键 0。对一个键做 softmax，这个键得到全部注意力权重，所以无论查询是什么，
#    输出都恰好是词元 0 的值。代码打印两种单行掩码，并在掩码一节的 ``q``、``k``、``v`` 上核对
#    这两点：

newest = q[:, :, -1:]  # (batch, num_heads, 1, head_dim)：最后一个词元的查询
print("bottom_right：", causal_mask(1, total, alignment="bottom_right", device=device).int().tolist())
print("top_left：    ", causal_mask(1, total, alignment="top_left", device=device).int().tolist())
last_row = scaled_dot_product_attention(q, k, v, is_causal=True)[:, :, -1:]  # (batch, num_heads, 1, head_dim)
no_mask = scaled_dot_product_attention(newest, k, v)  # (batch, num_heads, 1, head_dim)
top_left_out = scaled_dot_product_attention(newest, k, v, is_causal=True)  # (batch, num_heads, 1, head_dim)
print(f"不加掩码 与 完整因果注意力的最后一行：{(no_mask - last_row).abs().max().item():.1e}")
print(f"is_causal=True 与 词元 0 的值：        {(top_left_out - v[:, :, :1]).abs().max().item():.1e}")

# %%
# .. _ex14-summary:
#
# 小结
# ----
# * 带缓存的解码与完整的因果注意力是同一个函数：每一步的输出都等于完整计算中对应的行
#   （上面已在 ``float64`` 下核对）。
# * 新词元是 *最后* 的查询：它们的因果掩码要右下角对齐。
# * 缓存用内存换计算，每个词元的大小由“层数 × 键/值头数 × head_dim × 字节数”决定：这正是分组查询
#   注意力要减小的量（:ref:`sphx_glr_auto_examples_plot_15_grouped_heads_decode.py`）。
