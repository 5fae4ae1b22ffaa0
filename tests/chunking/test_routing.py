"""The {doc_type: strategy} table, parent/child chunks, the model-limit guard, chunk ids."""

import pathlib

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas.records import Document, content_hash
from transforms import stat_events
from transforms.chunking.routing import ChunkDocuments, ChunkingConfig, DocumentChunker
from transforms.chunking.tokens import get_tiktoken_encoding, make_tokenizer
from transforms.embedding.embed import resolve_model_path
from transforms.token_budget import TokenBudget

TEXT = "\n\n".join(
    f"Paragraph {i} explains one idea in detail. It has a second sentence, and a third one."
    for i in range(60)
)
MARKDOWN = "# Guide\n\n" + "\n\n".join(
    f"## Part {i}\n\n" + "Some words about this part of the guide. " * 12 for i in range(8)
)


def doc(text, doc_type="text", language=None, doc_id="d1"):
    return Document(doc_id, f"/c/{doc_id}", doc_type, text, content_hash(text), language)


def test_strategy_table_and_override():
    default = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=64)))
    assert {c.strategy for c in default.chunk_document(doc(TEXT))} == {"recursive"}
    assert {c.strategy for c in default.chunk_document(doc(MARKDOWN, "markdown"))} == {"markdown"}
    fixed = DocumentChunker(
        ChunkingConfig(budget=TokenBudget(chunk_size=64), strategies={"text": "fixed"})
    )
    assert {c.strategy for c in fixed.chunk_document(doc(TEXT))} == {"fixed"}


def test_bad_strategy_and_sizes_name_the_flag():
    with pytest.raises(ValueError, match="--strategy_text='semantic-ish'"):
        ChunkingConfig(strategies={"text": "semantic-ish"})
    with pytest.raises(ValueError, match="--chunk_overlap=40"):
        ChunkingConfig(budget=TokenBudget(chunk_size=64, chunk_overlap=40))
    with pytest.raises(ValueError, match="--parent_chunk_size=64"):
        ChunkingConfig(budget=TokenBudget(chunk_size=64), parent_chunk_size=64)
    with pytest.raises(ValueError, match="header"):
        ChunkingConfig(budget=TokenBudget(chunk_size=40, header_reserve=34))


def test_header_reserve_leaves_room():
    chunks = DocumentChunker(
        ChunkingConfig(budget=TokenBudget(chunk_size=96, header_reserve=34))
    ).chunk_document(doc(TEXT))
    assert max(c.token_count for c in chunks) <= 96 - 34


def test_parent_child_small_to_big():
    config = ChunkingConfig(
        budget=TokenBudget(chunk_size=48), parent_chunk_size=256, config_fingerprint="f"
    )
    chunks = DocumentChunker(config).chunk_document(doc(MARKDOWN, "markdown"))
    parents = {c.chunk_id: c for c in chunks if c.is_parent}
    children = [c for c in chunks if not c.is_parent]
    assert parents and len(children) > len(parents)
    tok = make_tokenizer("cl100k_base")
    for p in parents.values():
        assert p.parent_id is None and tok.count(p.text) <= 256
    for c in children:
        parent = parents[c.parent_id]
        assert parent.start_char <= c.start_char and c.end_char <= parent.end_char
        assert tok.count(c.text) <= 48
        assert c.section_path  # inherited from the parent when the child has none
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))


def test_model_guard_splits_what_the_model_would_truncate():
    model = resolve_model_path("default")
    # word pieces: long identifiers cost several word pieces per cl100k token
    code = "\n".join(
        f"x_{i}_valueOfSomethingLong = compute_{i}(aVeryLongArgumentName)" for i in range(60)
    )
    plain = ChunkingConfig(budget=TokenBudget(chunk_size=200), strategies={"code": "code"})
    # a path header's room of 8 tokens keeps 16 word pieces free: 128 - 2 - 16 for the text
    guarded = ChunkingConfig(
        budget=TokenBudget(
            chunk_size=208, header_reserve=8, model_tokenizer=model, model_max_tokens=128
        ),
        strategies={"code": "code"},
    )
    d = doc(code, "code", "python")
    wp = make_tokenizer(f"hf:{model}")
    assert any(wp.count(c.text) > 128 - 2 - 16 for c in DocumentChunker(plain).chunk_document(d))
    chunks = DocumentChunker(guarded).chunk_document(d)
    assert all(wp.count(c.text) <= 128 - 2 - 16 for c in chunks)
    assert all(code[c.start_char : c.end_char] == c.text for c in chunks)


