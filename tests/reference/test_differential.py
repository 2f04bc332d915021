"""Differential tests: random configurations, mha_ref against PyTorch, every example classified.

Each example runs one call in ``torch.nn.MultiheadAttention`` (or
``torch.nn.functional.scaled_dot_product_attention``) and the same call in ``mha_ref`` with
copied weights, and lands in exactly one class:

* ``equal``: both return, and outputs, weights and gradients agree to the dtype's tolerance;
* ``both raise``: both reject the input;
* one of the **listed differences**, each a named predicate below that mirrors one item of
  the list "Differences from PyTorch, on purpose" in ``MultiHeadAttention``'s docstring.

Anything else fails with the configuration printed. Hypothesis runs derandomized (the same
examples on every run) with tiny tensors; the counts per class are written to
``build/differential-counts.json`` and printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mha_ref import MultiHeadAttention, scaled_dot_product_attention

NUM_MHA_EXAMPLES = int(os.environ.get("MHA_REF_DIFFERENTIAL_MHA", 4000))
NUM_SDPA_EXAMPLES = int(os.environ.get("MHA_REF_DIFFERENTIAL_SDPA", 2500))
COUNTS_FILE = Path(__file__).resolve().parents[2] / "build" / "differential-counts.json"

#: (atol, rtol) per dtype of the computation; autocast computes in bfloat16.
TOLERANCE = {
    torch.float64: (1e-9, 1e-9),
    torch.float32: (5e-5, 5e-5),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (6e-2, 6e-2),
}
LOW_PRECISION = (torch.float16, torch.bfloat16)

COUNTS: dict[str, Counter] = {"mha": Counter(), "sdpa": Counter()}
SECONDS: dict[str, float] = {}

SETTINGS = {
    "derandomize": True,  # the same examples on every run
    "deadline": None,
    "database": None,
    "print_blob": False,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


# ----------------------------------------------------------------------------------------------
# Running one call and comparing
# ----------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one library did: the tensors it returned (and gradients), or the error."""

    error: Exception | None = None
    tensors: dict[str, torch.Tensor | None] | None = None


