"""
示例 9：各种实现的比较
======================

多头注意力可以用好几种写法计算同一个函数：逐个头循环、一次批量的张量计算、一次打包的投影、
PyTorch 融合实现的 ``F.scaled_dot_product_attention``，或者直接用 ``torch.nn.MultiheadAttention``。
分组查询注意力和多查询注意力改变了函数本身（键/值头更少），它们另有自己的参照。

本例先 **检查** 每种实现与参照结果是否相同，然后才在构建本页的设备上为它们 **计时** 并报告峰值
内存。如果参与比较的实现连结果都不一致，给它们计时就毫无意义。

耗时取决于机器、机器的负载和库的编译方式，每次运行都不同。它们打印在以 ``[timing]`` 开头的
行上，从不抄进正文；请把它们理解为“在这次构建、这台设备上”的结果，而不是普遍规律。
"""

# %%
# .. _ex09-the-setup:
#
# 准备
# ----
# 一批 4 个序列，每个 128 个词元，``embed_dim = 64``，8 个头（``head_dim = 8``），不加掩码。
# 所有实现共用同一个 :class:`mha_ref.MultiHeadAttention` 的参数，每次调用都在
# ``torch.no_grad()`` 下进行（推理：不记录自动求导图）。先打印计时所依赖的运行环境。

# sphinx_gallery_parallel = False
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from mha_ref import (
    GroupedQueryAttention,
    MultiHeadAttention,
    merge_heads,
    pick_device,
    split_heads,
)
from mha_ref.tutorial.bench import environment, peak_memory, plot_benchmark, tensor_bytes, time_fn
from mha_ref.tutorial.plotting import text_table

torch.manual_seed(0)
device = pick_device()

batch, seq_len, embed_dim, num_heads = 4, 128, 64, 8
head_dim = embed_dim // num_heads

env = environment(device)
print(f"torch {env['torch']}，设备：{env['device']}，线程数：{env['threads']}")

ref = MultiHeadAttention(embed_dim, num_heads, batch_first=True, use_fused=False).to(device).eval()
W_q, W_k, W_v = ref.projection_weights()  # 各为 (embed_dim, embed_dim)
b_q, b_k, b_v = ref.projection_biases()  # 各为 (embed_dim,)
x = torch.randn(batch, seq_len, embed_dim, device=device)  # (batch, seq_len, embed_dim)
print("x：", tuple(x.shape))

# %%
# .. _ex09-the-implementations:
#
# 各种实现
# --------
# 1. **朴素循环**：逐字照搬论文公式，一次算一个头，每个头使用投影矩阵中属于自己的那几行。
# 2. **批量显式计算** （``mha_ref``，构造时传入 ``use_fused=False``）：通过 ``split_heads`` 一次
#    算完所有头；即使调用时传入 ``need_weights=False``，权重张量
#    ``(batch, num_heads, seq_len, seq_len)`` 也会被完整算出来。
# 3. **打包 QKV**：与上一种相同，但 Q、K、V 由打包的 ``in_proj_weight``
#    ``(3 * embed_dim, embed_dim)`` 经 *一次* 矩阵乘法得到。
# 4. **F.scaled_dot_product_attention**：打包投影之后调用 PyTorch 的融合注意力，它不返回注意力权重，
#    也可能根本不在内存里存下完整的注意力权重矩阵。
# 5. **默认设置的 mha_ref.MultiHeadAttention** （``use_fused=True``）：与
#    ``torch.nn.MultiheadAttention`` 一样，不要求返回权重（``need_weights=False``）时，它把注意力
#    本身交给 PyTorch 的融合算子，所以预期它的表现与第 4 种相近。
# 6. 使用相同参数的 **torch.nn.MultiheadAttention**，要求返回权重（它的默认值
#    ``need_weights=True``）。
# 7. 同一个模块，传入 ``need_weights=False``。
#
# 在不求导的评估模式下，``torch.nn.MultiheadAttention`` 会走融合的推理“快速路径”；在 torch 2.13
# 中，无论是否要求返回权重都是如此。融合不等于不存权重：视设备和 PyTorch 版本而定，这条路径可能
# 仍会完整地计算 ``Q K^T`` 及其 softmax。存下整个权重张量的实现，内存峰值至少有这个张量那么大；
# 下面表格的最后一列把每个峰值与这个大小比较。这只是大小的比较：峰值低于它，说明权重从未被完整存下；
# 峰值高于它，并不说明存下了（其他张量也占内存）。


