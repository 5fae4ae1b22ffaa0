"""PDF, DOCX and PPTX: type detection, text and structure, the page of every chunk, rejects."""

from __future__ import annotations

import pytest

from schemas.records import RawDocument
from tests.paged.make import (
    code_pdf,
    contents_and_index_pdf,
    courier_pdf,
    image_only_pdf,
    long_pdf,
    marked_pdf,
    numeric_table_pdf,
    page_word,
    sample_docx,
    sample_pptx,
    two_column_pdf,
    words_pdf,
)
from transforms.chunking.routing import ChunkingConfig, DocumentChunker
from transforms.ingest.detect import binary_type
from transforms.ingest.extraction import ExtractError, extract_document
from transforms.ingest.layout import (
    Line,
    OutlineEntry,
    join_hyphen,
    normalise,
    outline_headings,
    page_of,
    running_lines,
)
from transforms.token_budget import TokenBudget

pytest.importorskip("reportlab")


def _extract(name: str, data: bytes):
    return extract_document(RawDocument(name, "id", data), None)


def test_binary_types_by_magic_and_by_name():
    pdf = marked_pdf(1)
    assert binary_type("x.bin", pdf) == "pdf"
    assert binary_type("x.pdf.gz", b"") == "pdf"
    assert binary_type("x", sample_docx()) == "docx"
    assert binary_type("x", sample_pptx()) == "pptx"
    assert binary_type("x.pptx.bz2", b"junk") == "pptx"
    assert binary_type("x.txt", b"plain text") is None


def test_pdf_pages_headings_and_running_lines():
    doc = _extract("m.pdf", marked_pdf(5))
    assert doc.doc_type == "pdf" and doc.page_count == 5
    assert doc.title == "Marked test document"
    assert doc.page_labels == ("iii", "iv", "v", "vi", "vii")
    for n in range(1, 6):
        assert f"# {n} Chapter number {n}\n" in doc.text
        at = doc.text.index(f"MARKERPAGE{n},")
        assert page_of(doc.page_starts, at) == n
    assert "running header" not in doc.text  # on every page at the same place: removed
    assert "example that the word" in doc.text  # exam- + ple joined: "example" occurs too


def test_every_chunk_has_the_page_of_its_markers():
    doc = _extract("m.pdf", marked_pdf(6))
    chunker = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=60)))
    chunks = chunker.chunk_document(doc)
    assert len(chunks) > 6
    for c in chunks:
        assert doc.text[c.start_char : c.end_char] == c.text
        assert c.page_start is not None and c.page_start <= c.page_end
        for n in range(1, 7):
            if f"MARKERPAGE{n}," in c.text:
                assert c.page_start <= n <= c.page_end
        assert c.page_label == ("iii", "iv", "v", "vi", "vii", "viii")[c.page_start - 1]


def test_two_columns_come_out_left_column_whole_then_right():
    from transforms.ingest.pdf import pdf_to_paged_text

    text = pdf_to_paged_text(two_column_pdf()).text
    assert text.startswith("# A title set across both columns of the page\n")
    order = [text.index(f"{side} line {k} of") for side in ("left", "right") for k in range(12)]
    assert order == sorted(order), text
    assert "prose right line" not in text  # no line of one column runs into the other
    table = pdf_to_paged_text(two_column_pdf(table=True)).text
    assert all(f"key {k} value {k}\n" in table for k in "abcdefghijkl")  # a table stays in rows


def test_contents_and_index_pages_are_left_out_and_counted():
    from transforms.ingest.pdf import pdf_to_paged_text

    paged = pdf_to_paged_text(contents_and_index_pdf())
    assert paged.removed["contents_pages"] == 1 and paged.removed["index_pages"] == 1
    assert "Contents" not in paged.text and "...." not in paged.text
    assert "Index" not in paged.text and "alpha option" not in paged.text
    for n in (2, 3, 4):  # the body pages are whole, each on its page
        assert paged.text.count(f"BODYPAGE{n}.") == 10
        assert page_of(paged.page_starts, paged.text.index(f"BODYPAGE{n}")) == n
    assert paged.page_starts[0] == paged.page_starts[1] == 0  # page 1 left out: empty


