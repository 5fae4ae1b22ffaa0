"""A model folder's fast tokenizer, run by the `tokenizers` library itself.

transformers' fast tokenizers (`AutoTokenizer`) wrap the folder's `tokenizer.json` in this
very library; importing transformers to get there costs about 2 s of CPU in every process
(a worker, a job started by a scheduler), and each `from_pretrained` another 0.5 s. Read
directly, the file loads in about 0.05 s and is shared by every stage of a process.

What transformers adds on top is undone or repeated here: the file's own truncation and
padding settings (sentence-transformers folders ship `max_length` 128 and fixed padding)
are switched off for counting, and applied per call only where the encoder asks for them.
A folder without `tokenizer.json` (a slow tokenizer only) is read by transformers.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

TOKENIZER_FILE = "tokenizer.json"


def has_fast_tokenizer(path: str) -> bool:
    return os.path.isfile(os.path.join(path, TOKENIZER_FILE))


@functools.lru_cache(maxsize=8)
def counting_tokenizer(path: str) -> Any:
    """The folder's `tokenizers.Tokenizer`, without truncation or padding: one per process
    and folder, shared (never reconfigured after this, so safe across threads)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(os.path.join(path, TOKENIZER_FILE))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


class ModelInputs:
    """The model's inputs for a batch of texts, as transformers' fast tokenizer makes them with
    `padding=True, truncation=True, max_length=max_seq_length`: special tokens added, cut at
    `max_length`, padded to the batch's longest text."""

    def __init__(self, path: str, max_length: int) -> None:
        from tokenizers import Tokenizer

        self.max_length = max_length
        self._counting = counting_tokenizer(path)
        # An instance of its own: truncation and padding are set once here, never per call.
        tokenizer = Tokenizer.from_file(os.path.join(path, TOKENIZER_FILE))
        tokenizer.enable_truncation(max_length)
        padding = tokenizer.padding or {}
        pad_token = padding.get("pad_token", "[PAD]")
        pad_id = tokenizer.token_to_id(pad_token)
        if pad_id is None:
            raise ValueError(f"the tokenizer at {path!r} has no padding token {pad_token!r}")
        tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)
        self._tokenizer = tokenizer

    def __call__(self, texts: Sequence[str], add_special_tokens: bool = True) -> dict[str, Any]:
        """Unpadded, untruncated word-piece ids per text (the model's own count of a text), in
        the shape transformers returns: `{"input_ids": [[...], ...]}`."""
        encodings = self._counting.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        return {"input_ids": [e.ids for e in encodings]}

    def batch(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """`input_ids`, `attention_mask` and `token_type_ids` (int64) of the padded batch."""
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=True)
        return {
            "input_ids": np.asarray([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.asarray([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.asarray([e.type_ids for e in encodings], dtype=np.int64),
        }