def naive_loop(x):
    heads = []
    for i in range(num_heads):
        rows = slice(i * head_dim, (i + 1) * head_dim)  # 这个头在 W_q、W_k、W_v 中对应的行
        q = x @ W_q[rows].T + b_q[rows]  # (batch, seq_len, head_dim)
        k = x @ W_k[rows].T + b_k[rows]  # (batch, seq_len, head_dim)
        v = x @ W_v[rows].T + b_v[rows]  # (batch, seq_len, head_dim)
        scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (batch, seq_len, seq_len)
        heads.append(scores.softmax(dim=-1) @ v)  # (batch, seq_len, head_dim)
    return ref.out_proj(torch.cat(heads, dim=-1))  # (batch, seq_len, embed_dim)


def batched_explicit(x):
    return ref(x, x, x, need_weights=False)[0]  # (batch, seq_len, embed_dim)


def packed_qkv(x):
    qkv = F.linear(x, ref.in_proj_weight, ref.in_proj_bias)  # (batch, seq_len, 3 * embed_dim)
    q, k, v = (split_heads(t, num_heads) for t in qkv.chunk(3, dim=-1))  # 各为 (batch, num_heads, seq_len, head_dim)
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (batch, num_heads, seq_len, seq_len)
    context = scores.softmax(dim=-1) @ v  # (batch, num_heads, seq_len, head_dim)
    return ref.out_proj(merge_heads(context))  # (batch, seq_len, embed_dim)


def fused_sdpa(x):
    qkv = F.linear(x, ref.in_proj_weight, ref.in_proj_bias)  # (batch, seq_len, 3 * embed_dim)
    q, k, v = (split_heads(t, num_heads) for t in qkv.chunk(3, dim=-1))  # 各为 (batch, num_heads, seq_len, head_dim)
    context = F.scaled_dot_product_attention(q, k, v)  # (batch, num_heads, seq_len, head_dim)
    return ref.out_proj(merge_heads(context))  # (batch, seq_len, embed_dim)


default_mha = MultiHeadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
default_mha.load_state_dict(ref.state_dict())  # 相同的参数，默认 use_fused=True
torch_mha = ref.to_torch().eval()  # 持有相同参数的 torch.nn.MultiheadAttention

implementations = {
    "朴素循环（逐个头）": naive_loop,
    "批量显式计算（mha_ref）": batched_explicit,
    "打包 QKV": packed_qkv,
    "F.scaled_dot_product_attention": fused_sdpa,
    "mha_ref.MultiHeadAttention（默认：不要权重时走融合算子）": lambda x: default_mha(x, x, x, need_weights=False)[0],
    "nn.MultiheadAttention，need_weights=True": lambda x: torch_mha(x, x, x)[0],
    "nn.MultiheadAttention，need_weights=False": lambda x: torch_mha(x, x, x, need_weights=False)[0],
}

# %%
# .. _ex09-check-first-same-output:
#
# 先检查：输出相同吗？
# --------------------
# 参照是同一个 ``mha_ref`` 模块在 float64 下的结果，因此每个 float32 实现（包括 ``mha_ref``
# 自己）都是和一个舍入误差小得多的结果比较。差异若只在 float32 舍入误差的量级，与最先打印的
# 输出量级相比微不足道，就说明“是同一个函数”；任何差异超过容差 ``1e-4``，脚本就会停止。