def test_model_guard_cuts_a_chunk_into_even_pieces():
    """A chunk a little over the model's word pieces is cut into pieces of about the same size,
    not one full piece and a tail of a few words (gettext's manual: a 156-token paragraph of
    quoted format directives became 151 tokens and "const/volatile qualifier.")."""
    model = resolve_model_path("default")
    wp = make_tokenizer(f"hf:{model}")
    budget = 128 - 2 - 16
    sentences, text = [], ""
    while wp.count(text) <= budget:  # just over the budget
        sentences.append(f"The flag `x_{len(sentences)}_someOption` is set.")
        text = " ".join(sentences)
    config = ChunkingConfig(
        budget=TokenBudget(
            chunk_size=400, header_reserve=8, model_tokenizer=model, model_max_tokens=128
        ),
        strategies={"markdown": "markdown"},
    )
    chunks = DocumentChunker(config).chunk_document(doc(text, "markdown"))
    counts = [wp.count(c.text) for c in chunks]
    assert len(chunks) == 2 and all(n <= budget for n in counts)
    assert min(counts) >= max(counts) // 2, counts
    assert " ".join(c.text for c in chunks) == text


def test_chunk_ids_are_stable_and_config_bound():
    a = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=64), config_fingerprint="one"))
    b = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=64), config_fingerprint="two"))
    ids_a = [c.chunk_id for c in a.chunk_document(doc(TEXT))]
    assert ids_a == [c.chunk_id for c in a.chunk_document(doc(TEXT))]
    assert not set(ids_a) & {c.chunk_id for c in b.chunk_document(doc(TEXT))}
    assert len(set(ids_a)) == len(ids_a)


def test_an_edit_keeps_the_ids_of_the_chunks_it_did_not_touch():
    """A sentence more at the top of a page: its first chunk changes; the chunks after it have
    the same texts, new offsets and the same ids. Identical texts get distinct ids, and the
    same text in another document another id."""
    chunker = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=64, chunk_overlap=0)))
    before = chunker.chunk_document(doc(TEXT))
    after = chunker.chunk_document(doc("One sentence more. " + TEXT))
    assert before[0].chunk_id != after[0].chunk_id
    kept = {c.chunk_id: c for c in after[1:]}
    assert [c.chunk_id for c in before[1:]] == list(kept)
    for old in before[1:]:
        new = kept[old.chunk_id]
        assert new.text == old.text and new.start_char == old.start_char + 19
    repeated = "\n\n".join(["The same paragraph, said again and again, word for word."] * 40)
    ids = [c.chunk_id for c in chunker.chunk_document(doc(repeated))]
    assert len(set(ids)) == len(ids)
    elsewhere = {c.chunk_id for c in chunker.chunk_document(doc(TEXT, doc_id="d2"))}
    assert not elsewhere & {c.chunk_id for c in before}


def test_chunk_documents_transform_with_a_failing_document():
    good = doc(TEXT, doc_id="good")
    broken = Document("bad", "/c/bad", "text", 12345, "h")  # not a string: the chunker raises
    # a document counted for boilerplate keeps its lines on its reject (a rebuild takes them off)
    empty = Document("empty", "/c/empty", "text", "", "h", line_digests=b"8 bytes!")
    with TestPipeline() as p:
        result = (
            p
            | beam.Create([good, broken, empty])
            | ChunkDocuments(ChunkingConfig(budget=TokenBudget(chunk_size=64)))
        )
        assert_that(
            result.by_document | beam.Map(lambda item: (item[1][0].doc_id, len(item[1]) > 5)),
            equal_to([("good", True)]),
            label="chunked",
        )
        assert_that(
            result.rejects | beam.Map(lambda r: (r.doc_id, r.stage, r.reason, r.line_digests)),
            equal_to(
                [
                    ("bad", "chunk", "chunk_failed", None),
                    ("empty", "chunk", "no_chunks", b"8 bytes!"),
                ]
            ),
            label="rejects",
        )


