"""Real pretrained models, offline: what every model shares, written once, and one file per model.

Each model's weights come as a GGUF file inside a package on the package index; no model hub
and no network are used. The attention inside every block is the reference's
:class:`mha_ref.GroupedQueryAttention` (with :class:`mha_ref.RotaryEmbedding`, and
:class:`mha_ref.QKNorm` where the model has it); the rest is here. SmolLM2-135M lives in
:mod:`mha_ref.tutorial.smollm2` (its file, model, loader and head tools), built on these
modules; Gemma 3 270M in :mod:`~mha_ref.tutorial.real_models.gemma3`::

    import torch
    from mha_ref.tutorial.real_models.gemma3 import load_gemma3

    model = load_gemma3()                     # once per process; the same object afterwards
    tokens = model.tokenizer.encode("The capital of France is")   # (seq_len,), <bos> first
    losses = model.token_losses(tokens)       # (1, seq_len - 1) nats
    with torch.no_grad():
        logits, _ = model(tokens, logits_at=torch.tensor([-1]))   # (1, 1, 262144)

Modules:

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
    RMS normalisation, the gated feed-forward layer (SwiGLU, GeGLU), the next-token losses,
    the check of a model's input.
``gemma3``
    Gemma 3 270M: its file (joined from four chunk packages), its sizes and the values its file
    does not state, its blocks, its loader.
``transformers_reference``
    transformers' own model and tokenizer of a GGUF file, the independent side of the tests'
    comparisons and of ``nox -s bench``'s timings (transformers is a test-only dependency).
``local_global``
    example 25's measurements of Gemma 3's local and global layers: the KV cache, the two RoPE
    bases, a local layer decoded from a ring buffer, and where induction lives, by ablation.
``qk_norm_and_sinks``
    example 26's measurements: Gemma 3's attention logits with QK-norm against SmolLM2's, the
    norms' worth in loss, and the first token's attention in local and global layers.
"""
