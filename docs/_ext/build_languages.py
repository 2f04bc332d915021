"""Build every language of the site in one Python process: ``nox -s docs`` runs this.

    python docs/_ext/build_languages.py OUTDIR [SPHINX-BUILD OPTIONS...]

builds ``docs/<lang>`` into ``OUTDIR/<lang>`` for each language, with the same options as::

    sphinx-build -b html -c . -D language=<lang> -n -W -q [OPTIONS...] docs/<lang> OUTDIR/<lang>

Each language is a separate Sphinx application, exactly as with ``sphinx-build``; only the
process is shared. The second language then does not pay again for importing torch, matplotlib,
Sphinx and the theme (2-3 s), and it reuses the training results the first one cached
(``mha_ref.experiments``). The first language that fails stops the build with its exit status.
Each language's wall time is written to ``OUTDIR/../timings/languages.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = ("en", "zh_CN")


def build_language(lang: str, outdir: Path, options: list[str]) -> int:
    """Run sphinx-build for one language in this process; return its exit status."""
    import sphinx.locale
    from sphinx.cmd.build import build_main

    # Sphinx keeps the message catalogues it loaded in a module-level dict, and a later
    # application adds its language as a fallback to them: drop them, so that each language
    # starts from its own catalogues (Sphinx's own test fixtures do the same)
    sphinx.locale.translators.clear()
    argv = ["-b", "html", "-c", str(ROOT), "-D", f"language={lang}", "-n", "-W", "-q"]
    argv += [*options, str(ROOT / "docs" / lang), str(outdir / lang)]
    return build_main(argv)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    outdir, options = Path(argv[0]).resolve(), argv[1:]
    timings: dict[str, float] = {}
    for lang in LANGUAGES:
        start = time.perf_counter()
        status = build_language(lang, outdir, options)
        timings[lang] = round(time.perf_counter() - start, 2)
        if status != 0:
            print(f"the {lang} build failed (exit status {status})", file=sys.stderr)
            return status
    timings_file = outdir.parent / "timings" / "languages.json"
    timings_file.parent.mkdir(parents=True, exist_ok=True)
    timings_file.write_text(json.dumps(timings, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
