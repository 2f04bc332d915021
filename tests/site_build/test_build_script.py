"""The build script behaves like a command: ``--help`` helps, a mistyped folder is refused, the
books are withdrawn when not written, and only this checkout's ``mha_ref`` is built or tested.

``docs/_ext/build_languages.py`` once took any first argument for its output folder, so
``--help`` ran a full two-language build into a folder named ``--help``. And a nox environment
holds an editable install of the checkout that made it: used by another checkout, it built the
first checkout's package into the second one's pages (``docs/_ext/checkout_guard.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "docs" / "_ext"
BUILD_SCRIPT = EXT / "build_languages.py"
GUARD = EXT / "checkout_guard.py"
sys.path.insert(0, str(EXT))


def run(command: list[str], cwd: Path, pythonpath: list[Path] | None = None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    return subprocess.run(
        [sys.executable, *command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def fake_package(folder: Path) -> Path:
    """An ``mha_ref`` that is not this checkout's, as another checkout's install would be."""
    package = folder / "mha_ref"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the fake mha_ref was imported')\n")
    return folder


# -- the command line --------------------------------------------------------------------------
def test_help_prints_the_usage_and_builds_nothing(tmp_path):
    result = run([str(BUILD_SCRIPT), "--help"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python docs/_ext/build_languages.py OUTDIR")
    for option in ("--languages", "--epub, --no-epub", "OUTDIR"):
        assert option in result.stdout
    assert list(tmp_path.iterdir()) == [], "--help wrote files"


@pytest.mark.parametrize("outdir", ["-x", "--html"])
def test_an_output_folder_that_starts_with_a_dash_is_refused(tmp_path, outdir):
    result = run([str(BUILD_SCRIPT), "--", outdir], cwd=tmp_path)
    assert result.returncode == 2
    assert f"OUTDIR: expected a folder name, given {outdir!r}, which starts with '-'" in (
        result.stderr
    )
    assert f"./{outdir}" in result.stderr  # the fix
    assert list(tmp_path.iterdir()) == []


def test_no_output_folder_and_a_folder_after_sphinx_options_are_refused(tmp_path):
    nothing = run([str(BUILD_SCRIPT)], cwd=tmp_path)
    assert nothing.returncode == 2
    assert "the following arguments are required: OUTDIR" in nothing.stderr
    late = run([str(BUILD_SCRIPT), "-j", "1", "build/html"], cwd=tmp_path)
    assert late.returncode == 2
    assert "OUTDIR: expected it first, before the Sphinx options, given '1' after '-j'" in (
        late.stderr
    )
    assert list(tmp_path.iterdir()) == []


def test_arguments_split_between_the_script_and_sphinx(monkeypatch):
    import build_languages
    monkeypatch.delenv("CI", raising=False)
    argv = ["out", "-j", "1", "--languages=en", "-D", "a=b", "--epub"]
    args, sphinx = build_languages.parse_arguments(argv)
    assert (args.outdir, args.languages, args.epub) == (Path("out").resolve(), ("en",), True)
    assert sphinx == ["-j", "1", "-D", "a=b"]
    args, _ = build_languages.parse_arguments(["out"])
    assert (args.languages, args.epub) == (("en", "zh_CN"), False)  # no books outside CI
    monkeypatch.setenv("CI", "true")
    assert build_languages.parse_arguments(["out"])[0].epub is True
    assert build_languages.parse_arguments(["out", "--no-epub"])[0].epub is False
    with pytest.raises(SystemExit):
        build_languages.parse_arguments(["out", "--languages=fr"])


def test_a_build_without_books_withdraws_every_older_book(tmp_path):
    pytest.importorskip("sphinx")
    import build_languages
    staging = tmp_path / "html-staging"
    books = {}
    for lang in ("en", "zh_CN"):
        (staging / lang).mkdir(parents=True)
        books[lang] = staging / lang / f"mha-ref-{lang}.epub"
        books[lang].write_bytes(b"an older build's book")
    assert build_languages.withdraw_books(staging, keep=["en"]) == [books["zh_CN"]]
    assert books["en"].is_file() and not books["zh_CN"].exists()
    assert build_languages.withdraw_books(staging, keep=[]) == [books["en"]]
    assert not any(staging.rglob("*.epub"))


# -- this checkout's package ---------------------------------------------------------------------
def test_the_check_passes_on_this_checkouts_package(tmp_path):
    result = run([str(GUARD)], cwd=tmp_path, pythonpath=[ROOT, fake_package(tmp_path)])
    assert result.returncode == 0, result.stderr


def test_the_check_fails_on_another_checkouts_package(tmp_path):
    fake = fake_package(tmp_path / "other-checkout")
    result = run([str(GUARD)], cwd=tmp_path, pythonpath=[fake, ROOT])
    assert result.returncode == 1
    assert f"mha_ref: expected the package of this checkout ({ROOT / 'mha_ref'})" in result.stderr
    assert f"loaded from {fake / 'mha_ref' / '__init__.py'}" in result.stderr
    assert f"PYTHONPATH={ROOT}" in result.stderr  # the fix


def test_putting_the_checkout_first_wins_over_another_package(tmp_path):
    fake = fake_package(tmp_path / "other-checkout")
    code = (
        f"import sys; sys.path[:0] = [{str(fake)!r}, {str(EXT)!r}]\n"
        "import checkout_guard as guard\n"
        "try:\n"
        "    guard.require_checkout()\n"
        "except guard.WrongCheckoutError:\n"
        "    print('refused')\n"
        "guard.put_checkout_first()\n"
        "print(guard.require_checkout())\n"
        "import os; print(os.environ['PYTHONPATH'].split(os.pathsep)[0])\n"
    )
    result = run(["-c", code], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    expected = ["refused", str(ROOT / "mha_ref" / "__init__.py"), str(ROOT)]
    assert result.stdout.splitlines() == expected


def test_the_build_stops_on_another_checkouts_package(tmp_path):
    """The build script of a checkout without the package that the environment imports (here: a
    copy of the scripts alone, beside which this checkout's mha_ref is installed) stops before
    building, and says why."""
    other = tmp_path / "other-checkout"
    (other / "docs" / "_ext").mkdir(parents=True)
    for script in (BUILD_SCRIPT, GUARD):
        shutil.copy(script, other / "docs" / "_ext" / script.name)
    result = run([str(other / "docs" / "_ext" / "build_languages.py"), "out"], cwd=other,
                 pythonpath=[ROOT])  # fmt: skip
    assert result.returncode == 1
    assert f"mha_ref: expected the package of this checkout ({other / 'mha_ref'})" in (
        result.stderr
    )
    assert f"loaded from {ROOT / 'mha_ref' / '__init__.py'}" in result.stderr
    assert not (other / "out").exists() and not (other / "out-staging").exists()
