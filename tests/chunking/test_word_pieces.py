"""The embedding model's word pieces read by `tokenizers` alone (transforms/chunking/
word_pieces.py) are transformers' own: the same ids, counts, offsets and model inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from transforms.chunking.tokens import HuggingFaceTokenizer
from transforms.chunking.word_pieces import ModelInputs, counting_tokenizer
from transforms.embedding.models import resolve_model_path

TEXTS = [
    "",
    "plain words",
    "   leading and trailing spaces   ",
    "Ünïcödé àccents, ÇA VA? 東京は晴れ。 emoji 🚀🚀 and the tab\tcharacter",
    "def f(x):\n    return x ** 2  # a comment\n",
    "| a | table |\n|---|---|\n| 1 | 2 |",
    "supercalifragilisticexpialidocious antidisestablishmentarianism " * 40,  # past 256 pieces
]


@pytest.fixture(scope="module")
def theirs():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model_path("default"))


@pytest.fixture(scope="module")
def texts() -> list[str]:
    root = Path(__file__).resolve().parents[2] / "samples"
    found = list(TEXTS)
    for path in sorted(root.glob("*/*.md"))[:4] + sorted(root.glob("code/*"))[:2]:
        text = path.read_text(errors="replace")
        found += [text[i : i + 700] for i in range(0, min(len(text), 7000), 700)]
    return found


def test_counts_and_offsets_are_transformers_own(theirs, texts) -> None:
    ours = HuggingFaceTokenizer(resolve_model_path("default"))
    assert ours._fast is not None  # the folder has tokenizer.json: transformers is not used
    for text in texts:
        enc = theirs(text, add_special_tokens=False, return_offsets_mapping=True)
        fast = counting_tokenizer(resolve_model_path("default")).encode(
            text, add_special_tokens=False
        )
        assert fast.ids == enc["input_ids"], text[:60]
        assert [tuple(o) for o in fast.offsets] == [tuple(o) for o in enc["offset_mapping"]]
        assert ours.count(text) == len(enc["input_ids"])
    with_specials = HuggingFaceTokenizer(resolve_model_path("default"), add_special_tokens=True)
    assert with_specials.count("plain words") == len(theirs("plain words")["input_ids"]) == 4


def test_model_inputs_are_transformers_padded_and_cut_batches(theirs, texts) -> None:
    inputs = ModelInputs(resolve_model_path("default"), 256)
    batch = texts[:12]
    want = theirs(batch, padding=True, truncation=True, max_length=256, return_tensors="np")
    got = inputs.batch(batch)
    assert got["input_ids"].shape[1] == 256  # the long text is cut at 256, the rest padded
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert got[name].dtype == np.int64
        assert np.array_equal(got[name], want[name]), name
    # the model's own count, uncut: what the embed stage compares with max_seq_length
    counts = [len(ids) for ids in inputs(batch, add_special_tokens=True)["input_ids"]]
    assert counts == [len(ids) for ids in theirs(batch)["input_ids"]]
    assert max(counts) > 256
