"""Definitions (a <dt> and its <dd>) as units: written as a Markdown definition, kept whole by
the chunker when they fit, their term in the section path and the header (issue 25, item 3;
real pages: Sphinx 5.3's logging API, git 2.39's web--browse, tests/data/README.md)."""

import gzip
import os

from schemas.records import Document
from transforms.chunking.markdown import markdown_sections
from transforms.chunking.routing import ChunkingConfig, DocumentChunker
from transforms.context.path import path_header
from transforms.ingest.definitions import MARKERS, definitions
from transforms.ingest.html import html_to_markdown
from transforms.token_budget import TokenBudget

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
LOGGING = "sphinx53-extdev-logging"
ADAPTER = "class sphinx.util.logging.SphinxLoggerAdapter(logging.LoggerAdapter)"
WARNING = "warning(msg, *args, **kwargs)"


def _extraction(name: str):
    with gzip.open(os.path.join(DATA, f"{name}.html.gz")) as f:
        return html_to_markdown(f.read())


def _chunks(name: str, chunk_size: int = 192, header_reserve: int = 32):
    e = _extraction(name)
    budget = TokenBudget(chunk_size=chunk_size, header_reserve=header_reserve, chunk_overlap=8)
    config = ChunkingConfig(budget=budget)
    doc = Document(
        doc_id="d", source=f"html/{name}.html", doc_type="html", text=e.text,
        content_hash="h", title=e.title,
    )  # fmt: skip
    return e.text, DocumentChunker(config).chunk_document(doc)


def test_a_term_and_its_description_are_one_definition_in_the_text():
    text = _extraction("git239-web--browse").text
    # Before: "- -b <browser>", "- --browser=<browser>" and "- Use the specified..." were
    # three list items, nothing saying that the third describes the first two.
    assert (
        "- -b <browser>\n  --browser=<browser>\n"
        ": Use the specified browser. It must be in the list of supported browsers.\n"
        "- -t <browser>\n  --tool=<browser>\n: Same as above.\n"
    ) in text
    assert not any(m in text for m in MARKERS)
    terms = [d.term for d in definitions(text)]
    assert terms == ["-b <browser>", "-t <browser>", "-c <conf.var>"]


def test_a_description_s_blocks_are_indented_under_its_term():
    text = _extraction(LOGGING).text
    (adapter,) = [d for d in definitions(text) if d.term.startswith("*class*")]
    nested = [d.term for d in adapter.parts]
    assert nested == [
        "warning(*msg*, **args*, ***kwargs*)",
        "debug(*msg*, **args*, ***kwargs*)",
    ]
    warning = adapter.parts[0]
    assert [d.term for d in warning.parts] == [
        "**type**, ***subtype***",
        "**location**",
        "**color**",
    ]
    # the code block of the description stays a code block, indented with it
    assert "    : Where the warning happened." in text[warning.start : warning.end]
    assert "      ```\n      logger = sphinx.util.logging.getLogger(__name__)\n" in text


def test_a_definition_s_term_is_the_last_entry_of_its_section_path():
    text = _extraction(LOGGING).text
    paths = [s.path for s in markdown_sections(text) if s.definition is not None]
    assert ("Logging API", "sphinx.util.logging.getLogger(name)") in paths
    assert ("Logging API", ADAPTER) in paths


def test_a_definition_that_fits_is_one_chunk_headed_by_its_term():
    text, chunks = _chunks("git239-web--browse")
    (chunk,) = [c for c in chunks if "Use the specified browser" in c.text]
    # Before: the options were list items of the OPTIONS section, path (..., "OPTIONS")
    start = text.index("- -b <browser>")
    end = text.index("\n- -t <browser>")
    assert chunk.start_char <= start and chunk.end_char >= end
    text, chunks = _chunks(LOGGING)
    (chunk,) = [c for c in chunks if c.text.startswith("- debug(")]
    assert chunk.section_path == ("Logging API", ADAPTER, "debug(msg, *args, **kwargs)")
    assert "Where the message emitted." in chunk.text  # its description, whole
    assert path_header(chunk) == (  # the terms named without their parameter lists
        f"{LOGGING}.html > Logging API > class sphinx.util.logging.SphinxLoggerAdapter(…)"
        " > debug(…)"
    )