@pytest.mark.parametrize("parent_chunk_size", [None, 256])
def test_chunk_document_counted_counts_the_whole_document(parent_chunk_size):
    chunker = DocumentChunker(
        ChunkingConfig(budget=TokenBudget(chunk_size=64), parent_chunk_size=parent_chunk_size)
    )
    encoding = get_tiktoken_encoding("cl100k_base")
    for d in (doc(TEXT), doc(MARKDOWN, "markdown"), doc("   \n", doc_id="blank")):
        chunks, n_tokens = chunker.chunk_document_counted(d)
        assert chunks == chunker.chunk_document(d)
        assert n_tokens == len(encoding.encode_ordinary(d.text))


SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "samples"


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base"])
def test_both_token_engines_give_the_same_chunks_on_the_samples(tokenizer):
    from transforms.ingest.detect import CODE_LANGUAGE_BY_EXTENSION

    docs = []
    for folder, doc_type in (("text", "text"), ("markdown", "markdown"), ("code", "code")):
        for path in sorted((SAMPLES / folder).iterdir()):
            language = CODE_LANGUAGE_BY_EXTENSION.get(path.suffix) if doc_type == "code" else None
            docs.append(doc(path.read_text(), doc_type, language, doc_id=path.name))
    assert len(docs) == 24
    for size, overlap in ((512, 0), (96, 16)):
        fast, slow = (
            DocumentChunker(
                ChunkingConfig(
                    budget=TokenBudget(chunk_size=size, chunk_overlap=overlap, tokenizer=tokenizer),
                    token_engine=e,
                )
            )
            for e in ("bpe", "tiktoken")
        )
        assert (fast.tokenizer.engine, slow.tokenizer.engine) == ("bpe", "tiktoken")
        for d in docs:
            assert fast.chunk_document_counted(d) == slow.chunk_document_counted(d), d.doc_id


@pytest.mark.parametrize("pricing", [None, "cl100k_base", "o200k_base"])
def test_doc_events_carry_the_documents_pricing_tokens(pricing):
    docs = [doc(TEXT, doc_id="t"), doc(MARKDOWN, "markdown", doc_id="m")]
    empty = Document("empty", "/c/empty", "text", "", "h")
    encoding = get_tiktoken_encoding(pricing or "cl100k_base")
    expected = [
        stat_events.doc_event(d, s, len(encoding.encode_ordinary(d.text)))
        for d, s in zip(docs, ["recursive", "markdown"], strict=True)
    ]
    with TestPipeline() as p:
        result = (
            p
            | beam.Create([*docs, empty])
            | ChunkDocuments(ChunkingConfig(budget=TokenBudget(chunk_size=64)), pricing)
        )
        assert_that(result.events, equal_to(expected))


def test_a_document_over_the_chunk_time_limit_is_a_reject_and_the_others_go_on():
    small = doc("A short note.", doc_id="small")
    big = doc(TEXT * 200, doc_id="big")
    with TestPipeline() as p:
        result = (
            p
            | beam.Create([small, big])
            | ChunkDocuments(ChunkingConfig(budget=TokenBudget(chunk_size=64), timeout_s=1e-9))
        )
        assert_that(
            result.documents | beam.Map(lambda d: d.doc_id), equal_to(["small"]), label="docs"
        )
        assert_that(
            result.rejects | beam.Map(lambda r: (r.doc_id, r.stage, r.reason)),
            equal_to([("big", "chunk", "chunk_timeout")]),
            label="rejects",
        )


def test_the_time_limit_is_checked_inside_the_chunkers():
    from transforms.chunking.split import ChunkTimeout, time_limit

    chunker = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=64)))
    for d in (doc(TEXT * 50), doc(MARKDOWN * 50, "markdown")):
        with pytest.raises(ChunkTimeout), time_limit(1e-9):
            chunker.chunk_document(d)
        assert chunker.chunk_document(d)  # no limit outside the block
