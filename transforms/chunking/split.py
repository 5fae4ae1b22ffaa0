"""The splitting primitives every chunker and every limit share, below `base.py`.

Cut points are token boundaries of the document's own tokenization (`TokenizedText`), so every
count is a difference of two indices: separator candidates per level (blank line > line >
sentence > word > token), greedy packing to a budget (`recursive_split`), token windows, sentence
starts (blingfire) and overlap. `fit` is the one way a span is made to fit a limit that the
derived count cannot prove: the chunk tokenizer's alone-count, or the model's word pieces.
`longest_prefix` is the same for a header that must be cut to fit.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np

from transforms.chunking.tokens import TokenizedText, Tokenizer


class ChunkTimeout(RuntimeError):
    """A document took longer than the chunk stage's time limit (--chunk_timeout_s)."""


_deadline = threading.local()


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Within the block, `check_deadline()` raises ChunkTimeout once `seconds` have passed
    (0: no limit). Per thread: each Beam worker thread chunks its own document."""
    previous = getattr(_deadline, "at", None)
    _deadline.at = time.monotonic() + seconds if seconds > 0 else None
    try:
        yield
    finally:
        _deadline.at = previous


def check_deadline() -> None:
    """Called from the chunkers' loops: a pathological document (a huge table, a deeply nested
    file) ends as a reject instead of stalling its worker."""
    at = getattr(_deadline, "at", None)
    if at is not None and time.monotonic() > at:
        raise ChunkTimeout("over the chunk stage's time limit")


def trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink [start, end) past leading and trailing whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_NEWLINE = re.compile(r"\n")
_SPACE = re.compile(r"\s+")

PARAGRAPH, LINE, SENTENCE, WORD, TOKEN = range(5)
LEVEL_NAMES = ("paragraph", "line", "sentence", "word", "token")


SENTENCE_WINDOW = 1 << 20
"""Sentence starts of a longer span are found a window of this many characters at a time:
blingfire's buffers take 17 bytes per byte of what it is given (1 GB for a 60 MB line)."""


def sentence_starts(text: str, start: int, end: int) -> list[int]:
    """Offsets (into `text`) where a sentence starts inside text[start:end], the first excluded.

    A span over SENTENCE_WINDOW characters is read in windows: each keeps the starts found in
    its first three quarters and the next begins at the last of them (a sentence start, so
    blingfire reads on from where it left off), or three quarters in when that is not half
    way, at a word; each window thus moves at least half a window on.
    """
    if end - start <= SENTENCE_WINDOW:
        return _sentence_starts(text, start, end)
    out: list[int] = []
    pos = start
    while end - pos > SENTENCE_WINDOW:
        stop = pos + SENTENCE_WINDOW
        keep_before = stop - SENTENCE_WINDOW // 4
        kept = [s for s in _sentence_starts(text, pos, stop) if s < keep_before]
        out.extend(kept)
        if kept and kept[-1] >= pos + SENTENCE_WINDOW // 2:
            pos = kept[-1]
        else:
            m = _SPACE.search(text, keep_before, stop)
            pos = m.end() if m and m.end() < stop else keep_before
    out.extend(_sentence_starts(text, pos, end))
    return out


def _sentence_starts(text: str, start: int, end: int) -> list[int]:
    piece = text[start:end]
    if not piece.strip():
        return []
    return [start + s for s in _blingfire_sentence_starts(piece)[1:]]


def _blingfire_sentence_starts(piece: str) -> list[int]:
    """Where blingfire's sentences start in `piece`: `text_to_sentences_and_offsets`, faster.

    blingfire's own wrapper maps byte offsets to characters in a Python loop over every byte
    and allocates three zeroed ctypes buffers per call; here the same C function writes into
    one numpy buffer and the offsets are mapped with numpy (a sentence split per overlap
    window made the wrapper a third of the chunker's time).
    """
    try:
        import blingfire
    except ImportError as e:  # pragma: no cover - install problem
        raise ImportError("sentence splitting needs `pip install blingfire`") from e
    data = piece.encode("utf-8")
    size = len(data) * 2  # what the wrapper allocates: output text, then starts and ends
    text_bytes = (size + 7) // 8 * 8
    buffer = np.empty(text_bytes + 8 * size, dtype=np.uint8)
    address = buffer.__array_interface__["data"][0]
    n_out = blingfire.blingfire.TextToSentencesWithOffsets(
        ctypes.c_char_p(data),
        ctypes.c_int(len(data)),
        ctypes.c_void_p(address),
        ctypes.c_void_p(address + text_bytes),
        ctypes.c_void_p(address + text_bytes + 4 * size),
        ctypes.c_int(size),
    )
    if n_out == -1 or n_out > size:  # blingfire failed: like its wrapper, no sentences
        return []
    # The wrapper counts the sentences as the lines of the output text, up to its first NUL.
    out_text = buffer[:n_out].tobytes().split(b"\0", 1)[0]
    n_sentences = out_text.count(b"\n") + 1
    byte_starts = np.frombuffer(buffer, dtype=np.int32, count=n_sentences, offset=text_bytes)
    if len(data) == len(piece):  # ASCII
        return byte_starts.tolist()
    is_char_start = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80
    char_of_byte = np.cumsum(is_char_start) - 1
    return char_of_byte[byte_starts].tolist()


