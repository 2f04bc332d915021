"""Tests for mha_ref.tutorial.bench: structure and arithmetic only, never a wall-clock number."""

import pytest
import torch

from mha_ref.tutorial import bench


class FakeClock:
    """Each call to ``fn`` advances the clock by the next duration in ``durations``."""

    def __init__(self, durations):
        self.now = 0.0
        self.durations = iter(durations)
        self.calls = 0

    def __call__(self):
        return self.now

    def work(self):
        self.calls += 1
        self.now += next(self.durations)


def test_measure_times_uses_fake_clock_and_skips_warmup():
    # two warm-up calls (10 s, 20 s: must not be counted), then five timed calls
    clock = FakeClock([10.0, 20.0, 0.3, 0.1, 0.5, 0.2, 0.4])
    times = bench.measure_times(clock.work, warmup=2, repeats=5, device="cpu", clock=clock)
    assert times == pytest.approx([0.3, 0.1, 0.5, 0.2, 0.4])
    assert clock.calls == 7


def test_time_fn_is_the_median_of_repeats():
    clock = FakeClock([99.0, 0.3, 0.1, 5.0, 0.2])  # one warm-up, one slow outlier
    assert bench.time_fn(clock.work, warmup=1, repeats=4, clock=clock) == pytest.approx(0.25)
    clock = FakeClock([0.3, 0.1, 7.0])
    assert bench.time_fn(clock.work, warmup=0, repeats=3, clock=clock) == pytest.approx(0.3)


def test_time_fn_real_clock_is_positive():
    x = torch.randn(64, 64)
    assert bench.time_fn(lambda: x @ x, warmup=1, repeats=3) > 0


@pytest.mark.parametrize(("warmup", "repeats"), [(-1, 3), (0, 0)])
def test_measure_times_rejects_bad_counts(warmup, repeats):
    with pytest.raises(ValueError, match="warmup|repeats"):
        bench.measure_times(lambda: None, warmup=warmup, repeats=repeats)


def test_peak_memory_cpu_sees_the_materialised_tensors():
    x = torch.randn(8, 4, 64, 16)  # allocated before the call: not counted
    scores_bytes = bench.tensor_bytes((8, 4, 64, 64))

    def attention():
        scores = x @ x.transpose(-2, -1)  # (8, 4, 64, 64)
        weights = scores.softmax(dim=-1)  # (8, 4, 64, 64)
        return weights @ x  # (8, 4, 64, 16)

    report = bench.peak_memory(attention, "cpu")
    assert report.method == "torch.profiler(profile_memory=True)"
    # scores and weights are alive together, plus the output
    expected = 2 * scores_bytes + bench.tensor_bytes((8, 4, 64, 16))
    assert report.peak_bytes == expected
    assert report.peak_mib == pytest.approx(expected / 2**20)


def test_peak_memory_cpu_sees_temporaries_inside_one_operator():
    # torch.nn.MultiheadAttention's inference path computes the per-head weights inside one
    # fused operator and returns only their average: the (N, H, L, L) tensor is a temporary.
    mha = torch.nn.MultiheadAttention(32, 8, batch_first=True).eval()
    x = torch.randn(2, 64, 32)
    with torch.no_grad():
        mha(x, x, x)  # warm-up
        report = bench.peak_memory(lambda: mha(x, x, x), "cpu")
    assert report.peak_bytes >= bench.tensor_bytes((2, 8, 64, 64))


def test_peak_memory_rejects_unknown_device():
    with pytest.raises(ValueError, match="device"):
        bench.peak_memory(lambda: None, "meta")


def test_tensor_bytes():
    assert bench.tensor_bytes((2, 4, 5, 5)) == 800
    assert bench.tensor_bytes((3, 7), torch.float64) == 168
    assert bench.tensor_bytes((2, 2), torch.bfloat16) == 8


def test_environment_structure():
    env = bench.environment("cpu")
    assert set(env) == {"torch", "python", "device", "threads", "cpu_count"}
    assert env["torch"] == torch.__version__
    assert env["threads"] == torch.get_num_threads() >= 1
    assert env["device"].startswith("cpu")
    assert all(isinstance(v, (str, int)) for v in env.values())


def test_plot_benchmark_reference_line():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["explicit", "fused"]
    reference = bench.tensor_bytes((4, 8, 128, 128))
    fig = bench.plot_benchmark(
        names,
        [2e-3, 1e-3],
        [3 * 2**20, 2**19],
        title="cpu (x86_64)",
        memory_reference_bytes=reference,
        memory_reference_label="attention weights",
    )
    ax_time, ax_memory = fig.axes
    assert [t.get_text() for t in ax_time.get_yticklabels()] == names
    (line,) = ax_memory.get_lines()
    assert line.get_xdata()[0] == pytest.approx(reference / 2**20)
    assert line.get_linestyle() == "--"
    (legend,) = fig.legends  # below the panels, so that it covers no bar
    assert [t.get_text() for t in legend.get_texts()] == ["attention weights"]
    assert ax_memory.get_legend() is None
    assert ax_memory.get_xlim()[1] > reference / 2**20
    no_reference = bench.plot_benchmark(names, [2e-3, 1e-3], [3 * 2**20, 2**19])
    assert not no_reference.axes[1].get_lines()
    plt.close("all")


