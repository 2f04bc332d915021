"""Tests for mha_ref.tutorial's experiments: task, head read-out, training, sweep, cache."""

import json
import math
import pickle
import struct

import pytest
import torch

from mha_ref.tutorial import cache, head_count, heads, tasks, training

# A short run: enough to check determinism and structure, not to learn the task.
SHORT = dict(steps=8, eval_size=64, probe_size=16)


# -- the task ------------------------------------------------------------------------------------


@pytest.mark.parametrize("offsets", [(-1, -2), (-1, -3), (-3, -1)])
def test_make_batch_targets_follow_the_table(offsets):
    table = tasks.make_table(5, seed=3)  # (5, 5)
    tokens, targets = tasks.make_batch(32, 7, table, torch.Generator().manual_seed(0), offsets)
    assert tokens.shape == targets.shape == (32, 7)
    start = -min(offsets)
    assert (targets[:, :start] == -100).all()
    for t in range(start, 7):
        expected = table[tokens[:, t + offsets[0]], tokens[:, t + offsets[1]]]  # (32,)
        assert torch.equal(targets[:, t], expected)


def test_make_table_is_seeded_and_not_symmetric():
    table = tasks.make_table(16, seed=0)
    assert torch.equal(table, tasks.make_table(16, seed=0))
    assert not torch.equal(table, tasks.make_table(16, seed=1))
    assert not torch.equal(table, table.T)  # order matters: both relations must be told apart
    assert table.min() >= 0 and table.max() < 16


@pytest.mark.parametrize("offsets", [(-1,), (1, -2), (-2, -2), (-1, -8)])
def test_bad_offsets_are_rejected(offsets):
    with pytest.raises(ValueError, match="offsets"):
        tasks.make_batch(2, 8, tasks.make_table(4), torch.Generator(), offsets)


# -- reading the heads from weights ------------------------------------------------------------


def _synthetic_weights(seq_len=6):
    """Four heads: offset -1, offset -2, offset -1 again, uniform over allowed keys."""
    weights = torch.zeros(3, 4, seq_len, seq_len)  # (N, H, L, L)
    for t in range(seq_len):
        weights[:, 0, t, max(t - 1, 0)] = 1.0
        weights[:, 1, t, max(t - 2, 0)] = 1.0
        weights[:, 2, t, max(t - 1, 0)] = 1.0
        weights[:, 3, t, : t + 1] = 1.0 / (t + 1)
    return weights


def test_offset_profile_and_entropy_of_known_heads():
    weights = _synthetic_weights()
    profile = heads.offset_profile(weights, min_query=2)  # (H, L)
    assert profile.shape == (4, 6)
    assert profile[0, 1] == 1.0 and profile[0].sum() == 1.0
    assert profile[1, 2] == 1.0
    entropy = heads.head_entropy(weights, min_query=2)  # (H,)
    assert entropy[:3].tolist() == [0.0, 0.0, 0.0]
    assert entropy[3].item() == pytest.approx(heads.uniform_entropy(6, min_query=2))
    expected = sum(math.log(t + 1) for t in range(2, 6)) / 4
    assert heads.uniform_entropy(6, 2) == pytest.approx(expected)


def test_summarize_heads_finds_offsets_and_spread():
    summary = heads.summarize_heads(_synthetic_weights(), min_query=2)
    assert [(h.offset, h.weight, h.focused) for h in summary[:3]] == [
        (-1, 1.0, True),
        (-2, 1.0, True),
        (-1, 1.0, True),
    ]
    assert not hasattr(summary[2], "redundant_with")  # same offset is not "redundant"
    # uniform head, queries t = 2..5: every offset the query can reach gets 1 / (t + 1)
    assert not summary[3].focused
    assert summary[3].weight == pytest.approx((1 / 3 + 1 / 4 + 1 / 5 + 1 / 6) / 4, abs=1e-4)
    assert summary[2].describe() == "head 2 attends mostly to offset -1 (mean weight 1.00)"
    assert summary[2].describe("zh_CN") == "头 2 主要关注偏移 -1（平均权重 1.00）"
    assert summary[3].describe().startswith("head 3 is spread out: offset ")
    with pytest.raises(ValueError, match="language"):
        summary[0].describe("fr")


# -- training --------------------------------------------------------------------------------------


def test_train_is_deterministic_and_leaves_global_state_alone():
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()

    torch.manual_seed(123)
    first = training.train(num_heads=2, **SHORT)
    assert torch.equal(torch.rand(3), expected_next)  # global RNG untouched
    assert torch.get_num_threads() == threads
    assert torch.are_deterministic_algorithms_enabled() == deterministic

    second = training.train(num_heads=2, **SHORT)
    assert first.loss_curve == second.loss_curve
    assert first.accuracy == second.accuracy
    assert torch.equal(first.probe_weights, second.probe_weights)
    other_seed = training.train(num_heads=2, seed=1, **SHORT)
    assert other_seed.loss_curve != first.loss_curve