ref64 = MultiHeadAttention(embed_dim, num_heads, batch_first=True, dtype=torch.float64, use_fused=False)
ref64 = ref64.to(device).eval()
ref64.load_state_dict(ref.state_dict())
x64 = x.double()  # (batch, seq_len, embed_dim)
with torch.no_grad():
    expected = ref64(x64, x64, x64, need_weights=False)[0]  # (batch, seq_len, embed_dim)
print("输出的量级（max |expected|）：", f"{expected.abs().max().item():.2f}")

check_rows = []
for name, fn in implementations.items():
    with torch.no_grad():
        out = fn(x)  # (batch, seq_len, embed_dim)
    diff = (out.double() - expected).abs().max().item()
    check_rows.append((name, tuple(out.shape), f"{diff:.0e}", diff < 1e-4))
print(text_table(["实现", "输出形状", "最大绝对误差", "相同"], check_rows))
if not all(row[-1] for row in check_rows):
    raise RuntimeError("有实现与参照结果不一致，为它计时毫无意义")

# %%
# .. _ex09-grouped-query-and-multi-query-attention:
#
# 分组查询注意力与多查询注意力
# ----------------------------
# ``num_kv_heads = 2`` （GQA）和 ``1`` （MQA）的 :class:`mha_ref.GroupedQueryAttention` 键/值头
# 更少，所以是另一个函数，也有自己的参数。构造时传入 ``use_fused=False``，它走显式计算路径，
# 这里检查的、后面计时的都是这条路径。它的参照是：用模块自己的投影层做投影，再在这些投影
# 结果上调用 PyTorch 的 ``F.scaled_dot_product_attention(..., enable_gqa=True)``。

gqa_modules = {
    "GQA，2 个键/值头": GroupedQueryAttention(embed_dim, num_heads, 2, use_fused=False),
    "MQA，1 个键/值头": GroupedQueryAttention(embed_dim, num_heads, 1, use_fused=False),
}
gqa_rows = []
for name, module in gqa_modules.items():
    module = module.to(device).eval()
    with torch.no_grad():
        q = split_heads(module.q_proj(x), num_heads)  # (batch, num_heads, seq_len, head_dim)
        k = split_heads(module.k_proj(x), module.num_kv_heads)  # (batch, num_kv_heads, seq_len, head_dim)
        v = split_heads(module.v_proj(x), module.num_kv_heads)  # (batch, num_kv_heads, seq_len, head_dim)
        context = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # (batch, num_heads, seq_len, head_dim)
        reference = module.out_proj(merge_heads(context))  # (batch, seq_len, embed_dim)
        out = module(x)[0]  # (batch, seq_len, embed_dim)
    diff = (out - reference).abs().max().item()
    gqa_rows.append((name, tuple(k.shape), f"{diff:.0e}", diff < 1e-4))
    implementations[name] = lambda x, m=module: m(x)[0]
print(text_table(["实现", "键的形状", "与 SDPA 的最大绝对误差", "相同"], gqa_rows))
if not all(row[-1] for row in gqa_rows):
    raise RuntimeError("GQA/MQA 与 F.scaled_dot_product_attention(enable_gqa=True) 不一致")

# %%
# .. _ex09-then-time-and-memory:
#
# 然后计时、测内存
# ----------------
# :func:`mha_ref.tutorial.bench.time_fn` 先调用每种实现 3 次预热，再逐次计时 10 次调用（有 GPU 时，每次
# 读时钟前都同步 GPU），报告中位数。:func:`mha_ref.tutorial.bench.peak_memory` 报告一次调用在调用前已有
# 内存之上的张量内存峰值：GPU 上取自 ``torch.cuda.max_memory_allocated``，CPU 上取自
# ``torch.profiler`` 记录的分配与释放事件（包括算子内部的临时张量）。作为参照，先打印注意力权重
# 张量本身的大小。
#
# 该看什么：哪些实现的峰值低于 ``(batch, num_heads, seq_len, seq_len)`` 权重的大小（见表格的最后一列；
# 它们不可能完整存下权重），以及在这台设备上，逐头循环和融合算子
# 与批量代码相比如何。逐头循环每次只持有一个头的权重，所以它的峰值低于整个张量。自己运行
# 这个脚本时，请让机器保持空闲：如果另一个程序占满了某个核心，PyTorch 的工作线程会互相等待，
# 小运算可能慢上许多倍（调用 ``torch.set_num_threads(1)`` 可以避免这一点，代价是只用一个核心）。