def test_time_interleaved_alternates_and_takes_medians():
    # one warm-up round (a, b), then three rounds a, b, a, b, a, b
    clock = FakeClock([50.0, 60.0, 0.1, 1.0, 0.3, 3.0, 0.2, 2.0])
    order = []

    def make(name):
        def fn():
            order.append(name)
            clock.work()

        return fn

    medians = bench.time_interleaved(
        {"a": make("a"), "b": make("b")}, warmup=1, repeats=3, device="cpu", clock=clock
    )
    assert order == ["a", "b"] * 4
    assert medians == pytest.approx({"a": 0.2, "b": 2.0})
    with pytest.raises(ValueError, match="repeats"):
        bench.time_interleaved({"a": make("a")}, repeats=0)



def test_time_interleaved_spread_gives_median_min_and_max():
    clock = FakeClock([50.0, 60.0, 0.1, 1.0, 0.3, 3.0, 0.2, 2.0])

    def make():
        def fn():
            clock.work()

        return fn

    spread = bench.time_interleaved_spread(
        {"a": make(), "b": make()}, warmup=1, repeats=3, device="cpu", clock=clock
    )
    assert spread["a"] == pytest.approx((0.2, 0.1, 0.3))
    assert spread["b"] == pytest.approx((2.0, 1.0, 3.0))

