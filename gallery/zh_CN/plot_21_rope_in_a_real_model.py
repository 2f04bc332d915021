"""
示例 21：真实模型各头里的 RoPE
==============================

示例 20 把旋转位置编码（RoPE）放进了一个两层的玩具模型。这里看它在一个真实语言模型里的样子：
SmolLM2-135M-Instruct，也就是真实模型那几个示例所用的模型（同一个 4 位文件），它的 270 个头（30 个块，每块 9 个查询头）都旋转
自己的查询和键。每个头有 64 个特征，分成 32 对旋转，每一对转得快慢不同：最快的一对每个词元转一
弧度，最慢的一对慢到在模型的整个上下文里几乎不转。Barbero 等人（2024，“Round and Round We Go!
What makes Rotary Positional Encodings useful?”，`arXiv:2410.06205
<https://arxiv.org/abs/2410.06205>`_）发现，Gemma 7B 用最快的几对搭出位置头，而查询和键的范数大多
放在最慢的几对里，这几对充当内容通道。本页在这个模型上测量这两点，然后把一个前一词元头的旋转逐对
去掉，看它需要的是哪几对。
"""

# %%
# .. _ex21-the-32-speeds:
#
# 32 种转速
# ---------
# 一个头的第 :math:`i` 对每个词元转 :math:`\theta_i = b^{-2i/64}` 弧度，其中 :math:`b` 是 RoPE 的 base，这个模型的是 100000
# （:func:`mha_ref.rotary_frequencies`）。下表对其中几对给出这个转速、转一整圈需要的词元数
# （:math:`2\pi/\theta_i`），以及在下面所用的文本上一共转了多少。在整段文本上转得远不到一弧度的一对，
# 几乎分不出一个位置和另一个位置：它给分数加上的部分只取决于内容。（自己运行本页需要真实模型：
# 下面打印三条安装命令。）

import math

import matplotlib.pyplot as plt
import torch

from mha_ref import rotary_frequencies
from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.smollm2 import install_steps, load_smollm2
from mha_ref.tutorial.rope_heads import (
    plot_pair_shares,
    previous_token_scores,
    queries_and_keys,
    rope_head_analysis,
    weights_without_rotation,
)

print("安装（按这个顺序）：", *install_steps(), sep="\n  ")
model = load_smollm2()
config = model.config
analysis = rope_head_analysis("statements", max_tokens=256)  # 设置了 MHA_REF_CACHE_DIR 时结果存入那个文件夹，再次运行直接读取
tokens, usage = analysis["tokens"], analysis["usage"]
text_len = len(tokens)
speeds = rotary_frequencies(config.head_dim, config.rope_base)  # (32,) 每个词元转的弧度
print(f"头：{config.num_layers} 个块 x {config.num_heads}；head_dim {config.head_dim}；"
      f"base {config.rope_base:g}；文本：{text_len} 个词元")
rows = [
    [i, f"{speeds[i]:.2e}", f"{2 * math.pi / speeds[i]:,.0f}", f"{speeds[i] * (text_len - 1):.3f}"]
    for i in (0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 31)
]
print(text_table(["特征对", "每个词元转的弧度", "转一圈的词元数", f"转过的弧度（共 {text_len} 个词元）"],
                 rows))

# %%
# .. _ex21-where-the-queries-and-keys-are-large:
#
# 查询和键在哪里大
# ----------------
# 对每个头，在这段文本（Python 语言参考中关于 ``for``、``while`` 和 ``if`` 语句的三段话，随软件包
# 一起提供）上算出旋转之前的查询和键，测量每一对的大小（它在所有词元上的均方根范数）。一对给分数
# 加上的量，最多是查询和键在这一对里大小的乘积，所以这个乘积（这一对的 *使用量*，usage）说明每种转速对这个头
# 能有多大影响（:class:`~mha_ref.tutorial.rope_heads.FrequencyUsage`）。热力图给出每个块在每一对上
# 的份额，对块内 9 个头取平均（每一行之和为 1）。

share = usage.usage / usage.usage.sum(dim=-1, keepdim=True)  # (layers, heads, pairs)
per_block = share.mean(dim=1)  # (layers, pairs)
fig = plot_pair_shares(
    per_block,
    title="各特征对在头的查询-键大小中所占的份额",
    xlabel="特征对（0 = 最快，31 = 最慢）",
    ylabel="块",
    colorbar_label="份额（块内各头的平均）",
)
plt.show()