def test_a_numeric_table_on_a_front_page_is_not_taken_for_contents():
    # every row ends with a number, as a contents page's lines do, but the numbers do not go
    # up and each row holds others: it was dropped as a contents page
    from transforms.ingest.pdf import pdf_to_paged_text

    paged = pdf_to_paged_text(numeric_table_pdf())
    assert paged.removed["contents_pages"] == 0
    assert paged.text.count("TABLEROW") == 7 and "snappy TABLEROW 2.073 550 1750" in paged.text
    for n in (2, 3, 4):
        assert paged.text.count(f"BODYPAGE{n}.") == 10


def test_camlidl_title_page_version_and_numbered_list_are_not_headings():
    # samples/pdf/camlidl-1.04.doc.pdf: "Version 1.04" is set in the title's font under the
    # title; "1. Use IDispatch ..." is a numbered list item in the body font
    from pathlib import Path

    from transforms.ingest.pdf import pdf_to_paged_text

    pdf = Path(__file__).parent.parent / "samples" / "pdf" / "camlidl-1.04.doc.pdf"
    text = pdf_to_paged_text(pdf.read_bytes()).text
    assert text.startswith("# Camlidl user’s manual\n\nVersion 1.04\n")
    assert "\n1. Use IDispatch instead of IUnknown" in text
    assert "# 1. Use IDispatch" not in text
    assert (
        "\n## 1 Overview\n" in text and "\n### 6.3 Dispatch interfaces and type libraries\n" in text
    )


@pytest.mark.parametrize("chunk_size", [24, 64, 200])
def test_every_chunk_starts_on_the_page_of_its_first_character(chunk_size):
    pages = 7
    doc = _extract("w.pdf", words_pdf(pages))
    assert doc.page_count == pages and doc.page_starts is not None
    chunks = DocumentChunker(
        ChunkingConfig(budget=TokenBudget(chunk_size=chunk_size))
    ).chunk_document(doc)
    assert len(chunks) > pages
    words = [page_word(n) for n in range(1, pages + 1)]
    for c in chunks:
        assert doc.text[c.start_char : c.end_char] == c.text
        # the page whose marker word the chunk's first line carries (every line has it)
        first_line = doc.text[c.start_char : doc.text.find("\n", c.start_char)]
        line_start = doc.text.rfind("\n", 0, c.start_char) + 1
        marker = doc.text[line_start : doc.text.find("\n", c.start_char)]
        where = [n for n, w in enumerate(words, start=1) if w in marker]
        assert len(where) == 1, (first_line, marker)
        last_start = doc.text.rfind("\n", 0, max(c.start_char, c.end_char - 1)) + 1
        last = doc.text[last_start : doc.text.find("\n", c.end_char - 1)]
        end = [n for n, w in enumerate(words, start=1) if w in last]
        assert (c.page_start, c.page_end) == (where[0], end[0]), c.text


def test_a_pdf_named_pdf_gz_is_typed_pdf_after_decompression():
    # the read step decompresses (the bad-input suite runs a real paged/marked.pdf.gz); what
    # reaches extraction is the PDF's bytes under the .gz name
    doc = _extract("m.pdf.gz", marked_pdf(2))
    assert doc.doc_type == "pdf" and doc.page_count == 2


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("enc.pdf", lambda: marked_pdf(1, encrypt="secret"), "encrypted"),
        ("scan.pdf", lambda: image_only_pdf(3), "no_text_layer"),
        ("cut.pdf", lambda: marked_pdf(3)[:400], "corrupt_pdf"),
        ("bad.docx", lambda: b"PK\x03\x04 not really a zip word/", "corrupt_docx"),
        ("bad.pptx", lambda: sample_pptx()[:300], "corrupt_pptx"),
    ],
)
def test_bad_paged_files_are_rejected_with_a_reason(name, data, reason):
    with pytest.raises(ExtractError) as e:
        _extract(name, data())
    assert e.value.reason == reason
    if reason == "no_text_layer":
        assert "3 pages" in str(e.value)


