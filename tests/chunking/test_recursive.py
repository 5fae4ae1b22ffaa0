"""The recursive prose chunker: hard limit, exact offsets, nothing lost, bounded overlap."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transforms.chunking.recursive import RecursiveChunker
from transforms.chunking.split import WORD, even_split, recursive_split, sentence_starts
from transforms.chunking.tokens import TiktokenTokenizer

TOK = TiktokenTokenizer("cl100k_base")

PROSE = (
    "Retrieval quality depends on chunk boundaries. A fact cut in two is unreachable.\n\n"
    "Dr. Smith measured it at 5 p.m. on the 3rd. The results, e.g. recall at 10, improved. "
    "Nobody expected that.\n\n"
    "Short paragraph.\n\n"
    + "A longer paragraph follows with many sentences in it. " * 30
    + "\n\nThe end."
)


def covered(text, chunks):
    mask = [False] * len(text)
    for c in chunks:
        for i in range(c.start, c.end):
            mask[i] = True
    return all(mask[i] or text[i].isspace() for i in range(len(text)))


def check_invariants(text, chunks, size, overlap):
    for c in chunks:
        assert text[c.start : c.end].strip(), "no empty chunks"
        assert TOK.count(text[c.start : c.end]) <= size
        assert c.token_count == TOK.count(text[c.start : c.end])
    assert covered(text, chunks)
    for a, b in itertools.pairwise(chunks):
        assert a.start <= b.start and a.end <= b.end
        if b.start < a.end:  # the overlap is a slice of both chunks
            assert TOK.count(text[b.start : a.end]) <= overlap


def test_prose_chunks_at_paragraph_and_sentence_boundaries():
    chunks = RecursiveChunker(TOK, 64, 0).chunk(PROSE)
    check_invariants(PROSE, chunks, 64, 0)
    texts = [PROSE[c.start : c.end] for c in chunks]
    assert texts[0].startswith("Retrieval quality")
    # the long paragraph is cut between sentences, never inside one
    for t in texts:
        assert t.endswith((".", "it.")), t[-30:]


def test_overlap_is_bounded_and_starts_at_a_sentence_or_word():
    chunks = RecursiveChunker(TOK, 80, 20).chunk(PROSE)
    check_invariants(PROSE, chunks, 80, 20)
    overlapping = [b for a, b in itertools.pairwise(chunks) if b.start < a.end]
    assert overlapping, "neighbours share text"
    for c in overlapping:
        assert PROSE[c.start - 1].isspace() and not PROSE[c.start].isspace()


def test_repeated_passages_get_their_own_offsets():
    para = "The same paragraph, repeated word for word. It must not collapse.\n\n"
    text = para * 40
    size = TOK.count(para.strip()) + 2  # one paragraph fits, two do not
    chunks = RecursiveChunker(TOK, size, 0).chunk(text)
    check_invariants(text, chunks, size, 0)
    starts = [c.start for c in chunks]
    assert len(set(starts)) == len(starts) == 40
    assert all(text[c.start : c.end] == para.strip() for c in chunks)


def test_resplit_piece_inside_the_next_chunks_overlap_keeps_chunks_in_order():
    # Found by hypothesis: the second chunk, with its overlap, is over the limit once trimmed
    # and is re-split; its last piece ("alpha") lay wholly inside the third chunk, whose
    # overlap reaches back past it, and came out before a chunk that starts earlier.
    text = "alpha 🙂 end. alpha e.g. γάμμα end. alpha alpha alpha"
    chunks = RecursiveChunker(TOK, 16, 7).chunk(text)
    check_invariants(text, chunks, 16, 7)
    assert [(c.start, c.end) for c in chunks] == [(0, 23), (24, 40), (30, 52)]


def test_very_long_word_is_split_at_tokens():
    text = "prefix " + "x" * 5000 + " suffix"
    chunks = RecursiveChunker(TOK, 32, 0).chunk(text)
    check_invariants(text, chunks, 32, 0)
    assert "".join(text[c.start : c.end] for c in chunks).replace(" ", "") == text.replace(" ", "")


def test_sentence_splitter_is_not_fooled_by_abbreviations():
    text = "Dr. Smith arrived at 5 p.m. today. He left early. Then e.g. nothing happened."
    starts = sentence_starts(text, 0, len(text))
    assert [text[s : s + 4] for s in starts] == ["He l", "Then"]


def test_segments_tile_the_range():
    doc = TOK.tokenize(PROSE)
    segments = recursive_split(doc, 0, len(PROSE), 50)
    assert segments[0][0] == 0 and segments[-1][1] == len(PROSE)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(segments))
    assert all(doc.count(s, e) <= 50 for s, e in segments)


def test_a_long_sentence_s_last_words_pack_on_with_the_sentence_after_it():
    """A sentence over the limit is split at words; its last words and the short sentence
    after it share a segment (PostgreSQL's polygon(circle) row: a chunk of "|" alone)."""
    long = " ".join(f"w{i}" for i in range(70)) + "."
    text = f"{long} Short one. Another short one.\n\nNext paragraph here."
    doc = TOK.tokenize(text)
    segments = recursive_split(doc, 0, len(text), 40)
    assert segments[0][0] == 0 and segments[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(segments))
    assert all(doc.count(s, e) <= 40 for s, e in segments)
    texts = [text[s:e] for s, e in segments]
    # before: [..., " w60 .. w69.", " Short one. Another short one.\n\n", "Next paragraph
    # here."]; now the last words go on to the end (the paragraph break too)
    assert texts[-1].startswith(" w60 ") and "w69. Short one. Another short one." in texts[-1]
    assert len(segments) == 4, texts


@pytest.mark.parametrize(
    "text,limit", [("。;\r😀\n\n", 1), ("。;\r🌁", 2), ("。;\r𐀀", 3), ("😀", 1)]
)
def test_a_character_of_more_tokens_than_the_limit_is_a_segment_of_its_own(text, limit):
    # the review of the packing above: a range ending in such a character gave an empty last
    # window, the level above took the character for a part that fits, and one level up the
    # loop looked past its last point (IndexError)
    doc = TOK.tokenize(text)
    for split in (recursive_split, even_split):
        segments = split(doc, 0, len(text), limit)
        assert segments[0][0] == 0 and segments[-1][1] == len(text)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(segments))
        assert all(s < e for s, e in segments)  # no empty segment
        # over the limit only where one character alone is
        assert all(doc.count(s, e) <= limit or e == doc.ceil(s + 1) for s, e in segments)


