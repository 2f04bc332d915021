"""
示例 22：多头潜在注意力
=======================

分组查询注意力（:ref:`sphx_glr_auto_examples_plot_15_grouped_heads_decode.py`）让几个查询头共用
键/值头，从而缩小 KV 缓存。DeepSeek-V2 的 *多头潜在注意力*\\ （multi-head latent attention，MLA）
保留每个头自己的键和值，却两者都不缓存：每个词元只被压缩一次，得到 ``kv_latent_dim`` 个数的潜在向量
``c = W^DKV h``，每个头再用自己的上投影从它重建出键和值。位置信息不能放进潜在向量里（RoPE 的旋转会
夹在两个本该事先相乘的矩阵之间），所以旁边另外缓存一个很小的、各头共用的 *解耦 RoPE 键*。

本例构建 :class:`mha_ref.MultiHeadLatentAttention`，在页面上核对它的 **吸收** 形式（上投影并入
查询投影和输出投影，注意力直接对缓存的潜在向量计算）等于 **朴素** 形式；把每个词元的缓存与同宽度的
MHA、GQA、MQA 比较；再给一步解码随上下文长度计时。
"""

# %%
# .. _ex22-naive-and-absorbed-forms:
#
# 朴素形式与吸收形式给出相同的数
# ------------------------------
# 一个层，``embed_dim = 64``，4 个 ``head_dim = 16`` 的头，潜在向量 ``kv_latent_dim = 32``，RoPE
# 键 ``rope_dim = 8``，用 ``float64`` 计算。朴素形式为每个头重建键 ``W_i^UK c`` 和值 ``W_i^UV c``，
# 再做普通的注意力。吸收形式从不构建它们：因为 ``q_i . (W_i^UK c) = ((W_i^UK)^T q_i) . c``，查询只需
# 映射到潜在空间一次；又因为输出对值是线性的，``W^O_i W_i^UV`` 可以把潜在空间里的上下文直接映射到
# 输出。于是注意力就成了多查询注意力：每个词元只有一个共用的键，含 ``kv_latent_dim + rope_dim`` 个特征。

# sphinx_gallery_parallel = False
import matplotlib.pyplot as plt
import torch

from mha_ref import (
    GroupedQueryAttention,
    MultiHeadLatentAttention,
    kv_cache_bytes_per_token,
    latent_cache_bytes_per_token,
    pick_device,
)
from mha_ref.tutorial.bench import environment, time_interleaved_spread
from mha_ref.tutorial.plotting import plot_lines, text_table

torch.manual_seed(0)
device = pick_device()

mla = MultiHeadLatentAttention(64, 4, kv_latent_dim=32, head_dim=16, rope_dim=8, dtype=torch.float64).to(device)
x = torch.randn(2, 10, 64, dtype=torch.float64, device=device)  # (batch, seq_len, embed_dim)
with torch.no_grad():
    naive, naive_weights = mla(x, is_causal=True, need_weights=True)  # (2, 10, 64), (2, 4, 10, 10)
    absorbed, absorbed_weights = mla(x, is_causal=True, need_weights=True, absorbed=True)
    query_weight, output_weight = mla.absorbed_weights()  # (4, 32, 64), (64, 4, 32)
print("吸收后的查询矩阵", tuple(query_weight.shape), "= (num_heads, kv_latent_dim, embed_dim)")
print("吸收后的输出矩阵", tuple(output_weight.shape), "= (embed_dim, num_heads, kv_latent_dim)")
print(f"最大绝对差，输出：{(naive - absorbed).abs().max().item():.1e}；注意力权重：{(naive_weights - absorbed_weights).abs().max().item():.1e}")

# %%
# .. _ex22-decoding-with-the-latent-cache:
#
# 用潜在缓存解码
# --------------
# 解码时，每个词元只把潜在向量和旋转后的 RoPE 键追加到 :class:`mha_ref.LatentKVCache`。先送入 4 个
# 词元的提示，再每步一个词元，两种形式各做一遍；每种都必须等于上面完整的因果前向计算。

rows = []
with torch.no_grad():
    for absorbed_form in (False, True):
        cache = mla.new_cache(batch=2, max_len=10)
        pieces = [mla.decode(x[:, :4], cache, absorbed=absorbed_form)]  # (2, 4, 64)
        pieces += [mla.decode(x[:, t : t + 1], cache, absorbed=absorbed_form) for t in range(4, 10)]
        decoded = torch.cat(pieces, dim=1)  # (2, 10, 64)
        rows.append(("吸收" if absorbed_form else "朴素", tuple(cache.latents.shape), tuple(cache.rope_keys.shape),
                     f"{(decoded - naive).abs().max().item():.1e}"))
