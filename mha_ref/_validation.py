"""Checks for user input, one readable function per kind of mistake.

Every check raises :class:`ValueError` (a value is out of range or a shape is wrong) or
:class:`TypeError` (a value has the wrong type or dtype). Each message names the argument,
says what was expected and what was given, and suggests a fix. The public modules call these
functions instead of using bare ``assert`` statements, which disappear under ``python -O``.

This module is private: its names may change without notice.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

import torch

# ----------------------------------------------------------------------------------------------
# Small formatting helpers
# ----------------------------------------------------------------------------------------------


_MAX_DIVISOR_SEARCH = 10**6  # trial divisions at most: instant, and exact up to 10**12
_MAX_LISTED_DIVISORS = 10  # longer lists are cut to the divisors nearest the value given


def divisors(number: int) -> list[int]:
    """Return the positive divisors of ``number`` in increasing order.

    Divisors come in pairs ``(d, number // d)`` with ``d <= sqrt(number)``, so trying the ``d``
    up to the square root finds them all. The search stops after ``10**6`` candidates; beyond
    ``number = 10**12`` the list therefore holds only the divisors of a pair whose smaller
    member is below ``10**6``.
    """
    small, large = [], []
    for candidate in range(1, min(math.isqrt(number), _MAX_DIVISOR_SEARCH) + 1):
        if number % candidate == 0:
            small.append(candidate)
            if candidate != number // candidate:
                large.append(number // candidate)
    return small + large[::-1]


def divisors_near(number: int, target: int) -> str:
    """List the divisors of ``number`` for a message; only those nearest ``target`` if many.

    >>> divisors_near(10, 3)
    '1, 2, 5, 10'
    >>> divisors_near(2**20, 3)
    '1, 2, 4, 8, 16, 32, 64, 128, 256, 512, ... (21 in all)'
    """
    found = divisors(number)
    if len(found) <= _MAX_LISTED_DIVISORS:
        return _join(found)
    nearest = sorted(found, key=lambda divisor: (abs(divisor - target), divisor))
    shown = sorted(nearest[:_MAX_LISTED_DIVISORS])
    before = "..., " if shown[0] != found[0] else ""
    after = ", ..." if shown[-1] != found[-1] else ""
    return f"{before}{_join(shown)}{after} ({len(found)} in all)"


def _shape(tensor: torch.Tensor) -> tuple[int, ...]:
    """Return a tensor's shape as a plain tuple, which prints as ``(2, 5, 8)``."""
    return tuple(tensor.shape)


def _join(numbers: Sequence[int]) -> str:
    """Join numbers as ``"1, 2, 5, 10"``."""
    return ", ".join(str(number) for number in numbers)


#: advice for an error message: the text, or a function that writes it. A function is called
#: only when the check fails, so that nothing builds a message on the success path (where
#: ``torch.compile`` traces every line, and building text from symbolic sizes breaks the graph)
Hint = str | Callable[[], str]


def _hint_text(hint: Hint) -> str:
    """The text of ``hint``, calling it if it is a function."""
    return hint() if callable(hint) else hint


# ----------------------------------------------------------------------------------------------
# Constructor arguments
# ----------------------------------------------------------------------------------------------


def _is_integer(value: object) -> bool:
    """True for Python and NumPy integers (any ``numbers.Integral``), False for ``bool``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def require_int(name: str, value: object) -> None:
    """Raise TypeError unless ``value`` is an integer (``int``, ``numpy.int64``...; not bool)."""
    if not _is_integer(value):
        raise TypeError(
            f"{name} must be an int, got {type(value).__name__} ({value!r}). "
            f"Pass a whole number, for example {name}=8."
        )


def require_positive_int(name: str, value: object, meaning: str = "") -> None:
    """Raise unless ``value`` is an int greater than zero.

    Args:
        name: The argument name shown in the message, e.g. ``"embed_dim"``.
        value: The value the user passed.
        meaning: Optional words saying what the number counts, e.g. ``"features per token"``.
    """
    require_int(name, value)
    if value <= 0:
        what = f" ({meaning})" if meaning else ""
        raise ValueError(
            f"{name}{what} must be a positive integer, got {name}={value}. "
            f"Pass a value of at least 1."
        )


def require_non_negative_int(name: str, value: object, meaning: str = "") -> None:
    """Raise unless ``value`` is an int greater than or equal to zero (a length may be 0)."""
    require_int(name, value)
    if value < 0:
        what = f" ({meaning})" if meaning else ""
        raise ValueError(
            f"{name}{what} must be a non-negative integer, got {name}={value}. "
            f"A sequence cannot have fewer than 0 positions."
        )


def require_crop_length(length: object, cached_len: int) -> None:
    """Raise unless ``length`` is an int in ``0 .. cached_len``: what a cache's ``crop`` keeps."""
    require_non_negative_int("length", length, "number of tokens to keep")
    if length > cached_len:
        raise ValueError(
            f"length must be at most cached_len={cached_len}, got length={length}. "
            f"crop only shortens the cache; append tokens to lengthen it."
        )


def require_divisible_heads(
    embed_dim: int,
    num_heads: int,
    embed_name: str = "embed_dim",
    heads_name: str = "num_heads",
) -> None:
    """Raise ValueError unless ``embed_dim`` splits evenly into ``num_heads`` heads."""
    if embed_dim % num_heads != 0:
        raise ValueError(
            f"{embed_name} (={embed_dim}) must be divisible by {heads_name} (={num_heads}): "
            f"head_dim would be {embed_dim / num_heads:.2f}. Choose {heads_name} among the "
            f"divisors of {embed_dim}: {divisors_near(embed_dim, num_heads)}."
        )


def require_kv_heads_divide(num_heads: int, num_kv_heads: int) -> None:
    """Raise ValueError unless query heads form equal groups over the key/value heads."""
    if num_heads % num_kv_heads != 0:
        raise ValueError(
            f"num_kv_heads (={num_kv_heads}) must divide num_heads (={num_heads}) so that every "
            f"key/value head serves the same number of query heads; "
            f"{num_heads} / {num_kv_heads} = {num_heads / num_kv_heads:.2f}. "
            f"Choose num_kv_heads among the divisors of {num_heads}: "
            f"{divisors_near(num_heads, num_kv_heads)}."
        )


def require_probability(name: str, value: object) -> None:
    """Raise unless ``value`` is a real number in ``[0, 1]`` (a dropout probability).

    ``bool`` is accepted as ``0``/``1``, as PyTorch accepts it; ``1`` zeroes every weight.
    """
    if not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a float in [0, 1], got {type(value).__name__} ({value!r}). "
            f"Pass for example {name}=0.1, or {name}=0.0 for no dropout."
        )
    if not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{name} must be in [0, 1], got {name}={value}. It is the probability of zeroing "
            f"an attention weight. Use for example {name}=0.1, or {name}=0.0 for no dropout."
        )


