"""A Debian changelog is text, not Markdown (a real one: ca-certificates-java's, bookworm)."""

import gzip
import os

from transforms.ingest.detect import detect

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def test_a_trimmed_debian_changelog_is_text():
    with gzip.open(os.path.join(DATA, "debian-ca-certificates-java-changelog.gz"), "rt") as f:
        text = f.read()
    # Debian ends a trimmed changelog with two "# ..." lines: two Markdown signs before
    assert text.rstrip().splitlines()[-1].startswith("# To read the complete changelog")
    assert detect("/usr/share/doc/ca-certificates-java/changelog", text[:8192]).doc_type == "text"


def test_markdown_that_only_mentions_urgency_is_still_markdown():
    text = "# Release notes\n\n- fixed (1.0) urgency=high\n- more\n"
    assert detect("/x/NOTES", text).doc_type == "markdown"


SAMPLES = os.path.join(os.path.dirname(DATA), "..", "samples")


def test_restructuredtext_is_text_not_markdown():
    import json

    with open(os.path.join(SAMPLES, "jsonl", "records.jsonl"), encoding="utf-8") as f:
        routing = json.loads(f.readlines()[3])["text"]  # Flask's Quickstart, "Routing"
    # Before: its "- " items and the backtick underline of "Variable Rules" (a Markdown code
    # fence) made it Markdown, and the fence swallowed the rest of the record.
    assert "Variable Rules\n``````````````\n" in routing
    assert detect("records.jsonl#L4", routing).doc_type == "text"
    rst = "Setup\n~~~~~\n\n- one\n- two\n\nSee :func:`setup` and\n\n.. note:: it is done\n"
    assert detect("/x/NOTES", rst).doc_type == "text"


def test_markdown_that_mentions_rest_once_is_still_markdown():
    text = "# Sphinx notes\n\n- write `.. note::` blocks\n- more\n\n```\ncode\n```\n"
    assert detect("/x/NOTES", text).doc_type == "markdown"
    setext = "Title\n=====\n\n- one\n- two\n\nSection\n-------\n\ntext\n"
    assert detect("/x/NOTES", setext).doc_type == "markdown"
