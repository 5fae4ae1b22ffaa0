"""HTML API references: trafilatura's definition terms are not headings, and heading text keeps
its backslash escapes (a real page: Sphinx 5.3's "Logging API", Debian's sphinx-doc)."""

import gzip
import os

from lxml.html import document_fromstring

from transforms.chunking.markdown import headings, markdown_sections
from transforms.ingest.html import (
    _definition_term_links_as_text,
    definition_terms_inline,
    html_to_markdown,
)

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _page(name: str) -> str:
    with gzip.open(os.path.join(DATA, name), "rt", encoding="utf-8") as f:
        return f.read()


def test_definition_terms_of_a_real_api_page_are_not_headings():
    text = html_to_markdown(_page("sphinx53-extdev-logging.html.gz")).text
    paths = {section.path for section in markdown_sections(text)}
    # Before (and again with `definition_terms_inline` left out): four signatures were
    # headings ("error(msg, *args, **kwargs)", "class sphinx.util.logging.SphinxLoggerAdapter
    # (logging.LoggerAdapter)[source] : LoggerAdapter allowing..."), the term glued to its
    # description.
    assert [h for _, _, h in headings(text)] == ["Logging API"]
    # a definition's term is the last entry of its own section's path, under the real heading
    assert ("Logging API", "sphinx.util.logging.getLogger(name)") in paths
    assert (
        "Logging API",
        "class sphinx.util.logging.SphinxLoggerAdapter(logging.LoggerAdapter)",
    ) in paths
    assert "\n  - error(*msg*, **args*, ***kwargs*)\n" in text  # a nested item, term and all


def test_heading_text_keeps_backslash_escapes():
    (section,) = [s for s in markdown_sections("# object.\\_\\_gt\\_\\_\n\nRich comparison.\n")]
    assert section.path == ("object.__gt__",)


def test_definition_terms_inline_leaves_other_lists_alone():
    assert (
        definition_terms_inline("- \nterm\n- item\n-  \n\n- \n- x")
        == "- term\n- item\n-  \n\n- \n- x"
    )


def test_permalinks_and_source_links_leave_definition_terms():
    # Sphinx's viewcode "[source]" after every signature of a real page (Sphinx 5.3's Logging
    # API): 422 section path entries of the zoo's Django and Sphinx pages ended in it
    text = html_to_markdown(_page("sphinx53-extdev-logging.html.gz")).text
    assert "[source]" not in text
    assert "- sphinx.util.logging.getLogger(*name*)\n" in text
    # texi2any's "¶" after a definition term (zsh's manual, `a.copiable-anchor`; texi2any 7
    # names it `copiable-link`)
    for kind in ("copiable-anchor", "copiable-link"):
        page = (
            "<html><body><main><h2>Modules</h2><dl><dt id='index-pid'><span><tt>pid</tt>"
            f"<a href='#index-pid' class='{kind}'> &para;</a></span></dt><dd><p>The process "
            "ID of the current process.</p></dd></dl></main></body></html>"
        )
        text = html_to_markdown(page).text
        assert "¶" not in text and "The process ID of the current process." in text


def test_a_section_of_linked_signatures_is_kept():
    # Sphinx 5.3's "Utilities": the types in EventManager's signatures are links, and to
    # trafilatura's link-density test its section (the page's last) was a link list: it went
    text = html_to_markdown(_page("sphinx53-extdev-utils.html.gz")).text
    assert [h for _, _, h in headings(text)][-1] == "Utility components"
    at = text.index("## Utility components\n")
    assert text[at:].split("\n")[2:6] == [
        "- *class* sphinx.events.EventManager(*app: Sphinx*)",
        ": Event manager for Sphinx.",
        "  - add(*name: str*) → None",  # the arrow: a span trafilatura dropped as an icon
        "  : Register a custom Sphinx event.",
    ]
    assert "emit_firstresult(" in text[at:]
    # a term that is nothing but a link, or a term without an anchor, keeps its link: a table
    # of contents stays a link list (DocBook's `9.18.1. CASE`)
    page = (
        "<html><body><main><h1>Functions</h1><p>Text of the page, long enough to be content "
        "and more than a table of contents.</p><dl><dt id='f'><code>f(x: <a href='t.html'>T"
        "</a>)</code></dt><dd><p>Applies f.</p></dd><dt id='g'><a href='g.html'>9.1. G</a></dt>"
        "<dd><p>Section.</p></dd><dt><a href='h.html'>H</a> — h</dt><dd><p>Chapter.</p></dd>"
        "</dl></main></body></html>"
    )
    tree = document_fromstring(page)
    _definition_term_links_as_text(tree)
    assert [len(dt.findall(".//a")) for dt in tree.iter("dt")] == [0, 1, 1]
