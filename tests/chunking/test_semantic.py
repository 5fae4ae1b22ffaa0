"""The semantic chunker breaks where the topic changes, and keeps the hard limit."""

import numpy as np
import pytest

from transforms.chunking.semantic import SemanticChunker, breakpoints
from transforms.chunking.tokens import TiktokenTokenizer

TOK = TiktokenTokenizer("cl100k_base")

COOKING = (
    "Preheat the oven to two hundred degrees. Whisk the eggs with the sugar until pale. "
    "Fold the flour into the batter gently. Pour the batter into a buttered tin. "
    "Bake the cake for forty minutes until golden. Let the cake cool before slicing it. "
)
NETWORKING = (
    "A TCP connection starts with a three-way handshake. The client sends a SYN packet. "
    "The server answers with SYN-ACK. The client acknowledges, and data can flow. "
    "Lost segments are retransmitted after a timeout. Congestion control limits the window. "
)


def test_breakpoints_pick_the_largest_distances():
    v = np.array([[1, 0], [1, 0], [0, 1], [0, 1], [1, 0]], dtype=np.float32)
    assert breakpoints(v, 50.0) == [2, 4]
    assert breakpoints(v[:2], 50.0) == []


@pytest.mark.slow
def test_topic_change_is_a_boundary():
    text = COOKING + NETWORKING
    chunks = SemanticChunker(TOK, 200, percentile=90).chunk(text)
    texts = [text[c.start : c.end] for c in chunks]
    assert all(TOK.count(t) <= 200 for t in texts)
    # no chunk mixes the two topics
    assert not any("oven" in t and "TCP" in t for t in texts)
    assert "".join(texts).replace(" ", "") == text.replace(" ", "")
    assert {c.strategy for c in chunks} == {"semantic"}


@pytest.mark.slow
def test_groups_over_the_limit_are_split():
    text = (COOKING + NETWORKING) * 6
    chunks = SemanticChunker(TOK, 40).chunk(text)
    assert all(TOK.count(text[c.start : c.end]) <= 40 for c in chunks)
    assert chunks == SemanticChunker(TOK, 40).chunk(text)


def test_bad_percentile():
    with pytest.raises(ValueError, match="percentile"):
        SemanticChunker(TOK, 64, percentile=100)
