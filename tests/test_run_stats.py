"""The statistics `corpus-chunker inspect` shows, on hand-made chunk rows."""

import pytest

from commands import run_stats
from commands.run_stats import Limits


def chunk(doc, i, start, end, tokens, text=None, doc_type="markdown", strategy="markdown"):
    return {
        "chunk_id": f"{doc}-{i}",
        "doc_id": doc,
        "source": f"/corpus/{doc}.md",
        "doc_type": doc_type,
        "strategy": strategy,
        "chunk_index": i,
        "text": text if text is not None else f"text of {doc} {i}",
        "context": None,
        "start_char": start,
        "end_char": end,
        "token_count": tokens,
        "embed_tokens": tokens + 5,
        "section_path": [],
        "is_parent": False,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# Title", True),
        ("# Title\n\n## Sub", True),
        ("Title\n=====", True),  # setext
        ("# Title\n\nSome prose.", False),
        ("Just prose # not a heading", False),
        ("```\n# a comment in a fence\n```", False),
        ("", False),
    ],
)
def test_heading_only(text, expected):
    assert run_stats.is_heading_only(text) is expected


def test_limits_from_settings_and_definitions():
    limits = Limits.from_settings({"chunk_size": 192, "chunk_text_room": 158})
    assert (limits.at_limit_from, limits.fragment_below) == (151, pytest.approx(19.2))


def test_group_stats_counts_what_it_says():
    limits = Limits(chunk_size=100, text_room=80)
    rows = [
        chunk("a", 0, 0, 10, 3, text="# Heading"),  # fragment, heading-only
        chunk("a", 1, 10, 200, 78, text="same text"),  # at limit (>= 76), duplicate
        chunk("a", 2, 150, 190, 20),  # inside chunk 1: covered; overlaps it
        chunk("b", 0, 0, 50, 40, text="same text"),  # duplicate of a-1
        chunk("c", 0, 0, 30, 30, doc_type="code", strategy="code"),
        {**chunk("c", 1, 0, 90, 90, doc_type="code", strategy="code"), "is_parent": True},
    ]
    groups = {(g.doc_type, g.strategy): g for g in run_stats.group_stats(rows, limits, 2.0)}
    md = groups[("markdown", "markdown")]
    assert (md.documents, md.chunks) == (2, 4)
    assert (md.at_limit, md.fragments, md.heading_only) == (1, 1, 1)
    assert (md.covered, md.duplicates) == (1, 2)
    assert (md.overlapping_pairs, md.neighbour_pairs) == (1, 2)
    assert (md.p50, md.max) == (20, 78)
    assert md.cost_usd == pytest.approx((8 + 83 + 25 + 45) * 2.0 / 1e6)
    code = groups[("code", "code")]
    assert code.chunks == 1  # the parent chunk is left out
    assert code.heading_only is None  # not Markdown: not counted
    total = run_stats.total_stats(list(groups.values()), limits, 2.0)
    assert (total.chunks, total.documents, total.heading_only, total.max) == (5, 3, 1, 78)


def test_segments_mark_overlap_gaps_and_starts():
    chunks = [chunk("a", 0, 0, 10, 1), chunk("a", 1, 6, 15, 1), chunk("a", 2, 17, 20, 1)]
    pieces = run_stats.segments(22, chunks)
    assert [(p.start, p.end, p.chunks, p.starts_chunk) for p in pieces] == [
        (0, 6, (0,), 0),
        (6, 10, (0, 1), 1),  # overlap
        (10, 15, (1,), None),
        (15, 17, (), None),  # in no chunk
        (17, 20, (2,), 2),
        (20, 22, (), None),
    ]


def test_reject_counts_most_frequent_first():
    rejects = [
        {"stage": "extract", "reason": "empty", "source": "x"},
        {"stage": "read", "reason": "invalid_json", "source": "y#L2"},
        {"stage": "extract", "reason": "empty", "source": "z"},
    ]
    assert run_stats.reject_counts(rejects) == [
        ("extract", "empty", 2, "x"),
        ("read", "invalid_json", 1, "y#L2"),
    ]


def test_changes_between_runs():
    def doc(doc_id, content_hash):
        return {
            "doc_id": doc_id,
            "source": doc_id,
            "doc_type": "text",
            "content_hash": content_hash,
        }

    before_docs = [doc("kept", "h1"), doc("edited", "h2"), doc("gone", "h3")]
    now_docs = [doc("kept", "h1"), doc("edited", "h2b"), doc("new", "h4")]
    before_chunks = [
        chunk("kept", 0, 0, 5, 1),
        chunk("edited", 0, 0, 5, 1),
        chunk("gone", 0, 0, 5, 1),
    ]
    now_chunks = [chunk("kept", 0, 0, 5, 1), chunk("edited", 9, 0, 5, 1), chunk("new", 0, 0, 5, 1)]
    out = run_stats.changes("/last", now_docs, now_chunks, before_docs, before_chunks)
    assert [d["source"] for d in out.documents_added] == ["new"]
    assert [d["source"] for d in out.documents_changed] == ["edited"]
    assert [d["source"] for d in out.documents_removed] == ["gone"]
    assert out.documents_unchanged == 1
    assert (out.chunks_added, out.chunks_removed, out.chunks_kept) == (2, 2, 1)
