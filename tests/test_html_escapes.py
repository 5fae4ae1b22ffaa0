"""The text of an HTML page is text, not Markdown escapes, while code keeps its backslashes and
headings their section paths (real pages of the generator zoo: Sphinx's and Django's
documentation, git's manual pages; tests/data/README.md)."""

import gzip
import os
import re

from hypothesis import given
from hypothesis import strategies as st

from transforms.chunking.block_parser import block_parser
from transforms.chunking.markdown import markdown_sections
from transforms.ingest.html import html_to_markdown
from transforms.ingest.trafilatura_markdown import _HTML_BLOCK_START, fences_alone, without_escapes

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# the escapes trafilatura adds to prose: a backslash before * _ ` ~ [ ] <
_ESCAPE = re.compile(r"\\[*_`~\[\]<]")


def _text(name: str) -> str:
    with gzip.open(os.path.join(DATA, name)) as f:
        return html_to_markdown(f.read()).text


def _blocks(text: str) -> tuple[list[str], list[str]]:
    """The contents of the fenced code blocks of `text`, and its other lines."""
    tokens = block_parser().parse(text)
    code = [t.content for t in tokens if t.type == "fence"]
    in_code = {i for t in tokens if t.type == "fence" for i in range(*t.map)}
    prose = [line for i, line in enumerate(text.split("\n")) if i not in in_code]
    return code, prose


def test_a_definition_term_is_text():
    text = _text("sphinx53-extdev-logging.html.gz")
    _, prose = _blocks(text)
    # Before: "- sphinx.util.logging.pending\\_logging()\\[source\\]"
    assert "- sphinx.util.logging.pending_logging()" in prose
    assert "  - error(*msg*, **args*, ***kwargs*)" in prose


def test_prose_is_text_and_code_keeps_its_backslashes():
    text = _text("django32-ref-urls.html.gz")
    code, prose = _blocks(text)
    # Before: "- `include`(*pattern\_list*)", "...*\*\*kwargs*)", "\[source\]"
    assert not [line for line in prose if _ESCAPE.search(re.sub(r"`[^`]*`", "", line))]
    # one definition with three signatures: the first is its term, the others follow it
    assert "- `include`(*module*, *namespace=None*)" in prose
    assert "  `include`(*pattern_list*)" in prose
    assert "(*prefix*, *view=django.views.static.serve*, ***kwargs*)" in text
    # fenced code and inline code as the page has them
    assert "    re_path(r'^bio/(?P<username>\\w+)/$', views.bio, name='bio'),\n" in code[1]
    assert "sequences like `\\d` without the need to" in text
    assert "(like `<username>` above)" in text


def test_a_heading_holds_its_placeholder_unescaped():
    text = _text("git239-web--browse.html.gz")
    # git's <tool> placeholder: CommonMark reads an HTML tag there, but the chunker reads a tag
    # that names no HTML element as text (before: "### browser.\\<tool>.path" in the text)
    assert "### browser.<tool>.path" in text
    assert (
        "git-web--browse(1) Manual Page",
        "CONFIGURATION VARIABLES",
        "browser.<tool>.path",
    ) in {s.path for s in markdown_sections(text)}
    assert "setting the configuration variable `browser.<tool>.path`." in text
    _, prose = _blocks(text)
    assert "- -b <browser>" in prose


