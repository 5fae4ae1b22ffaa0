"""HTML API references: trafilatura's definition terms are not headings, and heading text keeps
its backslash escapes (real pages: Python 3.11's documentation, Debian's python3.11-doc)."""

import gzip
import os

from transforms.chunking.markdown import headings, markdown_sections
from transforms.ingest.html import definition_terms_inline, html_to_markdown

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _page(name: str) -> str:
    with gzip.open(os.path.join(DATA, name), "rt", encoding="utf-8") as f:
        return f.read()


def test_definition_terms_of_a_real_api_page_are_not_headings():
    text = html_to_markdown(_page("python311-datamodel.html.gz")).text
    paths = {path for section in markdown_sections(text) for path in [section.path]}
    # Before: every signature (`object.__lt__(self, other)` ...) was a level-2 heading, and
    # the real headings after it nested under it.
    assert not [h for _, _, h in headings(text) if "(" in h]
    assert ("3. Data model", "3.3. Special method names", "3.3.1. Basic customization") in paths
    # a definition's term is the last entry of its own section's path, under the real headings
    assert (
        "3. Data model",
        "3.3. Special method names",
        "3.3.1. Basic customization",
        "object.__repr__(self)",
    ) in paths
    assert "- object.__lt__(*self*, *other*)" in text  # a list item, term and all


def test_heading_text_keeps_backslash_escapes():
    (section,) = [s for s in markdown_sections("# object.\\_\\_gt\\_\\_\n\nRich comparison.\n")]
    assert section.path == ("object.__gt__",)


def test_definition_terms_inline_leaves_other_lists_alone():
    assert (
        definition_terms_inline("- \nterm\n- item\n-  \n\n- \n- x")
        == "- term\n- item\n-  \n\n- \n- x"
    )