def run(call: Callable[[], dict[str, torch.Tensor | None]]) -> Outcome:
    """Run ``call`` with warnings silenced; keep its tensors or its exception."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return Outcome(tensors=call())
        except (RuntimeError, ValueError, TypeError, AssertionError, IndexError) as error:
            return Outcome(error=error)


def agree(ours: Outcome, theirs: Outcome, dtype: torch.dtype) -> bool:
    """True when both returned and every tensor agrees (None with None, NaN with NaN)."""
    if ours.error is not None or theirs.error is not None:
        return False
    for name, expected in theirs.tensors.items():
        actual = ours.tensors.get(name)
        if expected is None or actual is None:
            if (expected is None) != (actual is None):
                return False
            continue
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            return False
        # the computation's tolerance, or the tensor's own where it is coarser (a float32
        # mask's gradient in a float64 computation is only as exact as float32)
        atol, rtol = max(TOLERANCE[dtype], TOLERANCE.get(expected.dtype, (0.0, 0.0)))
        # gradients accumulate over more steps: give them ten times the room
        scale = 10.0 if name.startswith("grad") else 1.0
        if not torch.allclose(actual.double(), expected.double(), atol=atol * scale,
                              rtol=rtol * scale, equal_nan=True):
            return False
    return True


def classify(kind: str, config, ours: Outcome, theirs: Outcome, dtype: torch.dtype,
             differences: dict[str, Callable]) -> str:
    """Put one example in exactly one class, or fail with its configuration."""
    if agree(ours, theirs, dtype):
        label = "equal"
    elif ours.error is not None and theirs.error is not None:
        label = "both raise"
    else:
        matching = [name for name, predicate in differences.items()
                    if predicate(config, ours, theirs)]
        if not matching:
            pytest.fail(
                f"{kind} example is neither equal, nor both raising, nor a listed difference:\n"
                f"config={config}\nours: {_describe(ours)}\ntorch: {_describe(theirs)}"
            )
        label = matching[0]
    COUNTS[kind][label] += 1
    return label


def _describe(outcome: Outcome) -> str:
    if outcome.error is not None:
        return f"raised {type(outcome.error).__name__}: {str(outcome.error)[:300]}"
    parts = []
    for name, tensor in outcome.tensors.items():
        if tensor is None:
            parts.append(f"{name}=None")
        else:
            parts.append(f"{name}{tuple(tensor.shape)} {tensor.dtype} "
                         f"{tensor.detach().flatten()[:4].tolist()}")
    return "; ".join(parts)


def max_abs_diff(ours: Outcome, theirs: Outcome, name: str) -> float:
    actual, expected = ours.tensors[name], theirs.tensors[name]
    return (actual.double() - expected.double()).abs().nan_to_num(math.inf).max().item()


def _write_counts() -> None:
    COUNTS_FILE.parent.mkdir(exist_ok=True)
    data = {kind: dict(sorted(counter.items())) for kind, counter in COUNTS.items()}
    data["total"] = sum(sum(counter.values()) for counter in COUNTS.values())
    data["seconds"] = {kind: round(value, 1) for kind, value in SECONDS.items()}
    COUNTS_FILE.write_text(json.dumps(data, indent=2) + "\n")
    summary = ", ".join(f"{kind}: {dict(counter)}" for kind, counter in COUNTS.items())
    print(f"\ndifferential examples {data['total']} ({summary}) -> {COUNTS_FILE}")


# ----------------------------------------------------------------------------------------------
# torch.nn.MultiheadAttention against mha_ref.MultiHeadAttention
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MhaConfig:
    """One random call: constructor arguments, inputs, masks and modes."""

    embed_dim: int
    num_heads: int
    dropout: float
    bias: bool
    add_bias_kv: bool
    add_zero_attn: bool
    kdim: int | None
    vdim: int | None
    batch_first: bool
    batch: int | None  # None: unbatched inputs
    query_len: int
    key_len: int
    self_attention: bool  # one tensor as query, key and value (torch's fast path needs it)
    dtype: torch.dtype
    autocast: bool
    training: bool
    grad: bool
    need_weights: bool
    average_attn_weights: bool
    is_causal: bool
    attn_mask: str  # "none", "bool2d", "float2d", "bool3d", "float3d"
    padding_mask: str  # "none", "bool", "float"
    mask_dtype: torch.dtype | None  # dtype of float masks
    non_contiguous: bool
    seed: int


@st.composite
def mha_configs(draw) -> MhaConfig:
    num_heads = draw(st.sampled_from([1, 2, 4]))
    embed_dim = num_heads * draw(st.sampled_from([1, 2, 3]))
    autocast = draw(st.booleans()) and draw(st.booleans())
    dtype = torch.float32 if autocast else draw(
        st.sampled_from([torch.float64, torch.float32, torch.float32, torch.bfloat16,
                         torch.float16])
    )
    self_attention = draw(st.booleans())
    kdim = None if self_attention else draw(st.sampled_from([None, None, 0, 3, embed_dim]))
    vdim = None if self_attention else draw(st.sampled_from([None, None, 0, 2, embed_dim]))
    batched = draw(st.booleans()) or draw(st.booleans())
    query_len = draw(st.integers(0, 4))
    key_len = query_len if self_attention else draw(st.integers(0, 4))
    training = draw(st.booleans())
    float_mask_dtype = draw(st.sampled_from([dtype, dtype, torch.float32, torch.float64]))
    return MhaConfig(
        embed_dim=embed_dim,
        num_heads=num_heads,
        dropout=draw(st.sampled_from([0.0, 0.0, 0.0, 1.0, True, 0.5])),
        bias=draw(st.booleans()),
        add_bias_kv=draw(st.booleans()) and draw(st.booleans()),
        add_zero_attn=draw(st.booleans()) and draw(st.booleans()),
        kdim=kdim,
        vdim=vdim,
        batch_first=draw(st.booleans()),
        batch=draw(st.integers(0, 3)) if batched else None,
        query_len=query_len,
        key_len=key_len,
        self_attention=self_attention,
        dtype=dtype,
        autocast=autocast,
        training=training,
        grad=draw(st.booleans()),
        need_weights=draw(st.booleans()),
        average_attn_weights=draw(st.booleans()),
        is_causal=draw(st.booleans()) and draw(st.booleans()),
        attn_mask=draw(st.sampled_from(["none", "none", "bool2d", "float2d", "bool3d",
                                        "float3d"])),
        padding_mask=draw(st.sampled_from(["none", "none", "bool", "float"])),
        mask_dtype=float_mask_dtype,
        non_contiguous=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)),
    )


def make_mha_inputs(config: MhaConfig):
    """Inputs and masks for one config, drawn from its seed."""
    generator = torch.Generator().manual_seed(config.seed)
    dtype = config.dtype

    def tensor(length: int, features: int) -> torch.Tensor:
        if config.batch is None:
            shape = (length, features)
        elif config.batch_first:
            shape = (config.batch, length, features)
        else:
            shape = (length, config.batch, features)
        if config.non_contiguous:  # the same values, stored transposed
            stored = torch.randn(tuple(reversed(shape)), generator=generator)
            return stored.permute(*reversed(range(len(shape)))).to(dtype)
        return torch.randn(shape, generator=generator).to(dtype)

    query = tensor(config.query_len, config.embed_dim)
    if config.self_attention:
        key = value = query
    else:
        key = tensor(config.key_len, config.kdim if config.kdim is not None else config.embed_dim)
        value = tensor(config.key_len,
                       config.vdim if config.vdim is not None else config.embed_dim)
    length_pair = (config.query_len, config.key_len)
    attn_mask = None
    if config.attn_mask != "none":
        heads = config.num_heads * (config.batch if config.batch is not None else 1)
        shape = length_pair if config.attn_mask.endswith("2d") else (heads, *length_pair)
        blocked = torch.rand(shape, generator=generator) < 0.3
        if config.attn_mask.startswith("bool"):
            attn_mask = blocked
        else:
            values = torch.randn(shape, generator=generator).masked_fill(blocked, -math.inf)
            attn_mask = values.to(config.mask_dtype)
    padding = None
    if config.padding_mask != "none":
        shape = (config.key_len,) if config.batch is None else (config.batch, config.key_len)
        blocked = torch.rand(shape, generator=generator) < 0.3
        if config.padding_mask == "bool":
            padding = blocked
        else:
            padding = torch.zeros(shape).masked_fill(blocked, -math.inf).to(config.mask_dtype)
    return query, key, value, attn_mask, padding


def build_mha_pair(config: MhaConfig):
    """A torch module and a copy in mha_ref with the same weights (random biases too)."""
    arguments = {
        "embed_dim": config.embed_dim, "num_heads": config.num_heads, "dropout": config.dropout,
        "bias": config.bias, "add_bias_kv": config.add_bias_kv,
        "add_zero_attn": config.add_zero_attn, "kdim": config.kdim, "vdim": config.vdim,
        "batch_first": config.batch_first,
    }
    param_dtype = torch.float32 if config.autocast else config.dtype
    torch.manual_seed(config.seed)
    theirs = torch.nn.MultiheadAttention(**arguments, dtype=param_dtype)
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.normal_(0.0, 0.5)
    ours = MultiHeadAttention(**arguments, dtype=param_dtype)
    ours.load_state_dict(theirs.state_dict())
    return theirs.train(config.training), ours.train(config.training)


def mha_call(module, config: MhaConfig) -> dict[str, torch.Tensor | None]:
    """One forward (and backward when autograd is on) with inputs rebuilt from the seed."""
    query, key, value, attn_mask, padding = make_mha_inputs(config)
    inputs = [query] if config.self_attention else [query, key, value]
    masks = [m for m in (attn_mask, padding) if m is not None and m.is_floating_point()]
    if config.grad:
        for tensor in inputs + masks:
            tensor.requires_grad_(True)
    if config.self_attention:
        key = value = query
    torch.manual_seed(config.seed)  # the same dropout draws in both libraries
    with torch.set_grad_enabled(config.grad), torch.autocast(
        "cpu", dtype=torch.bfloat16, enabled=config.autocast
    ):
        output, weights = module(
            query, key, value, key_padding_mask=padding, need_weights=config.need_weights,
            attn_mask=attn_mask, average_attn_weights=config.average_attn_weights,
            is_causal=config.is_causal,
        )
    result = {"output": output.detach(), "weights": None if weights is None else weights.detach()}
    if config.grad and output.requires_grad:
        loss = output.float().sin().sum()
        if weights is not None:
            loss = loss + weights.float().cos().sum()
        tracked = inputs + masks + [p for p in module.parameters()]
        grads = torch.autograd.grad(loss, tracked, allow_unused=True)
        names = [f"grad_input{i}" for i in range(len(inputs))]
        names += [f"grad_mask{i}" for i in range(len(masks))]
        names += [f"grad_{name}" for name, _ in module.named_parameters()]
        result.update(zip(names, grads, strict=True))
    return result


def torch_fast_path(config: MhaConfig) -> bool:
    """Whether torch.nn.MultiheadAttention takes its inference fast path for this call."""
    float_mask = config.attn_mask.startswith("float") or config.padding_mask == "float"
    return (
        not config.training and not config.grad and config.batch is not None
        and config.batch_first and config.self_attention and config.num_heads % 2 == 0
        and config.bias and not config.add_bias_kv and not config.add_zero_attn
        and not float_mask and not config.autocast
        and torch.backends.mha.get_fastpath_enabled()
    )


def has_fully_masked_row(config: MhaConfig) -> bool:
    """A query row whose keys are all blocked (by the masks, before any extra key)."""
    if config.add_bias_kv or config.add_zero_attn:
        return False  # the extra keys are always allowed
    _, _, _, attn_mask, padding = make_mha_inputs(config)
    if config.key_len == 0:
        return config.query_len > 0 and (config.batch is None or config.batch > 0)
    blocked = torch.zeros(config.query_len, config.key_len, dtype=torch.bool)
    if config.is_causal and attn_mask is None:
        blocked = blocked | ~torch.ones_like(blocked).tril()
    if attn_mask is not None:
        mask_blocked = attn_mask if attn_mask.dtype == torch.bool else attn_mask.isneginf()
        blocked = blocked | mask_blocked  # broadcasts to (heads, L, S) for 3-D masks
    if padding is not None:
        pad_blocked = padding if padding.dtype == torch.bool else padding.isneginf()
        pad_blocked = pad_blocked.reshape(-1, 1, 1, config.key_len)
        blocked = blocked.reshape(1, -1, config.query_len, config.key_len) | pad_blocked
    return bool(blocked.all(dim=-1).any())


# The list "Differences from PyTorch, on purpose" in MultiHeadAttention's docstring, item by
# item, as predicates on (config, ours, theirs). Items that random calls cannot reach (sizes
# given as bool, masks on another device, TorchScript, nn.TransformerEncoderLayer's fast path)
# have dedicated tests in test_parity.py, test_errors.py and test_modules.py; their predicates
# are listed too, so that this dict mirrors the docstring one to one.


def causal_without_mask(config, ours, theirs) -> bool:
    """is_causal=True without attn_mask: mha_ref builds the mask; torch raises or ignores it."""
    return config.is_causal and config.attn_mask == "none" and ours.error is None


def fast_path_ignores_is_causal(config, ours, theirs) -> bool:
    """is_causal=True with attn_mask: torch's fast path applies the mask, ignoring the hint."""
    return config.is_causal and config.attn_mask != "none" and torch_fast_path(config)


