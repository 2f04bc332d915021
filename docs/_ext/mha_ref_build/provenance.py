"""Provenance: each example records the torch version, device and thread count it ran with
(:func:`write_provenance`, called before the example runs), and its page shows them in a note under
its title (``source-read``). The footer's commit is set with the language's settings
(:func:`mha_ref_build.settings.build_commit`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from mha_ref_build import GALLERY_DIR, PROVENANCE_SUFFIX

if TYPE_CHECKING:
    from sphinx.application import Sphinx


def write_provenance(gallery_conf: dict, stem: str) -> None:
    """Write ``<stem>.provenance.json`` beside the example's page: torch, device, threads."""
    import torch

    from mha_ref.device import pick_device

    device = pick_device()
    record = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "device_type": device.type,
        "threads": torch.get_num_threads(),
    }
    out_dir = Path(gallery_conf["src_dir"]) / GALLERY_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}{PROVENANCE_SUFFIX}").write_text(json.dumps(record, sort_keys=True) + "\n")


# -- source-read: show provenance on each example page ---------------------------------------------
_PROVENANCE_TEXT = {
    "en": "This page's outputs were computed when the site was built: torch {torch}, "
    "device ``{device}``, {threads} CPU thread(s).",
    "zh_CN": "本页的输出都是在构建网站时运行代码得到的：torch {torch}，设备 ``{device}``，"
    "{threads} 个 CPU 线程。",
}


def _add_provenance(app: Sphinx, docname: str, source: list[str]) -> None:
    prefix = f"{GALLERY_DIR}/plot_"
    if not docname.startswith(prefix):
        return
    record_file = Path(app.srcdir) / f"{docname}{PROVENANCE_SUFFIX}"
    if not record_file.is_file():
        return
    record = json.loads(record_file.read_text())
    text = _PROVENANCE_TEXT[app.config.language].format(**record)
    note = f"\n\n.. rst-class:: mha-provenance\n\n.. note::\n\n   {text}\n"
    # put the note right after the page title block that sphinx-gallery writes
    source[0] = insert_after_title(source[0], note)


def insert_after_title(rst: str, note: str) -> str:
    """``rst`` with ``note`` right after its page title (the first line underlined with ``=``),
    or at its end when it has none."""
    lines = rst.split("\n")
    for i in range(1, len(lines)):
        underline = lines[i]
        if underline and set(underline) == {"="} and lines[i - 1].strip():
            return "\n".join(lines[: i + 1]) + note + "\n".join(lines[i + 1 :])
    return rst + note