def test_torch_compile_status_needs_a_cpp_compiler_on_cpu(monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert bench.torch_compile_status("cpu") == (
        False,
        "no C++ compiler found (inductor needs one on CPU)",
    )
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/g++" if name == "g++" else None)
    available, reason = bench.torch_compile_status("cpu")
    assert available and "C++ compiler found" in reason


def test_bench_suite_fast_attention_groups_structure(monkeypatch):
    """The issue-14 comparisons run and report ratios (tiny sizes; no time is asserted)."""
    from mha_ref.tutorial import bench_suite

    monkeypatch.setattr(bench_suite, "SIZES", {"bert-base layer": (1, 16, 16, 2)})
    monkeypatch.setattr(bench_suite, "DECODE_SIZE", (1, 32, 16, 4))
    monkeypatch.setattr(bench_suite, "torch_compile_status", lambda device: (False, "no compiler"))
    notes = []
    results = bench_suite.run_suite(
        device=torch.device("cpu"), repeats=1, warmup=0,
        groups=("tiled", "decode", "compile"), notes=notes,
    )
    names = [r.name for r in results]
    assert "tiled_attention (block 128) vs F.sdpa math backend, forward" in names
    assert "decode step (fused), num_kv_heads=1 vs 4" in names
    assert "decode step (explicit), num_kv_heads=2 vs 4" in names
    assert all(r.ratio > 0 for r in results)
    assert notes == ["torch.compile comparisons skipped: no compiler"]
    assert "skipped" in bench_suite.format_report(results, {"torch": "x"}, notes)


def test_compare_rounds_alternates_which_side_runs_first():
    from mha_ref.tutorial import bench_suite

    # one warm-up round (ours, reference), then rounds: ours first, reference first, ours first
    clock = FakeClock([50.0, 60.0, 1.0, 2.0, 4.0, 3.0, 1.5, 2.5])
    order = []

    def make(name):
        def fn():
            order.append(name)
            clock.work()

        return fn

    ours, reference = bench_suite.compare_rounds(
        make("ours"), make("reference"), warmup=1, repeats=3, clock=clock
    )
    assert order == ["ours", "reference"] + ["ours", "reference", "reference", "ours"] + [
        "ours", "reference"]
    # round 2 ran the reference first: its 4.0 s is the reference's, its 3.0 s ours
    assert ours == pytest.approx([1.0, 3.0, 1.5])
    assert reference == pytest.approx([2.0, 4.0, 2.5])
    with pytest.raises(ValueError, match="repeats"):
        bench_suite.compare_rounds(make("a"), make("b"), warmup=0, repeats=0)


@pytest.mark.parametrize(
    ("ours", "reference", "verdict"),
    [
        ([1.0, 1.0, 1.0], [1.0, 0.96, 1.0], "ok"),  # ratios 1.00, 1.04, 1.00: all <= 1.05
        ([1.2, 1.3, 1.1], [1.0, 1.0, 1.0], "missed"),  # every round above 1.05
        ([0.9, 1.3, 1.0], [1.0, 1.0, 1.0], "undecided"),  # 0.9 and 1.0 meet it, 1.3 does not
    ],
)
def test_a_ratio_whose_rounds_straddle_the_target_is_undecided(ours, reference, verdict):
    from mha_ref.tutorial import bench_suite

    result = bench_suite.summarize("x vs y, forward", "bert-base layer", ours, reference, 1.05)
    ratios = sorted(o / r for o, r in zip(ours, reference, strict=True))
    assert result.ratio == pytest.approx(ratios[1])  # the median of the per-round ratios
    assert (result.ratio_min, result.ratio_max) == pytest.approx((ratios[0], ratios[-1]))
    assert result.rounds == 3
    assert result.verdict == verdict
    line = bench_suite.format_report([result], {"torch": "x"}).splitlines()[-1]
    assert line.endswith({"ok": "  ok", "missed": "  MISSED", "undecided": "  undecided"}[verdict])
    assert f"{ratios[0]:.3f}-{ratios[-1]:.3f}" in line
    no_target = bench_suite.summarize("x", "teaching", ours, reference, None)
    assert no_target.verdict is None


def test_summarize_needs_one_time_per_round_on_each_side():
    from mha_ref.tutorial import bench_suite

    with pytest.raises(ValueError, match="one time per round"):
        bench_suite.summarize("x", "s", [1.0, 2.0], [1.0], None)
    with pytest.raises(ValueError, match="one time per round"):
        bench_suite.summarize("x", "s", [], [], None)


def test_bench_suite_rope_group_structure(monkeypatch):
    """The issue-20 comparison: attention with RoPE against the same layer without it."""
    from mha_ref.tutorial import bench_suite

    monkeypatch.setattr(bench_suite, "ROPE_SIZE", (1, 8, 16, 2))
    results = bench_suite.run_suite(
        device=torch.device("cpu"), repeats=1, warmup=0, groups=("rope",)
    )
    names = [r.name for r in results]
    assert names == [
        f"GroupedQueryAttention ({path}) with RoPE vs without, {part}"
        for path in ("fused", "explicit")
        for part in ("forward", "forward+backward")
    ]
    assert all(r.ratio > 0 and r.size == "rope b1 L8" for r in results)


def test_bench_suite_modern_group_structure(monkeypatch):
    """The issue-22 comparisons: MLA absorbed decode against GQA, MHA and MLA naive, and a
    sliding-window decode against the full one (tiny sizes; no time is asserted)."""
    from mha_ref.tutorial import bench_suite

    monkeypatch.setattr(bench_suite, "MLA_DECODE_SIZE", (1, 16, 16, 4, 8, 2))
    monkeypatch.setattr(bench_suite, "WINDOW_DECODE_SIZE", (1, 32, 16, 2, 1, 8))
    results = bench_suite.run_suite(
        device=torch.device("cpu"), repeats=1, warmup=0, groups=("modern",)
    )
    assert [r.name for r in results] == [
        "MLA decode step (absorbed, d_c=8) vs GQA num_kv_heads=1 (explicit)",
        "MLA decode step (absorbed, d_c=8) vs MHA (explicit)",
        "MLA decode step (absorbed) vs MLA naive (d_c=8)",
        "sliding-window decode step (window 8, fused) vs full (32)",
        "sliding-window decode step (window 8, explicit) vs full (32)",
    ]
    assert all(r.ratio > 0 for r in results)


def test_bench_suite_real_group_rows_and_skips(monkeypatch):
    """The issue-32 comparisons: one row per real model and length, and one decode step, each
    model against what transformers returns for its file; a model whose file is missing is a
    note, not a row."""
    from mha_ref.tutorial import bench_suite
    from mha_ref.tutorial.real_models import transformers_reference
    from mha_ref.tutorial.real_models.packages import ModelFileError

    class Tiny(torch.nn.Module):  # stands for both sides: logits of a 7-word vocabulary
        tokenizer = type("T", (), {"encode": staticmethod(lambda text: torch.arange(40) % 7)})

        def forward(self, tokens=None, input_ids=None, use_cache=None):
            tokens = input_ids if tokens is None else tokens  # (1, seq_len)
            logits = torch.nn.functional.one_hot(tokens, 7).float()  # (1, seq_len, 7)
            return (logits, []) if input_ids is None else type("O", (), {"logits": logits})

    def missing():
        raise ModelFileError("not installed: python -m pip install a-model")

    monkeypatch.setattr(bench_suite, "REAL_LENGTHS", (8, 16))
    steps = (lambda: torch.zeros(1), lambda: torch.zeros(1))  # _decode_steps: test_gemma3.py
    monkeypatch.setattr(bench_suite, "_decode_steps", lambda ours, theirs, text, cached: steps)
    monkeypatch.setattr(transformers_reference, "transformers_from_gguf", lambda p: (Tiny(), None))
    monkeypatch.setattr(bench_suite, "_real_models", lambda: [
        ("Model A", "AForCausalLM", Tiny, lambda: "a.gguf"),
        ("Model B", "BForCausalLM", missing, lambda: "b.gguf"),
    ])  # fmt: skip
    notes: list[str] = []
    results = bench_suite.run_suite(
        device=torch.device("cpu"), repeats=1, warmup=0, groups=("real",), notes=notes
    )
    assert [(r.name, r.size) for r in results] == [
        ("Model A vs transformers AForCausalLM, forward", "8 tokens"),
        ("Model A vs transformers AForCausalLM, forward", "16 tokens"),
        ("Model A vs transformers AForCausalLM, decode step", "1024 cached"),
    ]
    assert all(r.ratio > 0 for r in results)
    assert notes == ["Model B against transformers skipped: not installed: "
                     "python -m pip install a-model"]  # fmt: skip