def fully_masked_rows(config, ours, theirs) -> bool:
    """Rows with every key blocked: out_proj.bias here, NaN in some torch paths."""
    return (
        ours.error is None and theirs.error is None and has_fully_masked_row(config)
        and not ours.tensors["output"].isnan().any()
    )


def half_precision_weights_path(config, ours, theirs) -> bool:
    """16-bit inputs: mha_ref's explicit path computes scores in float32, torch's in 16 bits."""
    low = config.dtype in LOW_PRECISION or config.autocast
    return low and config.need_weights and ours.error is None and theirs.error is None


def float_mask_of_other_dtype(config, ours, theirs) -> bool:
    """A float mask of another float dtype than the query: cast here, an error in torch."""
    uses_float_mask = config.attn_mask.startswith("float") or config.padding_mask == "float"
    query_dtype = config.dtype
    return (uses_float_mask and config.mask_dtype != query_dtype and ours.error is None
            and theirs.error is not None)


def mixed_mask_kinds(config, ours, theirs) -> bool:
    """A bool mask with a float one: the same result, torch only adds a warning."""
    kinds = {config.attn_mask[:4], config.padding_mask[:4]} - {"none"}
    return kinds == {"bool", "floa"} and ours.error is None and theirs.error is None


def clearer_errors(config, ours, theirs) -> bool:
    """Bad input: ValueError/TypeError naming the argument (e.g. a mask torch drops unread)."""
    return isinstance(ours.error, (ValueError, TypeError)) and theirs.error is None


