"""What every real model needs installed, and how a model file is checked.

A real model's weights come in a package on the package index (one per model: its own module
says which and how to install it); reading them needs two packages more, ``gguf`` and
``tokenizers``, the ``real-model`` extra of ``mha_ref``. This module imports those two or says
how to install them (:func:`require_package`), names the commands, and checks a model file
against its pinned SHA-256 (:func:`file_sha256`), once per process.
"""

from __future__ import annotations

import hashlib
from importlib.metadata import version
from pathlib import Path

__all__ = [
    "EXTRA_PACKAGES",
    "TORCH_CPU_COMMAND",
    "TORCH_CPU_INDEX",
    "ModelFileError",
    "distribution_version",
    "extra_install_command",
    "file_sha256",
    "require_package",
]

#: what the real-model code needs beyond the tutorial extra, with the versions it was checked with
EXTRA_PACKAGES = {"gguf": "gguf==0.19.0", "tokenizers": "tokenizers==0.23.3"}

#: PyTorch's own index of CPU-only wheels (Linux, Windows and macOS)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: the command that installs a CPU-only torch before the wheel (so pip keeps it, instead of
#: pulling the default CUDA build on Linux, about 5.6 GB against 0.2 GB)
TORCH_CPU_COMMAND = f"python -m pip install torch --index-url {TORCH_CPU_INDEX}"

#: files already hashed in this process: (path, size, mtime) -> sha256
_checked: dict[tuple[str, int, int], str] = {}


class ModelFileError(FileNotFoundError):
    """The model file is missing or is not the pinned file; the message gives the fix."""


def extra_install_command() -> str:
    """The command that installs the ``real-model`` extra from the wheel the site ships.

    Returns:
        str: ``python -m pip install "mha_ref-<version>-py3-none-any.whl[tutorial,real-model]"``.
    """
    from mha_ref import __version__

    return f'python -m pip install "mha_ref-{__version__}-py3-none-any.whl[tutorial,real-model]"'


def require_package(name: str, model_install: str = ""):
    """Import ``name`` (``"gguf"`` or ``"tokenizers"``), or say how to install it.

    Args:
        name: the import name; a key of :data:`EXTRA_PACKAGES`.
        model_install: the model file's own install command, added to the message.

    Returns:
        The imported module.

    Raises:
        ValueError: if ``name`` is not a key of :data:`EXTRA_PACKAGES`.
        ModuleNotFoundError: if it is not installed; the message gives the install commands.
    """
    if name not in EXTRA_PACKAGES:
        raise ValueError(
            f"require_package: name must be one of {sorted(EXTRA_PACKAGES)}, got {name!r}"
        )
    try:
        # literal imports, one per package, so the build's import reader can follow them
        if name == "gguf":
            import gguf as module
        else:
            import tokenizers as module
        return module
    except ModuleNotFoundError as error:
        then = f"; then the model file:\n    {model_install}" if model_install else ""
        raise ModuleNotFoundError(
            f"the real model needs the package {EXTRA_PACKAGES[name]!r}, which is not "
            f"installed. Install mha_ref's real-model extra: from the site's wheel,\n"
            f"    {extra_install_command()}\n"
            f"or in a checkout, python -m pip install -e \".[tutorial,real-model]\"{then}"
        ) from error


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, computed once per process for each (path, size, mtime).

    Args:
        path: the file.

    Returns:
        str: 64 hexadecimal digits (about 0.2 s for 250 MB, then free in this process).
    """
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _checked:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                digest.update(chunk)
        _checked[key] = digest.hexdigest()
    return _checked[key]


def distribution_version(name: str) -> str:
    """The installed version of the distribution ``name`` (part of the weights caches' keys).

    Args:
        name: a distribution name (``"gguf"``).

    Returns:
        str: its version (``"0.19.0"``).
    """
    return version(name)
