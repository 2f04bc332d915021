"""Choose the device the examples and benchmarks run on."""

from __future__ import annotations

import os

import torch

__all__ = ["pick_device", "DEVICE_ENV_VAR"]

#: Name of the environment variable that overrides ``pick_device``, e.g. ``MHA_REF_DEVICE=cpu``.
DEVICE_ENV_VAR = "MHA_REF_DEVICE"


def pick_device() -> torch.device:
    """Return ``cuda`` if a GPU is available, else ``cpu``; the environment variable wins.

    Math: none; ``device = $MHA_REF_DEVICE if set, else ("cuda" if available else "cpu")``.

    Set ``MHA_REF_DEVICE`` (for example to ``cpu``, ``cuda`` or ``cuda:1``) to force a device,
    e.g. to get CPU numbers on a machine with a GPU.

    Returns:
        torch.device: The chosen device.

    Raises:
        ValueError: If ``MHA_REF_DEVICE`` is not a device name torch understands, or names a
            CUDA device while CUDA is not available.

    Source:
        The device-selection pattern of the PyTorch tutorials
        (``"cuda" if torch.cuda.is_available() else "cpu"``).
    """
    requested = os.environ.get(DEVICE_ENV_VAR, "").strip()
    if not requested:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError:
        raise ValueError(
            f"{DEVICE_ENV_VAR} must name a torch device such as 'cpu' or 'cuda', got "
            f"{DEVICE_ENV_VAR}={requested!r}. Fix or unset the environment variable."
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"{DEVICE_ENV_VAR}={requested!r} asks for CUDA, but torch.cuda.is_available() is "
            f"False on this machine. Set {DEVICE_ENV_VAR}=cpu or unset it."
        )
    return device
