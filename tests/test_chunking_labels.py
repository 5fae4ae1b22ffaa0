"""A paragraph of bold text alone at the top level (a run-in heading: SQLite's FAQ questions,
Doxygen's "Public Member Functions") heads the blocks after it, up to the next label or
heading, as a unit (real pages: SQLite 3.40's FAQ, JsonCpp 1.9.5's Json::Reader,
tests/data/README.md)."""

import gzip
import os
import re

from schemas.records import Document
from transforms.chunking.markdown import markdown_sections
from transforms.chunking.routing import ChunkingConfig, DocumentChunker
from transforms.context import path_header
from transforms.ingest.html import html_to_markdown
from transforms.token_budget import TokenBudget

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
QUESTION = re.compile(r"\*\*\((\d+)\) ")


def _chunks(name: str):
    with gzip.open(os.path.join(DATA, f"{name}.html.gz")) as f:
        e = html_to_markdown(f.read())
    budget = TokenBudget(chunk_size=192, header_reserve=34)
    doc = Document(doc_id="d", source=f"/c/{name}.html", doc_type="html", text=e.text,
                   content_hash="h", title=e.title)  # fmt: skip
    return e.text, DocumentChunker(ChunkingConfig(budget=budget)).chunk_document(doc)


def test_every_faq_question_heads_its_answer_one_line_or_two():
    text, chunks = _chunks("sqlite340-faq")
    units = [s for s in markdown_sections(text) if s.fresh]
    numbers = [int(s.path[-1][1 : s.path[-1].index(")")]) for s in units]
    assert numbers == [n for n in range(1, 29) if n != 16]  # this version has no (16)
    # The page wraps 11 questions over two source lines; the extraction writes each on one
    # line, as a browser shows it. A label over two lines is still one label:
    two_lines = [s.path[-1] for s in units if "\n" in text[s.blocks[0].start : s.blocks[0].end]]
    assert two_lines == []
    question = (
        "(17) I get some compiler warnings when I compile SQLite. Isn't this a problem? "
        "Doesn't it indicate poor code quality?"
    )
    assert question in [s.path[-1] for s in units]
    wrapped = text.replace("when I compile SQLite. Isn't", "when I compile SQLite.\nIsn't")
    assert wrapped != text
    assert question in [s.path[-1] for s in markdown_sections(wrapped) if s.fresh]
    shared = []
    for chunk in chunks:
        # a question never ends a chunk: it starts its chunk, or, when the question and
        # answer before it are small (under a quarter of the budget), follows them whole in
        # a chunk that holds its whole answer too
        for m in QUESTION.finditer(chunk.text):
            if m.start() == 0 or chunk.chunk_index == 0:
                continue
            shared.append(int(m.group(1)))
            unit = next(s for s in units if s.path[-1].startswith(f"({m.group(1)}) "))
            answer = text[unit.blocks[1].start : unit.blocks[-1].end]
            assert answer in chunk.text, chunk.text[:80]
            first = QUESTION.match(chunk.text)
            assert first is not None and int(first.group(1)) == int(m.group(1)) - 1
    assert shared == [9]  # "(8) ... limits?" is answered by a link: "See limits.html ..."


def test_an_answer_s_every_chunk_is_headed_by_its_question():
    _, chunks = _chunks("sqlite340-faq")
    # Before: (25)'s two-line question ended the chunk before, and its answer's chunk was
    # headed "faq.html > SQLite Frequently Asked Questions > Frequently Asked Questions"
    (pikchr,) = [c for c in chunks if "Each diagram is hand-written using the Pikchr" in c.text]
    assert pikchr.text.startswith("**(25) How are the syntax diagrams")
    assert pikchr.section_path[-1] == (
        '(25) How are the syntax diagrams (a.k.a. "railroad" diagrams) for SQLite generated?'
    )
    seventeen = [c for c in chunks if c.section_path[-1].startswith("(17) ")]
    assert len(seventeen) >= 2  # an answer over several chunks
    assert any("Valgrind" in c.text for c in seventeen[1:])  # not its first chunk
    for chunk in seventeen:
        assert "(17) I get some compiler warnings" in path_header(chunk)


def test_a_doxygen_summary_s_label_heads_its_list():
    _, chunks = _chunks("jsoncpp195-class-json-reader")
    members = [c for c in chunks if c.section_path[-1:] == ("Public Member Functions",)]
    assert members and members[0].text.startswith("**Public Member Functions**")
    assert "- `Reader ()`: Constructs a Reader allowing all features for parsing." in (
        members[0].text
    )