weights_bytes = tensor_bytes((batch, num_heads, seq_len, seq_len), torch.float32)
print(f"注意力权重 (batch, num_heads, seq_len, seq_len)，float32：{weights_bytes / 2**20:.2f} MiB")

seconds, peaks = [], []
for fn in implementations.values():
    with torch.no_grad():
        seconds.append(time_fn(lambda fn=fn: fn(x), warmup=3, repeats=10, device=device))
        peaks.append(peak_memory(lambda fn=fn: fn(x), device))

memory_rows = [
    (name, f"{p.peak_mib:.2f}", "是" if p.peak_bytes >= weights_bytes else "否")
    for name, p in zip(implementations, peaks, strict=True)
]
print(f"峰值内存（测量方式：{peaks[0].method}）：")
print(text_table(["实现", "峰值 MiB", "峰值 >= 权重张量的大小"], memory_rows))
fastest = min(seconds)
for name, s in zip(implementations, seconds, strict=True):
    print(f"[timing] {name}：{s * 1e3:.3f} ms（最快者的 {s / fastest:.1f} 倍）")

fig = plot_benchmark(
    list(implementations),
    seconds,
    [p.peak_bytes for p in peaks],
    title=f"batch={batch}，seq_len={seq_len}，embed_dim={embed_dim}，num_heads={num_heads}，设备：{env['device']}",
    time_label="每次调用的耗时中位数（ms）",
    memory_label="峰值内存（MiB）",
    memory_reference_bytes=weights_bytes,
    memory_reference_label="注意力权重张量的大小",
)
plt.show()

# %%
# .. _ex09-at-a-realistic-width:
#
# 真实宽度下：前向、反向与 torch.compile
# --------------------------------------
# 上面的数字来自教学用的小尺寸。GPT-2 small 的一层是 ``embed_dim = 768``、12 个头（``head_dim = 64``），
# 训练时一批是 8 个长 1024 个词元的序列。这个尺寸在 GPU 上只需几毫秒，在普通 CPU 上却很慢，所以在 CPU
# 上用同样的宽度、1 个长 512 个词元的序列来测量。实际使用的尺寸由设备决定，并打印出来。
#
# 三种实现，分别测前向（不记录自动求导，评估模式）和前向加反向（对输出做一个固定随机投影后求梯度）：
# ``mha_ref`` 显式路径（``use_fused=False``）、默认设置的 ``mha_ref`` （融合注意力），以及
# ``torch.nn.MultiheadAttention``；然后用 ``torch.compile`` 编译默认设置的 ``mha_ref``，只测前向。
# （编译更多模块以及反向图在 CPU 上要花很长时间，所以本页只编译这一个模块、只测前向。）在 CPU 上，
# ``torch.compile`` 的默认后端需要 C++ 编译器：找不到时，本页会说明并跳过这些行。和前面一样，先用
# ``float64`` 核对输出 **和梯度** 。

from mha_ref.tutorial.bench import time_interleaved_spread, torch_compile_status

if device.type == "cuda":
    big_batch, big_len = 8, 1024
else:
    big_batch, big_len = 1, 512
big_dim, big_heads = 768, 12
print(f"在 {device.type} 上使用的尺寸：batch={big_batch}，seq_len={big_len}，embed_dim={big_dim}，num_heads={big_heads}")
compile_ok, compile_reason = torch_compile_status(device)
print(f"torch.compile：{'可用' if compile_ok else '跳过'}，{compile_reason}")