def test_train_result_structure():
    result = training.train(num_heads=4, **SHORT)
    assert len(result.loss_curve) == SHORT["steps"]
    assert result.probe_tokens.shape == (4, 8)
    assert result.probe_weights.shape == (4, 4, 8, 8)  # (probe_keep, H, L, L)
    rows = result.probe_weights.sum(dim=-1)  # (4, 4, 8)
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)
    assert torch.equal(result.probe_weights.triu(1), torch.zeros_like(result.probe_weights))
    assert result.offset_profile.shape == (4, 8)
    assert result.entropy.shape == (4,)
    assert len(result.heads) == 4
    assert 0.0 <= result.accuracy <= 1.0
    # embeddings 16*16 + 8*16, attention 4*16*16 + 4*16, read-out 16*64 + 64 + 64*16 + 16
    assert result.attention_parameters == 1088
    assert result.num_parameters == 256 + 128 + 1088 + 1088 + 1040


@pytest.mark.parametrize("offsets", [(-1, -2), (-1, -3)])
def test_two_heads_learn_the_two_relations(offsets):
    """The offsets are read from the trained weights: changing the task moves them."""
    result = training.train(num_heads=2, offsets=offsets)
    assert result.accuracy > 0.95
    assert result.relations_found() == sorted(offsets, reverse=True)
    assert result.relations_missing() == []
    assert all(h.focused and h.weight > 0.9 for h in result.heads)
    assert result.loss_curve[-1] < result.loss_curve[0] / 10


# -- the head-count sweep ------------------------------------------------------------------------


def test_attention_flops_by_hand():
    flops = head_count.attention_flops(batch=2, seq_len=3, embed_dim=4, num_heads=2)
    assert flops["projections"] == 4 * 2 * 2 * 3 * 4 * 4
    assert flops["scores"] == flops["weighted_sum"] == 2 * 2 * 3 * 3 * 4
    assert flops["softmax"] == 6 * 2 * 2 * 3 * 3
    assert flops["total"] == 768 + 144 + 144 + 216
    one, eight = (head_count.attention_flops(8, 64, 32, h) for h in (1, 8))
    assert one["scores"] == eight["scores"]  # matmul work does not depend on h
    assert eight["softmax"] == 8 * one["softmax"]
    with pytest.raises(ValueError, match="divide"):
        head_count.attention_flops(1, 1, 10, 3)


def test_attention_weight_bytes():
    assert head_count.attention_weight_bytes(2, 5, 4) == 2 * 4 * 5 * 5 * 4
    assert head_count.attention_weight_bytes(2, 5, 4, torch.float16) == 2 * 4 * 5 * 5 * 2


def test_head_count_sweep_rows():
    rows = head_count.head_count_sweep((1, 2, 4), embed_dim=16, seeds=(0, 1), **SHORT)
    assert [r.num_heads for r in rows] == [1, 2, 4]
    assert [r.head_dim for r in rows] == [16, 8, 4]
    assert {r.attention_parameters for r in rows} == {1088}
    assert len({r.matmul_flops for r in rows}) == 1
    assert rows[0].flops < rows[1].flops < rows[2].flops
    assert [r.weight_bytes for r in rows] == [32 * h * 128 * 128 * 4 for h in (1, 2, 4)]
    for row, h in zip(rows, (1, 2, 4), strict=True):
        accuracies = [training.train(num_heads=h, seed=s, **SHORT).accuracy for s in (0, 1)]
        assert row.accuracies == accuracies
        assert row.accuracy_mean == pytest.approx(sum(accuracies) / 2, abs=1e-6)
        assert row.accuracy_std == pytest.approx(
            abs(accuracies[0] - accuracies[1]) / 2**0.5, abs=1e-6
        )
        assert row.accuracy_min == min(accuracies) and row.accuracy_max == max(accuracies)


def test_head_count_sweep_rejects_bad_arguments():
    with pytest.raises(ValueError, match="divide"):
        head_count.head_count_sweep((3,), embed_dim=16)
    with pytest.raises(ValueError, match="seeds"):
        head_count.head_count_sweep((1,), seeds=(0,))


# -- the cache -----------------------------------------------------------------------------------