@pytest.mark.parametrize("words", [44, 47, 90])
def test_even_split_leaves_no_small_tail(words):
    """Greedy packing of a run just over the limit leaves a tail of a word or two; even_split
    gives the same number of segments of about the same size, tiling the same range."""
    text = " ".join(f"w{i}" for i in range(words))
    doc = TOK.tokenize(text)
    greedy = recursive_split(doc, 0, len(text), 40, WORD)
    even = even_split(doc, 0, len(text), 40, WORD)
    assert len(even) == len(greedy) and even[0][0] == 0 and even[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(even))
    counts = [doc.count(s, e) for s, e in even]
    assert max(counts) <= 40
    if doc.count(*greedy[-1]) < 10:  # a small tail: evened
        assert min(counts) >= max(counts) - 4, counts
    else:
        assert even == greedy


def test_line_cut_never_lands_before_the_period_of_a_token_spanning_blank_line():
    # cl100k encodes ".\n\n" as one token; a cut after the first newline must not move the "."
    text = "First line of a docstring.\n\nSecond part of it goes on.\nThird line here.\n" * 20
    for c in RecursiveChunker(TOK, 24, 0).chunk(text):
        assert text[c.start : c.end].endswith("."), repr(text[c.start : c.end][-10:])


@pytest.mark.parametrize(("size", "overlap"), [(8, 8), (7, 0), (64, 32), (64, -1)])
def test_bad_sizes_are_rejected(size, overlap):
    with pytest.raises(ValueError, match=r"chunk_size|chunk_overlap"):
        RecursiveChunker(TOK, size, overlap)


words = st.sampled_from(
    ["alpha", "beta", "γάμμα", "日本語", "🙂", "x" * 60, "end.", "Dr.", "e.g.", "a", "\t"]
)
paragraph = st.lists(words, min_size=1, max_size=40).map(" ".join)
document = st.lists(st.one_of(paragraph, st.text(max_size=80)), min_size=1, max_size=12).map(
    lambda ps: "\n\n".join(ps) if len(ps) % 2 else "\n".join(ps)
)


@given(document, st.integers(16, 200), st.integers(0, 7))
def test_properties_on_random_documents(text, size, overlap_eighths):
    overlap = size * overlap_eighths // 16  # < size / 2
    chunker = RecursiveChunker(TOK, size, overlap)
    first = chunker.chunk(text)
    check_invariants(text, first, size, overlap)
    assert first == chunker.chunk(text), "same input, same chunks"
