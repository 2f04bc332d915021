"""Example 10's live model after an invalid input (ux-review-4, friction 11): the predictions of the
previous sequence do not stay on screen as if they were the answer to what the box now holds.

While the input is invalid the prediction table is gone and the heads (drawn for the last valid
sequence) are greyed out, and the message says so; a valid input brings both back.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

LANGUAGES = ("en", "zh_CN")
INDUCTION = "auto_examples/plot_10_induction_heads.html"
#: an unknown token, too many tokens, nothing
INVALID = ["ABCZ", "ABCDEFGHIJKLMNOPQRSTU", ""]
STALE_WORDS = {"en": "last valid sequence", "zh_CN": "上一个有效序列"}


def _open_live(watched, site_url, lang):
    watch = watched()
    page = watch.page
    page.goto(f"{site_url}/{lang}/{INDUCTION}", wait_until="load")
    page.wait_for_selector(".mha-attn-live-input")
    view = page.locator(".mha-attn", has=page.locator(".mha-attn-live-input")).first
    return watch, view


@pytest.mark.parametrize("lang", LANGUAGES)
def test_an_invalid_input_clears_the_predictions_and_greys_the_heads(watched, site_url, lang):
    watch, view = _open_live(watched, site_url, lang)
    box = view.locator(".mha-attn-live-input")
    rows = view.locator(".mha-attn-live-predictions tbody tr")
    message = view.locator(".mha-attn-live-message")
    box.fill("ABCDABCD")
    assert rows.count() == 8
    assert "mha-attn-stale" not in (view.get_attribute("class") or "")
    for text in INVALID:
        box.fill(text)
        assert box.get_attribute("aria-invalid") == "true", text
        # no table of the previous sequence's predictions on screen
        assert rows.count() == 0, text
        assert not view.locator(".mha-attn-live-predictions").is_visible(), text
        # the heads still drawn are marked: greyed out, and the message names their sequence
        assert "mha-attn-stale" in view.get_attribute("class"), text
        grid = view.locator("[role='grid']").first
        # grey by colour (not faded: its text keeps its contrast) and outlined
        style = grid.evaluate(
            "g => { const s = getComputedStyle(g.closest('.mha-attn > *'));"
            " return [s.filter, s.outlineStyle, s.opacity]; }"
        )
        assert style == ["grayscale(1)", "dashed", "1"], style
        said = message.text_content()
        assert STALE_WORDS[lang] in said and "ABCDABCD" in said, said
        assert "。 " not in said, said  # no space after a Chinese full stop
        assert view.evaluate("v => v.mhaAttn.live.stale") is True
    # a valid input again: predictions back, heads no longer marked
    box.fill("QRSQRS")
    assert box.get_attribute("aria-invalid") is None
    assert rows.count() == 6
    assert view.locator(".mha-attn-live-predictions").is_visible()
    assert "mha-attn-stale" not in view.get_attribute("class")
    assert STALE_WORDS[lang] not in message.text_content()
    assert not watch.errors, watch.errors