def test_no_cache_without_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(cache.CACHE_ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    training.train(num_heads=1, **SHORT)
    assert list(tmp_path.iterdir()) == []


def test_cache_hit_miss_and_source_change(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    first = training.train(num_heads=2, **SHORT)
    files = sorted(tmp_path.iterdir())
    assert len(files) == 1 and files[0].name.startswith("train-")

    # a hit: nothing is computed (computing would raise), the result is equal
    def must_not_run(**_):
        raise AssertionError("cache hit expected")

    monkeypatch.setattr(training, "_train", must_not_run)
    hit = training.train(num_heads=2, **SHORT)
    assert hit.loss_curve == first.loss_curve and hit.accuracy == first.accuracy
    assert torch.equal(hit.probe_weights, first.probe_weights)
    assert hit.heads == first.heads
    monkeypatch.undo()
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))

    # another argument: a miss, stored beside the first
    training.train(num_heads=2, seed=1, **SHORT)
    assert len(list(tmp_path.iterdir())) == 2

    # changed mha_ref source: a miss too
    monkeypatch.setattr(cache, "fingerprint", lambda modules: {"mha_ref/x.py": "edited"})
    training.train(num_heads=2, **SHORT)
    assert len(list(tmp_path.iterdir())) == 3


def test_cache_key_covers_every_input(monkeypatch):
    base = cache.cache_key("train", {"a": 1, "b": (1, 2), "lr": 0.01})
    assert base == cache.cache_key("train", {"b": [1, 2], "lr": 0.01, "a": 1})  # order-free
    assert base != cache.cache_key("train", {"a": 2, "b": (1, 2), "lr": 0.01})
    assert base != cache.cache_key("train", {"a": 1, "b": (1, 2), "lr": 0.010000001})
    assert base != cache.cache_key("head_count_sweep", {"a": 1, "b": (1, 2), "lr": 0.01})
    monkeypatch.setattr(training.torch, "__version__", "0.0.0")
    assert base != cache.cache_key("train", {"a": 1, "b": (1, 2), "lr": 0.01})
    with pytest.raises(TypeError, match="cache key"):
        cache.cache_key("train", {"a": object()})


def _entry_payload(path):
    """The pickled bytes of a cache entry (after its format line and its JSON header)."""
    data = path.read_bytes()
    assert data.startswith(cache._MAGIC)
    header, _, payload = data[len(cache._MAGIC) :].partition(b"\n")
    return json.loads(header), payload


