"""Section ids (a read transform, after Sphinx's ``SortIds``): a section that has an explicit label
gets that label as its HTML ``id``, so that both languages address it alike (the id made from a
Chinese heading is ``id7``), a link survives a section added above it, and the language switcher can
pass it on.
"""

from __future__ import annotations

from sphinx.transforms import SphinxTransform


class LabelledSectionIds(SphinxTransform):
    """Put a section's explicit label (``(masks-causal)=``, ``.. _ex04-a-padded-batch:``) first
    among its ids, so that the HTML writer emits ``<section id="masks-causal">`` and the headerlink,
    the page's table of contents and the sidebar use it. Every page has a label on every
    section, the same in both languages (tests/pages/test_section_labels.py), so a section's address
    is shared by the two languages and does not change when a section is added above it.

    docutils keeps the id made from the heading first (``building-a-causal-mask``, or ``id5``
    for a Chinese heading), and Sphinx's ``SortIds`` (priority 261) moves only an ``id``-prefixed
    first id back, so an English reST section would keep its heading's id. The other ids stay,
    after the label, so that old links still land. Runs after ``SortIds`` and before the
    ``doctree-read`` collectors read the ids.
    """

    default_priority = 262

    def apply(self, **kwargs) -> None:
        from docutils import nodes

        for section in self.document.findall(nodes.section):
            labels = [
                self.document.nameids.get(name)
                for name in section["names"]
                if self.document.nametypes.get(name)  # True: an explicit target
            ]
            label = next((id_ for id_ in labels if id_ in section["ids"]), None)
            if label and section["ids"][0] != label:
                section["ids"].remove(label)
                section["ids"].insert(0, label)