def require_bool(name: str, value: object) -> None:
    """Raise TypeError unless ``value`` is ``True`` or ``False`` (a Python ``bool``).

    ``torch.nn.functional.scaled_dot_product_attention`` accepts nothing else for its flags
    (``is_causal``, ``enable_gqa``): not ``0``/``1``, not ``numpy.bool_``, not a tensor. A
    truthy stand-in would be worse than an error: ``is_causal="False"`` is truthy.
    """
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be a bool (True or False), got {type(value).__name__} ({value!r}). "
            f"Pass {name}=True or {name}=False; convert a flag held in another type with "
            f"bool(...) (a string such as 'False' is not converted: bool('False') is True)."
        )


def require_alignment(alignment: object) -> None:
    """Raise ValueError unless ``alignment`` names a known causal-mask alignment."""
    if alignment not in ("top_left", "bottom_right"):
        raise ValueError(
            f"alignment must be 'top_left' or 'bottom_right', got alignment={alignment!r}. "
            f"Use 'top_left' to match torch's is_causal=True, or 'bottom_right' when the "
            f"queries are the last tokens of a longer key sequence (KV cache)."
        )


def require_finite_scale(scale: object) -> None:
    """Raise unless ``scale`` is ``None`` or a finite real number.

    A number is any ``numbers.Real`` (``float``, ``int``, ``bool``, ``numpy.float32``, ...)
    or a 0-d real tensor, as ``torch.nn.functional.scaled_dot_product_attention`` accepts.
    Zero and negative values are fine: ``0`` gives uniform weights, a negative scale reverses
    each query's preference. ``inf`` and ``nan`` are rejected (PyTorch returns NaN or zeros).
    """
    if scale is None:
        return
    if isinstance(scale, torch.Tensor):
        is_number = scale.dim() == 0 and not scale.is_complex()
    else:
        is_number = isinstance(scale, numbers.Real)
    if not is_number:
        if isinstance(scale, torch.Tensor):
            given = f"a tensor of shape {_shape(scale)} and dtype {scale.dtype}"
        else:
            given = f"{type(scale).__name__} ({scale!r})"
        raise TypeError(
            f"scale must be a real number or None, got {given}. "
            f"Pass a float, e.g. scale=0.125, or scale=None for the default 1 / sqrt(head_dim)."
        )
    scale = float(scale)
    if not math.isfinite(scale):
        raise ValueError(
            f"scale must be a finite number, got scale={scale}. An infinite scale makes every "
            f"score infinite and the softmax undefined (NaN). Pass scale=None for the default "
            f"1 / sqrt(head_dim), or a finite value (0 gives uniform weights)."
        )