fast, slow = range(0, 8), range(24, 32)
all_heads = share.flatten(0, 1)  # (270, pairs)
print(f"最快的 8 对的平均份额：{all_heads[:, list(fast)].sum(-1).mean():.3f}")
print(f"最慢的 8 对的平均份额：{all_heads[:, list(slow)].sum(-1).mean():.3f}")
print(f"8 对（第 16 到 23 对）的平均份额：{all_heads[:, 16:24].sum(-1).mean():.3f}")
most = per_block.mean(dim=0).argsort(descending=True)[:4].tolist()  # 份额最大的几对
print(f"平均份额最大的特征对：{most}")

# %%
# 和 Gemma 7B 一样，大小主要在慢的那几对里，它们在这段文本上只转过一弧度的一小部分（见第一张表）：
# 用它们算出的注意力分数（softmax 之前查询与键的乘积）取决于词元是什么，而不是在哪里。最快的几对平均只占很小的份额，但并非每个头都如此。
#
# .. _ex21-heads-that-rely-on-position:
#
# 依赖位置的头
# ------------
# 一个头的前一词元分数，是它放在每个查询前一个词元上的平均注意力权重（这里在这段文本上测；示例 16 在重复的
# 随机词元上测，所以数值与那里不同）。下表把分数最高的五个头和它们
# 在最快 8 对中的份额放在一起，再把最快几对份额最大的五个头和它们的分数放在一起。（块和头都从 0
# 开始编号，与其他真实模型示例相同。）

previous = analysis["previous"]  # (layers, heads)
fast_share = usage.share(list(fast))  # (layers, heads)


def describe(index):
    layer, head = divmod(int(index), config.num_heads)
    return [f"({layer}, {head})", f"{previous[layer, head]:.3f}", f"{fast_share[layer, head]:.3f}"]


header = ["头（块，头）", "前一词元分数", "最快 8 对的份额"]
print("前一词元分数最高的头：")
print(text_table(header, [describe(i) for i in previous.flatten().argsort(descending=True)[:5]]))
print("最快几对份额最大的头：")
print(text_table(header, [describe(i) for i in fast_share.flatten().argsort(descending=True)[:5]]))

# %%
# .. _ex21-taking-the-rotation-out-pair-by-pair:
#
# 逐对去掉旋转
# ------------
# 大小只说明一个头 *能* 用什么。为了看清前一词元分数最高的那个头 *需要* 什么，我们重新计算它所在块
# 的注意力，把其中一些对的旋转去掉（查询和键在这些对上的角度都设为 0），再测一次它的前一词元分数
# （:func:`~mha_ref.tutorial.rope_heads.rotation_removal_curve`）。两种顺序：先去掉最快的几对，或先
# 去掉最慢的几对。什么都不去掉时，重新计算的结果就是模型自己的注意力，差别只在 float32 的舍入（表下面核对了分数和单个权重的最大差）。这里只
# 测量这一个头的注意力模式。