def test_docx_headings_lists_tables():
    doc = _extract("w.docx", sample_docx())
    assert doc.doc_type == "docx" and doc.page_count is None and doc.page_starts is None
    assert "# Installation\n" in doc.text and "## Requirements\n" in doc.text
    assert "- Python 3.11\n- A C compiler\n" in doc.text
    assert "| Name | Value |\n|---|---|\n| alpha | 1 |" in doc.text
    chunks = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=20))).chunk_document(doc)
    assert all(c.page_start is None for c in chunks)
    assert ("Installation", "Requirements") in {c.section_path for c in chunks}


def test_pptx_slides_are_sections_and_pages_with_notes():
    doc = _extract("s.pptx", sample_pptx())
    assert doc.doc_type == "pptx" and doc.page_count == 3
    for n in range(1, 4):
        at = doc.text.index(f"# Slide title {n}\n")
        assert page_of(doc.page_starts, at) == n
        assert page_of(doc.page_starts, doc.text.index(f"Speaker notes of slide {n}")) == n
    assert "| Key | Value |" in doc.text


def test_layout_core():
    assert normalise("\ufb01nd e\ufb03cient") == "find efficient"
    assert join_hyphen("an exam-", "ple here", {"example"}) == ("an example here", "")
    assert join_hyphen("de-", "sired", set()) == ("desired", "")  # not written with a hyphen
    assert join_hyphen("self-", "contained", set(), frozenset({"self-contained"})) is None
    assert join_hyphen("self-", "contained", {"selfcontained"}, frozenset({"self-contained"}))
    pages = [
        [
            Line(p, "Manual header", 0, 10, 100, 20),
            Line(p, f"body of {'abcd'[p]}", 0, 100, 100, 110),
        ]
        + [Line(p, f"text {k}", 0, 120 + k, 100, 130 + k) for k in range(5)]
        + [Line(p, str(p + 1), 0, 800, 10, 810)]
        for p in range(4)
    ]
    running = running_lines(pages)
    assert {(p, 0) for p in range(4)} <= running  # the header
    assert {(p, 7) for p in range(4)} <= running  # the page number
    assert (0, 1) not in running


def test_running_lines_of_one_side_and_of_a_chapter_are_running():
    # Erlang/OTP's manuals (parsetools-2.4.1.pdf): the footer alternates between left and
    # right pages ("4 | Ericsson AB ..." and "Ericsson AB ... | 5"), each form on under half
    # the pages, and the head names the module of the pages under it ("yecc", then "leex")
    def page(p: int) -> list[Line]:
        head = "yecc" if p < 6 else "leex"
        footer = f"{p} | Ericsson AB." if p % 2 == 0 else f"Ericsson AB. | {p}"
        return (
            [Line(p, head, 0, 73, 30, 80, 9.0)]
            + [
                Line(
                    p,
                    f"the text of page {'abcdefghij'[p]}, line {'stuvwxyz'[k]}",
                    0,
                    120 + 12 * k,
                    400,
                    130 + 12 * k,
                    10.0,
                )
                for k in range(8)
            ]
            + [Line(p, footer, 0, 772, 300, 779, 9.0)]
        )

    pages = [page(p) for p in range(10)]
    running = running_lines(pages)
    assert {(p, 0) for p in range(10)} <= running  # "yecc" on 6 pages, "leex" on 4
    assert {(p, 9) for p in range(10)} <= running  # each footer on 5 of 10 pages, one side
    assert not any((p, i) in running for p in range(10) for i in range(1, 9))
    # a page's first line twice in a row, or a line on under half the pages: not running
    pages = [page(p) for p in range(10)]
    pages[3][0] = Line(3, "A line of its own", 0, 106, 300, 116, 9.0)
    pages[4][0] = Line(4, "A line of its own", 0, 106, 300, 116, 9.0)
    running = running_lines(pages)
    assert (3, 0) not in running and (4, 0) not in running
    # a head band that names each page's section, in a band apart from the text at the same
    # place on pages in a row ("1.1 Introduction", "1.2 Getting started"): running
    pages = [page(p) for p in range(10)]
    for p in range(10):
        pages[p][0] = Line(p, f"1.{'abcdefghij'[p]} Section {'klmnopqrst'[p]}", 0, 73, 90, 80, 9.0)
    running = running_lines(pages)
    assert {(p, 0) for p in range(10)} <= running