def test_damaged_cache_file_is_recomputed(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    first = training.train(num_heads=1, **SHORT)
    (path,) = tmp_path.iterdir()
    path.write_bytes(b"not a pickle")
    again = training.train(num_heads=1, **SHORT)
    assert again.loss_curve == first.loss_curve
    assert pickle.loads(_entry_payload(path)[1]).loss_curve == first.loss_curve
    assert "not a cache entry of this format" in capfd.readouterr().err


def test_an_entry_changed_so_that_it_still_loads_is_noticed(tmp_path, monkeypatch, capfd):
    """One float of the pickled result changed: the pickle loads (to a wrong number), the
    checksum does not match, the result is computed again and the file replaced."""
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    first = training.train(num_heads=1, **SHORT)
    (path,) = tmp_path.iterdir()
    header, payload = _entry_payload(path)
    target = struct.pack(">d", first.accuracy)  # pickle writes a float as 'G' + 8 bytes
    assert payload.count(b"G" + target) == 1
    damaged = payload.replace(b"G" + target, b"G" + struct.pack(">d", 0.0))
    assert pickle.loads(damaged).accuracy == 0.0  # it loads: only the checksum can tell
    path.write_bytes(path.read_bytes().replace(payload, damaged))
    capfd.readouterr()
    again = training.train(num_heads=1, **SHORT)
    report = capfd.readouterr().err
    assert again.accuracy == first.accuracy != 0.0
    assert f"{path}: its content does not match its checksum" in report
    assert "computing it again and replacing the file" in report
    new_header, new_payload = _entry_payload(path)  # replaced by a sound entry
    assert new_header["key"] == header["key"] and pickle.loads(new_payload).accuracy != 0.0
    training.train(num_heads=1, **SHORT)
    assert capfd.readouterr().err == ""  # now sound: read without a word


def test_an_entry_under_another_name_is_not_used(tmp_path, monkeypatch, capfd):
    """The header holds the key the entry was stored under: a file copied over another key's
    file is noticed even though its checksum is right."""
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    one = training.train(num_heads=1, **SHORT)
    two = training.train(num_heads=2, **SHORT)
    path_one, path_two = (p for p in sorted(tmp_path.iterdir(), key=lambda p: p.stat().st_mtime_ns))
    path_one.write_bytes(path_two.read_bytes())
    capfd.readouterr()
    again = training.train(num_heads=1, **SHORT)
    assert again.loss_curve == one.loss_curve != two.loss_curve
    assert "it was stored under another key" in capfd.readouterr().err


def test_the_key_covers_the_code_the_computation_can_run_and_no_more(monkeypatch):
    """A training's key holds the files of its import closure: the model and the training
    loop, the attention reference, not the figures; an ablation report's also holds the
    training that made the model it measures."""
    from mha_ref.tutorial.sources import fingerprint

    computes = []
    monkeypatch.setattr(training, "cached", lambda name, args, compute: computes.append(compute))
    training.train(num_heads=1, **SHORT)
    (compute,) = computes
    assert cache.compute_modules(compute) == ["mha_ref.tutorial.training"]
    training_files = set(fingerprint(cache.compute_modules(compute)))
    assert {"mha_ref/tutorial/training.py", "mha_ref/tutorial/tasks.py",
            "mha_ref/functional.py", "mha_ref/multihead.py"} <= training_files
    assert "mha_ref/tutorial/plotting.py" not in training_files
    assert training_files <= set(fingerprint(["mha_ref.tutorial.ablation"]))
    assert cache.compute_modules(lambda: None) is None  # defined here: all of mha_ref


def test_sweep_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    rows = head_count.head_count_sweep((1, 2), seeds=(0, 1), **SHORT)
    names = sorted(p.name.split("-")[0] for p in tmp_path.iterdir())
    assert names == ["head_count_sweep"] + ["train"] * 4
    must_hit = lambda **_: pytest.fail("cache hit expected")  # noqa: E731
    monkeypatch.setattr(head_count, "_head_count_sweep", must_hit)
    assert head_count.head_count_sweep((1, 2), seeds=(0, 1), **SHORT) == rows


# -- figures -------------------------------------------------------------------------------------


def test_plot_loss_curves_log_axis_is_labelled_and_readable(clean_matplotlib):
    fig = training.plot_loss_curves({"4 heads": [2.7, 1.0, 0.3, 0.1, 0.03]})
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    assert "log scale" in ax.get_ylabel()
    fig.canvas.draw()
    lo, hi = ax.get_ylim()
    shown = [t.get_text() for t in ax.get_yticklabels() if lo <= t.get_position()[1] <= hi]
    assert len([t for t in shown if t]) >= 5  # 1, 2 and 5 times each power of ten
    assert "0.5" in shown and "2" in shown


def test_plot_head_profiles_labels_its_colorbar(clean_matplotlib):
    result = training.train(num_heads=2, **SHORT)
    fig = heads.plot_head_profiles(result, colorbar_label="平均注意力权重")
    (bar,) = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert bar.get_ylabel() == "平均注意力权重"


def _row(h, accuracies):
    mean = sum(accuracies) / len(accuracies)
    return head_count.HeadCountRow(h, 16 // h, 1088, 0, 0, 0, accuracies, mean, 0.0, mean, mean)


def test_plot_head_count_sweep_bleu_axis_and_base_model(clean_matplotlib):
    published = [{"h": 1, "bleu": 24.9}, {"h": 8, "bleu": 25.8}, {"h": 32, "bleu": 25.4}]
    rows = [_row(1, [0.7, 0.8]), _row(8, [0.9, 1.0])]
    fig = head_count.plot_head_count_sweep(rows, published, base_label="base model")
    ax_bleu = fig.axes[1]
    low, high = ax_bleu.get_ylim()
    assert high - low >= 3.0  # a 0.9 BLEU gap is not stretched over the whole panel
    assert low < 24.9 and high > 25.8
    assert [t.get_text() for t in ax_bleu.get_legend().get_texts()] == ["base model"]
    (marker,) = ax_bleu.collections
    assert marker.get_offsets().tolist() == [[8.0, 25.8]]
    no_base = head_count.plot_head_count_sweep(rows, published, base_heads=None)
    assert no_base.axes[1].get_legend() is None


def test_a_real_model_computation_is_keyed_by_the_module_that_defines_it(monkeypatch):
    """The real model's analyses run on its threads through a wrapper defined in
    ``smollm2_heads``; the key must still hold the code of the module whose function is
    computed: a change to ``sink_values.py`` alone (example 18's value norms) would otherwise
    read a stale result."""
    from mha_ref.tutorial.real_models import sink_values, smollm2_heads
    from mha_ref.tutorial.sources import fingerprint

    computes = []
    monkeypatch.setattr(sink_values, "cached", lambda name, args, compute: computes.append(compute))
    sink_values.sink_values_analysis()
    (compute,) = computes
    assert cache.compute_modules(compute) == ["mha_ref.tutorial.real_models.sink_values"]
    assert "mha_ref/tutorial/real_models/sink_values.py" in set(
        fingerprint(cache.compute_modules(compute))
    )
    assert cache.compute_modules(smollm2_heads._in_model_threads(smollm2_heads._icl, 0.3, 3)) == [
        "mha_ref.tutorial.real_models.smollm2_heads"
    ]
