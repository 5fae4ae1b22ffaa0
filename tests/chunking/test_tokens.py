"""Token offsets derived from one encoding must agree with tiktoken itself."""

import functools
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from transforms.chunking.tokens import (
    TiktokenTokenizer,
    get_bpe_encoder,
    get_tiktoken_encoding,
    make_tokenizer,
    resolve_engine,
    seed_tiktoken_cache,
)


def test_offline_encoding_matches_reference_ids(cl100k):
    assert get_tiktoken_encoding("cl100k_base").encode("hello world") == [15339, 1917]
    assert cl100k.count("hello world") == 2


def test_seed_writes_files_named_as_tiktoken_expects(tmp_path):
    folder = seed_tiktoken_cache(str(tmp_path))
    names = sorted(os.listdir(folder))
    # sha1 of the official download URLs
    assert "9b5ad71b2ce5302211f9c61530b329a4922fc6a4" in names  # cl100k_base
    assert len(names) == 2


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown tiktoken encoding 'p50k'"):
        get_tiktoken_encoding("p50k")


def test_boundaries_ascii(cl100k):
    text = "The quick brown fox jumps over the lazy dog."
    doc = cl100k.tokenize(text)
    assert doc.boundaries[0] == 0 and doc.boundaries[-1] == len(text)
    assert doc.n_tokens == cl100k.count(text)
    # every prefix at a boundary has exactly the derived number of tokens
    for b, t in zip(doc.boundaries, doc.token_index, strict=True):
        assert cl100k.count(text[:b]) == t


@given(st.text(min_size=0, max_size=300))
def test_boundaries_unicode(text):
    tok = TiktokenTokenizer("cl100k_base")
    doc = tok.tokenize(text)
    assert doc.n_tokens == tok.count(text)
    assert np.all(np.diff(doc.boundaries) > 0) or len(text) == 0
    assert doc.boundaries[0] == 0 and doc.boundaries[-1] == len(text)
    # Boundaries are character positions: slicing there never splits a code point, and the
    # token counts of the two sides add up to at least the whole (BPE merges never cross).
    for b in doc.boundaries[1:-1]:
        assert doc.count(0, int(b)) + doc.count(int(b), len(text)) == doc.n_tokens


def test_o200k_and_tokenizer_factory():
    tok = make_tokenizer("o200k_base")
    assert tok.name == "o200k_base"
    assert tok.tokenize("héllo wörld, 日本語").n_tokens == tok.count("héllo wörld, 日本語")


ALPHABET = st.sampled_from(
    [
        "a",
        "Z",
        "7",
        "\n",
        " ",
        "\t",
        "\r",
        "/",
        "'",
        "\xa0",
        "\u2028",
        "\u0301",
        "語",
        "🙂",
        ".",
        "s",
        "  ",
        "\n\n",
        "word",
        " the",
        "'ll",
        "123456",
    ]
)


@functools.cache
def tokenizer(name: str, engine: str = "auto") -> TiktokenTokenizer:
    return TiktokenTokenizer(name, engine)  # its byte-length table takes a while to build


@given(st.lists(ALPHABET, max_size=80).map("".join), st.data())
def test_count_span_equals_encoding_alone(text, data):
    for name in ("cl100k_base", "o200k_base"):
        for engine in ("bpe", "tiktoken"):
            tok = tokenizer(name, engine)
            doc = tok.tokenize(text)
            a = data.draw(st.integers(0, len(text)))
            b = data.draw(st.integers(a, len(text)))
            # count() is tiktoken's own in both engines: the reference
            assert tok.count_span(doc, a, b) == tok.count(text[a:b])


# --- the bpe engine (GitHub's bpe crate) against tiktoken ---------------------------------

ENGINE_TEXTS = st.one_of(
    st.lists(ALPHABET, max_size=120).map("".join),
    st.text(max_size=200),
    # long pieces: runs of one letter, digit, space or newline, where BPE implementations differ
    st.tuples(
        st.sampled_from(["x", "7", " ", "\n", "\t", "é", "🙂", "ab"]), st.integers(1, 700)
    ).map(lambda t: t[0] * t[1]),
)


@given(ENGINE_TEXTS)
def test_bpe_engine_gives_tiktokens_tokens(text):
    for name in ("cl100k_base", "o200k_base"):
        expected = get_tiktoken_encoding(name).encode_ordinary(text)
        assert get_bpe_encoder(name).encode(text) == expected
        assert get_bpe_encoder(name).count(text) == len(expected)
        fast, reference = (
            tokenizer(name, "bpe").tokenize(text),
            tokenizer(name, "tiktoken").tokenize(text),
        )
        assert np.array_equal(fast.boundaries, reference.boundaries)
        assert np.array_equal(fast.token_index, reference.token_index)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_bpe_engine_on_special_token_text_and_surrogates(name):
    fast, reference = tokenizer(name, "bpe"), tokenizer(name, "tiktoken")
    text = "a <|endoftext|> b <|fim_prefix|>"  # ordinary text to both, never a special token
    assert np.array_equal(fast.tokenize(text).boundaries, reference.tokenize(text).boundaries)
    assert fast.tokenize(text).n_tokens == reference.count(text)
    # A lone surrogate cannot be UTF-8: the bpe engine defers to tiktoken, which raises too
    # when tokenizing, and counts it as tiktoken's wrapper does (a replacement character).
    with pytest.raises(UnicodeEncodeError):
        fast.tokenize("a\ud800b")
    assert fast._bpe_count("a\ud800b") == reference.count("a\ud800b") == 3