def test_sections_the_outline_does_not_list_are_headings_under_its_entry():
    # Erlang/OTP's manuals: the outline lists a module ("yecc"), set at 15 points; its
    # "Data Types" and "Exports", at 13.3 over a 10-point text, were text lines
    from transforms.ingest.layout import assemble

    def body(p: int, top: float) -> list[Line]:
        return [
            Line(
                p,
                f"Text line {'abcdefgh'[k]} of page {'xyz'[p]} reads on.",
                0,
                top + 12 * k,
                400,
                top + 12 * k + 10,
                10.0,
            )
            for k in range(8)
        ]

    pages = [
        [Line(0, "yecc", 0, 100, 60, 115, 15.0), *body(0, 130)],
        [Line(1, "Data Types", 0, 100, 90, 113, 13.3), *body(1, 130)],
        [Line(2, "Exports", 0, 100, 90, 113, 13.3), *body(2, 130)],
    ]
    text = assemble(pages, [OutlineEntry("yecc", 3, 0)]).text
    assert text.startswith("### yecc\n\nText line a")
    assert "\n#### Data Types\n\nText line a of page y" in text
    assert "\n#### Exports\n\nText line a of page z" in text
    # without an outline entry above them, lines set larger are not taken under one
    text = assemble(pages[1:], [OutlineEntry("Nothing here", 1, 0)]).text
    assert "#### Data Types" not in text


def test_an_outline_entry_is_the_largest_line_that_spells_it():
    # Erlang/OTP's pages carry the current section's name atop them, in the text's size
    # ("1.1 Introduction"); the heading is the same words, larger, further down
    lines = [
        Line(0, "1.1 Introduction", 0, 72, 100, 79, 9.0),
        Line(0, "1 Erlang ODBC User's Guide", 0, 152, 300, 166, 18.3),
        Line(0, "1.1 Introduction", 0, 200, 150, 213, 15.0),
        Line(0, "The text of the section.", 0, 230, 300, 240, 10.0),
    ]
    outline = [
        OutlineEntry("Erlang ODBC User's Guide", 1, 0),
        OutlineEntry("Introduction", 2, 0),
    ]
    assert outline_headings([lines], outline) == {(0, 1): (1, 1), (0, 2): (2, 1)}


def test_an_outline_entry_of_a_name_and_arity_is_the_call_it_names():
    # Erlang/OTP's outlines name functions "file/2"; the page writes the call
    lines = [
        Line(0, "Exports", 0, 100, 90, 113, 13.3),
        Line(0, "file(FileName) -> yecc_ret()", 0, 120, 300, 130, 10.0),
        Line(0, "file(Grammarfile, Options) -> yecc_ret()", 0, 140, 300, 150, 10.0),
        Line(0, "Types:", 0, 160, 300, 170, 10.0),
        Line(0, "Module:token(Cont, {a, b}, [c]) -> {more,Cont1} |", 0, 180, 400, 190, 10.0),
    ]
    outline = [
        OutlineEntry("file/2", 4, 0),
        OutlineEntry("file/1", 4, 0),
        OutlineEntry("Module:token/3", 4, 0),
        OutlineEntry("file/3", 4, 0),  # no such call: no heading
    ]
    assert outline_headings([lines], outline) == {(0, 2): (4, 1), (0, 1): (4, 1), (0, 4): (4, 1)}


def test_a_front_page_whose_lines_end_in_roman_letters_is_no_contents_page():
    # parsetools' chapter page: "1 Reference Manual", a paragraph whose line ends "Leex",
    # and the footer "... | 1" read as three lines ending in a page number
    from transforms.ingest.layout import contents_pages

    page = [
        Line(2, "1 Reference Manual", 0, 152, 300, 166, 18.3),
        Line(2, "The Parsetools application contains utilities for parsing and", 0, 193, 500, 201),
        Line(
            2, "scanning, and produces Erlang code for a parser as output. Leex", 0, 207, 500, 212
        ),
        Line(2, "is a lexical analyzer generator for Erlang, similar to lex.", 0, 217, 500, 224),
        Line(2, "Ericsson AB. All Rights Reserved.: Parse Tools | 1", 0, 772, 300, 779),
    ]
    title = [Line(p, "Parse Tools", 0, 600, 100, 620, 23.0) for p in range(2)]
    assert contents_pages([[title[0]], [title[1]], page]) == set()
    # a contents page in roman page numbers still is one
    roman = [
        Line(
            2, f"{k}. Chapter {'abcdef'[k]} {'i' * (k % 3 + 1)}", 0, 100 + 20 * k, 300, 110 + 20 * k
        )
        for k in range(1, 6)
    ]
    assert contents_pages([[title[0]], [title[1]], roman]) == {2}