def empty_inputs(config, ours, theirs) -> bool:
    """Empty inputs: an empty result here, where torch fails in an internal reshape, or its
    fast path returns no weights for an empty batch."""
    empty = 0 in (config.batch, config.query_len, config.key_len)
    if not empty or ours.error is not None:
        return False
    if theirs.error is not None:
        return "cannot reshape tensor of 0 elements" in str(theirs.error)
    return config.need_weights and theirs.tensors["weights"] is None and torch_fast_path(config)


def integer_sizes_only(config, ours, theirs) -> bool:
    """Sizes given as bool or float raise TypeError (not drawn here; see test_errors.py)."""
    return isinstance(config.embed_dim, (bool, float))


def dropout_in_unit_interval(config, ours, theirs) -> bool:
    """dropout outside [0, 1] raises at construction (not drawn here; see test_parity.py)."""
    return not 0.0 <= config.dropout <= 1.0


def functional_rules(config, ours, theirs) -> bool:
    """mha_ref.scaled_dot_product_attention's own items: see SDPA_DIFFERENCES below."""
    return False


def no_fast_path_of_its_own(config, ours, theirs) -> bool:
    """No NestedTensor input and no fused encoder-layer path (see test_modules.py)."""
    return False


def no_torchscript(config, ours, theirs) -> bool:
    """torch.jit.script raises (see test_modules.py)."""
    return False


