"""Texinfo's navigation lines are not page text (a real page: libffi's manual, libffi8)."""

import gzip
import os

from lxml.html import document_fromstring

from transforms.ingest.html import _drop_navigation_lines, html_to_markdown

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def test_the_navigation_lines_of_a_real_texinfo_page_are_gone():
    with gzip.open(os.path.join(DATA, "libffi8-closure-example.html.gz")) as f:
        text = html_to_markdown(f.read()).text
    # Before: "Next: Thread Safety, Previous: The Closure API, Up: Using libffi \\[Index\\]"
    assert "Next:" not in text and "Previous:" not in text
    assert text.startswith("### 2.6 Closure Example\n\nA trivial example")


def test_a_paragraph_with_a_next_link_and_other_words_stays():
    page = document_fromstring(
        "<html><body><p>Read on: the <a rel='next' href='b.html'>next chapter</a> explains"
        " why.</p><div><p>Next: <a rel='next' href='b.html'>B</a>, Up: "
        "<a rel='up' href='t.html'>Top</a></p></div></body></html>"
    )
    _drop_navigation_lines(page)
    assert [p.text_content() for p in page.iter("p")] == ["Read on: the next chapter explains why."]
