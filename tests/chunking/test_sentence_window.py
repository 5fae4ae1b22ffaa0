"""SentenceWindowChunker: sentences to embed, each with its window as the parent chunk."""

import itertools
from pathlib import Path

from schemas.records import Document, content_hash
from transforms.chunking.routing import ChunkingConfig, DocumentChunker
from transforms.chunking.sentence_window import (
    MIN_SENTENCE_TOKENS,
    WINDOW,
    SentenceWindowChunker,
)
from transforms.token_budget import TokenBudget

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "markdown" / "node-path.md"


def test_sentences_cover_the_text_within_the_budget(cl100k) -> None:
    text = SAMPLE.read_text(encoding="utf-8")
    chunker = SentenceWindowChunker(cl100k, 64)
    spans = chunker.chunk(text)
    covered = [False] * len(text)
    for a, b in itertools.pairwise(spans):
        assert a.end <= b.start  # in order, no overlap
    for s in spans:
        assert s.token_count == cl100k.count(text[s.start : s.end]) <= 64
        covered[s.start : s.end] = [True] * (s.end - s.start)
    assert all(c or ch.isspace() for c, ch in zip(covered, text, strict=True))
    # a heading goes with the sentence after it, a closing fence with the code before it
    starts = [text[s.start : s.end] for s in spans]
    assert not any(t.startswith("```\n") or t == "```" for t in starts)
    assert any(t.startswith("## Windows vs. POSIX\n\nThe default operation") for t in starts)


def test_prose_sentences_are_cut_at_sentence_starts_not_at_wrapped_lines(cl100k) -> None:
    text = "One sentence that is wrapped\nover two lines. A second sentence follows it, longer.\n"
    spans = SentenceWindowChunker(cl100k, 64).chunk(text)
    assert [text[s.start : s.end] for s in spans] == [
        "One sentence that is wrapped\nover two lines.",
        "A second sentence follows it, longer.",
    ]


def test_windows_hold_their_sentence_and_its_neighbours(cl100k) -> None:
    text = " ".join(f"Sentence number {i} says one thing about item {i}." for i in range(20))
    chunker = SentenceWindowChunker(cl100k, 64)
    tokenized = cl100k.tokenize(text)
    spans = chunker.chunk(text)
    assert all(s.token_count >= MIN_SENTENCE_TOKENS for s in spans)
    windows = chunker.windows(tokenized, spans)
    for i, (span, (start, end)) in enumerate(zip(spans, windows, strict=True)):
        assert start <= span.start < span.end <= end
        assert start == spans[max(0, i - WINDOW)].start and end == spans[min(19, i + WINDOW)].end
        assert cl100k.count(text[start:end]) <= chunker.window_tokens


def test_the_job_writes_each_window_as_its_sentences_parent() -> None:
    text = SAMPLE.read_text(encoding="utf-8")
    document = Document("d1", "/c/path.md", "markdown", text, content_hash(text))
    config = ChunkingConfig(
        budget=TokenBudget(chunk_size=64), strategies={"markdown": "sentence_window"}
    )
    assert config.emits_parents and not ChunkingConfig().emits_parents
    chunks = DocumentChunker(config).chunk_document(document)
    parents = {c.chunk_id: c for c in chunks if c.is_parent}
    children = [c for c in chunks if not c.is_parent]
    assert parents and children and len(parents) <= len(children)
    for child in children:
        parent = parents[child.parent_id]
        assert parent.start_char <= child.start_char < child.end_char <= parent.end_char
    assert len({(c.start_char, c.end_char) for c in parents.values()}) == len(parents)