# ----------------------------------------------------------------------------------------------
# Tensors: type, rank, dtype, device
# ----------------------------------------------------------------------------------------------


def require_tensor(name: str, value: object, dtype: str = "torch.float32") -> None:
    """Raise TypeError unless ``value`` is a ``torch.Tensor``; the fix converts to ``dtype``."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(value).__name__}. "
            f"Convert it first, for example {name} = torch.as_tensor({name}, dtype={dtype})."
        )


def require_rank(name: str, tensor: torch.Tensor, ranks: Sequence[int], layout: str) -> None:
    """Raise ValueError unless ``tensor.dim()`` is one of ``ranks``.

    Args:
        name: Argument name, e.g. ``"query"``.
        tensor: The tensor to check.
        ranks: Accepted numbers of dimensions.
        layout: The expected layout in words, e.g. ``"(batch, seq_len, embed_dim)"``.
    """
    if tensor.dim() not in ranks:
        accepted = " or ".join(f"{rank}-D" for rank in ranks)
        raise ValueError(
            f"{name} must be {accepted} with layout {layout}, got a {tensor.dim()}-D tensor of "
            f"shape {_shape(tensor)}. Add or remove dimensions, e.g. {name}.unsqueeze(0) adds a "
            f"batch dimension of size 1."
        )


def require_min_rank(name: str, tensor: torch.Tensor, min_rank: int, layout: str) -> None:
    """Raise ValueError unless ``tensor`` has at least ``min_rank`` dimensions."""
    if tensor.dim() < min_rank:
        raise ValueError(
            f"{name} must have at least {min_rank} dimensions with layout {layout}, got a "
            f"{tensor.dim()}-D tensor of shape {_shape(tensor)}. Add the missing dimensions, "
            f"e.g. {name}.unsqueeze(0)."
        )


def require_same_rank(name: str, tensor: torch.Tensor, other_name: str, other: torch.Tensor):
    """Raise ValueError unless two inputs have the same number of dimensions."""
    if tensor.dim() != other.dim():
        raise ValueError(
            f"{name} must have the same number of dimensions as {other_name} "
            f"({other.dim()}-D, shape {_shape(other)}), got a {tensor.dim()}-D {name} of shape "
            f"{_shape(tensor)}. Pass all of query, key and value batched (3-D) or all "
            f"unbatched (2-D)."
        )


def require_floating(name: str, tensor: torch.Tensor) -> None:
    """Raise TypeError unless ``tensor`` has a floating-point dtype."""
    if not torch.is_floating_point(tensor):
        raise TypeError(
            f"{name} must have a floating-point dtype, got {name}.dtype={tensor.dtype}. "
            f"Convert it, e.g. {name}.float() or {name}.to(torch.float64)."
        )


def require_matching_dtype(name: str, tensor: torch.Tensor, expected: torch.dtype) -> None:
    """Raise TypeError unless ``tensor`` has the dtype of the module's parameters."""
    if tensor.dtype != expected:
        raise TypeError(
            f"{name}.dtype ({tensor.dtype}) must match the dtype of the module's parameters "
            f"({expected}). Convert the input with {name}.to({expected}) or the module with "
            f"module.to({tensor.dtype})."
        )


def require_matching_device(name: str, tensor: torch.Tensor, expected: torch.device) -> None:
    """Raise ValueError unless ``tensor`` lives on the device of the module's parameters."""
    if tensor.device != expected:
        raise ValueError(
            f"{name} is on device {tensor.device} but the module's parameters are on "
            f"{expected}. Move one of them: {name}.to('{expected}') or "
            f"module.to('{tensor.device}')."
        )


