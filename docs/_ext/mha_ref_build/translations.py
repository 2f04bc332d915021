"""Translation hooks for what no message catalog covers, on Chinese pages: the English sentences
sphinx-gallery writes into every example page (``source-read``), the docstrings' own section titles
(Shape, Source: ``autodoc-process-docstring``, after napoleon) and the label of the attributes' type
field (``doctree-read``, after Sphinx linked the type).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mha_ref_build import GALLERY_DIR

if TYPE_CHECKING:
    from sphinx.application import Sphinx


# sphinx-gallery writes these English sentences into every generated page; no catalog covers
# them, so the Chinese build replaces them here
_ZH_GALLERY_TEXT = [
    (
        re.compile(
            r":ref:`Go to the end <(sphx_glr_download_[^>]+)>`\s+"
            r"to download the full example code\.?"
        ),
        r":ref:`跳到页末 <\1>` 下载完整的示例代码。",
    ),
    (re.compile(r"Download Python source code: "), "下载 Python 源代码："),
    (re.compile(r"Download Jupyter notebook: "), "下载 Jupyter 笔记本："),
    (re.compile(r"Download zipped: "), "下载 zip 压缩包："),
    (re.compile(r"Download all examples in Python source code: "), "下载全部示例的源代码："),
    (re.compile(r"Download all examples in Jupyter notebooks: "), "下载全部示例的笔记本："),
]


def _translate_gallery_text(app: Sphinx, docname: str, source: list[str]) -> None:
    if app.config.language != "zh_CN" or not docname.startswith(f"{GALLERY_DIR}/"):
        return
    for pattern, replacement in _ZH_GALLERY_TEXT:
        source[0] = pattern.sub(replacement, source[0])


#: the docstrings' own section titles (``napoleon_custom_sections`` in conf.py), in Chinese;
#: napoleon translates only its standard titles (Args, Returns, Raises)
_ZH_DOCSTRING_SECTIONS = {"Shape": "形状", "Source": "出处"}
_RUBRIC = re.compile(r"(\s*\.\. rubric:: )(\w+)\s*")


def _translate_docstring_sections(app: Sphinx, what, name, obj, options, lines: list[str]) -> None:
    """On Chinese pages, title the docstrings' own sections in Chinese, as napoleon and Sphinx
    title their standard ones (参数, 返回). Runs after napoleon (``autodoc-process-docstring``,
    priority 600)."""
    if app.config.language != "zh_CN":
        return
    for i, line in enumerate(lines):
        match = _RUBRIC.fullmatch(line)
        if match and match.group(2) in _ZH_DOCSTRING_SECTIONS:
            lines[i] = match.group(1) + _ZH_DOCSTRING_SECTIONS[match.group(2)]


#: the label of the ``:type:`` field napoleon writes under each attribute. Sphinx shows that
#: field's name as it is, capitalised ("Type"), not as one of its translated labels; it has to
#: stay ``:type:`` in the docstring, because only a field Sphinx knows gets its type linked
#: (``list[HeadSummary]``), so the label is changed in the doctree, after Sphinx linked it
_ZH_ATTRIBUTE_TYPE_LABEL = {"Type": "类型"}


def _translate_attribute_type_label(app: Sphinx, doctree) -> None:
    """On Chinese pages, label the attributes' type field 类型 (``doctree-read``)."""
    from docutils import nodes

    if app.config.language != "zh_CN":
        return
    for name in doctree.findall(nodes.field_name):
        if (label := _ZH_ATTRIBUTE_TYPE_LABEL.get(name.astext())) is not None:
            name[:] = [nodes.Text(label)]