def test_a_definition_too_large_is_cut_inside_it_with_its_term_in_every_piece():
    text, chunks = _chunks(LOGGING, chunk_size=96, header_reserve=16)
    (adapter,) = [d for d in definitions(text) if d.term.startswith("*class*")]
    warning = adapter.parts[0]
    inside = [c for c in chunks if warning.start <= c.start_char < warning.end]
    assert len(inside) >= 3
    assert inside[0].text.startswith("- warning(")  # its first piece starts a chunk
    for chunk in inside:
        assert chunk.section_path[:3] == ("Logging API", ADAPTER, WARNING), chunk.text[:60]
    location = [c for c in inside if c.text.startswith("- **location**")]
    assert location and location[0].section_path[-1] == "location"


def test_lists_that_are_not_definitions_stay_lists():
    text = "- a\n- b\n  - c\n  - Parameters\n  : the parameters\n- d\n: e\n\n- f\n  g\n"
    found = definitions(text)
    assert [d.term for d in found] == ["d"]  # "b" has no description of its own
    assert text[found[0].start : found[0].end] == "- d\n: e"
    # the terms are those at the indentation the range starts with
    assert [p.term for p in definitions(text, text.index("  - c"))] == ["Parameters"]


def test_terms_whose_description_was_lost_are_no_definition():
    from transforms.ingest.definitions import BODY, END, TERM, definitions_as_units

    # trafilatura dropped the <dd>: the text after the term is not read as more terms
    marked = (
        f"- {TERM}alpha()\nA paragraph after the list.\n\n- {TERM}beta()\n- {BODY}Does b.{END}\n"
    )
    text = definitions_as_units(marked)
    assert text == "- alpha()\nA paragraph after the list.\n\n- beta()\n: Does b.\n"
    assert [d.term for d in definitions(text)] == ["beta()"]


def test_a_term_of_two_lines_stays_one_term():
    from transforms.ingest.definitions import BODY, END, TERM, definitions_as_units

    # DocBook's <dt>WORK<br>TRANSACTION</dt> (PostgreSQL's ABORT page), as trafilatura writes it
    marked = f"- {TERM}`WORK`\n`TRANSACTION`\n- {BODY} Optional key words. {END}\n"
    text = definitions_as_units(marked)
    assert text == "- `WORK`\n  `TRANSACTION`\n: Optional key words.\n"
    assert [d.term for d in definitions(text)] == ["`WORK`"]


def test_a_chunk_of_sibling_definitions_names_them_in_its_path():
    # Two small sibling definitions share a chunk: its path was their common prefix,
    # ("Logging API",), so no header named them (issue 25); now it lists their terms.
    _, chunks = _chunks(LOGGING)
    (chunk,) = [c for c in chunks if c.text.startswith("- sphinx.util.logging.pending_logging(")]
    assert "- sphinx.util.logging.pending_warnings()" in chunk.text
    pending = (  # (three since Sphinx's "[source]" links left the terms, one's room freed)
        "sphinx.util.logging.pending_logging(), sphinx.util.logging.pending_warnings(), "
        "sphinx.util.logging.prefixed_warnings()"
    )
    assert chunk.section_path == ("Logging API", pending)
    assert path_header(chunk) == f"{LOGGING}.html > Logging API > {pending}"


def test_a_term_that_reads_as_block_syntax_is_escaped_at_its_start():
    from transforms.chunking.markdown import definition_term
    from transforms.ingest.definitions import term_as_text

    # git's option "--" (a real page): written "- --", it was a thematic break to a Markdown
    # reader, the term gone and its description a paragraph after a rule
    text = _extraction("git239-reset").text
    assert "- \\--\n: Do not interpret any more arguments as options.\n" in text
    found = {definition_term(d): d for d in definitions(text)}
    assert "--" in found  # the term is read as its text, "--"
    start = text.index("- \\--")
    assert found["--"].start == start
    # the first term after the item's "- ", a later one on the item's next line
    for term, first, later in [
        ("-", "\\-", "\\-"),  # an empty nested item; a setext underline
        ("=", "=", "\\="),  # text after "- "; an underline below the term above
        ("# comment", "\\# comment", "\\# comment"),
        ("> x", "\\> x", "\\> x"),
        # zsh's reply codes "1." to "5." after "- ": an empty ordered list (which cannot
        # interrupt a paragraph: on a later line it is text)
        ("1.", "1\\.", "1."),
        ("***", "\\***", "\\***"),
    ]:
        assert (term_as_text(term, first=True), term_as_text(term, first=False)) == (first, later)
    # what reads as its text is left as it is: no escape in the text that is embedded
    for term in ["-q, --quiet", "*class* click.Path(*exists=False*)", "<object>", "2023", "__x"]:
        assert term_as_text(term, first=True) == term_as_text(term, first=False) == term