torch.manual_seed(0)
big_explicit = MultiHeadAttention(big_dim, big_heads, batch_first=True, use_fused=False).to(device).eval()
big_default = MultiHeadAttention(big_dim, big_heads, batch_first=True).to(device).eval()
big_default.load_state_dict(big_explicit.state_dict())
big_torch = big_explicit.to_torch().eval()
big_x = torch.randn(big_batch, big_len, big_dim, device=device)  # (batch, seq_len, embed_dim)
probe = torch.randn(big_batch, big_len, big_dim, device=device)  # (batch, seq_len, embed_dim)：损失为 (out * probe).sum()

big_modules = {
    "mha_ref 显式": big_explicit,
    "mha_ref 默认（融合）": big_default,
    "nn.MultiheadAttention": big_torch,
}
if compile_ok:
    big_modules["torch.compile(mha_ref 默认)"] = torch.compile(big_default)


def run(module, x):
    return module(x, x, x, need_weights=False)[0]  # (batch, seq_len, embed_dim)


def forward_backward(module, x):
    x = x.detach().requires_grad_(True)  # (batch, seq_len, embed_dim)
    module.zero_grad(set_to_none=True)
    (run(module, x) * probe).sum().backward()
    return x.grad  # (batch, seq_len, embed_dim)


big_ref = MultiHeadAttention(big_dim, big_heads, batch_first=True, dtype=torch.float64, use_fused=False).to(device)
big_ref.load_state_dict(big_explicit.state_dict())
big_x64 = big_x.double().requires_grad_(True)  # (batch, seq_len, embed_dim)
big_expected = run(big_ref, big_x64)  # (batch, seq_len, embed_dim)
(big_expected * probe.double()).sum().backward()

big_rows = []
for name, module in big_modules.items():
    with torch.no_grad():
        out_diff = (run(module, big_x).double() - big_expected).abs().max().item()
    if name.startswith("torch.compile"):  # 编译版本只测前向
        big_rows.append((name, f"{out_diff:.0e}", "-", out_diff < 1e-4))
        continue
    x_grad = forward_backward(module, big_x)  # (batch, seq_len, embed_dim)
    grad_diff = max(
        (x_grad.double() - big_x64.grad).abs().max().item(),
        (module.in_proj_weight.grad.double() - big_ref.in_proj_weight.grad).abs().max().item(),
    )
    big_rows.append((name, f"{out_diff:.0e}", f"{grad_diff:.0e}", out_diff < 1e-4 and grad_diff < 1e-3))
print(text_table(["实现", "输出最大绝对差", "梯度最大绝对差", "相等"], big_rows))
if not all(row[-1] for row in big_rows):
    raise RuntimeError("真实宽度下有实现与 float64 参考结果不一致")

# %%
# 然后分别为前向、前向加反向计时（预热 1 轮，再按轮交替计时 7 轮：
# :func:`mha_ref.tutorial.bench.time_interleaved_spread`；中位数、最快和最慢的一轮）并测峰值内存。
# 虚线是 ``float32`` 的注意力权重 ``(batch, num_heads, seq_len, seq_len)`` 的大小。前向加反向时，
# 单是激活值和梯度就可能超过这个大小，所以那里最后一列的“是”说明不了权重的情况。两行耗时的范围
# 互相重叠时，它们的差别在这台机器的噪声之内。


def no_grad_forward(module):
    def call():
        with torch.no_grad():
            return run(module, big_x)

    return call


big_calls = {f"前向：{name}": no_grad_forward(module) for name, module in big_modules.items()}
big_calls |= {
    f"前向+反向：{name}": (lambda module=module: forward_backward(module, big_x))
    for name, module in big_modules.items()
    if not name.startswith("torch.compile")
}
big_spread = time_interleaved_spread(big_calls, warmup=1, repeats=7, device=device)
big_seconds = {name: median for name, (median, _, _) in big_spread.items()}
big_peaks = []
for call in big_calls.values():
    for module in big_modules.values():
        module.zero_grad(set_to_none=True)  # 先释放之前调用留下的梯度，而不是在测量期间释放
    big_peaks.append(peak_memory(call, device))
