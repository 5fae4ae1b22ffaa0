"""Every <pre> is a fenced code block, and only a <pre> (real pages: zlib's how-to, PostgreSQL 15's
SET and REVOKE)."""

import gzip
import os

from transforms.chunking.markdown import markdown_sections
from transforms.ingest.html import html_to_markdown

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _page(name: str) -> bytes:  # as read from disk: the page declares its encoding
    with gzip.open(os.path.join(DATA, name)) as f:
        return f.read()


def test_hash_lines_of_a_real_pages_listings_are_not_headings():
    text = html_to_markdown(_page("zlib-how.html.gz")).text
    # Before: "#  include <fcntl.h>", "#else", "#endif**" ... were headings (the listings are
    # <pre><b>, which trafilatura did not take for code).
    assert {s.path for s in markdown_sections(text)} == {("zlib Usage Example",)}
    assert "```\n#include <stdio.h>\n#include <string.h>\n" in text
    assert "#  include <fcntl.h>\n" in text


def test_a_listing_keeps_its_blank_lines():
    text = html_to_markdown(_page("zlib-how.html.gz")).text
    # Before: trafilatura dropped every empty line of a code block (it keeps only the blank
    # lines it writes between blocks): the header comment ran into the version history
    assert "Mark Adler */\n\n/* Version history:\n" in text
    assert "```\n/* zpipe.c:" in text  # the <pre>'s leading blank line (after <b>) goes


def test_a_synopsis_is_code_not_escaped_markdown():
    text = html_to_markdown(_page("postgresql15-sql-set.html.gz")).text
    assert "```\nSET [ SESSION | LOCAL ] configuration_parameter { TO | = }" in text
    assert "\\[" not in text.split("## Description")[0]


def test_inline_code_over_two_lines_stays_inline():
    text = html_to_markdown(_page("postgresql15-sql-revoke.html.gz")).text
    # Before: "The ```\nREVOKE ALL\n    PRIVILEGES\n```\n forms": the lone fence line opened a
    # code block, every later fence was read inverted and "## Compatibility" was code.
    assert "The `REVOKE ALL PRIVILEGES` forms will issue a warning" in text
    assert [s.path[-1] for s in markdown_sections(text)] == [
        "REVOKE", "Synopsis", "Description", "Notes", "Examples", "Compatibility"
    ]  # fmt: skip


def test_paragraph_whitespace_is_collapsed_as_a_browser_shows_it():
    text = html_to_markdown(_page("postgresql15-sql-set.html.gz")).text
    # Before: the page's source lines and their indentation stayed inside paragraphs and
    # list items ("...the\n   `SET` command", ": Specifies that ... session.\n      (This is").
    description = text.split("## Description\n\n")[1].split("\n\n")[0]
    assert description.startswith("The `SET` command changes run-time configuration parameters.")
    assert "\n" not in description and "  " not in description
    assert (
        "- `SESSION`\n: Specifies that the command takes effect for the current session. (This "
        "is the default if neither `SESSION` nor `LOCAL` appears.)\n- `LOCAL`\n"
    ) in text
    # a <pre> keeps its lines and indentation
    assert "```\nSET [ SESSION | LOCAL ] configuration_parameter { TO | = }" in text
    assert "\nSET [ SESSION | LOCAL ] TIME ZONE" in text