print(text_table(["解码形式", "缓存的潜在向量", "缓存的 RoPE 键", "与完整前向计算的最大绝对差"], rows))

# %%
# .. _ex22-what-the-cache-costs-per-token:
#
# 每个词元的缓存代价
# ------------------
# 与 :ref:`sphx_glr_auto_examples_plot_14_kv_cache.py` 相同的表，取 DeepSeek-V2 的宽度（60 层，128 个
# ``head_dim = 128`` 的头，``kv_latent_dim = 512``，``rope_dim = 64``，见论文第 3.1.2 节），旁边是同宽度
# 的 MHA、8 个键/值头的 GQA 和 MQA，均用 ``bfloat16``。MLA 的数量与头数无关。

layers, heads, head_dim, latent_dim, rope_dim = 60, 128, 128, 512, 64
context = 4096
shapes = {"MHA": heads, "GQA，8 个 KV 头": 8, "MQA": 1}
rows = []
for name, kv_heads in shapes.items():
    per_token = kv_cache_bytes_per_token(layers, kv_heads, head_dim, torch.bfloat16)
    rows.append((name, layers, heads, f"{kv_heads} 个 KV 头", f"{2 * kv_heads * head_dim}", f"{per_token / 2**10:.1f}",
                 f"{per_token * context / 2**30:.2f}"))
mla_per_token = latent_cache_bytes_per_token(layers, latent_dim, rope_dim, torch.bfloat16)
rows.append(("MLA", layers, heads, f"潜在向量 {latent_dim} + RoPE {rope_dim}", f"{latent_dim + rope_dim}",
             f"{mla_per_token / 2**10:.1f}", f"{mla_per_token * context / 2**30:.2f}"))
print(text_table(["注意力", "层数", "头数", "每词元每层缓存", "数的个数", "每词元 KiB",
                  f"GiB（{context} 个词元）"], rows))
gqa_groups = (latent_dim + rope_dim) / (2 * head_dim)
print(f"MLA 的缓存与 {gqa_groups:.2f} 个键/值头的 GQA 一样多；"
      f"MHA 的缓存是它的 {kv_cache_bytes_per_token(layers, heads, head_dim, torch.bfloat16) / mla_per_token:.1f} 倍")

# %%
# .. _ex22-bytes-read-against-arithmetic:
#
# 每个缓存词元：读的字节与做的运算
# --------------------------------
# 每个词元缓存的字节更少，并不意味着每一步解码都受内存限制。仍取上面的形状（``bfloat16``，批大小 1，
# 一层）：吸收形式的 MLA 一步对每个缓存词元只读一次它的潜在向量和 RoPE 键，共
# ``2 * (kv_latent_dim + rope_dim)`` 字节，而 128 个头每个都要用它们做运算：算分数
# ``2 * (kv_latent_dim + rope_dim)`` 次 FLOP，加权求和 ``2 * kv_latent_dim`` 次（一次乘加算 2 次）。
# GQA 和 MHA 对每个键/值头读一个键和一个值，每个查询头做 ``2 * 2 * head_dim`` 次 FLOP。两者之比就是
# 这一步相对缓存的运算强度；屋脊点取 NVIDIA H100 SXM 的，数据手册的数字与
# :ref:`sphx_glr_auto_examples_plot_15_grouped_heads_decode.py` 相同（3.35 TB/s，稠密 BF16 989 TFLOP/s）。
# 每步读一次的投影权重没有算在内。

gpu_bandwidth, gpu_flops = 3.35e12, 989e12  # 字节/秒，FLOP/秒（NVIDIA H100 SXM，稠密 BF16）
intensity_rows = []
for name, kv_heads in (("MHA", heads), ("GQA，8 个 KV 头", 8)):
    read_bytes = 2 * kv_heads * head_dim * 2  # 键 + 值，每个数 2 字节
    flops = heads * 2 * 2 * head_dim  # 分数 + 加权求和，每个查询头
    intensity_rows.append((name, read_bytes, flops, f"{flops / read_bytes:.0f}"))
mla_read = (latent_dim + rope_dim) * 2  # 一个潜在向量 + 一个 RoPE 键，每个数 2 字节
mla_flops = heads * 2 * ((latent_dim + rope_dim) + latent_dim)  # 分数 + 加权求和，每个头
intensity_rows.append(("MLA 吸收形式", mla_read, mla_flops, f"{mla_flops / mla_read:.0f}"))
print(text_table(["注意力", "每个缓存词元读的字节", "每个缓存词元的 FLOPs", "FLOP/字节"], intensity_rows))
print(f"H100 SXM 的屋脊点：{gpu_flops / gpu_bandwidth:.0f} FLOP/字节；"
      f"MLA 吸收形式达到它的 {mla_flops / mla_read / (gpu_flops / gpu_bandwidth):.2f} 倍")