def dropout_draws(config, ours, theirs) -> bool:
    """Not a listed difference: random dropout masks that the two draw differently.

    Only checked for both running; counted apart so that "equal" means equal. With the same
    seed both libraries usually draw the same mask, and then the example is "equal".
    """
    return (
        config.training and 0.0 < config.dropout < 1.0 and ours.error is None
        and theirs.error is None
        and ours.tensors["output"].shape == theirs.tensors["output"].shape
    )


MHA_DIFFERENCES = {
    "is_causal without attn_mask": causal_without_mask,
    "fast path ignores is_causal with attn_mask": fast_path_ignores_is_causal,
    "fully masked rows": fully_masked_rows,
    "16-bit scores in float32 (need_weights=True)": half_precision_weights_path,
    "float mask of another dtype is cast": float_mask_of_other_dtype,
    "bool and float masks mixed without warning": mixed_mask_kinds,
    "clearer errors": clearer_errors,
    "empty inputs": empty_inputs,
    "integer sizes only": integer_sizes_only,
    "dropout in [0, 1]": dropout_in_unit_interval,
    "functional and GQA rules": functional_rules,
    "no fast path or NestedTensor of its own": no_fast_path_of_its_own,
    "no torch.jit.script": no_torchscript,
    "dropout draws (both run)": dropout_draws,
}


@settings(max_examples=NUM_MHA_EXAMPLES, **SETTINGS)
@given(config=mha_configs())
def test_multihead_attention_differential(config: MhaConfig):
    theirs, ours = build_mha_pair(config)
    theirs_outcome = run(lambda: mha_call(theirs, config))
    ours_outcome = run(lambda: mha_call(ours, config))
    classify("mha", asdict(config), ours_outcome, theirs_outcome,
             torch.bfloat16 if config.autocast else config.dtype,
             {name: _on_config(predicate, config) for name, predicate in MHA_DIFFERENCES.items()})


def _on_config(predicate, config):
    """Bind the dataclass config (classify prints the dict form)."""
    return lambda _printed, ours, theirs: predicate(config, ours, theirs)


