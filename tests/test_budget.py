"""ChunkBudget: counts reused from the chunker are exactly the counts it would take itself."""

import dataclasses

import pytest

from schemas.records import Document, content_hash
from transforms.budget import ChunkBudget
from transforms.chunking.routing import ChunkingConfig, DocumentChunker
from transforms.chunking.tokens import make_tokenizer
from transforms.context import path_header
from transforms.token_budget import TokenBudget

PROSE = "\n\n".join(
    f"Paragraph {i} explains one idea: it has a second sentence, and a third one. Naïve café "
    f"prices (€{i},50) and 日本語のテキスト. 'Quoted' words / slashes / and   runs of spaces."
    for i in range(20)
)
MARKDOWN = "# Guide\n\n" + "\n\n".join(
    f"## Part {i}\n\n- item one\n- item two\n\n/usr/bin/tool --flag {i}\n\n"
    + "Some words about this part of the guide. " * 6
    for i in range(6)
)
CODE = "\n\n".join(
    f'''class Server{i}:
    """A server: it listens on /tmp/sock{i} and answers requests."""

    def run(self, port: int = {8000 + i}) -> None:
        # Serve until stopped; each request is one line.
        for line in self.lines():
            if not line.strip():
                continue
            self.answer(line)  # one reply per line

    def answer(self, line: str) -> str:
        return f"{{line!r}} -> ok"
'''
    for i in range(12)
)
HEADERS = (
    "Guide > Part 1",
    "Guide > A long header cut short…",
    "src/app/server.py > Server3 > run",
    "A header ending in a slash /",
    "Trailing spaces  ",
    "日本語 > 節",
    "Two\nlines",
)


def documents() -> list[Document]:
    return [
        Document(f"d{i}", f"/c/{name}", doc_type, text, content_hash(text), language)
        for i, (name, doc_type, text, language) in enumerate(
            [
                ("prose.txt", "text", PROSE, None),
                ("guide.md", "markdown", MARKDOWN, None),
                ("server.py", "code", CODE, "python"),
            ]
        )
    ]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_reused_counts_equal_full_counts(name):
    chunker = DocumentChunker(
        ChunkingConfig(budget=TokenBudget(chunk_size=64, chunk_overlap=8, tokenizer=name))
    )
    chunks = [c for doc in documents() for c in chunker.chunk_document(doc)]
    # Code chunks keep their indentation: texts that start with spaces are covered.
    assert any(c.text[0] == " " for c in chunks)
    tok = make_tokenizer(name)
    reusing = ChunkBudget(chunker.budget, name)
    assert reusing.reuse_counts
    for chunk in chunks:
        for context in (None, "", path_header(chunk), *HEADERS):
            c = dataclasses.replace(chunk, context=context)
            got = reusing.apply(c)
            assert got.embed_tokens == tok.count(c.embed_text())
            assert got.context_tokens == (tok.count(context) if context else 0)


def test_another_pricing_tokenizer_counts_whole():
    chunker = DocumentChunker(
        ChunkingConfig(budget=TokenBudget(chunk_size=64, tokenizer="cl100k_base"))
    )
    chunks = [c for doc in documents() for c in chunker.chunk_document(doc)]
    o200k = make_tokenizer("o200k_base")
    budget = ChunkBudget(chunker.budget, "o200k_base")
    assert not budget.reuse_counts
    for chunk in chunks:
        for context in (None, path_header(chunk)):
            c = dataclasses.replace(chunk, context=context)
            assert budget.apply(c).embed_tokens == o200k.count(c.embed_text())
