"""Page titles (a real page: PostgreSQL 15's SET, Debian's postgresql-doc-15)."""

import gzip
import os

from lxml.html import document_fromstring

from transforms.html import html_to_markdown, page_title

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _page(name: str) -> str:
    with gzip.open(os.path.join(DATA, name), "rt", encoding="utf-8") as f:
        return f.read()


def test_a_real_reference_page_is_titled_by_its_own_title_not_its_admonition():
    extraction = html_to_markdown(_page("postgresql15-sql-set.html.gz"))
    assert extraction.title == "SET"  # trafilatura's guess: "Note"


def test_a_guess_inside_the_title_or_equal_to_the_h1_stands():
    page = document_fromstring(
        "<html><head><title>textwrap — Text wrapping — Python 3.11 documentation</title></head>"
        "<body><h1>Wrapping</h1></body></html>"
    )
    assert page_title(page, "textwrap — Text wrapping") == "textwrap — Text wrapping"
    assert page_title(page, "Wrapping") == "Wrapping"
    assert page_title(page, "Download") == "textwrap — Text wrapping — Python 3.11 documentation"
    assert page_title(page, None) == "textwrap — Text wrapping — Python 3.11 documentation"
    assert page_title(document_fromstring("<p>x</p>"), "Guess") == "Guess"