CANDIDATE_WINDOW = 1 << 20
"""The regex levels' cut points of a longer span are found a window of about this many
characters at a time, so that only the result is the span's size (8 bytes a cut point)."""
_WINDOW_END = re.compile(r"\s(?=\S)")


def candidates(doc: TokenizedText, start: int, end: int, level: int) -> np.ndarray:
    """Token-boundary cut points strictly inside (start, end) for one separator level.

    Past CANDIDATE_WINDOW characters, the regex levels read windows that end where whitespace
    meets a visible character: every separator is whitespace, so none straddles a window's
    end, and the points are the ones the whole span gives (sorted across windows too: see
    `_snap`).
    """
    text = doc.text
    if level == SENTENCE or end - start <= CANDIDATE_WINDOW:
        return _snap(doc, _separators(text, start, end, level), start, end)
    parts, a = [], start
    while a < end:
        m = _WINDOW_END.search(text, min(a + CANDIDATE_WINDOW, end) - 1, end)
        b = m.end() if m else end
        part = _snap(doc, _separators(text, a, b, level), start, end)
        if parts and len(part) and len(parts[-1]) and part.item(0) == parts[-1].item(-1):
            part = part[1:]  # the same token boundary, from both sides of the window's end
        parts.append(part)
        a = b
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _separators(text: str, start: int, end: int, level: int) -> np.ndarray:
    """Where the level's separators are in text[start:end] (not yet on token boundaries)."""
    # Straight into arrays: a list of Python ints costs 36 bytes a cut (a word level over a
    # 60 MB line was 10 million of them).
    if level == PARAGRAPH:
        return np.fromiter((m.end() for m in _BLANK_LINE.finditer(text, start, end)), np.int64)
    if level == LINE:
        return np.fromiter((m.end() for m in _NEWLINE.finditer(text, start, end)), np.int64)
    if level == SENTENCE:
        return np.asarray(sentence_starts(text, start, end), dtype=np.int64)
    # WORD: cut before a whitespace run, where tiktoken's " word" tokens begin
    return np.fromiter((m.start() for m in _SPACE.finditer(text, start, end)), np.int64)


def _snap(doc: TokenizedText, pos: np.ndarray, start: int, end: int) -> np.ndarray:
    """Separator positions `pos` moved onto token boundaries, inside (start, end), sorted.

    Each goes down to the boundary at or before it, or forward to the next one when only
    whitespace lies between; so a separator before a window's end (where a visible character
    follows) lands at or before the last boundary there, and one after it at or past that.
    """
    text = doc.text
    if len(pos) == 0:
        return np.empty(0, dtype=np.int64)
    idx = np.maximum(doc.boundaries.searchsorted(pos, "right") - 1, 0)
    snapped = doc.boundaries[idx]
    # A separator inside a token (cl100k has ".\n\n" as one token) is moved to the token
    # boundary on whichever side only skips whitespace, so no cut lands before a "." or a word.
    # Moving forward skips only whitespace, so it needs whitespace at the separator itself:
    # that test first, as most separators inside a token (a blank line's end) have none.
    moved = False
    for i in np.flatnonzero(snapped != pos).tolist():
        p = pos.item(i)
        if p < len(text) and text[p].isspace():
            lo = snapped.item(i)
            if not text[lo:p].isspace():
                hi = doc.ceil(p)
                if text[p:hi].isspace():
                    snapped[i] = hi
                    moved = True
    if moved:  # a separator moved forward may pass the next one's snapped position
        snapped.sort()
    # Sorted: drop repeats (separators inside one token) and what lies outside (start, end).
    keep = snapped > start
    keep[1:] &= snapped[1:] != snapped[:-1]
    keep &= snapped < end
    return snapped[keep]