big_weights = tensor_bytes((big_batch, big_heads, big_len, big_len), torch.float32)
print(text_table(
    ["实现", "峰值 MiB", "峰值 >= 权重张量的大小"],
    [(name, f"{p.peak_mib:.0f}", "是" if p.peak_bytes >= big_weights else "否") for name, p in zip(big_calls, big_peaks, strict=True)],
))
print(f"环境：torch {env['torch']}，python {env['python']}，设备 {env['device']}，线程 {env['threads']} 个（共 {env['cpu_count']} 个 CPU）")
for name, (s, fastest, slowest) in big_spread.items():
    print(f"[timing] {name}：中位数 {s * 1e3:.1f} ms（最快 {fastest * 1e3:.1f}，最慢 {slowest * 1e3:.1f}）")

fig = plot_benchmark(
    list(big_calls),
    list(big_seconds.values()),
    [p.peak_bytes for p in big_peaks],
    title=f"batch={big_batch}，seq_len={big_len}，embed_dim={big_dim}，num_heads={big_heads}，设备：{env['device']}",
    time_label="每次调用的耗时中位数（ms）",
    memory_label="峰值内存（MiB）",
    memory_reference_bytes=big_weights,
    memory_reference_label="注意力权重张量的大小",
)
plt.show()

# %%
# .. _ex09-exercises:
#
# 练习
# ----
# **练习 1.** 回到教学用的尺寸。保持批大小和宽度不变，把 ``seq_len`` 连续翻倍两次。预测批量
# 显式计算、朴素循环（逐个头）和 ``F.scaled_dot_product_attention`` 三者的峰值内存：各自大致与
# ``seq_len`` 成正比，还是与它的平方成正比？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    批量显式计算要存下整个 ``(batch, num_heads, seq_len, seq_len)`` 的注意力权重张量，所以峰值
#    随 ``seq_len`` 的平方增长。朴素循环一次只保留一个头的 ``(batch, seq_len, seq_len)``：峰值
#    小一些，但仍然是平方增长。如果融合算子从不完整存下分数，它保留的东西（查询、键、值和输出）
#    只随 ``seq_len`` 线性增长；打印出的增长倍数会告诉你这台设备上的算子是否如此。序列越长，融合
#    算子的优势越明显。

quadratic_paths = {
    "批量显式计算（mha_ref）": batched_explicit,
    "朴素循环（逐个头）": naive_loop,
    "F.scaled_dot_product_attention": fused_sdpa,
}
longer = [x.repeat(1, k, 1) for k in (1, 2, 4)]  # 每个都是 (batch, k * seq_len, embed_dim)
print("seq_len：", [t.shape[1] for t in longer])
for name, fn in quadratic_paths.items():
    with torch.no_grad():
        peak = [peak_memory(lambda fn=fn, t=t: fn(t), device).peak_bytes for t in longer]
    growth = [f"{b / a:.1f} 倍" for a, b in zip(peak[:-1], peak[1:], strict=True)]
    print(f"{name}：峰值 MiB {[f'{p / 2**20:.2f}' for p in peak]}，每翻一倍增长 {growth}")

# %%
# **练习 2.** MQA 只保留一个键/值头，这里键和值只有 MHA 的八分之一。然而在峰值内存表里，它的峰值
# 接近批量显式计算，远高于融合算子。是哪个张量把它撑在那里的？预测 MHA、GQA 和 MQA 的键和注意力
# 权重各有多大。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    分组让查询头共用键和值，但每个查询头仍然要给每个键打分：注意力权重为每个 *查询* 头保留一个
#    ``(seq_len, seq_len)`` 矩阵，三者大小相同。键随 ``num_kv_heads`` 缩小；最大的张量，即注意力权
#    重，却不变。在注意力这一步里，键也一直这么小：这条显式路径不会把共用的键和值复制给每个查询头
#    （:func:`mha_ref.scaled_dot_product_attention` 的 ``enable_gqa=True`` 会用
#    ``repeat_interleave`` 这样复制），而是把每组的查询头叠在一起，用这一组唯一的键/值头给它们打分。
#    GQA 和 MQA 省下的是生成文本时的 KV 缓存；注意力权重的内存，只有从不存下它们的算子才能省。


