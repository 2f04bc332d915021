"""The cache layer (``mha_ref.tutorial.cache``): every kind of entry is checked on every read.

For each kind of cached artefact (a training, pickled; tensors, mapped; the real model's
weights, 538 MB), an entry is damaged on disk, once by changing bytes in the middle of the file
and once by truncating it, and the next read must return the clean value, replace the file with
a sound one and say on standard error which file and why. The last test does this at the level
of a published number: example 16's table of the induction head on a sentence is the same with
a damaged weights entry as with a sound one (without the check, 16 changed bytes turned its
0.386 and 0.576 into 0.062 and 0.062).

The real model's tests are skipped without its file (see ``tests/lab/test_real_model.py``); they
build the weights entry once (about 8 s) and repair it twice.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from mha_ref.tutorial import cache, training

SHORT = {"steps": 6, "batch_size": 8, "seq_len": 6}


def _flip_middle(path: Path, count: int = 16) -> None:
    """Invert ``count`` bytes in the middle of the file (its size stays the same)."""
    with path.open("r+b") as f:
        f.seek(path.stat().st_size // 2)
        old = f.read(count)
        f.seek(-count, 1)
        f.write(bytes(b ^ 0xFF for b in old))


def _truncate(path: Path) -> None:
    """Cut the file to half its size."""
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


DAMAGES = {
    "bytes changed in the middle": (_flip_middle, "its content does not match its checksum"),
    "truncated": (_truncate, "it is truncated"),
}


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _assert_repaired(path: Path, damaged_sha256: str, report: str, reason: str) -> None:
    """The damaged file was replaced, and the report says which file and why, on one line."""
    assert _sha256(path) != damaged_sha256
    (line,) = [line for line in report.splitlines() if str(path) in line]
    assert line.startswith(f"mha_ref.tutorial.cache: {path}: {reason}")
    assert line.endswith("; computing it again and replacing the file")


# -- a training (PICKLE) -------------------------------------------------------------------------


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_training_entry_is_reported_recomputed_and_replaced(
    damage, tmp_path, monkeypatch, capfd
):
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    clean = training.train(num_heads=2, **SHORT)
    (path,) = tmp_path.iterdir()
    assert path.suffix == ".pkl"
    damage_file, reason = DAMAGES[damage]
    damage_file(path)
    damaged_sha256 = _sha256(path)
    capfd.readouterr()
    again = training.train(num_heads=2, **SHORT)
    assert again.loss_curve == clean.loss_curve and again.accuracy == clean.accuracy
    assert torch.equal(again.probe_weights, clean.probe_weights)
    _assert_repaired(path, damaged_sha256, capfd.readouterr().err, reason)
    monkeypatch.setattr(training, "_train", lambda **_: pytest.fail("cache hit expected"))
    hit = training.train(num_heads=2, **SHORT)
    assert hit.loss_curve == clean.loss_curve
    assert capfd.readouterr().err == ""  # the new file is sound: read without a word


# -- tensors (TENSORS) ---------------------------------------------------------------------------


def _tensors() -> dict:
    generator = torch.Generator().manual_seed(0)
    return {
        "config": {"layers": 2, "eps": 1e-5, "name": "tiny", "sizes": [3, 4], "none": None},
        "state": {
            "w": torch.randn(64, 48, generator=generator),  # 12 KiB
            "half": torch.randn(5, 3, generator=generator).to(torch.bfloat16),
            "ids": torch.arange(7),
            "mask": torch.tensor([True, False, True]),
            "scalar": torch.tensor(2.5, dtype=torch.float64),
            "empty": torch.zeros(0, 4),
        },
        "list": [torch.ones(2), "text with a newline\nand 中文"],
    }


def _assert_same(value, expected) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(value, torch.Tensor) and value.dtype == expected.dtype
        assert value.shape == expected.shape and torch.equal(value, expected)
    elif isinstance(expected, dict):
        assert value.keys() == expected.keys()
        for k in expected:
            _assert_same(value[k], expected[k])
    elif isinstance(expected, list):
        assert isinstance(value, list) and len(value) == len(expected)
        for v, e in zip(value, expected, strict=True):
            _assert_same(v, e)
    else:
        assert value == expected and type(value) is type(expected)


def test_tensors_come_back_equal_as_views_of_the_mapped_file(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    computed = []
    compute = lambda: computed.append(1) or _tensors()  # noqa: E731
    first = cache.cached("tiny", {"n": 1}, compute, codec=cache.TENSORS)
    hit = cache.cached("tiny", {"n": 1}, compute, codec=cache.TENSORS)
    assert computed == [1]  # the second call read the entry
    _assert_same(hit, first)
    (path,) = tmp_path.iterdir()
    assert path.suffix == ".tensors"
    # the weights are not copied out of the mapping, and each starts on a 64-byte boundary
    w = hit["state"]["w"]
    assert not w.untyped_storage().resizable() and w.data_ptr() % 64 == 0
    assert capfd.readouterr().err == ""


def test_tensors_refuses_what_it_cannot_store(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    with pytest.raises(TypeError, match="not object; store such a result with the PICKLE"):
        cache.cached("bad", {}, lambda: {"x": object()}, codec=cache.TENSORS)
    with pytest.raises(TypeError, match="not tuple"):  # it would come back as a list
        cache.cached("bad", {}, lambda: {"x": (1, 2)}, codec=cache.TENSORS)
    with pytest.raises(TypeError, match="str keys"):
        cache.cached("bad", {}, lambda: {1: torch.ones(1)}, codec=cache.TENSORS)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_tensors_entry_is_reported_recomputed_and_replaced(
    damage, tmp_path, monkeypatch, capfd
):
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    cache.cached("tiny", {"n": 1}, _tensors, codec=cache.TENSORS)
    (path,) = tmp_path.iterdir()
    clean_sha256 = _sha256(path)
    damage_file, reason = DAMAGES[damage]
    damage_file(path)
    damaged_sha256 = _sha256(path)
    capfd.readouterr()
    again = cache.cached("tiny", {"n": 1}, _tensors, codec=cache.TENSORS)
    _assert_same(again, _tensors())
    _assert_repaired(path, damaged_sha256, capfd.readouterr().err, reason)
    assert _sha256(path) == clean_sha256  # the same bytes as the sound entry


def test_keep_latest_removes_the_other_entries_of_that_function_only(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    (tmp_path / "weights-0123456789abcdef0123.pt").write_bytes(b"an older layout")
    (tmp_path / "weights_other-" f"{'0' * 64}.pkl").write_bytes(b"another function")
    cache.cached("weights", {"v": 1}, _tensors, codec=cache.TENSORS, keep_latest=True)
    cache.cached("weights", {"v": 2}, _tensors, codec=cache.TENSORS, keep_latest=True)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and names[1] == "weights_other-" + "0" * 64 + ".pkl"
    assert names[0].startswith("weights-") and names[0].endswith(".tensors")
    must_hit = lambda: pytest.fail("cache hit expected")  # noqa: E731
    cache.cached("weights", {"v": 2}, must_hit, codec=cache.TENSORS, keep_latest=True)


def test_an_entry_of_another_codec_is_not_read(tmp_path, monkeypatch, capfd):
    """A pickle entry renamed to the tensors entry's name (same key) is refused."""
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    cache.cached("tiny", {"n": 1}, _tensors, codec=cache.TENSORS)
    (tensors_path,) = tmp_path.iterdir()
    tensors_path.unlink()
    cache.cached("tiny", {"n": 1}, _tensors)  # the same key, pickled
    (pickle_path,) = tmp_path.iterdir()
    pickle_path.rename(tensors_path)
    capfd.readouterr()
    _assert_same(cache.cached("tiny", {"n": 1}, _tensors, codec=cache.TENSORS), _tensors())
    assert "it holds a 'pickle' payload, not 'tensors'" in capfd.readouterr().err