def test_engine_choice_and_pickling():
    import pickle

    assert resolve_engine("auto", "cl100k_base") == "bpe"  # rs-bpe is a dependency
    assert TiktokenTokenizer("cl100k_base", "tiktoken").engine == "tiktoken"
    assert make_tokenizer("o200k_base", "bpe").engine == "bpe"
    with pytest.raises(ValueError, match="unknown token engine 'fast'"):
        TiktokenTokenizer("cl100k_base", "fast")
    # a worker rebuilds the engine that was asked for (and falls back if rs-bpe is missing)
    clone = pickle.loads(pickle.dumps(TiktokenTokenizer("cl100k_base", "auto")))
    assert (clone.requested_engine, clone.engine) == ("auto", "bpe")


@pytest.fixture
def fresh_engine_checks():
    from transforms.chunking import tokens

    caches = (tokens.get_bpe_encoder, tokens._bpe_disagrees)  # the tests may patch them out
    for cached in caches:
        cached.cache_clear()
    yield tokens
    for cached in caches:
        cached.cache_clear()


def test_auto_engine_falls_back_without_rs_bpe(monkeypatch, fresh_engine_checks, caplog):
    import pickle
    import sys

    monkeypatch.setitem(sys.modules, "rs_bpe.bpe", None)  # import fails as if not installed
    assert resolve_engine("auto", "cl100k_base") == "tiktoken"
    assert "rs-bpe is not installed" in caplog.text
    with pytest.raises(ValueError, match="--token_engine=bpe: rs-bpe is not installed"):
        resolve_engine("bpe", "cl100k_base")
    tok = TiktokenTokenizer("cl100k_base", "auto")
    assert tok.engine == "tiktoken" and tok._bpe is None
    assert tok.tokenize("hello world").n_tokens == 2
    assert pickle.loads(pickle.dumps(tok)).engine == "tiktoken"


def test_an_rs_bpe_that_disagrees_with_tiktoken_is_not_used(monkeypatch, fresh_engine_checks):
    tokens = fresh_engine_checks
    real = tokens.get_bpe_encoder("o200k_base")

    class OffByOne:  # a future release that tokenizes one piece differently
        def encode(self, text):
            return [*real.encode(text), 0]

        def count(self, text):
            return real.count(text)

    monkeypatch.setattr(tokens, "get_bpe_encoder", lambda name: OffByOne())
    assert resolve_engine("auto", "o200k_base") == "tiktoken"
    with pytest.raises(ValueError, match="tokenizes a probe text differently from tiktoken"):
        resolve_engine("bpe", "o200k_base")


# Prefixes as the budget stage builds them (a header, then "\n\n") and arbitrary ones.
PREFIXES = st.one_of(
    st.lists(ALPHABET, max_size=20).map("".join).map(lambda h: h + "\n\n"),
    st.lists(ALPHABET, max_size=20).map("".join),
    st.text(max_size=40),
)
JOINED_TEXTS = st.one_of(st.lists(ALPHABET, max_size=60).map("".join), st.text(max_size=80))


@given(PREFIXES, JOINED_TEXTS)
def test_count_joined_equals_encoding_the_join(prefix, text):
    for name in ("cl100k_base", "o200k_base"):
        tok = tokenizer(name)
        assert tok.count_joined(prefix, text, tok.count(text)) == tok.count(prefix + text)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_count_joined_derives_at_a_header_join(name):
    tok = tokenizer(name)
    prefix = "Guide > Install…\n\n"
    for text in ("Run the installer.", "    return x", "'s own", "# Title", "\tindented"):
        # The join is a piece break, so only the header is encoded ...
        assert tok._breaks.match(prefix + text, len(prefix) - 1)
        assert tok.count_joined(prefix, text, tok.count(text)) == tok.count(prefix + text)
    # ... and where it is not, the whole is encoded (o200k runs "\n/" into one piece).
    for text in ("\n\nnext", "   ", "/usr/bin"):
        assert tok.count_joined(prefix, text, tok.count(text)) == tok.count(prefix + text)


def test_the_default_cache_is_this_users_own_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = seed_tiktoken_cache()
    assert folder == str(tmp_path / "cache" / "corpus-chunker" / "tiktoken")
    assert os.stat(folder).st_mode & 0o077 == 0  # not readable or writable by others
    assert "tmp" not in os.path.relpath(folder, tmp_path).split(os.sep)[0]


def test_a_planted_link_in_the_cache_is_refused(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").symlink_to(victim)  # cl100k's name
    with pytest.raises(ValueError, match="is not a file"):
        seed_tiktoken_cache(str(folder))
    assert victim.read_text() == "precious"


def test_a_linked_default_cache_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "cache" / "corpus-chunker").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cache" / "corpus-chunker" / "tiktoken").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="symlink"):
        seed_tiktoken_cache()
    assert not os.listdir(tmp_path / "elsewhere")