def test_a_heading_under_the_outline_may_run_on_a_second_line():
    # freefem's "ADDENDUM: How to use this License for your" / "documents", set close; and
    # liboctave's "END OF TERMS AND CONDITIONS" over "How to Apply These Terms ...", a
    # line apart: two headings
    from transforms.ingest.layout import assemble

    text = [
        Line(
            0,
            f"Body text line {'abcdefghij'[k]} runs on here.",
            0,
            300 + 12 * k,
            400,
            310 + 12 * k,
            10.0,
        )
        for k in range(10)
    ]
    lines = [
        Line(0, "GNU Free Documentation License", 0, 40, 300, 58, 18.0),
        Line(0, "ADDENDUM: How to use this License for your", 0, 100, 484, 110, 14.3),
        Line(0, "documents", 0, 118, 201, 128, 14.3),
        Line(0, "END OF TERMS AND CONDITIONS", 0, 160, 369, 170, 14.3),
        Line(0, "How to Apply These Terms to Your New Programs", 0, 189, 455, 199, 14.3),
        *text,
    ]
    out = assemble([lines], [OutlineEntry("GNU Free Documentation License", 1, 0)]).text
    assert "\n## ADDENDUM: How to use this License for your documents\n" in out
    assert "\n## END OF TERMS AND CONDITIONS\n" in out
    assert "\n## How to Apply These Terms to Your New Programs\n" in out


def test_outline_headings_match_numbered_lines_and_take_a_chapter_line():
    lines = [
        Line(0, "Chapter 3", 0, 10, 100, 20),
        Line(0, "The Gory Details", 0, 30, 100, 40),
        Line(0, "3.7.4 2-Systems", 0, 50, 100, 60),
        Line(0, "tion (PDE).", 0, 70, 100, 80),
    ]
    outline = [
        OutlineEntry("The Gory Details", 1, 0),
        OutlineEntry("2-Systems", 2, 0),
        OutlineEntry("Pde()", 2, 0),  # on another page; must not take "tion (PDE)."
    ]
    assert outline_headings([lines], outline) == {(0, 0): (1, 2), (0, 2): (2, 1)}


def test_a_split_table_repeats_its_header_row_in_every_piece():
    from transforms.context.path import path_header

    rows = "".join(f"| row {i} | value number {i} of the long table |\n" for i in range(60))
    text = "# Data\n\nThe table:\n\n| Name | Value |\n|---|---|\n" + rows + "\nAfter.\n"
    doc = extract_document(RawDocument("t.md", "id", text.encode()), None)
    chunks = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=64))).chunk_document(doc)
    pieces = [c for c in chunks if "| row " in c.text]
    assert len(pieces) > 3
    for c in pieces:
        if "| Name" not in c.text:  # a later piece: cut between rows, under the header row
            assert c.text.startswith("| row ")
            assert c.table_header == "| Name | Value |"
            assert path_header(c).endswith("\n| Name | Value |")
    assert all(c.table_header is None for c in chunks if not c.text.startswith("|"))


def _cpu_spin(seconds: float) -> None:
    import time

    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _pages_then_spin(pages: int, seconds: float) -> int:
    from transforms.ingest.extraction import allow_pages

    allow_pages(pages)
    _cpu_spin(seconds)
    return pages


def test_a_long_pdf_gets_the_cpu_limit_once_per_thousand_pages():
    from transforms.ingest.extraction import CpuTimeUp, allow_pages, within_cpu_time
    from transforms.ingest.pdf import pdf_to_paged_text

    assert within_cpu_time(0.2, _pages_then_spin, 3000, 0.4) == 3000  # 0.6 s for 3,000 pages
    with pytest.raises(CpuTimeUp):
        within_cpu_time(0.2, _pages_then_spin, 900, 0.4)  # up to 1,000 pages: the flag's 0.2 s
    allow_pages(5000)  # outside within_cpu_time: nothing is set
    _cpu_spin(0.3)  # and no SIGPROF comes
    told: list[int] = []
    pdf_to_paged_text(marked_pdf(3), on_page_count=told.append)
    assert told == [3]


