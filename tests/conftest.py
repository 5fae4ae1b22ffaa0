"""Shared fixtures: the offline tokenizer, built once per test session."""

import pytest

from transforms.chunking.tokens import TiktokenTokenizer


@pytest.fixture(scope="session")
def cl100k() -> TiktokenTokenizer:
    return TiktokenTokenizer("cl100k_base")
