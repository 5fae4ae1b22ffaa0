"""The run's token limits, decided in one place and checked before anything is built.

`TokenBudget` holds the chunk tokenizer and `--chunk_size`, the room kept for the context
header, the overlap, and the embedding model's tokenizer and limit in word pieces. The chunk
stage enforces it (`transforms.chunking.base`), the context stage fits each header to it in
both tokenizers at once (`transforms.context.path.HeaderFitter`), and the count stage
(`transforms.budget`) only counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.records import CONTEXT_JOINER
from transforms.chunking.base import MIN_CHUNK_SIZE, ModelLimit
from transforms.chunking.tokens import Tokenizer, make_tokenizer

DEFAULT_CHUNK_SIZE = 192  # with the default header room, chunks of all-MiniLM-L6-v2 fit its 256
DEFAULT_MAX_OVERLAP = 32  # the default overlap: this, or a quarter of the text room if smaller
# The fewest tokens a chunk's text may have once the header's room is taken.
MIN_TEXT_TOKENS = 16
MODEL_SPECIAL_TOKENS = 2  # [CLS] and [SEP], which the model's max_seq_length includes
# Word pieces of the model's limit kept free for the header: twice the header's room in the
# chunk tokenizer, at most this many. A longer header is cut to fit the model (the context
# stage), the chunk's text never is.
MAX_MODEL_HEADER_RESERVE = 16


def header_reserve(mode: str, max_header_tokens: int, llm_context_tokens: int) -> int:
    """Tokens a chunk leaves free for its `mode` header and the joiner after it. In llm mode
    the room also holds the path header used when the LLM fails."""
    if mode == "path":
        return max_header_tokens + len(CONTEXT_JOINER)
    if mode == "llm":
        return max(llm_context_tokens, max_header_tokens) + len(CONTEXT_JOINER)
    return 0


@dataclass(frozen=True)
class TokenBudget:
    """Every token limit of a run; validated at construction, with errors naming the flag."""

    chunk_size: int = DEFAULT_CHUNK_SIZE  # hard maximum of header + joiner + text, in `tokenizer`
    chunk_overlap: int = 0  # tokens neighbouring chunks may share
    tokenizer: str = "cl100k_base"  # the chunk tokenizer: chunk_size and token_count are in it
    header_reserve: int = 0  # tokens of chunk_size kept free for the header and the joiner
    model_tokenizer: str | None = None  # the embedding model ("default" or a folder), if any
    model_max_tokens: int | None = None  # its max_seq_length, [CLS] and [SEP] included

    def __post_init__(self) -> None:
        if not self.tokenizer:
            raise ValueError(f"--tokenizer must name a tokenizer, got {self.tokenizer!r}")
        if self.header_reserve < 0:
            raise ValueError(f"the header reserve must be >= 0, got {self.header_reserve}")
        body = self.chunk_size - self.header_reserve
        if body < MIN_TEXT_TOKENS:
            raise ValueError(
                f"--chunk_size={self.chunk_size} leaves {body} tokens for a chunk's text after "
                f"the context header's room of {self.header_reserve} (at least "
                f"{MIN_TEXT_TOKENS} are needed); raise --chunk_size or lower the header size"
            )
        if not 0 <= self.chunk_overlap < body // 2:
            raise ValueError(
                f"--chunk_overlap={self.chunk_overlap} must be in [0, {body // 2}) "
                f"(half of the {body} tokens a chunk has after its header)"
            )
        if (self.model_tokenizer is None) != (self.model_max_tokens is None):
            raise ValueError(
                "the model's tokenizer and its max_seq_length come together, got "
                f"{self.model_tokenizer!r} and {self.model_max_tokens!r}"
            )
        room = self.model_text_tokens
        if room is not None and room < MIN_CHUNK_SIZE:
            raise ValueError(
                f"--embedding_model={self.model_tokenizer!r} reads {self.model_max_tokens} word "
                f"pieces: {room} are left for a chunk's text after [CLS], [SEP] and the "
                f"header's {self.model_header_reserve} (at least {MIN_CHUNK_SIZE} are needed)"
            )

    @classmethod
    def from_flags(
        cls,
        chunk_size: int,
        chunk_overlap: int | None,
        tokenizer: str,
        header_reserve: int,
        model_tokenizer: str | None = None,
        model_max_tokens: int | None = None,
    ) -> TokenBudget:
        """The budget of the job's flags; `chunk_overlap` None is the default overlap."""
        if chunk_overlap is None:
            quarter = (chunk_size - header_reserve) // 4
            chunk_overlap = max(0, min(DEFAULT_MAX_OVERLAP, quarter))
        return cls(
            chunk_size, chunk_overlap, tokenizer, header_reserve, model_tokenizer, model_max_tokens
        )

    @property
    def body_size(self) -> int:
        """Tokens a chunk's text may have: what the chunkers of embedded chunks work to."""
        return self.chunk_size - self.header_reserve

    @property
    def model_header_reserve(self) -> int:
        """Word pieces of the model's limit kept free for at least a short header."""
        return min(2 * self.header_reserve, MAX_MODEL_HEADER_RESERVE)

    @property
    def model_text_tokens(self) -> int | None:
        """Word pieces a chunk's text may have in the model's count (None: no model)."""
        if self.model_max_tokens is None:
            return None
        return self.model_max_tokens - MODEL_SPECIAL_TOKENS - self.model_header_reserve

    @property
    def model_input_tokens(self) -> int | None:
        """Word pieces the model reads whole of header + joiner + text (None: no model)."""
        if self.model_max_tokens is None:
            return None
        return self.model_max_tokens - MODEL_SPECIAL_TOKENS

    def model(self) -> Tokenizer | None:
        """The embedding model's tokenizer, resolved where it is called (on the worker: the
        bundled model's folder differs between the launcher and a worker image)."""
        if self.model_tokenizer is None:
            return None
        from transforms.embedding.models import resolve_model_path

        return make_tokenizer(f"hf:{resolve_model_path(self.model_tokenizer)}")

    def model_limit(self) -> ModelLimit | None:
        """The model's limit on a chunk's text, for the chunkers of embedded chunks."""
        model = self.model()
        if model is None:
            return None
        assert self.model_text_tokens is not None
        return ModelLimit(model, self.model_text_tokens)
