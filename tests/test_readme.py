"""The README and docs/flags.md say what the code does."""

import os

from pipelines import flags_doc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*path: str) -> str:
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def test_docs_flags_md_is_what_the_generator_makes():
    assert _read("docs", "flags.md") == flags_doc.render(), (
        "docs/flags.md differs from the option definitions: run python -m pipelines.flags_doc"
    )
