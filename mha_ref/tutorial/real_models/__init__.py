"""Real pretrained models, offline: what every model shares, written once, and one file per model.

Each model's weights come as a GGUF file inside a package on the package index; no model hub
and no network are used. The attention inside every block is the reference's
:class:`mha_ref.GroupedQueryAttention` (with :class:`mha_ref.RotaryEmbedding`, and
:class:`mha_ref.QKNorm` where the model has it); the rest is here. Two models:
SmolLM2-135M-Instruct (:mod:`~mha_ref.tutorial.real_models.smollm2`) and Gemma 3 270M
(:mod:`~mha_ref.tutorial.real_models.gemma3`). The head tools
(:mod:`~mha_ref.tutorial.real_models.heads`) work on either::

    import torch
    from mha_ref.tutorial.real_models.gemma3 import load_gemma3
    from mha_ref.tutorial.real_models.heads import ablate_heads

    model = load_gemma3()                     # once per process; the same object afterwards
    tokens = model.tokenizer.encode("The capital of France is")   # (seq_len,), <bos> first
    losses = model.token_losses(tokens)       # (1, seq_len - 1) nats
    with torch.no_grad():
        logits, _ = model(tokens, logits_at=torch.tensor([-1]))   # (1, 1, 262144)
    with ablate_heads(model, [(5, 0)]):       # (layer, head), both 0-based
        ablated = model.token_losses(tokens)  # that head's output set to zero

What every model shares:

``packages``
    the packages the models need (``gguf``, ``tokenizers``) and their install commands; a model
    file's SHA-256, computed once per process.
``gguf``
    reading a GGUF file and dequantising its tensors
    (:func:`~mha_ref.tutorial.real_models.gguf.read_gguf`), the tokenizer's arrays read whole.
``tokenizer``
    :class:`~mha_ref.tutorial.real_models.tokenizer.GGUFTokenizer`, from a file's byte-level
    BPE (SmolLM2) or SentencePiece BPE (Gemma 3) metadata.
``loading``
    the dequantised weights through the build's checksummed cache; the threads of the
    models' measurements.
``layers``
    RMS normalisation, the gated feed-forward layer (SwiGLU, GeGLU), the blocks run in order
    (:class:`~mha_ref.tutorial.real_models.layers.DecoderStack`), the next-token losses, the
    check of a model's input.
``transformers_reference``
    transformers' own model and tokenizer of a GGUF file, the independent side of the tests'
    comparisons and of ``nox -s bench``'s timings (transformers is a test-only dependency).

One file per model (its file, its sizes and the values its file does not state, its blocks, its
loader):

``smollm2``
    SmolLM2-135M-Instruct: every block global, 9 query heads over 3 key/value heads.
``gemma3``
    Gemma 3 270M (its file joined from four chunk packages): five local blocks to each global
    one, one key/value head, QK-norm.

What the examples measure on them:

``heads``
    what each head does, for either model: scores, ablation (zero and mean), attribution
    patching, the every-head views.
``texts``
    the real texts the pages and tests use, shipped with the package (source and licence in
    ``texts/README.md``).
``smollm2_heads``
    examples 16 to 19's measurements on SmolLM2's heads.
``sink_values``, ``path_patching``
    example 18's value norms of the first token; example 17's path patching.
``local_global``
    example 25's measurements of Gemma 3's local and global layers: the KV cache, the two RoPE
    bases, a local layer decoded from a ring buffer, and where induction lives, by ablation.
``qk_norm_and_sinks``
    example 26's measurements: Gemma 3's attention logits with QK-norm against SmolLM2's, the
    norms' worth in loss, and the first token's attention in local and global layers.
"""