def require_same_device(
    name: str, tensor: torch.Tensor, reference_name: str, expected: torch.device
) -> None:
    """Raise ValueError unless ``tensor`` (a mask, a key...) is on the device of the query.

    Args:
        name: Argument name, e.g. ``"attn_mask"``.
        tensor: The tensor to check.
        reference_name: What sets the device, e.g. ``"query"``.
        expected: The device of ``reference_name``.
    """
    if tensor.device != expected:
        raise ValueError(
            f"{name} is on device {tensor.device} but {reference_name} is on {expected}. "
            f"Move it: {name}.to({reference_name}.device)."
        )


def require_same_dtype(name: str, tensor: torch.Tensor, other_name: str, other: torch.Tensor):
    """Raise TypeError unless two inputs share a dtype."""
    if tensor.dtype != other.dtype:
        raise TypeError(
            f"{name}.dtype ({tensor.dtype}) must match {other_name}.dtype ({other.dtype}). "
            f"Convert one of them, e.g. {name}.to({other.dtype})."
        )


# ----------------------------------------------------------------------------------------------
# Shapes of query, key and value
# ----------------------------------------------------------------------------------------------


def require_feature_size(
    name: str, tensor: torch.Tensor, expected: int, expected_name: str
) -> None:
    """Raise ValueError unless the last dimension of ``tensor`` equals ``expected``.

    Args:
        name: Argument name, e.g. ``"key"``.
        tensor: The tensor whose last dimension is checked.
        expected: The feature size the module was built for.
        expected_name: The constructor argument that set it, e.g. ``"kdim"``.
    """
    given = tensor.shape[-1]
    if given != expected:
        raise ValueError(
            f"{name} has {given} features in its last dimension (shape {_shape(tensor)}), but "
            f"the module was built with {expected_name}={expected}. Build the module with "
            f"{expected_name}={given}, or give {name} {expected} features."
        )


def require_same_batch(
    query: torch.Tensor, other_name: str, other: torch.Tensor, batch_first: bool
) -> None:
    """Raise ValueError unless ``query`` and ``other`` have the same batch size.

    When the sizes differ but would agree under the other ``batch_first`` setting, the message
    says so: that is the usual cause (``torch.nn.MultiheadAttention`` defaults to
    ``batch_first=False``, i.e. ``(seq_len, batch, embed_dim)``).
    """
    batch_dim = 0 if batch_first else 1
    if query.shape[batch_dim] == other.shape[batch_dim]:
        return
    layout = "(batch, seq_len, features)" if batch_first else "(seq_len, batch, features)"
    message = (
        f"query and {other_name} must have the same batch size: with batch_first={batch_first} "
        f"the layout is {layout}, so dim {batch_dim} is the batch, but query.shape="
        f"{_shape(query)} gives batch {query.shape[batch_dim]} and {other_name}.shape="
        f"{_shape(other)} gives batch {other.shape[batch_dim]}."
    )
    other_batch_dim = 1 - batch_dim
    if query.shape[other_batch_dim] == other.shape[other_batch_dim]:
        message += (
            f" Under batch_first={not batch_first} the batch sizes would match: did you mean "
            f"to build the module with batch_first={not batch_first}?"
        )
    else:
        message += f" Pass the same batch of sequences as query and {other_name}."
    raise ValueError(message)


def _require_same_size(
    name: str, tensor: torch.Tensor, other_name: str, other: torch.Tensor, dim: int, *,
    what: str, unit: str, why: str, fix: str,
) -> None:
    """Raise ValueError unless two tensors have the same size along ``dim``.

    The message names both tensors' shapes and the size each has along ``dim`` (``unit``),
    says what the two must share (``what``) and why (``why``), and ends with ``fix``.
    """
    if tensor.shape[dim] != other.shape[dim]:
        raise ValueError(
            f"{name} and {other_name} must {what} (dim {dim}): {why}. Got "
            f"{name}.shape={_shape(tensor)} ({unit} {tensor.shape[dim]}) and "
            f"{other_name}.shape={_shape(other)} ({unit} {other.shape[dim]}). {fix}"
        )