layer, head = analysis["head"]
removed = list(range(config.head_dim // 2 + 1))
fig = plot_lines(
    removed,
    {"先去掉最快的": analysis["fast_first"], "先去掉最慢的": analysis["slow_first"]},
    xlabel="去掉旋转的特征对数",
    ylabel="前一词元分数",
    title=f"去掉旋转时的头 ({layer}, {head})",
)
plt.show()
rows = [[n, f"{analysis['fast_first'][n]:.3f}", f"{analysis['slow_first'][n]:.3f}"]
        for n in (0, 1, 2, 4, 8, 16, 24, 28, 31, 32)]
print(text_table(["不旋转的特征对数", "先去掉最快的", "先去掉最慢的"], rows))
with torch.no_grad():
    _, own = model(tokens, need_weights=True)  # 模型自己的前向传播：每块一个 (1, heads, L, L)
own_score = previous_token_scores(own[layer][0])[head]  # 这个头在模型自己的传播中的分数
queries, keys = queries_and_keys(model, tokens, layer)  # (heads, L, hd), (kv_heads, L, hd)
nothing = torch.zeros(config.head_dim // 2, dtype=torch.bool)  # (pairs,) 每一对都旋转
recomputed = weights_without_rotation(model, queries, keys, nothing)[head]  # (L, L)
gap = (recomputed - own[layer][0, head]).abs().max()  # 单个权重的最大差
print(f"什么都不去掉：{analysis['fast_first'][0]:.5f}；同一个头在模型自己的前向传播中："
      f"{own_score:.5f}；单个权重的最大差：{gap:.1e}")

# %%
# 只去掉最快那一对的旋转，这个头放在前一个词元上的权重就大部分没了（“先去掉最快的”）：这个头需要
# 这一对。另一种顺序说明只有它还不够：最慢的一半特征对停转时几乎没有变化，但中间的几对也停转时分数
# 就下降，只剩最快那一对还在转时（“先去掉最慢的”，31 对）所剩无几。前一词元模式是用较快的一半特征对
# 搭出来的，即最快那一对加上中间的几对，而不是慢的那一半；它用的是快的那一端，这与 Barbero 等人在
# Gemma 中的发现一致。这个头的大小大部分在别的特征对里（它在最快 8 对中的份额见上表）。
#
# 同样的干预同时作用于每一个头，每个头在自己的块里，所有对都不旋转：前一词元模式明显的那些头，有多少
# 还能保住它？

unrotated = analysis["unrotated"]  # (layers, heads)
clear = previous > 0.3
kept = (unrotated[clear] > 0.5 * previous[clear]).sum()
print(f"前一词元分数高于 0.3 的头：{int(clear.sum())}")
print(f"其中不旋转时仍保住一半以上分数的头：{int(kept)}")
print(f"不旋转时所有头中最高的分数：{unrotated.max():.3f}")

# %%
# .. _ex21-what-this-shows:
#
# 这说明了什么
# ------------
# 在这个模型里，和 Gemma 7B 一样，查询和键在慢的那几对里最大，它们在这种长度的文本上几乎不转，
# 因此承载内容。前一词元分数最高的那个头是用较快的一半特征对搭出来的：最快那一对停转，它就失去
# 大部分模式；只有最慢的一半停转时，它保住这个模式；只剩最快那一对还在转时，它又失去大部分模式；
# 而前一词元模式明显的头，没有一个在完全不旋转时还能保住它。
# RoPE 给每个头同时提供这两种通道，每个头各有自己的搭配。Barbero 等人认为，慢的几对正是更大的 base
# 有助于长上下文的原因：base 越大，在整个上下文里几乎不动的特征对就越多。

# %%
# .. _ex21-exercises:
#
# 练习
# ----
# **练习 1.** Barbero 等人提出 p-RoPE：最慢的那些对干脆不旋转。根据上面那个头的曲线，最慢的多少对可以
# 停转，而它的前一词元分数下降不超过 0.01？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    沿着“先去掉最慢的”那条曲线往下读，直到它比起点低出 0.01 以上：

start = analysis["slow_first"][0]
safe = next(n for n, score in enumerate(analysis["slow_first"]) if score < start - 0.01) - 1
print(f"最慢的 {safe} 对可以停转：分数 {analysis['slow_first'][safe]:.3f}"
      f"（原为 {start:.3f}）；再多一对：{analysis['slow_first'][safe + 1]:.3f}")
print(f"其余各对中最慢的是第 {31 - safe} 对，在这段文本上转过 {speeds[31 - safe] * (text_len - 1):.3f} "
      f"弧度")

# %%
# **练习 2.** 这个模型能读 8192 个词元。哪些特征对在这个上下文里转不满一整圈？它们平均占查询–键大小的
# 多少份额？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    一对转一整圈需要 :math:`2\pi/\theta_i` 个词元。需要的词元数比上下文还多的那些对，在上下文里永远回不到
#    同一个角度，而它们占了大小的大部分：

never = [i for i in range(len(speeds)) if 2 * math.pi / speeds[i] > config.context_length]
print(f"在 {config.context_length} 个词元里转不满一圈的特征对：{never[0]} 到 {never[-1]}")
print(f"它们在头的大小中的平均份额：{all_heads[:, never].sum(-1).mean():.3f}")

# %%
# .. _ex21-summary:
#
# 小结
# ----
# - SmolLM2-135M-Instruct 的每个头把查询和键分成 32 对旋转，从每个词元一弧度，到在整个上下文里远不到一弧度。
# - 查询和键的大小大多在慢的几对里：它们是内容的通道。
# - 前一词元分数最高的头，在最快那一对的旋转被去掉时失去它的模式，在最慢的一半失去旋转时保住它，只靠最快
#   那一对又保不住：它的位置来自最快的一对和中间的几对一起。前一词元模式明显的头，没有一个在不旋转时还能保住它。
