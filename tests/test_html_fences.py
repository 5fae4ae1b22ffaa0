"""Every <pre> is a fenced code block whose fences stand alone on their lines (real pages of the
generator zoo: Sphinx's documentation, git's manual pages, GLib's API reference;
tests/data/README.md)."""

import gzip
import os
import re

from transforms.chunking.block_parser import block_parser
from transforms.ingest.html import html_to_markdown
from transforms.ingest.trafilatura_markdown import fences_alone

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _text(name: str) -> str:
    with gzip.open(os.path.join(DATA, name)) as f:
        return html_to_markdown(f.read()).text


def _code(text: str) -> list[str]:
    """The contents of the fenced code blocks of `text`."""
    return [t.content for t in block_parser().parse(text) if t.type == "fence"]


def _glued_fences(text: str) -> list[str]:
    return [line for line in text.split("\n") if re.search(r"\S[ \t]*```", line)]


def test_a_pre_in_a_definition_is_a_code_block_of_its_own():
    text = _text("sphinx53-extdev-logging.html.gz")
    # Before: "Example usage: ```" and "...and nodes: ```": no fence opened, the code was read
    # as text and its closing fence opened a code block that swallowed the page after it.
    assert not _glued_fences(text)
    assert "  Example usage:\n  ```\n  >>> from sphinx.util import logging\n" in text
    code = _code(text)
    assert len(code) == 4
    assert "logger.warning('Warning happened!', location=('chapter1/index', 10))\n" in code[1]
    # a nested definition list's terms are items too, not "  - " and the term on a new line
    assert "\n  - error(*msg*, " in text
    assert not [line for line in text.split("\n") if line.strip() == "-"]


def test_the_list_a_code_block_broke_out_of_goes_on_as_a_list():
    text = _text("sphinx53-extdev-logging.html.gz")
    # trafilatura writes the code unindented, so the block ends the list; the nested items
    # after it ("    - **color**") read as an indented code block before
    assert not [t for t in block_parser().parse(text) if t.type == "code_block"]
    assert "  ```\n    - **color**\n    : The color of logs." in text


def test_a_listing_laid_out_in_a_table_is_a_code_block():
    text = _text("glib274-reference-counted-strings.html.gz")
    # Before: "| ``` 1 2 3 ... ``` | ``` PersonDetails * person_details_from_data (...) ``` |"
    assert not _glued_fences(text)
    code = _code(text)
    listing = next(c for c in code if c.startswith("PersonDetails *\n"))
    assert "  // Use g_autoptr() to simplify error cases\n" in listing
    assert not any(re.fullmatch(r"[\d\s]+", c) for c in code)  # no line numbers' block


def test_a_one_line_pre_is_a_code_block():
    text = _text("git239-web--browse.html.gz")
    # Before: inline code, glued to the paragraph after it
    assert "```\n$ git config --global web.browser firefox\n```\nas they are" in text
    assert "```\ngit web--browse [<options>] (<URL>|<file>)…\n```" in text


def test_a_pre_in_a_table_cell_is_inline_code():
    # PostgreSQL's function tables: an example's result is a <pre> in the cell, after an
    # empty <code class="returnvalue">
    html = (
        "<html><head><title>T</title></head><body><main><h1>T</h1><p>Functions that are"
        " described in the table below, with an example each.</p><table><tr><th>Function</th>"
        "<th>Example</th></tr><tr><td><p><code>f(1)</code> → <code></code>\n</p><pre>\n"
        "  value\n-------\n 1\n</pre></td><td>x</td></tr></table></main></body></html>"
    )
    text = html_to_markdown(html).text
    assert "| `f(1)` → `value ------- 1` | x |" in text
    assert not _glued_fences(text)


def test_fences_alone():
    glued = "- term\n- Example: ```\ncode\n```\n- next"
    assert fences_alone(glued) == "- term\n- Example:\n```\ncode\n```\n- next"
    assert fences_alone("- ```\ncode\n```") == "```\ncode\n```"
    assert fences_alone("```\ncode\n```\n    - item\n      more\n\n    code") == (
        "```\ncode\n```\n- item\n  more\n\n    code"
    )
    # a span that ends the line, a fence no later line closes, and code are left alone
    assert fences_alone("a ```b```\nx\n```\ny\n```") == "a ```b```\nx\n```\ny\n```"
    assert fences_alone("text ```") == "text ```"
    assert fences_alone("````\na ```\n```\n````") == "````\na ```\n```\n````"