# %%
# MHA 和 GQA 远在屋脊点之下：它们的一步解码受读取缓存的限制。128 个头的吸收形式 MLA 则接近屋脊点
# （见打印的比值），所以在这样的 GPU 上，它也接近受算力限制。

# %%
# .. _ex22-one-decode-step-beside-gqa:
#
# 一步解码随上下文的耗时，与 GQA 并排
# -----------------------------------
# 换一个在普通 CPU 上也能很快计时的小层：``embed_dim = 512``，8 个 64 维的头，批大小 1，每步一个新词元，
# ``float32``，在运行本页的设备上计时（最后一行打印它）。比较 MHA（8 个键/值头）、GQA（2 个）以及 ``kv_latent_dim = 256``
# （4 个头宽，与 DeepSeek-V2 相同）、``rope_dim = 32`` 的 MLA；吸收形式的 MLA 像推理引擎那样只算一次
# 合并后的矩阵，朴素形式的 MLA 每一步都要重建全部缓存的键和值。四者都用 ``mha_ref`` 的显式注意力
# （GQA 设 ``use_fused=False``），哪一方都不用 PyTorch 的融合内核。对每个缓存词元、每个头，吸收形式
# 算分数要乘 ``kv_latent_dim + rope_dim`` 个数，加权求和再乘 ``kv_latent_dim`` 个数，而 GQA 是
# ``2 * head_dim`` 个（打印的第一行）。计时按轮进行（预热 2 轮，计时 7 轮；
# :func:`mha_ref.tutorial.bench.time_interleaved_spread`），结果写成同一上下文下相对 GQA 一步的倍数。
# 耗时只打印在 ``[timing]`` 行里：它们取决于机器，每次运行都不一样。这些数只描述这台机器，不描述 GPU；
# 在 GPU 上一步解码受什么限制，取决于它的运算强度（见上表）。

embed_dim, num_heads, step_head_dim = 512, 8, 64
contexts = [256, 512, 1024, 2048]
torch.manual_seed(1)
gqa_layers = {kv: GroupedQueryAttention(embed_dim, num_heads, kv, bias=False, use_fused=False).to(device).eval() for kv in (8, 2)}
mla_layer = MultiHeadLatentAttention(embed_dim, num_heads, 256, step_head_dim, 32).to(device).eval()
with torch.no_grad():
    folded = mla_layer.absorbed_weights()  # 只算一次，供每一步使用
x_new = torch.randn(1, 1, embed_dim, device=device)  # (batch, 1, embed_dim)
print(f"每个缓存词元、每个头的乘加次数：MLA 吸收形式 {256 + 32 + 256}，GQA {2 * step_head_dim}，"
      f"比值 {(256 + 32 + 256) / (2 * step_head_dim):.2f}")


def gqa_step(layer, cache, cached_len):
    cache.crop(cached_len)
    return layer.decode(x_new, cache)  # (1, 1, embed_dim)


def mla_step(cache, cached_len, absorbed_form):
    cache.crop(cached_len)
    return mla_layer.decode(x_new, cache, absorbed=absorbed_form, absorbed_weights=folded if absorbed_form else None)


ratios = {"MHA / GQA": [], "MLA 吸收 / GQA": [], "MLA 朴素 / GQA": []}
timing_rows = []
for cached_len in contexts:
    steps = {}
    for kv, layer in gqa_layers.items():
        cache = layer.new_cache(1, cached_len + 1)
        cache.append(torch.randn(1, kv, cached_len, step_head_dim, device=device), torch.randn(1, kv, cached_len, step_head_dim, device=device))
        steps[f"GQA {kv}"] = lambda layer=layer, cache=cache, n=cached_len: gqa_step(layer, cache, n)
    latent_cache = mla_layer.new_cache(1, cached_len + 1)
    latent_cache.append(torch.randn(1, cached_len, 256, device=device), torch.randn(1, cached_len, 32, device=device))
    steps["MLA absorbed"] = lambda c=latent_cache, n=cached_len: mla_step(c, n, True)
    steps["MLA naive"] = lambda c=latent_cache, n=cached_len: mla_step(c, n, False)
    with torch.no_grad():
        spread = time_interleaved_spread(steps, warmup=2, repeats=7, device=device)
    base = spread["GQA 2"][0]
    ratios["MHA / GQA"].append(spread["GQA 8"][0] / base)
    ratios["MLA 吸收 / GQA"].append(spread["MLA absorbed"][0] / base)
    ratios["MLA 朴素 / GQA"].append(spread["MLA naive"][0] / base)
    timing_rows.append((cached_len, f"{base * 1e3:.2f}", *(f"{ratios[k][-1]:.2f}" for k in ratios)))