def test_without_escapes_keeps_those_that_keep_the_structure():
    assert without_escapes("a \\<b> \\_c\\_ \\*d\\* \\[e\\]") == "a <b> _c_ *d* [e]"
    # a backslash of the page before an escaped character is its own: 2k+1 -> k
    assert without_escapes("C:\\\\\\_dir and a\\\\\\*b") == "C:\\_dir and a\\*b"
    # code is verbatim: spans, and fenced blocks
    assert without_escapes("`\\_x` \\_y") == "`\\_x` _y"
    assert without_escapes("```\n\\_x\n```\n\\_y") == "```\n\\_x\n```\n_y"
    # at the start of a line, an escape that keeps it from opening a block stays
    assert without_escapes("\\* not an item") == "\\* not an item"
    assert without_escapes("- \\* not a nested item") == "- \\* not a nested item"
    assert without_escapes("\\`\\`\\` not a fence") == "\\``` not a fence"
    assert without_escapes("\\<div> not HTML") == "\\<div> not HTML"
    assert without_escapes("\\_\\_init\\_\\_ is text") == "__init__ is text"
    assert without_escapes("- \\<commit>") == "- <commit>"  # one tag alone: no other block
    assert without_escapes("\\[skip\\] or \\[array length=n\\]") == "[skip] or [array length=n]"
    assert without_escapes("\\[label\\]: not a definition") == "\\[label]: not a definition"
    assert without_escapes("\\[label\\]:\ndestination") == "\\[label]:\ndestination"
    # ...but a label and ":" with no destination after them is no definition (the Linux
    # kernel's "[You can ignore ... anyway!]:" before a listing)
    assert without_escapes("\\[You can ignore it.]:\n\ntext") == "[You can ignore it.]:\n\ntext"
    assert without_escapes("\\[You can ignore it.]:") == "[You can ignore it.]:"
    assert without_escapes("\\[\n--all \\]") == "[\n--all ]"  # a label closed, no ":" after it
    assert without_escapes("\\[a\n\\[b\n\\]\\]: c") == "[a\n[b\n]]: c"  # "[" in a label: none
    # an escaped backtick next to a code span's stays: it would join the span's run
    assert without_escapes("by the `list`\\``envsubst` program") == (
        "by the `list`\\``envsubst` program"
    )
    assert without_escapes("a \\`\\`\\` b") == "a ``` b"
    # trafilatura's block-start escapes and a table's \| are syntax: untouched
    assert without_escapes("\\# not a heading\n1\\. not a list") == (
        "\\# not a heading\n1\\. not a list"
    )
    assert without_escapes("| a \\| b | \\<c> |") == "| a \\| b | <c> |"
    # ...but inside a line, after a space (a list item's paragraphs, which trafilatura writes
    # on the item's line), such an escape starts nothing: it goes, outside code spans
    assert without_escapes("- a: \\- b \\+ c 2\\. d \\> e \\## f") == "- a: - b + c 2. d > e ## f"
    assert without_escapes("- \\- a\\-b `c \\- d`") == "- \\- a\\-b `c \\- d`"
    assert without_escapes("- 1\\. a") == "- 1\\. a"


def test_without_escapes_in_a_heading_keeps_its_plain_text():
    # __gt__ unescaped is strong emphasis: the escapes of "_" stay, the others go
    heading = without_escapes("## object.\\_\\_gt\\_\\_ and \\[x\\]")
    assert heading == "## object.\\_\\_gt\\_\\_ and [x]"
    assert [s.path for s in markdown_sections(heading)] == [("object.__gt__ and [x]",)]
    # a "tag" that names no HTML element (lower case), an "autolink" that is no link: text
    assert without_escapes("### impl\\<T> From\\<T> for Box\\<dyn Any + 'a>") == (
        "### impl<T> From<T> for Box<dyn Any + 'a>"
    )
    heading = "#### fn chain\\<U>(self) -> Option\\<Self::Item>"
    assert without_escapes(heading) == "#### fn chain<U>(self) -> Option<Self::Item>"
    assert [s.path for s in markdown_sections(without_escapes(heading))] == [
        ("fn chain<U>(self) -> Option<Self::Item>",)
    ]
    # an HTML element's tag and a link stay escaped: unescaped, they would leave the path
    assert (
        without_escapes("## a \\<div> b \\<https://x.org/>") == "## a \\<div> b \\<https://x.org/>"
    )
    (section,) = markdown_sections(without_escapes("## a\\_b\\_c\n\ntext\n"))
    assert section.path == ("a_b_c",)
    # an empty link to nowhere is text: C++'s operator[]() (Doxygen's member headings)
    assert without_escapes("## operator\\[\\]() \\[1/9\\]") == "## operator[]() [1/9]"
    assert [s.path for s in markdown_sections("## operator[]() [1/9]")] == [("operator[]() [1/9]",)]


# Markdown made of what escapes and block starts are made of
_MARKDOWN = st.lists(
    st.sampled_from(
        ["\\*", "\\_", "\\`", "\\<", "\\[", "\\]", "\\~", "*", "_", "`", "<", ">", "#",
         "-", "+", "1.", " ", "  ", "\n", "\n\n", "a", "div", "pre", "x", ":", "|", "=", "\\",
         "```", "<x>", "\\<x>", "- "]
    ),
    max_size=30,
).map("".join)  # fmt: skip


def _structure(markdown: str) -> list[tuple]:
    """The blocks markdown-it reads, a one-tag HTML block (type 7) as the paragraph it acts as."""
    out = []
    for tok in block_parser().parse(markdown):
        kind = tok.type
        if kind == "html_block" and not _HTML_BLOCK_START.match(tok.content.lstrip()):
            kind = "paragraph_open"
        if kind not in ("inline", "paragraph_close"):
            out.append((kind, tok.map, tok.level))
    return out


@given(markdown=_MARKDOWN)
def test_without_escapes_keeps_the_blocks(markdown):
    assert _structure(without_escapes(markdown)) == _structure(markdown)
    fences_alone(markdown)