# ----------------------------------------------------------------------------------------------
# F.scaled_dot_product_attention against mha_ref.scaled_dot_product_attention
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SdpaConfig:
    batch_shape: tuple[int, ...]  # leading dimensions before the head dimension
    num_heads: int
    num_key_heads: int
    num_value_heads: int
    enable_gqa: bool
    has_head_dim: bool  # False: inputs are (..., L, E) with no head dimension at all
    query_len: int
    key_len: int
    head_dim: int
    value_dim: int
    dtype: torch.dtype
    autocast: bool
    grad: bool
    dropout_p: float
    scale: float | None
    is_causal: bool
    attn_mask: str  # "none", "bool", "float"
    mask_shape: str  # "LS", "1LS", "full"
    mask_dtype: torch.dtype
    non_contiguous: bool
    seed: int


@st.composite
def sdpa_configs(draw) -> SdpaConfig:
    enable_gqa = draw(st.booleans()) and draw(st.booleans())
    num_heads = draw(st.sampled_from([1, 2, 4]))
    if enable_gqa:
        divisors = [d for d in (1, 2, 4) if num_heads % d == 0]
        num_key_heads = draw(st.sampled_from(divisors + [3]))
        num_value_heads = draw(st.sampled_from(divisors))
    else:
        num_key_heads = num_value_heads = num_heads
    autocast = draw(st.booleans()) and draw(st.booleans())
    dtype = torch.float32 if autocast else draw(
        st.sampled_from([torch.float64, torch.float32, torch.float32, torch.bfloat16,
                         torch.float16])
    )
    return SdpaConfig(
        batch_shape=draw(st.sampled_from([(), (1,), (2,), (0,), (2, 1)])),
        num_heads=num_heads,
        num_key_heads=num_key_heads,
        num_value_heads=num_value_heads,
        enable_gqa=enable_gqa,
        has_head_dim=enable_gqa or draw(st.booleans()) or draw(st.booleans()),
        query_len=draw(st.integers(0, 4)),
        key_len=draw(st.integers(0, 4)),
        head_dim=draw(st.sampled_from([0, 1, 2, 4, 8])),
        value_dim=draw(st.sampled_from([1, 3, 4])),
        dtype=dtype,
        autocast=autocast,
        grad=draw(st.booleans()),
        dropout_p=draw(st.sampled_from([0.0, 0.0, 0.0, 1.0, True])),
        scale=draw(st.sampled_from([None, None, None, 0.0, -0.5, 0.3, 2.0, True])),
        is_causal=draw(st.booleans()) and draw(st.booleans()),
        attn_mask=draw(st.sampled_from(["none", "bool", "float"])),
        mask_shape=draw(st.sampled_from(["LS", "1LS", "full"])),
        mask_dtype=draw(st.sampled_from([dtype, torch.float32, torch.float64])),
        non_contiguous=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)),
    )


def make_sdpa_inputs(config: SdpaConfig):
    generator = torch.Generator().manual_seed(config.seed)

    def tensor(heads: int, length: int, features: int) -> torch.Tensor:
        head_shape = (heads,) if config.has_head_dim else ()
        shape = (*config.batch_shape, *head_shape, length, features)
        if config.non_contiguous:
            stored = torch.randn((*shape[:-2], features, length), generator=generator)
            return stored.transpose(-2, -1).to(config.dtype)
        return torch.randn(shape, generator=generator).to(config.dtype)

    query = tensor(config.num_heads, config.query_len, config.head_dim)
    key = tensor(config.num_key_heads, config.key_len, config.head_dim)
    value = tensor(config.num_value_heads, config.key_len, config.value_dim)
    attn_mask = None
    if config.attn_mask != "none":
        pair = (config.query_len, config.key_len)
        head_shape = (config.num_heads,) if config.has_head_dim else ()
        shape = {"LS": pair, "1LS": (1, *pair),
                 "full": (*config.batch_shape, *head_shape, *pair)}[config.mask_shape]
        blocked = torch.rand(shape, generator=generator) < 0.3
        if config.attn_mask == "bool":
            attn_mask = ~blocked  # True = may attend
        else:
            values = torch.randn(shape, generator=generator).masked_fill(blocked, -math.inf)
            attn_mask = values.to(config.mask_dtype)
    return query, key, value, attn_mask