def require_same_length(key: torch.Tensor, value: torch.Tensor, seq_dim: int) -> None:
    """Raise ValueError unless key and value have the same number of positions."""
    _require_same_size(
        "key", key, "value", value, seq_dim, what="have the same sequence length",
        unit="length", why="every key position needs one value",
        fix="Pass key and value from the same sequence.",
    )


def require_same_new_tokens(
    name: str, tensor: torch.Tensor, other_name: str, other: torch.Tensor, dim: int, fix: str
) -> None:
    """Raise ValueError unless two tensors appended to a cache hold as many new tokens (``dim``).

    Used by the caches' ``append``: each new token stores one of each, so a mismatch would
    leave the cache's parts out of step. ``fix`` is the sentence that says what to pass.
    """
    _require_same_size(
        name, tensor, other_name, other, dim, what="hold the same number of new tokens",
        unit="new_len", why="each token stores one of each", fix=fix,
    )


def require_same_head_dim(query: torch.Tensor, key: torch.Tensor) -> None:
    """Raise ValueError unless query and key vectors have the same length (for the dot product)."""
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same last dimension (head_dim) to take dot products, "
            f"got query.shape={_shape(query)} and key.shape={_shape(key)}. Project them to the "
            f"same head_dim."
        )


def require_broadcastable(
    name: str, shape: Sequence[int], other_name: str, other_shape: Sequence[int]
) -> None:
    """Raise ValueError unless two batch shapes broadcast together."""
    try:
        torch.broadcast_shapes(tuple(shape), tuple(other_shape))
    except RuntimeError:
        raise ValueError(
            f"the batch dimensions of {name} {tuple(shape)} and {other_name} "
            f"{tuple(other_shape)} must broadcast (each size equal, or 1). Make them agree."
        ) from None