# -- the real model's weights (TENSORS, 538 MB) and a published number ---------------------------


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """A sound weights entry in a fresh cache folder, its file's SHA-256, and the clean weights
    as read from the model file itself."""
    from test_real_model import require_model_file

    from mha_ref.tutorial.real_models import smollm2
    from mha_ref.tutorial.real_models import smollm2 as load

    require_model_file()

    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(cache.CACHE_ENV_VAR, str(folder))
        clean = load._read_cached(smollm2.model_file())  # computed from the GGUF file, stored
    (path,) = folder.iterdir()
    assert path.name.startswith("smollm2-weights-") and path.stat().st_size > 500e6
    return folder, path, _sha256(path), clean


def _assert_same_weights(read, clean) -> None:
    config, state, tokenizer_json = read
    assert config == clean[0] and tokenizer_json == clean[2]
    assert state.keys() == clean[1].keys()
    assert all(torch.equal(state[name], clean[1][name]) for name in state)


def test_a_truncated_weights_entry_is_reported_recomputed_and_replaced(
    weights, monkeypatch, capfd
):
    from mha_ref.tutorial.real_models import smollm2
    from mha_ref.tutorial.real_models import smollm2 as load

    folder, path, clean_sha256, clean = weights
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(folder))
    _truncate(path)
    damaged_sha256 = _sha256(path)
    capfd.readouterr()
    _assert_same_weights(load._read_cached(smollm2.model_file()), clean)
    _assert_repaired(path, damaged_sha256, capfd.readouterr().err, "it is truncated")
    assert _sha256(path) == clean_sha256  # the same bytes as the sound entry


