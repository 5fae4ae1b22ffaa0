"""MarkdownChunker: section paths, whole blocks, fallbacks, and the shared chunk invariants."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval.chunk_structure import ChunkStructure
from transforms.chunking.base import ChunkSpan
from transforms.chunking.markdown import (
    MarkdownChunker,
    front_matter_end,
    headings,
    markdown_sections,
    without_html_comments,
    without_link_definitions,
)
from transforms.chunking.recursive import RecursiveChunker

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "markdown"
DATA = Path(__file__).resolve().parents[1] / "data"


def words(n: int, seed: str = "w") -> str:
    """`n` distinct short words (about one token each)."""
    return " ".join(f"{seed}{i}" for i in range(n))


def check_invariants(tok, text: str, chunks: list[ChunkSpan], chunk_size: int) -> None:
    covered = [0] * (len(text) + 1)
    for c in chunks:
        assert 0 <= c.start < c.end <= len(text)
        piece = text[c.start : c.end]
        assert piece.strip(), "whitespace-only chunk"
        assert c.token_count == tok.count(piece) <= chunk_size
        assert c.strategy == "markdown"
        covered[c.start] += 1
        covered[c.end] -= 1
    depth = 0
    for i, ch in enumerate(text):
        depth += covered[i]
        assert depth > 0 or ch.isspace(), f"character {i} ({ch!r}) is in no chunk"


def containing(chunks: list[ChunkSpan], start: int, end: int) -> list[ChunkSpan]:
    return [c for c in chunks if c.start <= start and end <= c.end]


# --- section paths ------------------------------------------------------------------------------


def test_nested_heading_paths(cl100k) -> None:
    body = words(30)
    text = f"# A\n\n{body}\n\n## B\n\n{body}\n\n### C\n\n{body}\n\n## D\n\n{body}\n"
    chunks = MarkdownChunker(cl100k, 40).chunk(text)
    check_invariants(cl100k, text, chunks, 40)
    by_heading = {}
    for heading in ("# A", "## B", "### C", "## D"):
        at = text.index(f"{heading}\n")
        (chunk,) = containing(chunks, at, at + len(heading))
        assert chunk.start == at, "a heading starts its section's first chunk"
        by_heading[heading] = chunk.section_path
    assert by_heading == {
        "# A": ("A",),
        "## B": ("A", "B"),
        "### C": ("A", "B", "C"),
        "## D": ("A", "D"),
    }


def test_setext_headings_and_plain_heading_text() -> None:
    text = "Guide\n=====\n\nintro\n\nInstall `pip`\n---\n\n### [Debian](http://x) *12*\n\nx\n"
    paths = [s.path for s in markdown_sections(text)]
    assert paths == [("Guide",), ("Guide", "Install pip"), ("Guide", "Install pip", "Debian 12")]


def test_a_myst_target_starts_the_section_of_its_heading(cl100k) -> None:
    # pip 24.0's docs/html/topics/vcs-support.md (tests/data/README.md): `(editable-vcs-installs)=`
    # names the heading under it; it ended the chunk before, a dangling label in its text.
    text = gzip.decompress((DATA / "pip24-vcs-support.md.gz").read_bytes()).decode()
    label = text.index("(editable-vcs-installs)=")
    heading = text.index("## Editable VCS installs")
    chunker = MarkdownChunker(cl100k, 160, 32)
    chunks = chunker.chunk(text)
    check_invariants(cl100k, text, chunks, 160)
    (first,) = [c for c in chunks if c.start <= label < c.end]
    assert first.start == label and first.end > heading
    assert first.section_path[-1] == "Editable VCS installs"
    assert not any(
        c.end <= heading and text[c.start : c.end].rstrip().endswith(")=") for c in chunks
    )
    # a line like it inside a paragraph is text, not a target: it stays in its section
    inline = "# A\n\nSee this\n(not-a-label)=\nline.\n\n## B\n\nbody\n"
    spans = MarkdownChunker(cl100k, 10).chunk(inline)
    at = inline.index("(not-a-label)")
    assert [c.section_path for c in spans if c.start <= at < c.end] == [("A",)]


def test_text_before_first_heading_has_empty_path(cl100k) -> None:
    # neither part is small (under a quarter of the chunk size), so neither joins the other
    text = f"{words(20)}\n\n# Title\n\n{words(20, 'v')}\n"
    chunks = MarkdownChunker(cl100k, 128).chunk(text)
    assert [c.section_path for c in chunks] == [(), ("Title",)]


# PostgreSQL's reference pages: the title and its purpose line are a section of their own, at
# the level of the sections after it; alone they were a chunk of 10 to 20 tokens.
PG_TITLE = "## DROP TABLE\n\nDROP TABLE — remove a table\n\n"
PG_SYNOPSIS = "## Synopsis\n\nDROP TABLE [ IF EXISTS ] name [, ...] [ CASCADE | RESTRICT ]\n\n"


def test_small_title_section_goes_on_into_the_next_sections(cl100k) -> None:
    description = f"## Description\n\nDROP TABLE removes tables from the database. {words(30)}\n"
    text = PG_TITLE + PG_SYNOPSIS + description
    chunker = MarkdownChunker(cl100k, 128)
    assert cl100k.count((PG_TITLE + PG_SYNOPSIS).strip()) < chunker.small_chunk_tokens
    chunks = chunker.chunk(text)
    check_invariants(cl100k, text, chunks, 128)
    assert [(c.start, c.end) for c in chunks] == [(0, len(text.rstrip()))]
    assert chunks[0].section_path == ("Description",)


def test_small_chunk_leads_the_first_piece_of_a_large_block(cl100k) -> None:
    text = f"## VACUUM\n\nVACUUM — garbage-collect a database\n\n## Synopsis\n\n{words(120)}\n"
    chunks = MarkdownChunker(cl100k, 80).chunk(text)
    check_invariants(cl100k, text, chunks, 80)
    assert chunks[0].start == 0 and "w0 w1" in text[chunks[0].start : chunks[0].end]
    assert chunks[0].section_path == ("Synopsis",)


def test_small_chunk_stays_alone_rather_than_cut_a_block_that_fits(cl100k) -> None:
    section_z, section_b = f"## Z\n\n{words(30, 'z')}", f"## B\n\n{words(29)}"
    text = f"{section_z}\n\n## A\n\nshort\n\n{section_b}\n"
    assert cl100k.count(section_b) <= 64 < cl100k.count(f"## A\n\nshort\n\n{section_b}")
    assert cl100k.count(f"{section_z}\n\n## A\n\nshort") > 64
    chunks = MarkdownChunker(cl100k, 64).chunk(text)
    check_invariants(cl100k, text, chunks, 64)
    assert [text[c.start : c.end] for c in chunks] == [section_z, "## A\n\nshort", section_b]


def test_small_document_lead_leads_the_first_piece_of_a_block_that_fits_alone(cl100k) -> None:
    """The document's first chunk, a title and its purpose line, does not stand alone: it
    leads the first piece of the block after it even where that block fits a chunk alone
    (PostgreSQL's 13-token "CREATE TRIGGER — define a new trigger" before its synopsis)."""
    title = "# CREATE TRIGGER\n\nCREATE TRIGGER — define a new trigger"
    synopsis = "## Synopsis\n\n```\n" + "\n".join(f"CREATE TRIGGER t{i} ON x" for i in range(7))
    text = f"{title}\n\n{synopsis}\n```\n\n## Description\n\n{words(20)}\n"
    assert cl100k.count(synopsis + "\n```") <= 64 < cl100k.count(f"{title}\n\n{synopsis}\n```")
    chunks = MarkdownChunker(cl100k, 64, 8).chunk(text)
    check_invariants(cl100k, text, chunks, 64)
    first = text[chunks[0].start : chunks[0].end]
    assert first.startswith(title) and "CREATE TRIGGER t0 ON x" in first
    assert all(c.token_count > 20 for c in chunks)


def test_document_opening_goes_on_with_the_first_paragraphs_of_the_next_section(cl100k) -> None:
    """The document's first chunk (a title, its purpose line and a synopsis) goes on with the
    heading and first paragraphs of the next section while they fit, as LangChain's first
    chunk does: the Description's first sentence (what the page is for) shares the chunk of
    the title and purpose line. Later sections still start their own chunk."""
    title = "# ALTER THING\n\nALTER THING — change the definition of a thing"
    synopsis = "## Synopsis\n\n```\nALTER THING name RENAME TO new_name\n```"
    first = "`ALTER THING` changes the definition of a thing."
    text = (
        f"{title}\n\n{synopsis}\n\n## Description\n\n{first}\n\n{words(30)}\n\n"
        f"{words(30, 'v')}\n\n## Parameters\n\n{words(12, 'p')}\n\n{words(40, 'q')}\n\n"
        f"## Notes\n\n{words(30, 'n')}\n"
    )
    chunks = MarkdownChunker(cl100k, 80, 8).chunk(text)
    check_invariants(cl100k, text, chunks, 80)
    opening = text[chunks[0].start : chunks[0].end]
    assert opening.startswith(title) and opening.endswith(first)
    assert chunks[0].section_path == ("ALTER THING", "Synopsis, Description")
    # the rest of the Description is named by it; Parameters is not cut to fill a chunk
    assert text[chunks[1].start :].startswith(words(30)) and chunks[1].section_path == (
        "ALTER THING",
        "Description",
    )
    assert any(text[c.start :].startswith("## Parameters") for c in chunks)
    assert not any("## Parameters" in text[c.start + 1 : c.end] for c in chunks)


def test_small_last_chunk_joins_the_one_before(cl100k) -> None:
    text = f"## A\n\n{words(15)}\n\n## B\n\n{words(15, 'v')}\n\n## C\n\nlast words\n"
    chunks = MarkdownChunker(cl100k, 80).chunk(text)
    check_invariants(cl100k, text, chunks, 80)
    assert [text[c.start : c.start + 4] for c in chunks] == ["## A", "## B"]
    assert text[chunks[-1].start : chunks[-1].end].endswith("last words")
    assert chunks[-1].section_path == ("B",)


def test_crlf_offsets_match_markdown_it_lines(cl100k) -> None:
    text = "# A\r\n\r\npara one\r\n\r\n## B\r\n\r\n```\r\ncode\r\n```\r\n\r\ntail\r"
    sections = markdown_sections(text)
    assert [s.path for s in sections] == [("A",), ("A", "B")]
    fence = sections[1].blocks[1]
    assert text[fence.start : fence.end] == "```\r\ncode\r\n```"
    check_invariants(cl100k, text, MarkdownChunker(cl100k, 8).chunk(text), 8)


# --- atomic blocks ------------------------------------------------------------------------------


def test_fitting_code_fence_is_never_split(cl100k) -> None:
    # The fence has blank lines inside: the recursive splitter's natural cut is in the middle.
    fence = "```python\n" + "\n\n".join(f"x{i} = {i}" for i in range(20)) + "\n```"
    text = f"# Code\n\n{words(40)}\n\n{fence}\n\n{words(10, 'z')}\n"
    size = cl100k.count(fence) + 5
    start = text.index(fence)
    recursive = RecursiveChunker(cl100k, size).chunk(text)
    assert not containing(recursive, start, start + len(fence)), "the test must cross a boundary"
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    assert containing(chunks, start, start + len(fence))


def test_fitting_table_is_never_split(cl100k) -> None:
    rows = "\n".join(f"| r{i} | {words(3, f'c{i}_')} |" for i in range(12))
    table = f"| key | value |\n|---|---|\n{rows}"
    text = f"# T\n\n{words(50)}\n\n{table}\n\n{words(30, 'z')}\n"
    size = cl100k.count(table) + 5
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    start = text.index(table)
    assert containing(chunks, start, start + len(table))


def test_list_items_stay_whole_when_the_list_does_not_fit(cl100k) -> None:
    items = [f"- item {i}\n\n  {words(25, f'i{i}_')}\n\n  {words(15, f'j{i}_')}" for i in range(6)]
    listing = "\n".join(items)
    text = f"# L\n\n{listing}\n"
    size = max(cl100k.count(item) for item in items) + 10
    assert cl100k.count(listing) > size
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    for item in items:
        start = text.index(item)
        assert containing(chunks, start, start + len(item)), item[:10]


def test_a_whole_list_stays_in_one_chunk_when_it_fits(cl100k) -> None:
    listing = "\n".join(f"- {words(5, f'i{i}_')}" for i in range(8))
    text = f"# L\n\n{words(60)}\n\n{listing}\n"
    size = cl100k.count(listing) + 5
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    start = text.index(listing)
    assert containing(chunks, start, start + len(listing))


@pytest.mark.parametrize("overlap", [0, 10])
def test_oversized_code_block_is_cut_only_between_lines(cl100k, overlap: int) -> None:
    # "):\n" is one cl100k token: cuts snapped to token boundaries would fall mid-line here.
    body = "\n".join(f"def f{i}(x):\n    return g{i}(x, {i})\n" for i in range(60))
    fence = f"```python\n{body}\n```"
    text = f"# Big\n\nSome text.\n\n{fence}\n\nAfter.\n"
    size = 64
    chunks = MarkdownChunker(cl100k, size, overlap).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    f0, f1 = text.index(fence), text.index(fence) + len(fence)
    inside = [c for c in chunks if c.start < f1 and c.end > f0]
    assert len(inside) > 3
    for c in inside:
        if f0 < c.start < f1:
            assert text[c.start - 1] == "\n", repr(text[c.start - 10 : c.start + 10])
        if f0 < c.end < f1:
            assert text[c.end] == "\n", repr(text[c.end - 10 : c.end + 10])
    if overlap:
        assert any(a.end > b.start for a, b in itertools.pairwise(inside))


def test_an_oversized_code_block_is_cut_after_a_blank_line_near_the_budget(cl100k) -> None:
    # functions of five lines, a blank line between them: pieces end after a whole function
    # where that keeps three quarters of the budget (before: after as many lines as fit, in
    # the middle of a function)
    def function(i: int) -> str:
        return "\n".join(
            [f"def f{i}(x):", *(f"    y{k} = g{k}(x, {i})" for k in range(3)), "    return y0"]
        )

    body = "\n\n".join(function(i) for i in range(30))
    fence = f"```python\n{body}\n```"
    size = 3 * cl100k.count(function(0)) + 12  # three functions and most of a fourth
    chunks = MarkdownChunker(cl100k, size, 0).chunk(fence)
    check_invariants(cl100k, fence, chunks, size)
    assert len(chunks) > 5
    for c in chunks[:-1]:
        assert fence[c.start : c.end].endswith("    return y0"), fence[c.end - 30 : c.end + 5]
    # a block without blank lines is packed as before: lines as fit
    dense = f"```\n{body.replace(chr(10) * 2, chr(10))}\n```"
    chunks = MarkdownChunker(cl100k, size, 0).chunk(dense)
    assert not dense[chunks[0].start : chunks[0].end].endswith("    return y0")


def test_oversized_paragraph_keeps_its_heading_in_the_first_piece(cl100k) -> None:
    para = " ".join(f"Sentence {words(8, f's{i}_')}." for i in range(40))
    text = f"# Intro\n\n## Long one\n\n{para}\n"
    chunks = MarkdownChunker(cl100k, 50).chunk(text)
    check_invariants(cl100k, text, chunks, 50)
    first = next(c for c in chunks if c.section_path == ("Intro", "Long one"))
    # the bare "# Intro" is small: it leads the first piece too
    assert text[first.start :].startswith("# Intro\n\n## Long one\n\nSentence")
    assert all(c.section_path == ("Intro", "Long one") for c in chunks[1:])


@pytest.mark.parametrize("kind", ["list", "code"])
def test_a_heading_leads_a_block_that_fits_alone_but_not_with_it(cl100k, kind: str) -> None:
    # Node's `#### eventTarget.addEventListener(type, listener[, options])` and its parameter
    # list, PostgreSQL's `## Synopsis` and its code block: the block fit a chunk alone but
    # not with the heading, and the heading stood alone, a chunk of the question's words
    # ranked above the one that answers it (issue 25). Like a label, it leads the first piece.
    size = 60
    heading = "#### `eventTarget.addEventListener(type, listener[, options])`"
    lines = []
    while True:
        line = f"* `option{len(lines)}` {{boolean}} {words(1, f'w{len(lines)}_')}"
        body = "\n".join([*lines, line])
        block = f"```\n{body}\n```" if kind == "code" else body
        if cl100k.count(block) > size:
            break
        lines.append(line)
    block = "\n".join(lines)
    block = f"```\n{block}\n```" if kind == "code" else block
    text = f"# Events\n\nIntro: {words(12)}.\n\n{heading}\n\n{block}\n"  # not a small lead
    assert cl100k.count(block) <= size < cl100k.count(f"{heading}\n\n{block}")
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    texts = [text[c.start : c.end] for c in chunks]
    assert heading not in [t.strip() for t in texts]
    (first,) = [t for t in texts if t.startswith(heading)]
    assert "option0" in first


def test_a_single_overlong_line_of_code_is_still_cut(cl100k) -> None:
    fence = "```\n" + "x" * 5000 + "\n```"
    chunks = MarkdownChunker(cl100k, 32, 4).chunk(fence)
    check_invariants(cl100k, fence, chunks, 32)


# --- merging sections ---------------------------------------------------------------------------


def test_small_sibling_sections_are_merged(cl100k) -> None:
    text = "# A\n\nintro\n\n## B\n\nbee\n\n### C\n\nsee\n\n## D\n\ndee\n"
    chunks = MarkdownChunker(cl100k, 512).chunk(text)
    # the path is their common prefix, then the merged siblings' headings (issue 25)
    assert [(c.start, c.end, c.section_path) for c in chunks] == [(0, len(text) - 1, ("A", "B, D"))]


def test_merged_path_is_the_common_prefix(cl100k) -> None:
    b_and_subsections = f"## B\n\n{words(40)}\n\n### C\n\nsee\n\n### E\n\ne"
    text = f"# A\n\n{words(30, 'a')}\n\n{b_and_subsections}\n\n## D\n\ndee\n"
    size = cl100k.count(b_and_subsections) + 2
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    # B, C and E share a chunk under their common prefix, which names C and E; D does not
    # fit beside them.
    assert [c.section_path for c in chunks] == [("A",), ("A", "B", "C, E"), ("A", "D")]
    assert text[chunks[1].start : chunks[1].end] == b_and_subsections
    # With room for D too, the chunk's path shrinks to what B, C, E and D have in common,
    # then names the siblings under it.
    chunks = MarkdownChunker(cl100k, size + 10).chunk(text)
    assert [c.section_path for c in chunks] == [("A",), ("A", "B, D")]
    assert text[chunks[1].start : chunks[1].end] == b_and_subsections + "\n\n## D\n\ndee"


def test_sections_under_different_top_headings_are_not_merged(cl100k) -> None:
    x, y, z = words(40, "x"), words(40, "y"), words(40, "z")  # none small at 256
    text = f"# A\n\n{x}\n\n# B\n\n{y}\n\n## B1\n\n{z}\n"
    chunks = MarkdownChunker(cl100k, 256).chunk(text)
    assert [c.section_path for c in chunks] == [("A",), ("B",)]


def test_no_tiny_chunks_when_sections_fit_together(cl100k) -> None:
    sections = "\n\n".join(f"## S{i}\n\n{words(5, f's{i}_')}" for i in range(30))
    text = f"# Doc\n\n{sections}\n"
    size = 100
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    # Each chunk is full up to less than one section (about 20 tokens) short of the budget.
    assert all(c.token_count > size - 25 for c in chunks[:-1])
    for chunk in chunks[1:]:  # under "Doc", then the sections the chunk holds
        doc, names = chunk.section_path
        assert doc == "Doc" and all(
            text.index(f"## {n}\n") >= chunk.start for n in names.split(", ")
        )


# --- unmapped text ------------------------------------------------------------------------------


def test_front_matter_and_link_definitions_are_kept(cl100k) -> None:
    text = "---\ntitle: Hello\ntags: [a]\n---\n\n# Real\n\nSee [x].\n\n[x]: https://example.com\n"
    assert front_matter_end(text) == text.index("\n\n# Real")
    sections = markdown_sections(text)
    assert [s.path for s in sections] == [(), ("Real",)]
    for size in (8, 512):
        chunks = MarkdownChunker(cl100k, size).chunk(text)
        check_invariants(cl100k, text, chunks, size)
        assert all("title" not in c.section_path for c in chunks)


def test_empty_and_whitespace_documents(cl100k) -> None:
    assert MarkdownChunker(cl100k, 16).chunk("") == []
    assert MarkdownChunker(cl100k, 16).chunk(" \n\n\t") == []


# --- properties ---------------------------------------------------------------------------------

_chars = st.characters(blacklist_categories=("Cs",))
_word = st.text(_chars, min_size=1, max_size=12) | st.text("abcdefé中🙂", min_size=60, max_size=200)
_line = st.lists(_word, min_size=1, max_size=12).map(" ".join)


@st.composite
def markdown_documents(draw: st.DrawFn) -> str:
    passage = draw(_line)  # repeated verbatim below: offsets must not come from str.find
    block = st.one_of(
        st.tuples(st.integers(1, 6), _line).map(lambda t: "#" * t[0] + " " + t[1]),
        st.tuples(_line, st.sampled_from("=-")).map(lambda t: f"{t[0]}\n{t[1] * 3}"),
        st.lists(_line, min_size=1, max_size=6).map("\n".join),
        st.lists(_line, max_size=8).map(lambda ls: "```py\n" + "\n".join(ls) + "\n```"),
        st.lists(_line, max_size=5).map(lambda ls: "\n".join("    " + x for x in ls)),
        st.lists(_line, min_size=1, max_size=6).map(lambda ls: "\n".join(f"- {x}" for x in ls)),
        st.lists(_line, min_size=1, max_size=4).map(lambda ls: "\n".join(f"> {x}" for x in ls)),
        st.lists(_word, min_size=1, max_size=4).map(
            lambda ws: "| a | b |\n|---|---|\n" + "\n".join(f"| {w} | {w} |" for w in ws)
        ),
        st.just(f"[ref]: https://example.com/{len(passage)}"),
        st.just(passage),
        # lead-ins: a paragraph ending with a colon goes on with the block after it
        st.lists(_line, min_size=1, max_size=3).map(lambda ls: "\n".join(ls) + ":"),
        # bold labels alone on their line: a unit's head (a FAQ question, a man page's
        # option), or a label of nothing when a label or heading follows
        (_word | st.from_regex(r"--?[a-z][a-z-]{0,12}", fullmatch=True)).map(lambda w: f"**{w}**"),
        # definitions as the HTML extraction writes them (a term, ": " and its description,
        # nested ones indented): units the chunker keeps whole or cuts with the term in path
        st.lists(
            st.tuples(_line, st.lists(_line, min_size=1, max_size=4), st.booleans()),
            min_size=1,
            max_size=4,
        ).map(
            lambda ds: "\n".join(
                f"- {term}\n: "
                + "\n  ".join(body)
                + (f"\n  - {body[0]}\n  : {term}" if nest else "")
                for term, body, nest in ds
            )
        ),
    )
    blocks = draw(st.lists(block, min_size=1, max_size=14))
    if draw(st.booleans()):
        blocks.insert(0, "---\nkey: value\n---")
    seps = draw(
        st.lists(st.sampled_from(["\n\n", "\n", "\r\n\r\n", "\n\n\n", "\n  \n"]), min_size=1)
    )
    return "".join(b + seps[i % len(seps)] for i, b in enumerate(blocks))


@given(text=markdown_documents(), chunk_size=st.integers(16, 300), data=st.data())
def test_property_invariants(cl100k, text: str, chunk_size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(0, chunk_size // 2 - 1) | st.just(0))
    chunker = MarkdownChunker(cl100k, chunk_size, overlap)
    chunks = chunker.chunk(text)
    check_invariants(cl100k, text, chunks, chunk_size)
    assert chunker.chunk(text) == chunks
    doc = cl100k.tokenize(text)
    for span in chunker.split(doc):
        assert doc.count(span.start, span.end) <= chunk_size


@given(text=st.text(_chars, max_size=600), chunk_size=st.integers(16, 300))
def test_property_arbitrary_text(cl100k, text: str, chunk_size: int) -> None:
    chunks = MarkdownChunker(cl100k, chunk_size).chunk(text)
    check_invariants(cl100k, text, chunks, chunk_size)


# --- real documents -----------------------------------------------------------------------------


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="no samples/markdown")
@pytest.mark.parametrize("size", [64, 512])
def test_real_markdown_files(cl100k, size: int) -> None:
    files = sorted(SAMPLES.glob("*.md"))
    if not files:
        pytest.skip("no Markdown samples")
    for path in files:
        text = path.read_text(encoding="utf-8")
        chunks = MarkdownChunker(cl100k, size).chunk(text)
        check_invariants(cl100k, text, chunks, size)
        # Every fenced code block that fits the budget lies whole in one chunk.
        for section in markdown_sections(text):
            for b in section.blocks:
                fenced = text.startswith(("```", "~~~"), b.start)
                if fenced and cl100k.count(text[b.start : b.end]) <= size - 2:
                    assert containing(chunks, b.start, b.end), (path.name, b)
        first_heading = next(s.blocks[0].start for s in markdown_sections(text) if s.path)
        assert all(c.section_path for c in chunks if c.start >= first_heading), path.name


@pytest.mark.parametrize(
    ("text", "size"),
    [
        # A heading that fits only without its trailing blank line, before an oversized paragraph.
        ("# 0 0𐀀𐀀𐀀 " + "aé🙂" * 20 + "\n\n" + "0:0\x810𐀀0 " + "baé🙂" * 15 + "\n\n", 62),
        # An indented continuation line: keeping indentation must not revive a blank span.
        ("- 0 0 0 0 0 0 0\n\n    0\n\n", 16),
    ],
)
def test_found_by_hypothesis(cl100k, text: str, size: int) -> None:
    chunker = MarkdownChunker(cl100k, size)
    check_invariants(cl100k, text, chunker.chunk(text), size)
    doc = cl100k.tokenize(text)
    assert all(doc.count(s.start, s.end) <= size for s in chunker.split(doc))


# --- HTML comments ------------------------------------------------------------------------------


def test_html_comment_blocks_of_a_real_api_page_are_removed() -> None:
    # Node.js's path.md: each method's history in a `<!-- YAML ... -->` block
    text = (SAMPLES / "node-path.md").read_text(encoding="utf-8")
    assert text.count("<!-- YAML") == 15
    out = without_html_comments(text)
    assert "<!--" not in out and "added: v0.1.25" not in out
    assert "## `path.basename(path[, suffix])`\n\n* `path` {string}" in out
    # everything else is kept, byte for byte
    assert out.count("```") == text.count("```")
    assert [s.path for s in markdown_sections(out)] == [s.path for s in markdown_sections(text)]


def test_only_blocks_that_are_comments_and_nothing_else_go() -> None:
    text = (
        "a\n\n<!-- x -->\n\nb\n\n```\n<!-- in code -->\n\n\n```\n\n"
        "para <!-- inline --> text\n\n<!-- a --> text <!-- b -->\n\n<!-- one --><!-- two -->\n"
    )
    assert without_html_comments(text) == (
        "a\n\nb\n\n```\n<!-- in code -->\n\n\n```\n\n"
        "para <!-- inline --> text\n\n<!-- a --> text <!-- b -->\n\n"
    )
    assert without_html_comments("no comment\n") == "no comment\n"


# --- link reference definitions -------------------------------------------------------------


def test_link_definitions_of_a_real_api_page_are_removed() -> None:
    # Node.js's intl.md ends with 25 `[label]: url` lines: rendered to nothing
    text = (SAMPLES / "node-intl.md").read_text(encoding="utf-8")
    first = text.index('["ICU Data"]: http')
    out = without_link_definitions(text)
    assert out == text[:first]  # the block and nothing else, the blank line before it kept
    assert "[btest402][]: Generally used" in out  # a list item that starts like one stays
    assert headings(out) == headings(text)


def test_a_block_that_a_heading_links_through_stays() -> None:
    # qs's README: its title is `# qs <sup>[![Version Badge][npm-version-svg]][package-url]</sup>`
    text = (SAMPLES / "qs-README.md").read_text(encoding="utf-8")
    assert "[package-url]: https://npmjs.org/package/qs" in text
    assert without_link_definitions(text) == text
    assert headings(text)[0] == (4, 1, "qs")
    # a keep-a-changelog heading links through its definition; the other run goes
    text = "## [1.0.0] - 2017\n\nFirst.\n\n[1.0.0]: https://x/1.0.0\n\nSee.\n\n[a]: b\n"
    assert without_link_definitions(text) == text.removesuffix("[a]: b\n")


def test_only_definitions_at_the_top_level_go() -> None:
    text = (
        "a [x] and [y]\n\n[x]: https://x\n[y]: https://y 'title'\n\nb\n\n"
        "- item\n\n  [z]: https://z\n\n> [q]: https://q\n\n```\n[c]: in code\n```\n"
    )
    assert without_link_definitions(text) == (
        "a [x] and [y]\n\nb\n\n- item\n\n  [z]: https://z\n\n> [q]: https://q\n\n"
        "```\n[c]: in code\n```\n"
    )
    assert without_link_definitions("no [definition]: here\n") == "no [definition]: here\n"


def test_a_bold_label_goes_with_the_block_after_it(cl100k) -> None:
    # SQLite's lang_transaction.html: "**begin-stmt:**" and the statement's syntax after it; a
    # heading inside a definition or a Doxygen summary's "**Public Member Functions**" the same
    first = f"## Transaction\n\n{words(35)}"
    label = "**begin-stmt:**"
    block = f"BEGIN DEFERRED IMMEDIATE EXCLUSIVE TRANSACTION {words(40, 'v')}"
    text = f"{first}\n\n{label}\n\n{block}\n"
    chunker = MarkdownChunker(cl100k, 100)
    assert cl100k.count(f"{first}\n\n{label}") <= 100  # the label fits after the first block
    chunks = chunker.chunk(text)
    check_invariants(cl100k, text, chunks, 100)
    # before: the first chunk ended with the label, the block started the second
    assert [text[c.start : c.end] for c in chunks] == [first, f"{label}\n\n{block}"]
    # a label that fits with its block where it is stays where it is
    short = f"{first}\n\n{label}\n\nBEGIN TRANSACTION\n"
    assert len(chunker.chunk(short)) == 1
    # a block too large for a chunk: the label shares its first piece, as a heading does
    large = f"{first}\n\n{label}\n\n{words(200, 'v')}\n"
    chunks = chunker.chunk(large)
    check_invariants(cl100k, large, chunks, 100)
    assert large[chunks[1].start :].startswith(f"{label}\n\nv0 v1")


def test_labels_of_nothing_are_content_not_chunks(cl100k) -> None:
    # SQLite's lang_transaction.html: each statement's syntax diagram is an image, so the
    # labels above them are all that is left of the section
    labels = "**begin-stmt:**\n\n**commit-stmt:**\n\n**rollback-stmt:**"
    text = f"# 1. Transaction Control Syntax\n\n{labels}\n\n# 2. Transactions\n\n{words(30)}\n"
    chunks = MarkdownChunker(cl100k, 192).chunk(text)
    check_invariants(cl100k, text, chunks, 192)
    # Before: "# 1. ... **begin-stmt:**" and "**commit-stmt:**" were chunks of their own (5
    # tokens: "How do I commit the current transaction?" ranked the second first), the third
    # label led the next section's chunk
    assert [(c.start, c.end) for c in chunks] == [(0, len(text) - 1)]
    # the labels head nothing: the chunk is named by the section whose content it holds
    assert chunks[0].section_path == ("2. Transactions",)
    # a label whose blocks are definitions heads them (Texinfo's "**Arguments**"): its unit
    # still starts a chunk, named by it
    options = "\n".join(f"- `-{c}`\n: {words(12, c)}" for c in "abc")
    text = f"## Invoking gettext\n\n{words(30)}\n\n**Arguments**\n\n{options}\n"
    chunks = MarkdownChunker(cl100k, 100).chunk(text)
    check_invariants(cl100k, text, chunks, 100)
    assert text[chunks[1].start :].startswith("**Arguments**\n\n- `-a`")
    assert chunks[1].section_path[:2] == ("Invoking gettext", "Arguments")


def test_small_label_units_go_on_together(cl100k) -> None:
    # groff's man pages (gettext's msgattrib(1)): each option a bold name and one line, a
    # label's unit each; every unit was a chunk of its own (13 tokens on average, 52 of the
    # zoo's 95 chunks under a tenth of the budget)
    options = [f"**--option{i}**\n\nkeep {words(5, f'o{i}')} messages" for i in range(12)]
    text = "# MSGATTRIB\n\n## OPTIONS\n\n" + "\n\n".join(options) + "\n"
    chunks = MarkdownChunker(cl100k, 192).chunk(text)
    check_invariants(cl100k, text, chunks, 192)
    assert len(chunks) < 6
    assert all(c.token_count >= 192 // 4 for c in chunks[:-1])
    # every chunk starts with an option and names those it holds
    assert all(text[c.start :].startswith("**--option") for c in chunks[1:])
    assert chunks[1].section_path[:2] == ("MSGATTRIB", "OPTIONS")
    assert chunks[1].section_path[2].startswith("--option")
    assert ", --option" in chunks[1].section_path[2]
    # units that are not small (a FAQ's questions and answers) each start a chunk still
    faq = "\n\n".join(f"**({i}) Question {i}?**\n\n{words(40, f'a{i}')}" for i in range(3))
    text = f"# Frequently Asked Questions\n\n{faq}\n"
    chunks = MarkdownChunker(cl100k, 192).chunk(text)
    check_invariants(cl100k, text, chunks, 192)
    assert [text[c.start :].split("\n", 1)[0] for c in chunks] == [
        "# Frequently Asked Questions",
        "**(1) Question 1?**",
        "**(2) Question 2?**",
    ]
    # and a small tail of a unit cut in pieces does not go on into the next unit
    long_unit = f"**(0) Long?**\n\n{words(120, 'p')}\n\n{words(130, 'q')}\n\n{words(8, 't')}"
    short, last = f"**(1) Short?**\n\n{words(6, 's')}", f"**(2) Last?**\n\n{words(60, 'z')}"
    text = f"# FAQ\n\n{long_unit}\n\n{short}\n\n{last}\n"
    chunks = MarkdownChunker(cl100k, 192).chunk(text)
    check_invariants(cl100k, text, chunks, 192)
    # the tail "t0 ... t7" ends its chunk; the small unit after it opens the next (and, being
    # small and whole, takes the unit after it)
    assert text[: chunks[-1].start].rstrip().endswith("t5 t6 t7")
    assert text[chunks[-1].start :].startswith("**(1) Short?**")


def test_a_small_last_chunk_joined_to_the_one_before_keeps_its_sections_names(cl100k) -> None:
    # groff's man pages end with COPYRIGHT, then SEE ALSO, whose last paragraph follows a bold
    # label ("**info msgattrib**"): the document's small last chunk joined the chunk before
    # and the joined chunk was named by SEE ALSO alone
    text = (
        f"# MSGATTRIB\n\n## COPYRIGHT\n\n{words(40, 'c')}\n\n## SEE ALSO\n\n"
        "The full documentation is maintained as a Texinfo manual; the command\n\n"
        "**info msgattrib**\n\nshould give you access to the complete manual.\n"
    )
    chunks = MarkdownChunker(cl100k, 192).chunk(text)
    check_invariants(cl100k, text, chunks, 192)
    assert len(chunks) == 1
    assert chunks[0].section_path == ("MSGATTRIB", "COPYRIGHT, SEE ALSO")


def test_chunks_inside_a_section_keep_its_path_after_a_small_lead_went_on_into_it(cl100k) -> None:
    paragraphs = "\n\n".join(
        f"NOTIFY sends a notification event. {words(40, f'p{i}')}" for i in range(4)
    )
    text = (
        "# NOTIFY\n\nNOTIFY — generate a notification\n\n## Synopsis\n\nNOTIFY channel\n\n"
        f"## Description\n\n{paragraphs}\n"
    )
    chunks = MarkdownChunker(cl100k, 80).chunk(text)
    check_invariants(cl100k, text, chunks, 80)
    assert len(chunks) >= 3
    # the first chunk carries the small title and synopsis on into the Description; every
    # later chunk lies wholly inside the Description and is named for it
    assert chunks[0].start == 0
    assert [c.section_path for c in chunks[1:]] == [("NOTIFY", "Description")] * (len(chunks) - 1)


# --- headings that head what follows, pieces of a definition ------------------------------------


def test_no_chunk_ends_with_a_heading_whose_sections_follow(cl100k) -> None:
    text = f"# Guide\n\n{words(20, 'a')}\n\n## Parameters\n\n### alpha\n\n{words(30, 'b')}\n"
    chunks = MarkdownChunker(cl100k, 100).chunk(text)
    check_invariants(cl100k, text, chunks, 100)
    # Before: "## Parameters" ended the first chunk, its section named in that chunk's path,
    # and the chunk holding what it heads began without it.
    assert [text[c.start : c.end].splitlines()[-1] for c in chunks] == [
        words(20, "a"),
        words(30, "b"),
    ]
    assert text[chunks[1].start :].startswith("## Parameters\n\n### alpha")
    assert [c.section_path for c in chunks] == [("Guide",), ("Guide", "Parameters", "alpha")]


def test_a_heading_before_its_sibling_with_content_goes_with_it(cl100k) -> None:
    # Doxygen: "Member Function Documentation" and each member are all <h2>
    text = (
        f"# Json::Path Class Reference\n\n{words(20, 'a')}\n\n"
        f"## Member Function Documentation\n\n## make()\n\n{words(30, 'b')}\n"
    )
    chunks = MarkdownChunker(cl100k, 100).chunk(text)
    check_invariants(cl100k, text, chunks, 100)
    assert len(chunks) == 2
    assert text[chunks[1].start :].startswith("## Member Function Documentation\n\n## make()")
    # a heading alone is not named among the chunk's sections: what it heads is
    assert chunks[1].section_path == ("Json::Path Class Reference", "make()")


def test_headings_that_head_nothing_are_content(cl100k) -> None:
    # rustdoc's implementors (std::ops::Shr, whose page keeps no heading above them): one <h3>
    # each, nothing under them. They are content; holding back each chunk's last one, as a
    # heading of what follows, gave 35-token chunks.
    text = "\n\n".join(f"### impl Shr<u{i}> for T{i}" for i in range(120))
    chunks = MarkdownChunker(cl100k, 192).chunk(text)
    check_invariants(cl100k, text, chunks, 192)
    assert all(c.token_count >= 192 // 4 for c in chunks[:-1])


@pytest.mark.parametrize(
    "page",
    [
        "sphinx53-websupport-api.html.gz",  # a class too large for a chunk, "## Methods" after it
        "sphinx53-extdev-utils.html.gz",
        "postgresql15-sql-set.html.gz",  # "TIME ZONE", a long parameter, "## Notes" after it
        "postgresql15-runtime-config-statistics.html.gz",
        "jsoncpp195-class-json-char-reader-builder.html.gz",
    ],
)
@pytest.mark.parametrize("size", [128, 192])
def test_pieces_of_a_definition_keep_its_term_and_headings_go_with_their_sections(
    cl100k, page: str, size: int
) -> None:
    from eval.chunk_structure import chunk_structure
    from transforms.ingest.html import html_to_markdown

    with gzip.open(DATA / page, "rt", encoding="utf-8") as f:
        text = html_to_markdown(f.read()).text
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    found = chunk_structure(text, [(c.start, c.end, c.section_path) for c in chunks])
    # Before: 8 chunks of these pages ended with a heading whose content began the next
    # chunk, and 7 pieces of definitions lost their term ("Parameters, Notes" for the end of
    # SET's "TIME ZONE"; "The WebSupport Class" for the end of that class).
    assert (found.heading_at_end, found.piece_without_term) == (0, 0)


@pytest.mark.parametrize(
    ("page", "heading", "first"),
    [
        # a release's heading, then a section whose first item fits only alone
        ("erlang25-kernel-notes-cut.html.gz", "### 1.4 Kernel 8.5", "#### Fixed Bugs"),
        # a heading of one parameter's definition that fits a chunk only alone
        ("postgresql15-runtime-config-resource.html.gz", "### 20.4.2. Disk", "- `temp_file_limit`"),
        # a release's heading, a bold label and an item too long for a chunk
        ("scrapy28-news-cut.html.gz", "## Scrapy 2.6.2 (2022-07-25)", "**Security bug fix:**"),
    ],
)
def test_headings_of_what_follows_lead_its_first_piece_at_the_jobs_budget(
    cl100k, page: str, heading: str, first: str
) -> None:
    from eval.chunk_structure import chunk_structure
    from transforms.ingest.html import html_to_markdown
    from transforms.token_budget import TokenBudget, header_reserve

    # the job's defaults: --chunk_size 192 less the path header's room, the default overlap
    budget = TokenBudget.from_flags(192, None, "cl100k_base", header_reserve("path", 32, 64))
    with gzip.open(DATA / page, "rt", encoding="utf-8") as f:
        text = html_to_markdown(f.read()).text
    chunks = MarkdownChunker(cl100k, budget.body_size, budget.chunk_overlap).chunk(text)
    check_invariants(cl100k, text, chunks, budget.body_size)
    found = chunk_structure(text, [(c.start, c.end, c.section_path) for c in chunks])
    # Before: the heading ended the chunk before (Erlang's, PostgreSQL's: the chunk could
    # not take it with the block after it, which fits a chunk alone) or stood alone
    # (Scrapy's: the label after it started a chunk of its own)
    assert found.heading_at_end == 0
    assert text.count(heading) == 1
    at = text.index(heading)
    opened = [c for c in chunks if c.start == at]
    assert len(opened) == 1 and not [c for c in chunks if c.start < at < c.end]
    piece = text[opened[0].start : opened[0].end]
    assert first in piece and piece.strip() != heading


def _job_chunks(cl100k, page: str) -> tuple[str, list[ChunkSpan]]:
    """A real page's text and its chunks at the job's defaults (--chunk_size 192 less the path
    header's room, the default overlap)."""
    from transforms.ingest.html import html_to_markdown
    from transforms.token_budget import TokenBudget, header_reserve

    budget = TokenBudget.from_flags(192, None, "cl100k_base", header_reserve("path", 32, 64))
    with gzip.open(DATA / page, "rt", encoding="utf-8") as f:
        text = html_to_markdown(f.read()).text
    chunks = MarkdownChunker(cl100k, budget.body_size, budget.chunk_overlap).chunk(text)
    check_invariants(cl100k, text, chunks, budget.body_size)
    return text, chunks


def _held_together(cl100k, page: str, opening: str, first: str) -> ChunkStructure:
    """The structure counts of a real page's chunks at the job's budget, once asserted that
    the one chunk holding the first `opening` holds `first` after it."""
    from eval.chunk_structure import chunk_structure

    text, chunks = _job_chunks(cl100k, page)
    at = text.index(opening)
    holding = [c for c in chunks if c.start <= at < c.end]
    assert len(holding) == 1
    assert first in text[at : holding[0].end]
    return chunk_structure(text, [(c.start, c.end, c.section_path) for c in chunks])


@pytest.mark.parametrize(
    ("page", "lead_in", "first"),
    [
        # a paragraph before a code block of its section
        (
            "sphinx53-usage-restructuredtext-basics.html.gz",
            "The handling of the `::` marker is smart:",
            "- If it occurs as a paragraph of its own",
        ),
        # a paragraph before the definitions below its section
        (
            "postgresql15-sql-set.html.gz",
            "can only be adjusted using the `SET` command or that have a special syntax:",
            "- `SCHEMA`",
        ),
        # a heading and its lead-in alone, before the definitions below them
        (
            "erlang25-statem.html.gz",
            "The `gen_statem` behaviour supports two **callback modes**:",
            "- **`state_functions`**",
        ),
    ],
)
def test_a_lead_in_goes_on_with_what_it_introduces_at_the_jobs_budget(
    cl100k, page: str, lead_in: str, first: str
) -> None:
    # Before: the chunk ended with the lead-in, and what it introduces began the next one
    found = _held_together(cl100k, page, lead_in, first)
    assert (found.heading_at_end, found.piece_without_term) == (0, 0)
    if "statem" not in page:  # its other lead-ins end chunks where their blocks fit only alone
        assert found.lead_in_at_end == 0


def test_a_lead_in_between_two_lists_of_definitions_opens_the_chunk_of_the_second(
    cl100k,
) -> None:
    # PostgreSQL's client applications: options, then "dropdb also accepts the following
    # command-line arguments for connection parameters:", then more options
    def option(name: str) -> str:
        words = " ".join(f"{name} sets value {i}." for i in range(6))
        return f"- `--{name}`\n: {words}"

    lead_in = "dropdb also accepts the following command-line arguments for connection:"
    first = "\n".join(option(n) for n in ("echo", "force", "interactive"))
    second = "\n".join(option(n) for n in ("host", "port", "username"))
    text = f"# dropdb\n\n## Options\n\n{first}\n\n{lead_in}\n\n{second}\n"
    size = cl100k.count(f"## Options\n\n{first}\n\n{lead_in}") + 4
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    at = text.index(lead_in)
    # the chunk that holds the lead-in goes on into the first option it introduces, and is
    # named by that option (before: the lead-in ended the chunk of the first list)
    (holding,) = [c for c in chunks if c.start <= at < c.end]
    assert holding.start == at
    assert "- `--host`" in text[holding.start : holding.end]
    assert holding.section_path[-1].startswith("--host")


@pytest.mark.parametrize(
    ("page", "heading", "first"),
    [
        # the opening filled with the next section, whose lead-in then went on with its list
        (
            "click81-parameters.html.gz",
            "## Differences",
            "Arguments can do less than options. The following features",
        ),
        ("attrs222-names.html.gz", "## TL;DR", "We recommend our modern APIs for new code:"),
        ("rust163-std-io-seek.html.gz", "## Examples", "`File`s implement `Seek`:"),
        # a small chunk carried into the section grew past small with the heading, and the
        # section's first paragraph did not fit after it
        (
            "django32-ref-templates-language.html.gz",
            "## Accessing method calls",
            "Most method calls attached to objects",
        ),
    ],
)
def test_no_chunk_ends_with_a_heading_whose_text_starts_the_next(
    cl100k, page: str, heading: str, first: str
) -> None:
    # Before (config_version 80): the chunk ended with the heading, and its first paragraph
    # began the next chunk
    assert _held_together(cl100k, page, heading + "\n", first).heading_at_end == 0


def test_a_functions_signatures_go_on_with_its_description(cl100k) -> None:
    """Erlang's gen_sctp writes open/0, open/1 (twice) and open/2 as four `<h4>` signatures,
    the first three of nothing, then one description. The signatures of nothing were held
    only as the last of a run (a heading before a sibling heading of nothing heads nothing,
    as rustdoc's implementations), and a run of headings too large to be small no longer
    went on into what it heads: at config_version 83 the first two were a chunk of headings
    alone, the description's chunk started at open(Opts). Now the run of sibling headings
    goes on with the sibling whose content ends it."""
    text, chunks = _job_chunks(cl100k, "erlang25-kernel-gen-sctp.html.gz")
    first = text.index("#### open() -> {ok, Socket}")
    (holding,) = [c for c in chunks if c.start <= first < c.end]
    piece = text[holding.start : holding.end]
    assert "#### open(Port, Opts) -> " in piece and "Types\n\nOpts = [Opt]" in piece
    assert holding.start == first  # the chunk before ends with the previous function
    headings_alone = [
        c
        for c in chunks
        if all(line.startswith("#") for line in text[c.start : c.end].split("\n") if line)
    ]
    # two type specifications of 150 tokens each, as headings: over half a chunk, alone
    assert len(headings_alone) == 2


def test_a_chunk_that_ends_before_a_heading_is_not_named_by_it(cl100k) -> None:
    # Django's "## Accessing method calls" goes on with its first paragraph (above); the chunk
    # before it held nothing of that section, and was still named by it at config_version 85
    # ("Automatic HTML escaping, Accessing method calls")
    text, chunks = _job_chunks(cl100k, "django32-ref-templates-language.html.gz")
    at = text.index("## Accessing method calls\n")
    (before,) = [c for c in chunks if c.end <= at < c.end + 3]
    assert not any("Accessing method calls" in entry for entry in before.section_path)
    assert before.section_path[-1] == "String literals and automatic escaping"


def test_a_lead_in_does_not_cut_a_block_that_fits_a_chunk_alone(cl100k) -> None:
    code = "```\n" + "\n".join(f"line_{i} = compute({i})" for i in range(40)) + "\n```"
    lead_in = "For example, here is what the generated module holds:"
    size = cl100k.count(code) + 2
    words = " ".join(["Some words of text."] * (size // 15))
    text = f"# Title\n\n{words}\n\n{lead_in}\n\n{code}\n\nMore {words}\n"
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    # the code fits a chunk alone but not after its lead-in: it stays whole, and the lead-in
    # stays with the text before it (a chunk of the lead-in alone would say nothing)
    code_at = text.index("```")
    assert containing(chunks, code_at, code_at + len(code))
    lead = text.index(lead_in)
    assert [c for c in chunks if c.start <= text.index(words) and lead < c.end]
    # with room for both, the lead-in goes on with the code instead of ending the chunk before
    size = cl100k.count(f"{lead_in}\n\n{code}") + 2
    text = f"# Title\n\n{words}\n\n{lead_in}\n\n{code}\n"
    chunks = MarkdownChunker(cl100k, size).chunk(text)
    check_invariants(cl100k, text, chunks, size)
    assert [c for c in chunks if c.start == text.index(lead_in) and c.end == len(text.rstrip())]


@pytest.mark.parametrize(
    ("page", "term", "words"),
    [
        # a heading, then a parameter whose description is one line too long for a chunk
        (
            "postgresql15-runtime-config-resource.html.gz",
            "- `shared_buffers` (`integer`)",
            "Sets the amount of memory the database server uses for shared memory buffers.",
        ),
        ("sphinx53-usage-configuration.html.gz", "- language", "The code for the language"),
    ],
)
def test_a_definition_cut_in_pieces_has_its_description_in_its_first(
    cl100k, page: str, term: str, words: str
) -> None:
    from eval.chunk_structure import chunk_structure

    text, chunks = _job_chunks(cl100k, page)
    at = text.index(term)
    first = next(c for c in chunks if c.start <= at < c.end)
    # Before: the first piece ended with the term line (its description, one line too
    # long for what the heading left of the chunk, began the next)
    assert words in text[first.start : first.end]
    found = chunk_structure(text, [(c.start, c.end, c.section_path) for c in chunks])
    assert (found.heading_at_end, found.piece_without_term, found.term_at_end) == (0, 0, 0)


def test_a_heading_of_sections_leads_the_first_piece_of_a_block_it_cannot_precede_whole(
    cl100k,
) -> None:
    # Flask's API page: "## Message Flashing" holds nothing but the definition of `flash`,
    # which fits a chunk alone but not after it. Before: the heading was a chunk of its own.
    body = f"{words(23, 'b')}\n\n  {words(23, 'c')}"
    text = f"# API\n\n{words(48, 'a')}\n\n## Message Flashing\n\n- flash(message)\n: {body}\n"
    chunks = MarkdownChunker(cl100k, 100).chunk(text)
    check_invariants(cl100k, text, chunks, 100)
    definition = text.index("- flash(message)")
    assert cl100k.count(text[definition:].strip()) <= 100  # it fits alone, not after the heading
    assert not [c for c in chunks if text[c.start : c.end].strip() == "## Message Flashing"]
    second = next(c for c in chunks if c.start > 0)
    assert text[second.start :].startswith("## Message Flashing\n\n- flash(message)")