def sdpa_call(function, config: SdpaConfig) -> dict[str, torch.Tensor | None]:
    query, key, value, attn_mask = make_sdpa_inputs(config)
    inputs = [query, key, value]
    if config.grad:
        for tensor in inputs:
            tensor.requires_grad_(True)
    with torch.set_grad_enabled(config.grad), torch.autocast(
        "cpu", dtype=torch.bfloat16, enabled=config.autocast
    ):
        output = function(query, key, value, attn_mask=attn_mask, dropout_p=config.dropout_p,
                          is_causal=config.is_causal, scale=config.scale,
                          enable_gqa=config.enable_gqa)
    result = {"output": output.detach()}
    if config.grad and output.requires_grad:
        grads = torch.autograd.grad(output.float().sin().sum(), inputs, allow_unused=True)
        result.update(zip(("grad_query", "grad_key", "grad_value"), grads, strict=True))
    return result


def sdpa_mask_and_causal_any_rank(config, ours, theirs) -> bool:
    """attn_mask with is_causal: both applied here; torch's math backend raises (non-4-D)."""
    return config.is_causal and config.attn_mask != "none" and theirs.error is not None


def sdpa_float_mask_cast(config, ours, theirs) -> bool:
    """A float mask other than float32 or the query's dtype: cast here, an error in torch."""
    query_dtype = torch.bfloat16 if config.autocast else config.dtype
    return (config.attn_mask == "float" and config.mask_dtype not in (torch.float32, query_dtype)
            and ours.error is None and theirs.error is not None)


def sdpa_non_finite_scale(config, ours, theirs) -> bool:
    """scale=inf or nan raises here; torch returns NaN or zeros (not drawn; test_functional)."""
    return config.scale is not None and not math.isfinite(config.scale)


def sdpa_clearer_errors(config, ours, theirs) -> bool:
    """Bad input: ValueError/TypeError with the argument named, where torch computes (it does
    not check the shapes of empty tensors, e.g. key heads that do not divide query heads)."""
    return isinstance(ours.error, (ValueError, TypeError)) and theirs.error is None


def sdpa_zero_scale_causal(config, ours, theirs) -> bool:
    """scale <= 0 with is_causal: the formula over the allowed keys here and in torch's math
    backend (uniform for 0); torch's default CPU kernel returns NaN (it multiplies the -inf of
    blocked keys by the scale)."""
    return (
        config.scale is not None and config.scale <= 0.0 and config.is_causal
        and ours.error is None
        and theirs.error is None and theirs.tensors["output"].isnan().any()
        and not ours.tensors["output"].isnan().any()
    )


SDPA_DIFFERENCES = {
    "scale <= 0 with is_causal: no NaN": sdpa_zero_scale_causal,
    "attn_mask with is_causal on any rank": sdpa_mask_and_causal_any_rank,
    "float mask of another dtype is cast": sdpa_float_mask_cast,
    "non-finite scale raises": sdpa_non_finite_scale,
    "clearer errors": sdpa_clearer_errors,
}


@settings(max_examples=NUM_SDPA_EXAMPLES, **SETTINGS)
@given(config=sdpa_configs())
def test_scaled_dot_product_attention_differential(config: SdpaConfig):
    theirs = run(lambda: sdpa_call(F.scaled_dot_product_attention, config))
    ours = run(lambda: sdpa_call(scaled_dot_product_attention, config))
    dtype = torch.bfloat16 if config.autocast else config.dtype
    classify("sdpa", asdict(config), ours, theirs, dtype,
             {name: _on_config(predicate, config) for name, predicate in SDPA_DIFFERENCES.items()})


# ----------------------------------------------------------------------------------------------
# Timing and the counts file
# ----------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _time_and_record(request):
    start = time.perf_counter()
    yield
    kind = "mha" if "multihead" in request.node.name else "sdpa"
    SECONDS[kind] = time.perf_counter() - start
    _write_counts()