def _example_16_induction_table(model) -> str:
    """What example 16 prints under "induction head (layer, head) on the sentence's repeated
    tokens", computed as the example computes it (``gallery/en/plot_16_real_model_heads.py``):
    the top induction head, from the repeated random tokens, on the sentence."""
    from mha_ref.tutorial.plotting import text_table
    from mha_ref.tutorial.real_models import heads as lab
    from mha_ref.tutorial.real_models import smollm2_heads

    repeated = lab.random_repeated_tokens(

        **smollm2_heads.REPEATED, vocab_size=model.config.vocab_size

    )
    with torch.no_grad():
        _, repeated_weights = model(repeated, need_weights=True)
    half_len = smollm2_heads.REPEATED["half_len"]
    induction = torch.stack([lab.induction_scores(w, half_len) for w in repeated_weights])
    ((layer, head),) = lab.top_heads(induction, 1)
    sentence = ("The meeting with Mr Dursley is on Tuesday. "
                "Later, the meeting with Mr Dursley was moved.")
    tokens = model.tokenizer.encode(sentence)  # (L,)
    labels = model.tokenizer.token_strings(tokens)
    with torch.no_grad():
        _, weights = model(tokens, need_weights=True)  # layers x (1, num_heads, L, L)
    rows = []
    for i, label in enumerate(labels):
        seen = [j for j in range(i) if labels[j] == label]
        if seen and seen[-1] + 1 < i:
            after = seen[-1] + 1
            weight = weights[layer][0, head, i]  # (L,)
            rows.append([f"{i} {label!r}", f"{labels[after]!r}", f"{weight[after]:.3f}",
                         f"{weight[0]:.3f}"])
    return f"induction head ({layer}, {head}) on the sentence's repeated tokens:\n" + text_table(
        ["query", "token after its earlier occurrence", "weight on it",
         "weight on the first token"], rows)


def test_example_16_prints_the_same_table_with_a_damaged_weights_entry(
    weights, monkeypatch, capfd
):
    from mha_ref.tutorial.real_models import smollm2 as load

    folder, path, clean_sha256, _ = weights
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(folder))
    torch.set_num_threads(1)
    monkeypatch.setattr(load, "_loaded", {})  # read the entry again, as a new process does
    sound = _example_16_induction_table(load.load_smollm2("cpu"))
    # the published table (English page of example 16)
    assert sound.startswith("induction head (18, 6) on the sentence's repeated tokens:")
    assert "15 ' with'     ' Mr'                               0.386         0.576" in sound

    _flip_middle(path)
    damaged_sha256 = _sha256(path)
    capfd.readouterr()
    monkeypatch.setattr(load, "_loaded", {})
    damaged = _example_16_induction_table(load.load_smollm2("cpu"))
    assert damaged == sound
    report = capfd.readouterr().err
    _assert_repaired(path, damaged_sha256, report, "its content does not match its checksum")
    assert _sha256(path) == clean_sha256  # the same bytes as the sound entry
