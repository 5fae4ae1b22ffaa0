"""Page titles and title headings (real pages: PostgreSQL 15's SET, an mdBook chapter, a
gtk-doc page, a Doxygen class; tests/data/README.md)."""

import gzip
import os

from lxml.html import document_fromstring

from transforms.chunking.markdown import markdown_sections
from transforms.ingest.html import html_to_markdown, page_title, title_heading_above_sections

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _page(name: str) -> str:
    with gzip.open(os.path.join(DATA, name), "rt", encoding="utf-8") as f:
        return f.read()


def test_a_real_reference_page_is_titled_by_its_own_title_not_its_admonition():
    extraction = html_to_markdown(_page("postgresql15-sql-set.html.gz"))
    assert extraction.title == "SET"  # trafilatura's guess: "Note"


def test_a_real_api_page_is_titled_by_its_own_title_not_the_sites_banner():
    # libxslt's 23 API pages all open with <h1>The XSLT C library for GNOME</h1>, trafilatura's
    # guess for each, so every chunk's header of every page said the same; the page's own
    # <title> is also its <h2>.
    with gzip.open(os.path.join(DATA, "libxslt-keys.html.gz"), "rb") as f:
        extraction = html_to_markdown(f.read())
    assert extraction.title == "Module keys from libxslt"


def test_the_title_wins_over_a_first_h1_when_a_heading_says_it():
    page = document_fromstring(
        "<html><head><title>Module keys</title></head>"
        "<body><h1>Site banner</h1><h2>Module keys</h2><p>x</p></body></html>"
    )
    assert page_title(page, "Site banner") == "Module keys"
    # no heading says the <title>: the first <h1> stands
    other = document_fromstring(
        "<html><head><title>Home</title></head><body><h1>Install</h1><p>x</p></body></html>"
    )
    assert page_title(other, "Install") == "Install"


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


def test_the_title_heading_of_a_real_reference_page_heads_its_sections():
    text = html_to_markdown(_page("postgresql15-sql-set.html.gz")).text
    assert text.startswith("# SET\n\nSET — change a run-time parameter\n\n## Synopsis")
    paths = [s.path for s in markdown_sections(text)]
    assert ("SET", "Synopsis") in paths and ("SET", "Description") in paths
    assert all(p[0] == "SET" for p in paths)


def test_the_title_heading_moves_up_only_when_it_is_at_its_sections_level():
    siblings = "## T\n\nwhat T does\n\n## Synopsis\n\nx\n\n## Description\n\ny"
    assert title_heading_above_sections(siblings, "T") == siblings[1:]
    assert title_heading_above_sections(siblings, "Other") == siblings  # not the title
    nested = "# T\n\n## A\n\nx"
    assert title_heading_above_sections(nested, "T") == nested  # already above its sections
    above = "## T\n\n# A\n\n## B"
    assert title_heading_above_sections(above, "T") == above  # a later heading is higher
    fenced = "```\n## T\n```\n\n## T\n\n## A"
    # the "## T" in the fence is code, not the heading: only the real one moves
    assert title_heading_above_sections(fenced, "T") == "```\n## T\n```\n\n# T\n\n## A"
    late = "Intro.\n\n## T\n\n## A"
    assert title_heading_above_sections(late, "T") == "Intro.\n\n# T\n\n## A"


def test_a_book_chapter_is_titled_by_its_chapter_not_its_book():
    # mdBook: <title>Method Syntax - The Rust Programming Language</title>, and the menu bar's
    # <h1 class="menu-title"> names the book, trafilatura's guess on every chapter: all 40 of
    # the zoo's chapters were "The Rust Programming Language"
    extraction = html_to_markdown(_page("rust163-book-ch05-03-method-syntax.html.gz"))
    assert extraction.title == "Method Syntax"
    # gtk-doc: "Reference counted strings: GLib Reference Manual", the manual's name after ": "
    extraction = html_to_markdown(_page("glib274-reference-counted-strings.html.gz"))
    assert extraction.title == "Reference counted strings"


def test_a_doxygen_class_title_leaves_its_badges():
    # <div class="title">Json::CharReader Class Reference<span class="mlabels">...abstract...
    extraction = html_to_markdown(_page("jsoncpp195-class-json-char-reader.html.gz"))
    assert extraction.title == "Json::CharReader Class Reference"  # was "...Referenceabstract"
    assert extraction.text.startswith("# Json::CharReader Class Reference\n")


def test_the_site_after_the_pages_name_in_its_title_goes_when_a_heading_names_the_page():
    def titled(title: str, headings: str, guess: str | None = None) -> str | None:
        page = f"<html><head><title>{title}</title></head><body>{headings}<p>x</p></body></html>"
        return page_title(document_fromstring(page), guess)

    # Javadoc 8: "Timeout (JUnit API)" and the page's heading "Class Timeout" (Javadoc 11's
    # pages were already titled by it); a word or two before the name, type parameters after
    assert titled("Timeout (JUnit API)", '<h2 class="title">Class Timeout</h2>') == "Class Timeout"
    assert titled("After (JUnit API)", "<h2>Annotation Type After</h2>") == "Annotation Type After"
    assert titled("Diff (Commons Lang API)", "<h1>Class Diff&lt;T&gt;</h1>") == "Class Diff<T>"
    assert titled("Intro - The Book", "<h1>The Book</h1><h1>Intro</h1>", "The Book") == "Intro"
    assert titled("A - B - Site", "<h1>A - B</h1>") == "A - B"
    # no heading names the page's part: as before (the guess inside the <title>, or the title)
    assert titled("Intro - The Book", "<h1>The Book</h1>", "The Book") == "The Book"
    assert titled("Timeout (JUnit API)", "<h2>Summary</h2>") == "Timeout (JUnit API)"
    assert titled("Timeout (JUnit API)", "<h2>A Rule Named Timeout</h2>") == (
        "Timeout (JUnit API)"  # more than two words before the name: not the page's heading
    )
