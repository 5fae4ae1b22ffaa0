"""The Markdown block parser that the chunker reads a text with (markdown-it, CommonMark and
GFM tables), in a module of its own: what the chunker imports and what its readers share
(transforms.ingest: a definition's term, the escapes kept, the structural invariant) import
it from here, without a cycle."""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=1)
def block_parser() -> Any:  # markdown_it.MarkdownIt, imported lazily
    """The parser, made once."""
    try:
        from markdown_it import MarkdownIt
    except ImportError as e:  # pragma: no cover - install problem
        raise ImportError("Markdown chunking needs `pip install markdown-it-py`") from e
    # Only block structure is needed: inline parsing is two thirds of markdown-it's time, so it
    # is switched off and run on heading text alone (`_heading_text` in markdown.py).
    return MarkdownIt("commonmark").enable("table").disable("inline")