for line in text_table(["上下文", "GQA 一步（ms）", "MHA / GQA", "MLA 吸收 / GQA", "MLA 朴素 / GQA"], timing_rows).splitlines():
    print("[timing]", line)
print("[timing] 运行于", environment(device)["device"])

fig = plot_lines(contexts, ratios, xlabel="缓存的词元数", ylabel="一步解码耗时 / GQA 的耗时", title="一步解码随上下文的耗时，批大小 1，embed_dim 512，8 个头", logx=True, logy=True)
plt.show()

# %%
# .. _ex22-exercises:
#
# 练习
# ----
# **练习 1.** DeepSeek-V2 的表 1 说，``kv_latent_dim = 4 * head_dim``、
# ``rope_dim = head_dim / 2`` 的 MLA 每个词元的缓存与 2.25 组的 GQA 相当。请从两者每词元每层缓存的内容推出这一点，并在
# ``head_dim = 64`` 时验证。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    有 ``g`` 个键/值头的 GQA 缓存 ``2 * g * head_dim`` 个数（每个头一个键和一个值）；MLA 缓存
#    ``kv_latent_dim + rope_dim = 4 * head_dim + head_dim / 2 = 4.5 * head_dim`` 个数。``2 g = 4.5``
#    时两者相等，即 ``g = 2.25``。下面的代码比较两者的字节数：

small_head = 64
mla_bytes = latent_cache_bytes_per_token(1, 4 * small_head, small_head // 2)
print(f"MLA，每词元每层字节数：{mla_bytes}")
print(f"4 × MLA：{4 * mla_bytes} 字节；9 = 4 × 2.25 个 KV 头的 GQA：{kv_cache_bytes_per_token(1, 9, small_head)} 字节")

# %%
# **练习 2.** 为什么 RoPE 那部分不能也吸收进去？把 *内容* 键按位置旋转，仍然硬把 ``W^UK`` 并入查询：
# 对哪些键位置，合并后的分数仍等于真正的分数？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    真正的分数是 ``q . R_j (W^UK c_j)``，``R_j`` 是位置 ``j`` 的旋转；合并后的分数是
#    ``((W^UK)^T q) . c_j``，丢掉了 ``R_j``。只有 ``R_j`` 是单位矩阵（位置 0）时两者才一致。合并需要
#    查询与潜在向量之间有一个固定的矩阵，而有了 RoPE，这个矩阵随每个键位置而变。代码按键位置量出差距：

from mha_ref import apply_rotary

w_uk = torch.randn(16, 32, dtype=torch.float64)  # (head_dim, kv_latent_dim)：一个头的 W^UK
q_one = torch.randn(16, dtype=torch.float64)  # (head_dim,)
latents = torch.randn(6, 32, dtype=torch.float64)  # (seq_len, kv_latent_dim)
keys = apply_rotary(latents @ w_uk.T, torch.arange(6))  # (seq_len, head_dim)，旋转后的内容键
real = keys @ q_one  # (seq_len,)
folded_scores = latents @ (w_uk.T @ q_one)  # (seq_len,)
print(f"各键位置的 |真实 - 合并|：{[f'{d:.1e}' for d in (real - folded_scores).abs().tolist()]}")


# %%
# .. _ex22-summary:
#
# 小结
# ----
# * MLA 每个词元、每层缓存一个 ``kv_latent_dim`` 个数的潜在向量和一个 ``rope_dim`` 个数的共用 RoPE
#   键，与头数无关；每个头仍有自己的键和值，由它自己的上投影重建。
# * 吸收形式（上投影并入查询投影和输出投影）与朴素形式只差舍入误差，前两张表打印了这一点；它就是
#   潜在空间里的多查询注意力，键有 ``kv_latent_dim + rope_dim`` 个特征。
# * 缓存表打印了同宽度下 MLA 每词元的字节数与 MHA、GQA、MQA 的对比；计时表打印了在这台机器上一步
#   解码相对 GQA 的代价，以及朴素形式每一步都要重建缓存时慢了多少。
#
# 出处：DeepSeek-AI 2024，“DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
# Language Model”，arXiv:2405.04434，第 2.1 节（式 9-19，表 1）和第 3.1.2 节（模型形状）；Ainslie 等
# 2023，arXiv:2305.13245（GQA）；Shazeer 2019，arXiv:1911.02150（MQA）。