def require_gqa_heads(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
    """Raise ValueError unless the key heads and the value heads each divide the query heads."""
    require_min_rank("query", query, 3, "(..., num_heads, query_len, head_dim)")
    require_min_rank("key", key, 3, "(..., num_kv_heads, key_len, head_dim)")
    require_min_rank("value", value, 3, "(..., num_kv_heads, key_len, value_dim)")
    require_head_groups(query.shape[-3], key.shape[-3], "query.shape[-3]", "with enable_gqa=True")
    require_head_groups(
        query.shape[-3], value.shape[-3], "query.shape[-3]", "with enable_gqa=True", "value"
    )


def require_kv_heads(key: torch.Tensor, value: torch.Tensor) -> None:
    """Raise ValueError unless key and value have a head dimension (-3) of the same size."""
    require_min_rank("key", key, 3, "(..., num_kv_heads, key_len, head_dim)")
    require_min_rank("value", value, 3, "(..., num_kv_heads, key_len, value_dim)")
    if value.shape[-3] != key.shape[-3]:
        raise ValueError(
            f"key and value must have the same number of heads (dim -3), got "
            f"key.shape={_shape(key)} and value.shape={_shape(value)}."
        )


def require_head_groups(
    num_heads: int, num_kv_heads: int, heads_name: str, context: str, kv_name: str = "key"
) -> None:
    """Raise ValueError unless ``num_heads`` is a multiple of ``num_kv_heads`` (dim -3)."""
    if num_kv_heads == 0 or num_heads % num_kv_heads != 0:
        raise ValueError(
            f"{context}, the query heads ({heads_name}={num_heads}) must be a multiple of the "
            f"{kv_name} heads ({kv_name}.shape[-3]={num_kv_heads}). Use a number of {kv_name} "
            f"heads among the divisors of {num_heads}: "
            f"{divisors_near(num_heads, max(num_kv_heads, 1))}."
        )


def require_within_context(num_tokens: int, context_length: int) -> None:
    """Raise ValueError when a sequence is longer than the causal mask built at construction."""
    if num_tokens > context_length:
        raise ValueError(
            f"the input has {num_tokens} tokens but the module was built with "
            f"context_length={context_length}, so its causal mask only covers "
            f"{context_length} positions. Build the module with context_length>={num_tokens}, "
            f"or truncate the input to its last {context_length} tokens, e.g. x[:, "
            f"-{context_length}:]."
        )


# ----------------------------------------------------------------------------------------------
# Masks
# ----------------------------------------------------------------------------------------------


def require_mask_dtype(name: str, mask: torch.Tensor, polarity: str, hint: Hint = "") -> None:
    """Raise TypeError unless ``mask`` is bool or floating point.

    Args:
        name: Argument name, e.g. ``"attn_mask"``.
        mask: The mask to check.
        polarity: What ``True`` means for this argument, e.g. ``"True = may attend"``.
        hint: Advice that replaces the default one (convert a 0/1 mask with ``.bool()``), or
            a function that writes it (called only if the check fails).
    """
    if mask.dtype != torch.bool and not torch.is_floating_point(mask):
        default = (
            f"An integer 0/1 mask is ambiguous: convert it with {name}.bool() after checking "
            f"which value means what."
        )
        raise TypeError(
            f"{name} must be a bool mask ({polarity}) or a float mask (added to the scores), "
            f"got {name}.dtype={mask.dtype}. {_hint_text(hint) or default}"
        )


def require_mask_shape(
    name: str, mask: torch.Tensor, accepted: Sequence[tuple[str, tuple[int, ...]]], hint: Hint = ""
) -> None:
    """Raise ValueError unless ``mask.shape`` is one of the ``accepted`` shapes.

    Args:
        name: Argument name, e.g. ``"attn_mask"``.
        mask: The mask to check.
        accepted: Pairs of (layout in words, shape), e.g. ``("(query_len, key_len)", (5, 7))``.
        hint: Extra advice appended to the message, or a function that writes it (called
            only if the check fails).
    """
    for _, shape in accepted:
        if _shape(mask) == tuple(shape):
            return
    _raise_mask_shape(name, mask, accepted, hint)


def _raise_mask_shape(
    name: str, mask: torch.Tensor, accepted: Sequence[tuple[str, tuple[int, ...]]], hint: Hint
) -> None:
    """The error of :func:`require_mask_shape`, built only when the shape is wrong."""
    listed = " or ".join(f"{layout} = {tuple(shape)}" for layout, shape in accepted)
    raise ValueError(
        f"{name} must have shape {listed}, got {name}.shape={_shape(mask)}. "
        f"{_hint_text(hint) or 'Build it for these query and key lengths (and batch size).'}"
    )


def require_mask_broadcasts(name: str, mask: torch.Tensor, scores_shape: Sequence[int]) -> None:
    """Raise ValueError unless ``mask`` broadcasts to the attention scores' shape."""
    target = tuple(scores_shape)
    try:
        broadcast = torch.broadcast_shapes(_shape(mask), target)
    except RuntimeError:
        broadcast = None
    if broadcast != target:
        raise ValueError(
            f"{name} must broadcast to the attention scores of shape {target} "
            f"(..., query_len, key_len), got {name}.shape={_shape(mask)}. The last two "
            f"dimensions must be (query_len, key_len) = {target[-2:]} (or 1)."
        )


def require_not_mask_and_causal(attn_mask: torch.Tensor | None, is_causal: bool) -> None:
    """Raise ValueError when both ``attn_mask`` and ``is_causal`` are given (for GQA's module)."""
    if attn_mask is not None and is_causal:
        raise ValueError(
            "attn_mask and is_causal=True were both given; pass only one. To combine a causal "
            "mask with your own, build mha_ref.causal_mask(query_len, key_len) and combine it "
            "with attn_mask (logical and for bool masks), then call with is_causal=False."
        )


def require_valid_lengths(lengths: torch.Tensor, max_len: int) -> None:
    """Raise ValueError unless every length is in ``[0, max_len]``."""
    if lengths.dim() != 1:
        raise ValueError(
            f"lengths must be 1-D (batch,), got a {lengths.dim()}-D tensor of shape "
            f"{_shape(lengths)}. Pass one length per sequence, e.g. lengths=[3, 5]."
        )
    if torch.is_floating_point(lengths) or lengths.dtype == torch.bool:
        raise TypeError(
            f"lengths must hold integers, got lengths.dtype={lengths.dtype}. "
            f"Convert with lengths.long()."
        )
    if (lengths < 0).any():
        raise ValueError(
            f"lengths must be non-negative, got lengths={lengths.tolist()}. "
            f"A sequence cannot have fewer than 0 tokens."
        )
    if (lengths > max_len).any():
        raise ValueError(
            f"every length must be at most max_len (={max_len}), got lengths={lengths.tolist()}. "
            f"Pass max_len>={int(lengths.max())} or leave max_len=None to use the longest length."
        )