def token_windows(doc: TokenizedText, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    # Each window is measured from where the last one actually ended: a window pulled back
    # off a character of several tokens must not push the next one over the limit.
    out = []
    pos = start
    while doc.count(pos, end) > limit:
        cut = doc.boundary_at_token(doc.tokens_before(pos) + limit)
        while cut > pos and doc.count(pos, cut) > limit:  # a character spanning several tokens
            cut = doc.floor(cut - 1)
        if cut <= pos:  # one character is over the limit on its own: give it its own window
            cut = doc.ceil(pos + 1)
        out.append((pos, cut))
        pos = cut
    if pos < end or not out:  # no empty window after a character over the limit at the end
        out.append((pos, end))
    return out


def recursive_split(
    doc: TokenizedText, start: int, end: int, limit: int, level: int = PARAGRAPH
) -> list[tuple[int, int]]:
    """Non-overlapping segments tiling [start, end), each at most `limit` tokens (derived count).

    At each level the text is cut at that level's separators and the pieces are packed
    greedily up to `limit`; a piece that alone is over `limit` is split at the next level,
    and the last part of that split packs on with the pieces after it.
    """
    if doc.count(start, end) <= limit:
        return [(start, end)]
    check_deadline()
    if level >= TOKEN:
        return token_windows(doc, start, end, limit)
    cuts = candidates(doc, start, end, level)
    if len(cuts) == 0:
        return recursive_split(doc, start, end, limit, level + 1)
    # Greedy packing over the points start, cuts..., end: from `here`, the farthest point j
    # with tokens_before(j) <= tokens_before(here) + limit, which are the points before the
    # first boundary holding one token more. Scalar lookups on the arrays (the loop runs once
    # a segment): no array of tokens per point, and no list of Python ints (36 bytes each).
    n = len(cuts) + 1

    def point(k: int) -> int:
        return start if k == 0 else end if k == n else cuts.item(k - 1)

    out: list[tuple[int, int]] = []
    # `here` starts the open segment: point(i), or, after a piece over the limit was split,
    # its last part's start, before point(i); that part packs on with the pieces after it
    # (a long sentence's last words and the short sentence after it share a segment, not
    # two: functions-geometry's "|" after a row's words was a chunk of its own)
    i, here = 0, start
    while here < end:
        target = doc.tokens_before(here) + limit
        over = doc.boundary_at_token(target + 1)
        if doc.tokens_before(over) <= target or end < over:  # every point left is in reach
            j = n
        else:
            j = int(cuts.searchsorted(over, "left"))
        if j > i or (j == i and here < point(i)):
            out.append((here, point(j)))
            here, i = point(j), j
        else:  # the piece from `here` (point(i)) to point(i + 1) is over the limit alone
            parts = recursive_split(doc, here, point(i + 1), limit, level + 1)
            if doc.count(*parts[-1]) > limit:  # one character over the limit alone: it ends
                out.extend(parts)
                here, i = point(i + 1), i + 1
            else:
                out.extend(parts[:-1])
                here, i = parts[-1][0], i + 1
    return out


def overlap_start(doc: TokenizedText, prev_start: int, start: int, overlap: int) -> int:
    """Where a chunk starting at `start` begins once it takes up to `overlap` tokens before it.

    The window is snapped forward to the first sentence start inside it, else the first word
    start, so overlap never begins mid-word when it can be helped.
    """
    if overlap <= 0 or start <= prev_start:
        return start
    window = max(doc.boundary_at_token(doc.tokens_before(start) - overlap), prev_start)
    while window < start and doc.count(window, start) > overlap:
        window = doc.ceil(window + 1)  # a character of several tokens straddled the window
    if window >= start:
        return start
    # Snap down to the token that holds the boundary (tiktoken's " word" tokens start at the
    # space), never below the window, so the overlap stays within `overlap` tokens.
    for s in sentence_starts(doc.text, window, start):
        snapped = doc.floor(s)
        if window < snapped < start:
            return snapped
    text = doc.text
    if window > 0 and not text[window - 1].isspace() and not text[window].isspace():
        m = _SPACE.search(text, window, start)
        if m and m.end() < start:
            snapped = doc.floor(m.start())
            if window < snapped < start:
                return snapped
    return window


def with_overlap(
    doc: TokenizedText, segments: list[tuple[int, int]], overlap: int
) -> list[tuple[int, int]]:
    """Extend each segment (but the first) back into its predecessor by up to `overlap` tokens."""
    if overlap <= 0 or len(segments) < 2:
        return segments
    out = [segments[0]]
    for (prev_start, _), (start, end) in itertools.pairwise(segments):
        out.append((overlap_start(doc, prev_start, start, overlap), end))
    return out


def fit(
    doc: TokenizedText,
    start: int,
    end: int,
    limit: int,
    count: Callable[[int, int], int],
    trim_span: Callable[[str, int, int], tuple[int, int]] = trim,
    balanced: Callable[[int, int], bool] = lambda s, e: False,
) -> list[tuple[int, int, int]]:
    """Pieces (start, end, count) tiling doc.text[start:end], each with `count(s, e) <= limit`.

    `doc` is the text as the tokenizer that the limit is in tokenized it, and `count` the exact
    count that must hold (a piece encoded alone), which the derived count only approximates at
    cuts inside a word. The text is split with `recursive_split` at `limit`, then with a budget
    a sixteenth lower each time until every trimmed piece passes `count`. Where the last piece
    is under a quarter of `limit` and `balanced(start, end)` of it says so, then with the
    smallest budget that gives no more pieces, so that they are of even size.
    """
    budget = limit
    while True:
        check_deadline()
        pieces = _pieces_at(doc, start, end, budget, count, trim_span)
        if all(c <= limit for _, _, c in pieces):
            break
        if budget <= 1:  # unreachable for limits of MIN_CHUNK_SIZE and more; never loop forever
            raise ValueError(f"cannot fit text[{start}:{end}] into {limit} tokens")
        budget -= max(1, budget // 16)
    if len(pieces) < 2 or pieces[-1][2] >= limit // 4 or not balanced(*pieces[-1][:2]):
        return pieces
    # A small tail (greedy packing at the limit leaves a few words: "const/volatile
    # qualifier." after a 151-token piece): the pieces as even as the separators allow

    def trial(b: int) -> list[tuple[int, int, int]] | None:
        found = _pieces_at(doc, start, end, b, count, trim_span)
        return found if all(c <= limit for _, _, c in found) else None

    return _evened(pieces, -(-doc.count(start, end) // len(pieces)), budget - 1, trial)


_P = TypeVar("_P")


def _evened(
    pieces: list[_P], lo: int, hi: int, split: Callable[[int], list[_P] | None]
) -> list[_P]:
    """`split(budget)` at the smallest budget in [lo, hi] that still gives as many pieces as
    `pieces` (None: that budget fails), else `pieces`: a greedy split made as even as its
    separators allow."""
    n = len(pieces)
    while lo <= hi:
        check_deadline()
        mid = (lo + hi) // 2
        trial = split(mid)
        if trial is not None and len(trial) == n:
            pieces, hi = trial, mid - 1
        else:
            lo = mid + 1
    return pieces


def even_split(
    doc: TokenizedText, start: int, end: int, limit: int, level: int = PARAGRAPH
) -> list[tuple[int, int]]:
    """`recursive_split`, but where its last segment is under a quarter of `limit`, the segments
    as even as the separators allow (a row of PostgreSQL's table of window functions, one line
    over the budget, was cut into 107 tokens and a tail of 23)."""
    segments = recursive_split(doc, start, end, limit, level)
    if len(segments) < 2 or doc.count(*segments[-1]) >= limit // 4:
        return segments
    lo = -(-doc.count(start, end) // len(segments))
    return _evened(segments, lo, limit - 1, lambda b: recursive_split(doc, start, end, b, level))


def _pieces_at(
    doc: TokenizedText,
    start: int,
    end: int,
    budget: int,
    count: Callable[[int, int], int],
    trim_span: Callable[[str, int, int], tuple[int, int]],
) -> list[tuple[int, int, int]]:
    pieces = []
    for s, e in recursive_split(doc, start, end, budget):
        s, e = trim_span(doc.text, s, e)
        if s < e:
            pieces.append((s, e, count(s, e)))
    return pieces


def longest_prefix(
    text: str,
    tokenizer: Tokenizer,
    accept: Callable[[str], bool],
    clean: Callable[[str], str] = str.rstrip,
) -> str | None:
    """The longest accepted strict prefix of `text` cut at one of its token boundaries, else None.

    Each cut is passed through `clean` (a header drops a dangling separator). Binary search over
    the boundaries, building only the prefixes it probes (memory linear in `text`); every
    returned value was checked by `accept`, so the caller's invariant holds even where token
    counts of concatenations are not monotonic.
    """
    # The boundaries whose cleaned prefix differs from the one before: probing one prefix of a
    # run of equal ones stands for them all.
    cuts: list[int] = []
    last = ""
    for boundary in tokenizer.tokenize(text).boundaries[1:-1].tolist():
        cut = clean(text[:boundary])
        if cut and cut != last:
            cuts.append(boundary)
            last = cut
        # `cut` is dropped here: only offsets are kept, so a long text costs no more than itself
    lo, hi, best = 0, len(cuts) - 1, None
    while lo <= hi:
        check_deadline()
        mid = (lo + hi) // 2
        candidate = clean(text[: cuts[mid]])
        if accept(candidate):
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best
