"""DOCX and PPTX files made by real tools (pandoc, Word, PowerPoint; tests/data/office/README.md
says how), through the extraction the job runs: headings, lists, tables, code, speaker notes
and one section per slide."""

from __future__ import annotations

from pathlib import Path

from schemas.records import RawDocument
from transforms.chunking.routing import ChunkingConfig, DocumentChunker
from transforms.ingest.extraction import extract_document
from transforms.ingest.layout import page_of
from transforms.token_budget import TokenBudget

OFFICE = Path(__file__).parent / "data" / "office"


def _doc(name: str):
    return extract_document(RawDocument(name, "id", (OFFICE / name).read_bytes()), None)


def test_pandoc_docx_headings_lists_tables_and_code():
    doc = _doc("zstd-readme.docx")
    assert doc.doc_type == "docx"
    text = doc.text
    assert "\n## Benchmarks\n" in text and "\n### Dictionary compression How To:\n" in text
    # a numbered list whose items hold a command: numbered, the command inside its item
    assert (
        "1. Create the dictionary\n   zstd --train FullPathToTrainingSet/* -o dictionaryName\n"
        "2. Compress with dictionary\n"
    ) in text
    # the list ends before the next heading, which stays a heading line of its own
    assert "--decompress FILE.zst\n\n## Build instructions\n" in text
    assert "- make install : create and install zstd cli, library and man pages\n" in text
    assert "\n- VS2010 project is compatible with VS2012" not in text  # nested: indented
    assert "   - VS2010 project is compatible with VS2012, VS2013, VS2015 and VS2017.\n" in text
    assert (
        "| Compressor name | Ratio | Compression | Decompress. |\n|---|---|---|---|\n"
        "| zstd 1.5.1 -1 | 2.887 | 530 MB/s | 1700 MB/s |\n"
    ) in text
    # a code block keeps its lines, fenced
    assert "```\ngit clone https://github.com/Microsoft/vcpkg.git\ncd vcpkg\n" in text
    chunks = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=128))).chunk_document(doc)
    assert all(doc.text[c.start_char : c.end_char] == c.text for c in chunks)
    paths = {c.section_path for c in chunks}
    assert ("Build instructions", "VCPKG") in paths
    assert ("The case for Small Data compression", "Dictionary compression How To:") in paths


def test_word_made_docx_styles_become_headings_and_a_table():
    doc = _doc("pandoc-reference.docx")
    assert doc.title == "Title"
    for level in range(1, 7):
        assert f"\n{'#' * level} Heading {level}\n" in doc.text
    assert "\n###### Heading 9\n" in doc.text  # Markdown has six levels
    assert "| Table | Table |\n|---|---|\n| 1 | 2 |\n" in doc.text


def test_powerpoint_deck_slides_are_sections_with_their_speaker_notes():
    doc = _doc("pandoc-reference.pptx")
    assert doc.doc_type == "pptx" and doc.page_count == 4
    titles = ["Presentation Title", "Slide Title", "Section header", "Slide Title for Two-Content"]
    for n, title in enumerate(titles, start=1):
        assert page_of(doc.page_starts, doc.text.index(f"# {title}\n")) == n
    notes = doc.text.index("Notes: Here is a note")
    assert page_of(doc.page_starts, notes) == 1
    assert "With another paragraph." in doc.text[notes : doc.text.index("# Slide Title\n")]
    assert page_of(doc.page_starts, doc.text.index("A speaker note on this slide too.")) == 2
    assert (
        "- Some content on the left.\n" in doc.text and "- Some content on the right.\n" in doc.text
    )
    chunks = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=64))).chunk_document(doc)
    for c in chunks:
        # the chunker joins a short slide to the next (slides 3 and 4 here): a chunk's pages
        # are the slides it spans, its section one of their titles
        assert page_of(doc.page_starts, c.start_char) == c.page_start
        assert page_of(doc.page_starts, c.end_char - 1) == c.page_end
        assert c.section_path[0] in titles[c.page_start - 1 : c.page_end]


def test_pandoc_deck_one_section_and_page_per_slide_with_tables():
    doc = _doc("zstd-readme.pptx")
    assert doc.page_count == 11
    assert page_of(doc.page_starts, doc.text.index("# Benchmarks\n")) == 2
    assert page_of(doc.page_starts, doc.text.index("# License\n")) == 10
    assert "| lz4 1.9.3 | 2.101 | 740 MB/s | 4500 MB/s |\n" in doc.text
    assert "\n  - VS2010 project is compatible with VS2012" in doc.text  # a nested bullet
    chunks = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=96))).chunk_document(doc)
    titles = [doc.text[a + 2 : doc.text.index("\n", a)] for a in doc.page_starts]
    assert titles[:3] == ["Slide 1", "Benchmarks", "Slide 3"]  # untitled slides are numbered
    for c in chunks:
        assert doc.text[c.start_char : c.end_char] == c.text
        assert page_of(doc.page_starts, c.start_char) == c.page_start
        assert page_of(doc.page_starts, c.end_char - 1) == c.page_end
        assert c.section_path[0] in titles[c.page_start - 1 : c.page_end]