def mib(tensor):
    return tensor.numel() * tensor.element_size() / 2**20


size_rows = []
with torch.no_grad():
    keys = split_heads(F.linear(x, W_k, b_k), num_heads)  # (batch, num_heads, seq_len, head_dim)
    _, weights = ref(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
    size_rows.append(("MHA", tuple(keys.shape), f"{mib(keys):.3f}", tuple(weights.shape), f"{mib(weights):.3f}"))
    for name, module in gqa_modules.items():
        keys = split_heads(module.k_proj(x), module.num_kv_heads)  # (batch, num_kv_heads, seq_len, head_dim)
        _, weights = module(x, need_weights=True)  # (batch, num_heads, seq_len, seq_len)
        size_rows.append((name, tuple(keys.shape), f"{mib(keys):.3f}", tuple(weights.shape), f"{mib(weights):.3f}"))
print(text_table(["实现", "键的形状", "键 MiB", "注意力权重的形状", "注意力权重 MiB"], size_rows))

# %%
# **练习 3.** 上面的检查把每个实现与 float64 参考结果相比，并允许一定的误差。为什么不直接用
# ``torch.equal`` 比较两个 float32 实现？预测一下：朴素循环的输出，与批量显式计算、打包 QKV 和
# ``F.scaled_dot_product_attention`` 的输出是否逐位相同？如果不同，差异与输出量级下 float32 的精度
# 相比有多大？
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    它们计算的是同一个函数，但舍入的顺序不同：每种实现都按自己的顺序累加同样的乘积（逐个头还是
#    所有头一起，三次矩阵乘法还是一次打包的乘法，算子是否分块遍历键）。float32 的每次运算都带有约
#    ``torch.finfo(torch.float32).eps`` 的相对误差，所以输出在最后几位上不同，差异相当于输出量级下
#    的几次舍入。``torch.equal`` 会把相同的函数判为不同；要判断“是同一个函数”，应当像上面的检查
#    那样，与更精确的参考结果比较，并允许舍入误差。

with torch.no_grad():
    loop_output = naive_loop(x)  # (batch, seq_len, embed_dim)
for name, fn in {
    "批量显式计算（mha_ref）": batched_explicit,
    "打包 QKV": packed_qkv,
    "F.scaled_dot_product_attention": fused_sdpa,
}.items():
    with torch.no_grad():
        other = fn(x)  # (batch, seq_len, embed_dim)
    print(
        f"朴素循环对比 {name}：逐位相同 {torch.equal(loop_output, other)}，"
        f"最大绝对差 {(loop_output - other).abs().max().item():.0e}"
    )
eps = torch.finfo(torch.float32).eps
print(f"float32 的 eps 乘以输出的量级：{eps * expected.abs().max().item():.0e}")

# %%
# .. _ex09-summary:
#
# 小结
# ----
# - 逐头循环、批量的显式实现、打包投影、``F.scaled_dot_product_attention``、默认设置下的 ``mha_ref``
#   以及 ``torch.nn.MultiheadAttention`` 计算的是同一个函数：计时之前，每一种都先与 float64 的参考
#   结果核对过。
# - 分组查询注意力和多查询注意力的键/值头更少，是不同的函数；它们与
#   ``F.scaled_dot_product_attention(..., enable_gqa=True)`` 核对。
# - 峰值内存低于 ``(batch, num_heads, seq_len, seq_len)`` 权重的大小，说明这种实现从未完整保存过
#   权重；高于它则什么也说明不了。
# - 耗时取决于设备、负载和库的构建方式；两行的耗时范围重叠时，它们的差别只是噪声。
