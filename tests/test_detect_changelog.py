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