def test_a_long_pdf_takes_a_small_multiple_of_its_text_in_memory():
    # 300 pages of 40 lines: each line a Line of its own (floats, string, tuple) kept until
    # the text was made took 12x the text in Python objects; compact pages take under 6x
    import tracemalloc

    from transforms.ingest.pdf import pdf_to_paged_text

    data = long_pdf(300)
    pdf_to_paged_text(long_pdf(2))  # the imports and PDFium's start-up, not counted
    tracemalloc.start()
    try:
        text = pdf_to_paged_text(data).text
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text.count("the quick brown fox") >= 300 * 30
    assert peak < 8 * len(text), f"peak {peak / 1e6:.1f} MB for {len(text) / 1e6:.1f} MB of text"


def _markdown_blocks(text: str) -> list[tuple[str, str]]:
    """(block type, its markup) of every block the chunker's Markdown reader finds."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    return [(t.type, t.markup) for t in tokens if t.type.endswith("_open") or t.type == "hr"]


def test_a_bullet_on_a_line_of_its_own_heads_the_line_after_it_not_the_line_before():
    # Erlang's STDLIB, ets:info/2: PDFium puts the bullet a few points above its item's
    # text, so it is a line alone; written "- " under the line before, Markdown read that
    # line as a heading ("Indicates if the table is fixed by any process." headed 550 chunks)
    from transforms.ingest.layout import assemble

    lines = [
        Line(0, "• Item=fixed, Value=boolean()", 57.1, 645.1, 300, 652.4, 10.0),
        Line(0, "Indicates if the table is fixed by any process.", 74.9, 661.7, 400, 668.4, 10.0),
        Line(0, "•", 57.1, 678.2, 59.8, 680.9, 10.0),
        Line(0, "Item=safe_fixed, Value={FixationTime,Info}|false", 75.7, 682.2, 400, 687.9, 10.0),
        # kernel's gen_sctp: the item is code in a smaller size, a little lower
        Line(0, "•", 57.1, 700.5, 59.8, 703.2, 10.0),
        Line(0, "#sctp_send_failed{", 81.2, 712.3, 167.0, 719.7, 8.0),
    ]
    text = assemble([lines]).text
    assert "- Item=safe_fixed, Value={FixationTime,Info}|false" in text
    assert "- \\#sctp_send_failed{" in text
    assert not [b for b in _markdown_blocks(text) if b[0] == "heading_open"], text


def test_a_line_of_dashes_or_a_marker_alone_is_text_not_markdown_block_syntax():
    # STDLIB's re: the metacharacter "-" alone on a line under its neighbour's description;
    # io:fread's control sequences "+" and "1."; tools' profiler output, a row of dashes;
    # a bulleted "*" (tools' operators)
    from transforms.ingest.layout import assemble

    rows = ["Negate the class, but only if the first character", "-",
            "Indicates character range", "+", "Like #, but prints lowercase letters.", "1.",
            "It localizes a set of alternatives.", "----- --- ------- ------------",
            "FUNCTION CALLS % TIME", "***", "• *", "• # not a heading", "- 1.", "="]  # fmt: skip
    lines = [Line(0, row, 72, 100 + 12 * i, 400, 110 + 12 * i, 10.0) for i, row in enumerate(rows)]
    text = assemble([lines]).text
    blocks = _markdown_blocks(text)
    assert all(
        kind in ("paragraph_open", "bullet_list_open", "list_item_open") for kind, _ in blocks
    )
    assert [m for kind, m in blocks if kind == "list_item_open"] == ["-", "-", "-"], text
    assert "\n\\-\n" in text and "\n1\\.\n" in text and "- \\# not a heading" in text


def test_monospaced_lines_set_apart_are_a_fenced_block_with_their_indentation():
    text = _extract("code.pdf", code_pdf()).text
    assert "```\ndef add(a, b):\n    return a + b\nprint(add(1, 2))\n```" in text, text
    # a name in code at the end of a prose line, and a term over its description, stay text
    assert "the name of the helper is add_numbers" in text
    assert "\nbadarg\nIf an argument is of the wrong type." in text, text
    assert text.count("```") == 2


def test_a_double_spaced_code_example_has_no_blank_lines():
    # freefem's examples: a line number in the text's font, the code double-spaced
    from transforms.ingest.layout import assemble

    code = [Line(0, f"{k} border(1,0,{k},20)", 121, 300 + 20 * k, 300, 308 + 20 * k, 10.0, False,
                 True) for k in range(1, 4)]  # fmt: skip
    lines = [Line(0, "For example", 143, 270, 250, 278, 10.0), *code,
             Line(0, "triangulates the unit square.", 126, 400, 400, 408, 10.0)]  # fmt: skip
    text = assemble([lines]).text
    assert "```\n1 border(1,0,1,20)\n2 border(1,0,2,20)\n3 border(1,0,3,20)\n```" in text, text


def test_code_that_runs_onto_the_next_page_is_one_block():
    # Erlang's tools: a type spec set in DejaVuSansMono across a page break (290 of 3,526
    # page breaks of 38 Debian PDFs fell inside a block, each closed and opened again)
    from transforms.ingest.layout import assemble, page_of

    def code(page: int, rows: list[tuple[float, str]]) -> list[Line]:
        return [Line(page, text, x, 600 + 12 * k, x + 6 * len(text), 610 + 12 * k, 10.0,
                     False, True) for k, (x, text) in enumerate(rows)]  # fmt: skip

    rows = [(72, "analyse_answer() ="), (96, "{ok, OutFile :: file:filename()} |")]
    first = [Line(0, "The type of an answer:", 72, 580, 300, 590, 10.0), *code(0, rows)]
    second = [*code(1, [(96, "{error, analyse_rsn()}"), (72, "analyse_file_option() =")]),
              Line(1, "It is returned by analyse_to_file/1.", 72, 700, 400, 710, 10.0)]  # fmt: skip
    paged = assemble([first, second])
    block = (
        "```\nanalyse_answer() =\n    {ok, OutFile :: file:filename()} |\n"
        "    {error, analyse_rsn()}\nanalyse_file_option() =\n```"
    )
    assert block in paged.text, paged.text
    assert paged.text.count("```") == 2
    # the second page starts at its first line, inside the block
    at = paged.text.index("    {error, analyse_rsn()}")
    assert page_of(paged.page_starts, at) == 2
    assert page_of(paged.page_starts, at - 5) == 1
    # an even page set 14 points further right (Erlang's PDFs: margins of 64 and 78 points)
    shifted = [ln._replace(x0=ln.x0 + 14, x1=ln.x1 + 14) for ln in second]
    assert block in assemble([first, shifted]).text
    # code further left on the next page is a block of its own
    moved = [Line(1, ln.text, ln.x0 - 50, ln.top, ln.x1 - 50, ln.bottom, 10.0, False, True)
             for ln in second[:2]]  # fmt: skip
    assert assemble([first, moved]).text.count("```") == 4


def test_a_call_heading_whose_signature_runs_on_takes_its_indented_lines():
    # Erlang's cprof: the outline names "analyse/0"; the page sets "analyse() ->" and its
    # return type on two indented lines in the same monospaced font
    lines = [
        Line(0, "Exports", 58, 326, 110, 336, 13.3),
        Line(0, "analyse() ->", 57.3, 358.4, 120, 364.2, 10.0, False, True),
        Line(0, "{AllCallCount :: integer() >= 0,", 124, 368.4, 300, 377.7, 10.0, False, True),
        Line(
            0,
            "ModAnalysisList :: mod_analysis_list()}",
            129.4,
            380.4,
            320,
            389.7,
            10.0,
            False,
            True,
        ),
        Line(0, "analyse(Limit) ->", 57.3, 396.9, 140, 402.7, 10.0, False, True),
        Line(0, "{AllCallCount :: integer() >= 0,", 124, 406.9, 300, 416.2, 10.0, False, True),
        Line(
            0,
            "ModAnalysisList :: mod_analysis_list()}",
            129.4,
            418.9,
            320,
            428.2,
            10.0,
            False,
            True,
        ),
        Line(0, "Collects and analyses the call counters.", 72, 440, 400, 450, 10.0),
    ]
    outline = [OutlineEntry("analyse/0", 4, 0), OutlineEntry("analyse/1", 4, 0)]
    assert outline_headings([lines], outline) == {(0, 1): (4, 3), (0, 4): (4, 3)}
    from transforms.ingest.layout import assemble

    text = assemble([lines], outline).text
    assert "#### analyse() -> {AllCallCount :: integer() >= 0, ModAnalysisList" in text, text


@pytest.mark.parametrize(
    ("font", "mono"),
    [("CMTT10", True), ("CMSLTT10", True), ("ABCDEF+CMTT9", True), ("t1xbtt", True),
     ("EAAAAA+DejaVuSansMono", True), ("WTLJKX+FreeMono", True), ("Courier-Bold", True),
     ("CMR10", False), ("CMSSBX10", False), ("NimbusRomNo9L-Regu", False), ("t1xr", False),
     ("EAAAAB+DejaVuSans", False), ("Times-Roman", False)],
)  # fmt: skip
def test_monospaced_fonts_are_known_by_name(font: str, mono: bool) -> None:
    # names seen in Debian's PDFs: TeX's typewriter faces and their slanted and bold cuts
    # (liboctave's CMSLTT10, t1xbtt), the FreeMono and DejaVu families, Courier
    from transforms.ingest.pdf import _MONO_FONT

    assert bool(_MONO_FONT.search(font)) is mono


def test_a_document_typeset_in_a_monospaced_font_has_no_code_blocks():
    # a text file printed to PDF: every line is Courier, so none is code set apart
    text = _extract("memo.pdf", courier_pdf()).text
    assert "```" not in text
    assert "Line 3 of paragraph 0 of a memo typed in Courier.\n\nLine 0 of paragraph 1" in text


def test_bulleted_names_in_code_are_list_items_and_an_unmapped_bullet_is_a_bullet():
    # Erlang's lcnt: "• debug" and "• distribution", the names in a monospaced font; gnuplot's
    # LaTeX bullets come out of PDFium as U+0088, a control character
    from transforms.ingest.layout import assemble

    rows = ["• debug", "• distribution", "• generic"]
    lines = [Line(0, "Valid categories are:", 72, 90, 300, 100, 10.0)]
    lines += [Line(0, row, 72, 110 + 12 * k, 200, 120 + 12 * k, 10.0, False, True)
              for k, row in enumerate(rows)]  # fmt: skip
    lines.append(Line(0, "\x88 New coordinate system (Degrees, Minutes, Seconds).", 72, 160,
                      400, 170, 10.0))  # fmt: skip
    text = assemble([lines]).text
    assert "```" not in text
    assert "- debug\n- distribution\n- generic\n" in text, text
    assert "- New coordinate system" in text and "\x88" not in text


def test_a_call_heading_with_a_bracket_open_takes_its_line_wrapped_at_its_own_edge():
    # Erlang's et: "report_event(...) -> {ok," wraps to "Continuation} | exit(Reason)" at the
    # heading's own left edge; the next call starts there too and is a heading of its own
    lines = [
        Line(0, "report_event(Handle, DetailLevel, FromTo, Label, Contents) -> {ok,", 58.5,
             130.8, 400, 137.9, 10.0, False, True),
        Line(0, "Continuation} | exit(Reason)", 57.4, 140.8, 200, 149.8, 10.0, False, True),
        Line(0, "report_event(Handle, DetailLevel, From, To, Label, Contents) -> {ok,", 58.5,
             157.3, 400, 164.4, 10.0, False, True),
        Line(0, "Continuation} | exit(Reason)", 57.4, 167.3, 200, 176.3, 10.0, False, True),
        Line(0, "Types:", 56.9, 182.6, 90, 189.3, 10.0),
    ]  # fmt: skip
    outline = [OutlineEntry("report_event/5", 4, 0), OutlineEntry("report_event/6", 4, 0)]
    assert outline_headings([lines], outline) == {(0, 0): (4, 2), (0, 2): (4, 2)}
