"""Repairs of trafilatura's output with the DOM, each on a real page of the generator zoo
(docs/structure.md; the pages: tests/data/README.md), and the structural invariant on them."""

import gzip
import os
import re

import lxml.html
import trafilatura

from transforms.chunking.block_parser import block_parser
from transforms.chunking.markdown import headings, markdown_sections
from transforms.ingest.html import HtmlExtraction, _prose_item_links_as_text, html_to_markdown
from transforms.ingest.structure_check import check_page

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _html(name: str) -> bytes:
    with gzip.open(os.path.join(DATA, name)) as f:
        return f.read()


def _extracted(name: str) -> tuple[HtmlExtraction, list]:
    """The job's extraction of a real page and the structural check's violations of it."""
    html = _html(name)
    extraction = html_to_markdown(html)
    return extraction, check_page(trafilatura.load_html(html), extraction.text, extraction.title)


def _violations(name: str) -> list:
    return _extracted(name)[1]


def _checked(name: str) -> HtmlExtraction:
    """The job's extraction of a real page, made once and checked: no violation."""
    extraction, violations = _extracted(name)
    assert violations == []
    return extraction


def _page(title: str, body: str) -> str:
    """A synthetic page: `body` after an <h1> of `title` in <main>."""
    return (
        f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>{body}"
        "</main></body></html>"
    )


def test_rustdoc_items_are_headed_by_their_signatures():
    text = html_to_markdown(_html("rust163-std-io-bytes.html.gz")).text
    found = [h for _, _, h in headings(text)]
    # Before: "## source" (and "## 1.28.0 · source") over every method, "## Expand description"
    # over an empty section, no title heading, short methods dropped as link lists
    assert found[:4] == [
        "Struct std::io::Bytes",
        "Trait Implementations",
        "impl<R: Debug> Debug for Bytes<R>",
        "fn fmt(&self, f: &mut Formatter<'_>) -> Result",
    ]
    assert not [h for h in found if "source" in h or h == "Expand description"]
    assert "fn next(&mut self) -> Option<Result<u8>>" in found
    assert "fn step_by(self, step: usize) -> StepBy<Self>" in found  # no "ⓘNotable traits"
    # the description, which a short paragraph with two links to code had lost
    assert "An iterator over `u8` values of a reader.\n" in text
    assert "calling `bytes` on a reader." in text


def test_a_heading_holds_text_not_escapes():
    text = _checked("rust163-std-io-bytes.html.gz").text
    # Before: "#### fn last(self) -> Option\<Self::Item>": `<Self::Item>` unescaped read as an
    # autolink, `<T>` as an HTML tag, and both dropped out of the section path
    assert "#### fn last(self) -> Option<Self::Item>" in text.split("\n")
    assert "\\<" not in text
    paths = {s.path[-1] for s in markdown_sections(text) if s.path}
    assert "fn last(self) -> Option<Self::Item>" in paths
    # a `where` clause after a <br> in the <h4>: before, a paragraph under "... where"
    chain = "fn chain<U>(self, other: U) -> Chain<Self, <U as IntoIterator>::IntoIter>"
    assert f"{chain} where U: IntoIterator<Item = Self::Item>," in paths


def test_a_heading_stays_on_one_line():
    text = html_to_markdown(_html("mkdocs142-dev-guide-themes.html.gz")).text
    # Before: "##### `title: str`", then after a blank line "      `class-attribute`", an
    # indented code block (and two spaces between the two, one since whitespace runs across
    # elements are one)
    assert "##### `title: str` `class-attribute`" in text.split("\n")
    assert "      `class-attribute`" not in text


def test_a_short_page_is_its_text_not_the_whole_page():
    text = _checked("cmake325-command-else.html.gz").text
    # Before: trafilatura's dump of the whole page ("Navigation index next | previous | CMake
    # » 3.25.1 Documentation » ...", "Previous topic", "Quick search"), its 109 characters
    # being under its 250-character threshold
    assert text == (
        "# else\n\nStarts the else portion of an if block.\n\n```\nelse([<condition>])\n```\n"
        "See the `if()` command."
    )


def test_mkdocs_headings_are_the_pages_headings():
    # every heading of the page was a "heading" violation: the checker read the permalink's
    # icon glyph into the page's headings; the job had split mkdocstrings' <h5>s
    assert [v.kind for v in _violations("mkdocs142-dev-guide-themes.html.gz")].count("heading") == 0


def test_javadoc_members_are_headed_sections_not_list_items():
    text = _checked("commons-lang3-reflect-inheritanceutils.html.gz").text
    # Before: Javadoc's lists of sections (`<ul class="member-list"><li><section><h3>`) were
    # list items, each on one line with its heading: "- ## Method Summary Modifier and
    # TypeMethodDescription`static int``distance(...", "  - ### distance Returns the number..."
    assert [h for _, _, h in headings(text)] == [
        "Class InheritanceUtils",
        "Constructor Summary",
        "Method Summary",
        "Methods inherited from class java.lang.Object",
        "Constructor Details",
        "InheritanceUtils",
        "Method Details",
        "distance",
    ]
    lines = text.split("\n")
    # the summary's grid of <div>s is the table it draws, a row per member
    assert "| Modifier and Type | Method | Description |" in lines
    assert (
        "| `static int` | `distance(Class<?> child, Class<?> parent)` | Returns the number of "
        "inheritance hops between two classes. |"
    ) in lines
    # a member's signature and description, whose <div>s' text trafilatura keeps in a list
    # item and drops outside one; the words before the description's <p> too
    assert "public static int distance(Class<?> child, Class<?> parent)" in lines
    assert "Utility methods focusing on inheritance." in lines
    assert "`InheritanceUtils` instances should NOT be constructed in standard programming." in (
        text
    )
    assert "This constructor is `public` to permit tools" in text
    paths = {s.path[-1] for s in markdown_sections(text) if s.path}
    assert "distance" in paths


def test_javadoc_description_keeps_its_words_before_its_paragraphs():
    text = _checked("commons-lang3-text-strtokenizer.html.gz").text
    first = text.split("\n### getCSVInstance\n", 1)[1].split("\n### ", 1)[0]
    # `<div class="block">Gets a new ... method). <p> You must call ...</div>`: once out of the
    # list item, on a page with this much <p> text, trafilatura kept the <p> and dropped the
    # <div>'s own text before it
    assert first.strip().split("\n\n")[:3] == [
        "public static StrTokenizer getCSVInstance()",
        "Deprecated.",
        "Gets a new tokenizer instance which parses Comma Separated Value strings initializing "
        "it with the given input. The default for CSV processing will be trim whitespace from "
        "both ends (which can be overridden with the setTrimmer method).",
    ]
    assert 'You must call a "reset" method to set the string which you want to parse.' in first


def test_a_rust_lifetime_in_a_heading_is_text_not_emphasis():
    text = _checked("rust163-std-btree-set-difference.html.gz").text
    # Before: "### impl<'\_, T, A> Clone for Difference<'\_, T, A> ...": unescaped, CommonMark
    # reads `_, T, A> Clone for Difference<'_` as emphasis, so the escapes stayed for the
    # section path to keep its underscores (181 of the zoo's rustdoc escapes)
    clone = "impl<'_, T, A> Clone for Difference<'_, T, A> where A: Allocator + Clone,"
    assert f"### {clone}" in text.split("\n")
    assert "\\_" not in text
    assert clone in [h for _, _, h in headings(text)]
    assert clone in {s.path[-1] for s in markdown_sections(text) if s.path}


def test_an_admonition_in_a_definition_is_labelled_not_headed():
    text = _checked("postgresql15-runtime-config-statistics.html.gz").text
    # Before: "  ### Note SQL-language functions that are simple enough...", a heading inside the
    # definition of track_functions, that took the note's first line for its text
    assert [h for _, _, h in headings(text)] == [
        "20.9. Run-time Statistics",
        "20.9.1. Cumulative Query and Index Statistics",
        "20.9.2. Statistics Monitoring",
    ]
    lines = text.split("\n")
    at = lines.index("- `track_functions` (`enum`)")
    note = lines.index("  **Note**", at)
    assert lines[note + 1].startswith("  SQL-language functions that are simple enough")
    assert not [line for line in lines[at + 1 : note] if line.startswith("- ")]
    # the chapter's table of contents (links to its own sections) is no lost content


def test_a_sphinx_toctree_in_the_body_is_content():
    text = _checked("cmake325-manual-cmake-generators.7.html.gz").text
    # Before: "#### Makefile Generators" followed at once by "#### Ninja Generators": the
    # toctree of generator pages under each heading, all links, went as navigation
    makefiles = text.split("#### Makefile Generators\n", 1)[1].split("\n#", 1)[0]
    assert "- Unix Makefiles" in makefiles.split("\n")
    assert "- Visual Studio 17 2022" in text.split("\n")


def test_a_table_in_a_definition_is_a_row_to_a_line():
    text = _checked("sphinx53-websupport-api.html.gz").text
    # Before: "  Key Contents text The comment text. username The username that was stored with
    # the comment. id ...", the table of WebSupport.get_data's <dd> as one run of text
    lines = text.split("\n")
    at = lines.index("  Key | Contents")
    assert lines[at + 1 : at + 4] == [
        "  text | The comment text.",
        "  username | The username that was stored with the comment.",
        "  id | The comment’s unique identifier.",
    ]


def test_a_heading_permalink_does_not_make_a_method_a_link_list():
    text = _checked("rust163-std-cell-unsafecell.html.gz").text
    # Before: "#### pub const fn new(value: T) -> UnsafeCell<T>" followed at once by the next
    # heading; `into_inner` and `get_mut` the same: each docblock's "Examples" heading (a link
    # to itself) and its example's "Run" link read as a link list
    new = text.split("#### pub const fn new(value: T) -> UnsafeCell<T>\n", 1)[1]
    assert new.lstrip().startswith("Constructs a new instance of `UnsafeCell`")
    assert "#### pub fn into_inner(self) -> T" in text.split("\n")
    get_mut = text.split("#### pub fn get_mut(&mut self) -> &mut T\n", 1)[1]
    assert get_mut.lstrip().startswith("Returns a mutable reference to the underlying data.")


def test_a_trait_s_implementors_are_a_list_of_code_items():
    text = _checked("rust163-std-convert-asref.html.gz").text
    # Before: no "Implementors" at all: each of the 43 is a heading of nothing (a section's
    # <h3>, its types links), which trafilatura drops, and the section's <h2> went with them
    implementors = text.split("## Implementors\n\n", 1)[1].split("\n")
    assert implementors[:2] == ["- `impl AsRef<str> for str`", "- `impl AsRef<str> for String`"]
    assert len([line for line in implementors if line.startswith("- `impl")]) == 43
    # a `where` clause on the item's line
    assert (
        "- `impl<T, const LANES: usize> AsRef<[T]> for Simd<T, LANES> where T: SimdElement, "
        "LaneCount<LANES>: SupportedLaneCount,`"
    ) in implementors
    assert not [h for _, _, h in headings(text) if h.startswith("impl")]


def test_trafilatura_s_own_extraction_is_kept_unless_it_found_next_to_nothing():
    # SQLite's CREATE VIEW: trafilatura's comparison took a fallback's 1,749 characters over
    # its own 1,888 (before: no title, no "1. Syntax", no "2. Description")
    text = _checked("sqlite340-lang-createview.html.gz").text
    assert text.startswith("CREATE VIEW\n\n# 1. Syntax\n\n**create-view-stmt:**")
    assert "\n# 2. Description\n\nThe CREATE VIEW command assigns a name" in text
    # gettext's index: its own extraction holds 326 characters of the page's 2,311, and the
    # fallback the index (kept as before)
    text = _checked("gettext021-index-part.html.gz").text
    assert "|  | `RET, PO Mode command` | 8.3.9 Modifying Translations | \n" in text


def test_a_trait_implementation_s_items_with_read_more_links_are_kept():
    text = _checked("rust163-std-cell-oncecell.html.gz").text
    # Before: "impl<T> Clone for OnceCell<T>" with nothing under it, and ToOwned's `to_owned`
    # and `clone_into` gone: their summaries' "Read more" links and their signatures' type
    # links made trafilatura's link-density test take them for boilerplate
    clone = text.split("impl<T> Clone for OnceCell<T> where T: Clone,\n\n", 1)[1]
    assert clone.startswith(
        "#### fn clone(&self) -> OnceCell<T>\n\nReturns a copy of the value. Read more\n\n"
        "#### fn clone_from(&mut self, source: &Self)\n\n"
    )
    assert "Uses borrowed data to replace owned data, usually by cloning. Read more" in text
    assert "Creates owned data from borrowed data, usually by cloning. Read more" in text


def test_a_heading_in_a_block_quote_is_a_label_in_one_piece():
    text = _checked("rust163-book-ch05-03-method-syntax.html.gz").text
    # Before: "### Where’s the", a blank line, then "`->` Operator?": trafilatura's quote
    # handling split the aside's <h3> at its <code>
    lines = text.split("\n")
    assert "**Where’s the `->` Operator?**" in lines
    assert "Where’s the" not in [h for _, _, h in headings(text)]


def test_a_section_of_the_content_is_not_taken_for_its_container():
    name = "cmake325-manual-cmake-generator-expressions.7-cut.html.gz"
    text = _checked(name).text
    # Before: trafilatura took <section id="primary-comparison-expressions"> (its id starts
    # with "primary") for the page's content, readability's text of the whole page won, and
    # its <pre> came out as plain lines, "# Non-group linking relationships..." a heading
    lines = text.split("\n")
    comment = "  # Non-group linking relationships, these are non-circular so far"
    at = lines.index(comment)
    assert lines[at - 7 : at - 5] == ["  ```", "  add_library(lib1A ...)"]
    assert lines[at - 1] == ""  # the listing's blank line before the comment
    assert "Non-group linking relationships" not in " ".join(h for _, _, h in headings(text))
    assert "### Primary Comparison Expressions" in lines


def test_a_section_of_one_paragraph_keeps_its_links():
    # Before: Django's "Generic views" lost its one paragraph as a link list, and trafilatura,
    # left with next to nothing, dumped the whole page ("Previous topic", "Quick search")
    name = "django32-topics-http-generic-views.html.gz"
    assert _checked(name).text == "# Generic views\n\nSee Built-in class-based views API."
    # Before: "## See also" followed at once by "## GIT"
    text = _checked("git239-merge-base.html.gz").text
    assert "## See also\n\ngit-rev-list(1), git-show-branch(1), git-merge(1)\n\n## GIT" in text
    # Before: mkdocstrings' `Page.canonical_url`, one sentence with two links, went
    text = _checked("mkdocs142-dev-guide-themes.html.gz").text
    at = text.index("##### `canonical_url: Optional[str]` `class-attribute`\n")
    assert text[at:].split("\n")[2].startswith("The full, canonical URL to the current page")


def test_a_manual_page_keeps_its_title_and_name_section():
    # AsciiDoc puts a man page's <h1> and NAME section in div#header, beside the div#content
    # that trafilatura takes as the content: before, the text began at "## SYNOPSIS"
    for name, purpose in [
        (
            "git239-merge-base.html.gz",
            "git-merge-base - Find as good common ancestors as possible for a merge",
        ),
        (
            "git239-web--browse.html.gz",
            "git-web--browse - Git helper script to launch a web browser",
        ),
    ]:
        extraction = _checked(name)
        command = purpose.split(" - ")[0]
        assert extraction.text.startswith(
            f"# {command}(1) Manual Page\n\n## NAME\n\n{purpose}\n\n## SYNOPSIS\n"
        ), extraction.text[:200]
        assert extraction.title == f"{command}(1) Manual Page"


def test_a_short_section_keeps_its_links():
    name = "commons-lang3-text-strtokenizer.html.gz"
    text = _checked(name).text
    # Before: "### nextToken" and "Deprecated." with no signature between: under 300 characters
    # with a link on `String`, the signature went as a link list
    assert "### nextToken\n\npublic String nextToken()\n\nDeprecated." in text
    assert "### toString\n\npublic String toString()\n\nDeprecated." in text


def test_doxygen_members_are_headed_sections_with_their_declarations():
    name = "jsoncpp195-class-json-reader.html.gz"
    extraction = _checked(name)
    text = extraction.text
    # Before: no heading at all (an empty <div id="main-nav"> passed for the content
    # container, so trafilatura's wild-text recovery ran), the page titled "◆ Char", every
    # declaration a table: "| bool Json::Reader::parse | ( | const char * | *beginDoc*, |"
    assert extraction.title == "Json::Reader Class Reference"
    found = [h for _, _, h in headings(text)]
    assert found[:3] == [
        "Json::Reader Class Reference",
        "Detailed Description",
        "Member Typedef Documentation",
    ]
    assert "parse() [1/3]" in found and "good()" in found
    parse = text.split("## parse() [1/3]\n\n", 1)[1]
    assert parse.startswith(
        "```\nbool Json::Reader::parse(const char * beginDoc,\nconst char * endDoc,\n"
        "Value & root,\nbool collectComments = true)\n```\nRead a Value from a JSON document."
    )
    # a short member keeps "Definition at line 38 of file reader.h" (two short links)
    char = text.split("## Char\n\n", 1)[1]
    assert char.startswith("```\nusing Json::Reader::Char = char\n```\nDefinition at line 38")
    # the summary: a label and a list, a member and its brief to an item
    assert "**Public Member Functions**" in text.split("\n")
    assert "- `bool good () const`: Return whether there are any errors." in text.split("\n")
    assert "More..." not in text and "\u25c6" not in text


def test_doxygen_templates_and_operators():
    text = _checked("jsoncpp195-class-json-secure-allocator.html.gz").text
    construct = text.split("## construct()\n\n", 1)[1]
    assert construct.startswith(
        "```\ntemplate<typename T >\ntemplate<typename... Args>\n"
        "void Json::SecureAllocator< T >::construct(pointer p,\nArgs &&... args) [inline]\n```"
    )
    # Before: "## operator\\[\\]()": unescaped, "[]()" reads as an empty link
    name = "jsoncpp195-class-json-char-reader-builder.html.gz"
    text = _checked(name).text
    assert "## operator[]()" in text.split("\n")
    assert "operator[]()" in {s.path[-1] for s in markdown_sections(text) if s.path}


def test_texinfo_button_bars_are_navigation_and_go():
    # zsh's manual (texi2any in its texi2html style): every node opens with a table of
    # bracketed links "[ << ] [ < ] [ Up ] [ > ] [ >> ] [Top] [Contents] [Index] [ ? ]"
    html = _html("zsh59-command-execution.html.gz")
    text = html_to_markdown(html).text
    # Before: the text began "| [ << ] | [ < ] | [ Up ] | ..." (391 such bars on the zoo's 73
    # Texinfo pages); the checker did not see them
    assert "[ << ]" not in text and "[Contents]" not in text
    assert text.startswith("# 8 Command Execution\n")
    assert "- 127\n: The search was unsuccessful." in text
    assert _violations("zsh59-command-execution.html.gz") == []
    tree = trafilatura.load_html(html)
    bar = "| [ << ] | [ < ] | [ Up ] | [ > ] | [ >> ] |  | [Top] | [Contents] | [Index] | [ ? ] |"
    found = check_page(tree, f"{bar}\n\n{text}", "8 Command Execution")
    assert [v.kind for v in found] == ["navigation"]
    # a link in brackets in running text is no bar
    assert not check_page(tree, f"{text}\nSee [Top] of the page.\n", "8 Command Execution")


def test_a_section_whose_anchor_holds_a_boilerplate_word_is_kept():
    # Sphinx 5.3's intersphinx page: its last section's id,
    # "using-intersphinx-with-inventory-file-under-basic-authorization", holds "author", one
    # of the words by which trafilatura discards a site's `div#author-box` before extracting
    text = _checked("sphinx53-usage-extensions-intersphinx.html.gz").text
    # Before: the section was gone, heading, code and all
    assert "## Using Intersphinx with inventory file under Basic Authorization\n" in text
    assert "'https://user:password@docs.python.org/3'" in text
    assert text.rstrip().endswith("stripped from the URL when generating the links.")


def test_a_section_named_comments_is_kept():
    # trafilatura, extracting without reader comments, prunes every div or section whose id
    # starts with "comment"; docutils and texi2any give a section "Comments" that id
    text = _checked("sphinx53-usage-restructuredtext-basics.html.gz").text
    # Before: the section was gone, heading, examples and all
    assert "## Comments\n\nEvery explicit markup block which isn’t a valid markup" in text
    assert "```\n..\n   This whole indented block\n   is a comment.\n" in text
    # zsh's manual: `<div class="section" id="Comments">` opens with the node's button bar,
    # then its heading
    text = _checked("zsh59-shell-grammar.html.gz").text
    assert "## 6.7 Comments\n\nIn non-interactive shells, or in interactive shells" in text
    assert "[ << ]" not in text


def test_a_texinfo_node_named_with_a_boilerplate_word_is_kept():
    # texi2any names a section by its node: the heading without its number. A node whose name
    # holds one of trafilatura's boilerplate words ("comment", "share", "menu", "tags") was
    # pruned whole, heading and text: GNU Octave's "Comments and the Help System", Bash's
    # "Comments", Autoconf's "Comments in Make Rules"
    text = _checked("octave73-comments-and-the-help-system.html.gz").text
    # Before: no text at all
    assert text.startswith("#### 2.7.3 Comments and the Help System\n\nThe `help` command")
    assert "# usage: f (x, t)\n" in text and "Previous:" not in text
    # an appendix's lettered number, the node's name in another case, the button bar first
    page = (
        '<html><body><div class="appendixsubsec" id="Shared-BLAS"><div class="header"><p>'
        'Previous: <a href="#MKL" rel="prev">Intel MKL</a>, Up: <a href="#BLAS" rel="up">BLAS'
        '</a></p></div><span id="Shared-BLAS-1"></span><h4 class="appendixsubsec">A.3.1.4 '
        "Shared BLAS</h4><p>The BLAS library will be used for many of the add-on packages as "
        "well as for the program itself, so a shared library is better.</p></div>"
        "<p>Another paragraph of the page, long enough to be its content, and then some.</p>"
        "</body></html>"
    )
    text = html_to_markdown(page).text
    assert "A.3.1.4 Shared BLAS\n\nThe BLAS library will be used for many" in text
    # a node whose name holds a character texi2any encodes, "-" as "_002d": the Octave page
    # with its node renamed "Comments and the Help-System"
    with gzip.open(os.path.join(DATA, "octave73-comments-and-the-help-system.html.gz"), "rt") as f:
        octave = f.read()
    encoded = octave.replace("Comments-and-the-Help-System", "Comments-and-the-Help_002dSystem")
    encoded = encoded.replace(
        "2.7.3 Comments and the Help System", "2.7.3 Comments and the Help-System"
    )
    assert html_to_markdown(encoded).text.startswith(
        "#### 2.7.3 Comments and the Help-System\n\nThe `help` command"
    )
    # an id that is no heading's node still counts as boilerplate
    shared = page.replace('id="Shared-BLAS"', 'id="share-buttons"')
    assert "The BLAS library" not in html_to_markdown(shared).text


def test_text_that_shows_escaped_html_keeps_its_entities():
    # trafilatura's Markdown ends with html.unescape of text that lxml had unescaped already
    text = _checked("django32-ref-templates-language.html.gz").text
    # Before: "This will be escaped: <b>", the opposite of what the page explains, and "`<`
    # is converted to `<`"
    assert "```\nThis will be escaped: &lt;b&gt;\nThis will not be escaped: <b>\n```" in text
    assert "- `<` is converted to `&lt;`\n- `>` is converted to `&gt;`\n" in text
    assert "- `&` is converted to `&amp;`" in text
    assert '{{ data|default:"3 &lt; 2" }}' in text
    # an "&" that starts an entity's name in code: Doxygen's `char *&current` read "¤t"
    page = _page(
        "Iterators",
        "<p>" + " ".join(f"word{i}" for i in range(80)) + "</p>"
        "<p>Takes <code>const iterator &amp;current</code> and <code>Copy(T &amp;copy)</code>"
        " from R&amp;D.</p><pre>if (a &amp;&amp; b &amp;&amp; &amp;para != 0)\n</pre>",
    )
    text = html_to_markdown(page).text
    assert "`const iterator &current` and `Copy(T &copy)` from R&D." in text
    assert "```\nif (a && b && &para != 0)\n```" in text


def test_a_list_in_a_table_cell_keeps_its_items():
    # trafilatura keeps a cell's paragraphs and dropped a list there whole
    text = _checked("postgresql15-functions-json.html.gz").text
    row = next(line for line in text.splitlines() if "`json_populate_record` (" in line)
    # Before: "... the following rules are applied in sequence: While the example below ..."
    assert (
        "the following rules are applied in sequence: • A JSON null value is converted to an"
        " SQL null in all cases. • If the output column is of type `json` or `jsonb`, the JSON"
        " value is just reproduced exactly. • If the output column is a composite (row) type"
    ) in row
    assert "reproduced exactly. While the example below" not in row
    # an ordered list counts from its start, a nested list's items follow their item's text
    page = _page(
        "Steps",
        "<p>" + " ".join(f"word{i}" for i in range(80)) + "</p>"
        "<table><tr><th>Correct</th><th>Incorrect</th></tr><tr><td><ol start='3'>"
        "<li>Create new table</li><li>Copy data<ul><li>all rows</li></ul></li></ol></td>"
        "<td><p>Rename first:</p><ul><li><p>Rename old table</p></li></ul></td></tr></table>",
    )
    text = html_to_markdown(page).text
    row = "| 3. Create new table 4. Copy data • all rows | Rename first: • Rename old table |"
    assert row in text
    # broken HTML: a cell outside any table keeps its list as a list (it raised
    # StopIteration, and the page was rejected)
    stray = _page(
        "Stray",
        "<p>" + " ".join(f"word{i}" for i in range(80)) + "</p>"
        "<td><ul><li>a stray cell's first item</li></ul></td>",
    )
    assert "- a stray cell's first item" in html_to_markdown(stray).text


def test_a_code_listings_caption_is_kept():
    # trafilatura, extracting no images, discards every element whose class or id holds
    # "caption"; these say what the code beside them is
    text = _checked("rust163-book-ch05-03-method-syntax.html.gz").text
    # Before: no "Listing 5-13" in the text (the Rust book's <p><span class="caption">)
    assert "```\nListing 5-13: Defining an `area` method on the `Rectangle` struct\n" in text
    text = _checked("django32-ref-templates-language.html.gz").text
    # Sphinx's div.code-block-caption: the file the template is
    assert "For example:\n\n`base.html`\n\n```\n{% autoescape off %}\n" in text
    assert '\n`child.html`\n\n```\n{% extends "base.html" %}\n' in text
    # a definition's term whose id holds "caption": Sphinx's option `:caption:`
    text = _checked("sphinx53-usage-restructuredtext-directives.html.gz").text
    assert "\n  - :caption: *caption of code block (text)*\n  : Set a caption to the" in text


def test_a_figures_or_a_sidebars_caption_still_goes():
    words = " ".join(f"word{i}" for i in range(80))
    page = _page(
        "Figures",
        f"<p>{words}</p><figure><img src='a.png'><figcaption class='caption'><p>A chart of"
        " the retries per hour over the week</p></figcaption></figure>"
        f"<div class='caption'>Image: the same chart by day of the month, for the year</div>"
        "<img src='b.png'><p class='caption'>Get started with the library</p>"
        "<ul><li><a href='a.html'>Installation</a></li></ul><pre>code = 1\n</pre>",
    )
    text = html_to_markdown(page).text
    assert "word79" in text and "code = 1" in text
    assert "chart" not in text and "Get started" not in text


def test_inline_code_spans_do_not_run_together():
    # DocBook's replaceable parts, <em class="replaceable"><code>...</code></em>, one after
    # another: trafilatura lost the space between them. Before: "`signal_name``process_id`",
    # which Markdown reads as one span holding "signal_name``process_id"
    text = _checked("postgresql15-app-pg-ctl.html.gz").text
    assert re.search(r"`kill` +`signal_name` +`process_id`", text)
    assert not re.search(r"[^`\s]``[^`\s]", text)
    # code that touches code is one span; emphasis that holds only code is the code
    page = _page(
        "Spans",
        "<p>" + " ".join(f"word{i}" for i in range(80)) + "</p>"
        "<p>Run <code>make</code><code>test</code>, <em><code>x</code></em> <em><code>y</code>"
        "</em> and <em>plain</em> words.</p>",
    )
    assert "Run `maketest`, `x` `y` and *plain* words." in html_to_markdown(page).text


def test_a_terms_class_and_name_in_touching_code_are_one_span():
    # Sphinx writes an attribute's term as the class's code and the name's, each in a
    # <span class="pre">, touching. Before: "`AppConfig.``name`", one span holding "``"
    text = _checked("django32-ref-applications.html.gz").text
    for name in ("name", "label", "verbose_name", "path"):
        assert f"- `AppConfig.{name}`\n" in text
    assert not re.search(r"[^`\s]``[^`\s]", text)


def test_lines_of_inline_code_in_a_div_stay_lines():
    # Doxygen's include lines: <code>...</code><br/> in a <div>. Before: one span,
    # "`#include <cstring>``#include <memory>`", and the next sentence on the line after it
    text = _checked("jsoncpp195-allocator-h.html.gz").text
    assert "\n`#include <cstring>`\n\n`#include <memory>`\n" in text
    assert re.search(r"\n\nGo to the source code of this file\.", text)


def _on_a_page_of_paragraphs(block: str) -> str:
    paragraphs = "".join(
        "<p>" + " ".join(f"word{i}x{j}" for i in range(80)) + "</p>" for j in range(6)
    )
    return html_to_markdown(_page("Blocks", paragraphs + block + "<p>The end.</p>")).text


def test_a_divs_own_text_is_kept_and_a_bar_of_links_is_not():
    # trafilatura keeps a <div>'s own text only on a page of little <p> text: here the
    # first went whole and the second lost "Run " (the words before its first element)
    text = _on_a_page_of_paragraphs(
        '<div>Text with <a href="x.html">a link</a> inside.</div>'
        "<div>Run <code>make</code> then <code>test</code>.</div>"
        '<div><a href="a.html">Home</a> | <a href="b.html">Table of contents</a> | '
        '<a href="c.html">Index</a></div>'
    )
    assert "\n\nText with a link inside.\n\nRun `make` then `test`.\n\nThe end." in text
    assert "Home" not in text and "Index" not in text


def test_text_in_divs_on_real_pages():
    # PostgreSQL's "See Also" (a <div> of its heading and links, "RESET, SHOW") is a bar of
    # cross-references, left out as before
    assert "See Also" not in _checked("postgresql15-sql-set.html.gz").text
    # rustdoc's notes (<div class="stab">) went, and as paragraphs their issue links made the
    # last methods of the Iterator implementation link boilerplate to trafilatura
    text = _checked("rust163-std-io-bytes.html.gz").text
    assert text.count("🔬 This is a nightly-only experimental API.") == 15
    assert re.search(
        r"#### fn is_sorted_by_key<F, K>\(self, f: F\) -> bool .*\n\n"
        r"🔬 This is a nightly-only experimental API\. \(`is_sorted` #53485\)\n\n"
        r"Checks if the elements of this iterator are sorted using the given key extraction",
        text,
    )
    # Doxygen's code fragment (a div.line to a line) is a code block, its tooltips gone
    text = _checked("jsoncpp195-class-json-char-reader-builder.html.gz").text
    assert "Usage:\n\n```\nusing namespace Json;\nCharReaderBuilder builder;\n" in text
    assert "**Definition:**" not in text
    # a page of one sentence keeps it, not its navigation bar (Django's "Generic views")
    text = _checked("django32-topics-http-generic-views.html.gz").text
    assert text == "# Generic views\n\nSee Built-in class-based views API."


def test_a_short_page_keeps_trafilaturas_own_extraction_unless_it_is_the_dump():
    # Vim's short help page, one <pre>, came out of trafilatura's fallbacks as loose lines:
    # short pages all went to them, for fear of the dump of the whole page that trafilatura
    # makes where it finds next to nothing (Django's "Generic views", above, still goes)
    text = _checked("vim90-os-mint.html.gz").text
    assert text.startswith("# Vim documentation: os_mint\n\nmain help file\n```\n*os_mint.txt*")
    assert "\t*MiNT* *Atari*\nThe Atari MiNT support was removed with patch 8.2.1215." in text
    assert text.endswith("\n```")
    # and the blank lines of its <pre>, which trafilatura drops from every code block
    assert "not maintained.\n\n\nOriginally added by" in text


def test_a_fragment_is_read_as_a_document():
    # Go's pages are their content alone (no <html>, no <body>): trafilatura's tree had no
    # body, and its extraction lost inline code met before and the text up to the next one
    text = _checked("go119-doc-asm.html.gz").text
    assert text.startswith("# A Quick Guide to Go's Assembler\n\nThis document is a quick outline")
    assert "`R0@>R1`: For `<<`, left shift `R0` by the count in `R1`. The other codes" in text
    assert (
        "\n- `[R0,g,R12-R15]`: For multi-register instructions, the set comprising `R0`, `g`,"
        in text
    )


def test_inline_code_that_holds_emphasis_is_its_text():
    # trafilatura wrote the emphasis apart from the code, out of order, and lost what followed
    text = _checked("go119-doc-asm.html.gz").text
    # before: "Field offsets are of the form *type*_*field**type*__size", two sentences gone
    assert (
        "Field offsets are of the form `type_field`. Struct sizes are of the form `type__size`. "
        "For example, consider the following Go definition:"
    ) in text
    # before: "... must be in `./locale/`. The text domain of individual documents depends on
    # *language*/LC_MESSAGES/sphinx.mo`gettext_compact`"
    text = _checked("sphinx53-usage-configuration.html.gz").text
    assert "must be in `./locale/language/LC_MESSAGES/sphinx.mo`. The text domain" in text


def test_reader_comments_still_go():
    words = " ".join(f"word{i}" for i in range(80))
    page = _page(
        "A post",
        f"<p>{words}.</p>"
        '<div id="comments" class="comments-area"><h2 class="comments-title">2 thoughts on'
        ' "A post"</h2><ol class="comment-list"><li><p>Great post, thanks!</p></li></ol></div>'
        f'<section id="comments-2"><h3>Leave a reply</h3><p>Your email is safe. {words}</p>'
        "</section>",
    )
    text = html_to_markdown(page).text
    assert "word79." in text
    assert "thoughts" not in text and "Great post" not in text and "Leave a reply" not in text


def test_a_boilerplate_block_that_is_no_section_of_content_still_goes():
    words = " ".join(f"word{i}" for i in range(80))
    page = (
        "<html><head><title>Templates</title></head><body><main><h1>Templates</h1>"
        f"<p>{words}.</p>"
        '<section id="built-in-template-tags"><h2>Built-in template tags</h2>'
        f"<p>Each tag is written between braces. {words}.</p></section>"
        '<div id="tags">Tagged: <a href="/t/a">alpha</a>, <a href="/t/b">beta</a></div>'
        "</main></body></html>"
    )
    text = html_to_markdown(page).text
    assert "## Built-in template tags\n\nEach tag is written between braces." in text
    assert "Tagged" not in text and "alpha" not in text


def test_a_django_section_with_a_boilerplate_word_in_its_anchor_is_kept():
    # Django's theme writes docutils' HTML4 sections with prefixed ids, `<div class="section"
    # id="s-message-tags"><span id="message-tags"></span><h3>Message tags</h3>`: "tags" is a
    # boilerplate word to trafilatura, and the id is no slug of the heading
    text = _checked("django32-ref-contrib-messages.html.gz").text
    # Before: both sections were gone, headings, code and all
    assert "### Message tags\n\nMessage tags are a string representation" in text
    assert "### Adding extra message tags\n" in text
    assert "extra_tags='dragonball')" in text


def test_a_definition_term_or_prose_item_with_a_boilerplate_word_in_its_id_is_kept():
    # Sphinx 5.3's configuration page: the terms of the configuration values `author`,
    # `show_authors` and `html_sidebars` are `<dt id="confval-author">`, and a list item is
    # `<li id="conf-tags"><p>`: "author", "sidebar" and "tags" are boilerplate words to
    # trafilatura, which discards list items (dt and li alike) for them
    text = _checked("sphinx53-usage-configuration.html.gz").text
    # Before: the terms were gone, each description left under the term before it
    # ("- project\n: The documented project's name.\n\n: The author name(s)...")
    assert "\n\n- author\n: The author name(s) of the document." in text
    assert "\n\n- show_authors\n: A boolean that decides whether `codeauthor`" in text
    assert "\n\n- html_sidebars\n: Custom sidebar templates, must be a dictionary" in text
    assert "\n- There is a special object named `tags` available in the config file." in text
    assert "\n\n: " not in text  # no description without its term
    # `div.admonition-accelerating-build-speed`: "elated" is a boilerplate word (for
    # "related") to trafilatura. Before: the note was gone
    assert "Accelerating build speed" in text
    assert "Each language (except Japanese) provides its own stemming algorithm." in text
    assert "- PyStemmer (all languages)" in text


def test_a_menu_item_or_an_entry_outside_the_sections_with_a_boilerplate_id_still_goes():
    words = " ".join(f"word{i}" for i in range(80))
    page = (
        "<html><head><title>Guide</title></head><body><main>"
        f"<section><h1>Guide</h1><p>{words}.</p>"
        '<ul><li id="search_menubutton"><a href="/search">Search</a></li>'
        '<li id="item-tags"><p>Tags are kept per document and listed on its page.</p></li></ul>'
        '<dl><dt id="opt-sidebar">sidebar</dt><dd id="sidebar-text"><p>Where the sidebar is '
        "drawn, left or right.</p></dd></dl></section>"
        '<ul><li id="author-box"><p>About the author: Jane Doe writes about gardening.</p></li>'
        '<li id="share-this"><p>Share this: Twitter, Facebook</p></li></ul>'
        "</main></body></html>"
    )
    text = html_to_markdown(page).text
    assert "Search" not in text  # a menu's item: a link, no paragraph
    assert "- Tags are kept per document and listed on its page." in text
    assert "- sidebar\n: Where the sidebar is drawn, left or right." in text
    # outside the page's sections: a blog's author box and share bar
    assert "Jane Doe" not in text and "Share this" not in text


def test_footnotes_are_text_of_the_page():
    # Sphinx 5.3's directives page: docutils writes its four footnotes as
    # `<aside class="footnote brackets">` in an `<aside class="footnote-list">`, and trafilatura
    # drops every <aside> before it extracts
    text = _checked("sphinx53-usage-restructuredtext-directives.html.gz").text
    # Before: none of the four was in the text
    assert "\n\n[1] The LaTeX writer only refers the `maxdepth` option of first toctree" in text
    assert "\n\n[2] A note on available globbing syntax: you can use the standard shell" in text
    assert "[3] There is a standard `.. include` directive, but it raises errors" in text
    assert "\n\n[4] For most builders name and format are the same." in text
    assert "(1,2)" not in text  # the links back to where a footnote is cited


def test_a_citation_is_text_and_a_contents_topic_is_not():
    words = " ".join(f"word{i}" for i in range(80))
    page = (
        "<html><head><title>Guide</title></head><body><main><h1>Guide</h1>"
        '<aside class="topic contents" id="contents"><p class="topic-title">Contents</p>'
        '<ul><li><a href="#setup">Setup</a></li><li><a href="#usage">Usage</a></li></ul>'
        "</aside>"
        f'<section id="setup"><h2>Setup</h2><p>As in <a href="#knu84">[KNU84]</a>, {words}.</p>'
        f'</section><section id="usage"><h2>Usage</h2><p>Run it. {words}.</p>'
        '<div role="list" class="citation-list">'
        '<aside class="citation" id="knu84" role="doc-biblioentry">'
        '<span class="label"><span class="fn-bracket">[</span>KNU84<span class="fn-bracket">]'
        '</span></span><span class="backrefs">(<a role="doc-backlink" href="#id1">1</a>)</span>'
        "<p>Donald E. Knuth, The TeXbook, Addison-Wesley, 1984.</p></aside></div>"
        "</section></main></body></html>"
    )
    text = html_to_markdown(page).text
    assert text.endswith("\n\n[KNU84] Donald E. Knuth, The TeXbook, Addison-Wesley, 1984.")
    assert "- Setup" not in text and "Contents" not in text


def test_a_field_list_whose_types_are_links_is_kept():
    # Click 8.1's parameters page (the evaluation's click corpus): each type of a "Parameters"
    # field is a link, so to trafilatura's link-density test the list was a link list
    text = _checked("click81-parameters.html.gz").text
    # Before: Choice's field list was gone, label and all
    assert (
        "  - Parameters\n  :\n    - **case_sensitive** (*bool*) – Set to false to make choices "
        "case insensitive. Defaults to true.\n    - **choices** (*Sequence[str]*) –"
    ) in text
    assert "- **path_type** (*Optional[Type]*) – Convert the incoming path value" in text
    # a field list's links go; other links of the page are left to trafilatura
    page = _page(
        "API",
        '<dl class="py function"><dt id="f">f(<em>x</em>)</dt><dd><p>Apply f.</p>'
        '<dl class="field-list simple"><dt>Parameters</dt><dd><ul class="simple">'
        '<li><p><strong>x</strong> (<a class="reference external" href="/t#int">'
        "<em>int</em></a>) – </p></li></ul></dd></dl></dd></dl>",
    )
    assert "- **x** (*int*) –" in html_to_markdown(page).text


def test_inline_code_inside_inline_code_keeps_its_order():
    # PostgreSQL 15's SET page: DocBook marks the replaceable part inside the literal,
    # <code class="literal">SET NAMES <em class="replaceable"><code>value</code></em></code>
    text = _checked("postgresql15-sql-set.html.gz").text
    # Before: "`SET NAMES` is an alias for `value``SET client_encoding TO` . `value`"
    assert "`SET NAMES value` is an alias for `SET client_encoding TO value`." in text
    assert "`SET SCHEMA 'value'` is an alias for `SET search_path TO value`." in text
    # gtk-doc: a function name in a literal
    page = _page(
        "Modules",
        f"<p>{' '.join(f'word{i}' for i in range(60))}.</p>"
        '<table><tr><td class="enum_member_description"><p>a module returned an error from its '
        '<code class="literal"><code class="function">g_module_check_init()</code></code> '
        "function</p></td></tr></table>",
    )
    assert "error from its `g_module_check_init()` function" in html_to_markdown(page).text


def test_footnotes_written_as_a_definition_list_are_labelled_text():
    # attrs 22.2's names page: docutils before 0.18 wrote footnotes as <dl class="footnote">,
    # each label a link back to where it is cited
    text = _checked("attrs222-names.html.gz").text
    # Before: "- 1\n: We considered ..." (a definition whose term is the label); with the
    # links of prose items written as text, trafilatura took the list of label links for a
    # link list and dropped both footnotes
    assert text.endswith(
        "\n[1] We considered calling the PyPI package just `attr` too, but the name was "
        "already taken by an *ostensibly* inactive package on PyPI.\n\n[2] The highly "
        "readable PEP also explains why *attrs* wasn’t just added to the standard library. "
        "Don’t believe the myths and rumors."
    )


def test_links_in_prose_items_are_text_and_a_menu_stays_links():
    words = " ".join(f"word{i}" for i in range(60))
    page = _page(
        "Installation",
        f"<p>{words}.</p><h2>Optional dependencies</h2><p>These are detected when installed.</p>"
        '<ul class="simple"><li><p><a href="https://pypi.org/project/colorama/">Colorama</a>'
        " provides request log highlighting when using the development server on Windows."
        '</p></li><li><p><a href="https://pypi.org/project/watchdog/">Watchdog</a> provides a'
        " faster, more efficient reloader for the development server.</p></li></ul>"
        '<ul><li><a href="/a">Alpha page</a></li><li><a href="/b">Beta page</a></li></ul>',
    )
    text = html_to_markdown(page).text
    # Before: trafilatura dropped the list: every link under 10 characters, every item short
    assert "- Colorama provides request log highlighting when using the development" in text
    assert "- Watchdog provides a faster, more efficient reloader" in text
    tree = lxml.html.fromstring(page)
    _prose_item_links_as_text(tree)
    # items that are their links (a menu, a table of contents) keep them
    assert [a.text for a in tree.iter("a")] == ["Alpha page", "Beta page"]


def test_whitespace_between_inline_elements_is_one_space_across_them():
    # Erlang's definition terms are a <strong> holding a link holding a code span, each on a
    # line of its own, indented with tabs: the whitespace between them was left as it was
    # (text of whitespace alone), and trafilatura wrote "- " with the term three lines below,
    # indented by a tab, and the description as ": ..." after blank lines, which the
    # invariant read as 18 headings of nothing on this page
    text = _checked("erlang25-statem.html.gz").text
    assert (
        "- **`state_functions`**\n: Events are handled by one callback function per state.\n"
        "- **`handle_event_function`**\n: Events are handled by one single callback function.\n"
    ) in text
    # a run across elements is one space, and none after a space or at a line's start:
    # texi2any's index anchors, empty spans each on a line of its own, left their newlines
    # in the paragraph ("builtin.\n Arithmetic")
    html = (
        "<html><body><main><h1>Arithmetic Evaluation</h1><p>An integer can be specified "
        "with the <tt>integer</tt> builtin.\n<span id='index-a'></span>\n<span id='index-b'>"
        "</span>\nArithmetic evaluation is <b> performed</b> on the value of each assignment "
        "to a named parameter declared integer in this manner.</p></main></body></html>"
    )
    text = html_to_markdown(html.encode()).text
    assert "the `integer` builtin. Arithmetic evaluation is **performed** on the value" in text


def test_a_block_inside_a_heading_is_on_the_headings_line():
    # Erlang's function headings are an <h4> holding a <span> of the signature, broken by a
    # <br>, and a <div> of the release that added the function: trafilatura wrote the <div>
    # on the line below the heading, which then matched no heading of the page, and the
    # signature kept the run of spaces after its <br> (the invariant: 8 headings on this page)
    text = _checked("erlang25-stdlib-unicode.html.gz").text
    assert (
        "\n#### characters_to_nfc_list(CD :: chardata()) -> [char()] | {error, [char()], "
        "chardata()} OTP 20.0\n\nConverts a possibly deep list of characters"
    ) in text
    found = [h for _, _, h in headings(text)]
    assert any(h.startswith("characters_to_nfc_binary(CD :: chardata()) -> ") for h in found)
    assert not [h for h in found if "  " in h]


def test_several_articles_are_items_of_the_page_not_its_content():
    # Erlang's reference pages put the data types and each function in an <article> of its
    # own: trafilatura took the first for the page's content (160 characters of beam_lib's
    # 19,335), and its fallback's text had no code blocks
    text = html_to_markdown(_html("erlang25-stdlib-beam-lib.html.gz")).text
    assert len(text) > 15_000
    assert text.startswith("# beam_lib\n")
    assert "tuples:\n\n```\n{debug_info, Mode, Module, Key}\n```\n" in text
    assert "\n#### chunks(Beam, ChunkRefs) -> " in text
    # a page of one <article> keeps it: trafilatura takes it, not the page around it
    page = (
        "<html><body><div id='content'><p>Site news and links of the day, with a lot of words "
        "around the article that are not the article itself at all.</p><article><h1>Title</h1>"
        "<p>The article's own text, long enough to be the content of the page that trafilatura "
        "extracts, with more words and more words and more words again.</p></article></div>"
        "</body></html>"
    )
    assert "Site news" not in html_to_markdown(page.encode()).text


def test_a_functions_types_lie_under_its_signature():
    # erl_docgen heads a function's types with <h3 class="func-types-title">Types</h3>, one
    # level above the function's own <h4>: every function after the first with types, and
    # its description, lay in a section "Types" beside "Exports", and the module's last
    # sections under it (beam_lib's paths ('beam_lib', 'Types')). The word stays, as text.
    from transforms.chunking.markdown import markdown_sections

    text = _checked("erlang25-stdlib-beam-lib.html.gz").text
    assert "### Types" not in text
    assert (
        "#### build_module(Chunks) -> {ok, Binary} OTP 18.2\n\nTypes\n\nChunks = "
        "[{chunkid(), dataB()}]\n\nBinary = binary()\n\nBuilds a BEAM module"
    ) in text
    paths = [s.path for s in markdown_sections(text)]
    assert not [p for p in paths if "Types" in p]
    built = text.index("Builds a BEAM module")
    (holding,) = [
        s for s in markdown_sections(text) if s.blocks[0].start <= built < s.blocks[-1].end
    ]
    assert holding.path == ("beam_lib", "Exports", "build_module(Chunks) -> {ok, Binary} OTP 18.2")


def test_an_admonition_is_text_of_its_section_not_a_section():
    # DocBook heads each note with <h3 class="title">Note</h3> whatever its section's level:
    # PostgreSQL's JSON chapter had its tables after a note under it ("Note > Table 9.46.
    # Additional jsonb Operators"), and a level-4 section's note took the next subsection
    # ("Note > 9.16.2.3. SQL/JSON Regular Expressions"). The word stays, as a paragraph.
    from transforms.chunking.markdown import markdown_sections

    text = _checked("postgresql15-functions-json.html.gz").text
    paths = [s.path for s in markdown_sections(text)]
    assert not [p for p in paths if "Note" in p]
    assert (
        "9.16. JSON Functions and Operators",
        "9.16.1. Processing and Creating JSON Data",
        "Table 9.46. Additional jsonb Operators",
    ) in paths
    assert text.count("\nNote\n") == 3 and "### Note" not in text


def test_a_blocks_source_indentation_is_no_text():
    # Erlang's descriptions put an example after their text ("Example:" and a newline), or
    # alone (`<dd>`, a newline), before a <div><pre> on a source line indented with spaces:
    # trafilatura wrote the indentation before the opening fence, and the code at the margin,
    # which CommonMark reads as paragraph text and its closing fence as the opening of a code
    # block over what follows (the invariant: 1 on this page, 6 on gen_sctp's)
    text = _checked("erlang25-kernel-app.html.gz").text
    assert (
        "parameters of the default `logger_std_h` handler. Example:\n  ```\n  erl -kernel logger "
        "'[{handler,default,logger_std_h,#{config=>#{file=>\"/tmp/erlang.log\"}}}]'\n  ```\n"
        "- **`error_logger_format_depth`**\n"
    ) in text
    # a description's paragraph after a newline and 8 spaces: before, an indented code block
    assert (
        "- **`net_setuptime = SetupTime`**\n:\n\n  `SetupTime` must be a positive integer" in text
    )


def test_a_paragraphs_dash_inside_a_line_is_not_escaped():
    # Erlang's release notes write their own dashes, a paragraph each ("<p>- The arity
    # calculation is updated.</p>") in a list item: trafilatura escapes the dash that starts a
    # paragraph, then writes the item's paragraphs on its line, where the "\-" starts nothing
    text = _checked("erlang25-eunit-notes.html.gz").text
    assert (
        "in the documentation build process. - The arity calculation is updated. - The module "
        "prefix used"
    ) in text
    assert "\\-" not in text


def test_a_sentence_of_links_to_the_pages_anchors_is_content():
    # math's description is two sentences, one with links to two functions of the page: a
    # short section of links to the page's own anchors was kept as a table of contents, and
    # trafilatura's link-density test dropped the whole description, its heading with it
    text = _checked("erlang25-stdlib-math.html.gz").text
    assert (
        "### Description\n\n\nThis module provides an interface to a number of mathematical "
        "functions.\n\nNote\n\n\nNot all functions are provided on all platforms. In particular, "
        "the `erf/1` and `erfc/1` functions are not provided on Windows.\n"
    ) in text


def test_an_items_text_starts_at_its_marker():
    # zsh's FAQ writes an item's text after a space ("<li> Syntax:", a nested <ul> below):
    # trafilatura wrote it after the marker, "-  Syntax:", whose content then starts at the
    # fourth column, and the nested items, two columns in, read as items of the outer list
    text = _checked("zsh59-faq02.html.gz").text
    assert "\n- Syntax:\n  - \\* Shell word splitting: see question 3.1.\n" in text
    assert "\n2. invoking zsh as sh or ksh" in text  # not "2.  invoking"
    levels = {
        t.content.split(":")[0]: t.level for t in block_parser().parse(text) if t.type == "inline"
    }
    assert levels["\\* Shell word splitting"] > levels["Syntax"]


def test_erlangs_inline_code_is_code():
    # Erlang marks inline code <span class="code">, which trafilatura writes as plain text;
    # a term of three such spans, the middle one a link wrapped in <span class="bold_code">,
    # came out as "`modes = [``file:mode()``]`" once the spans were code: the wrapper kept
    # the linked span from its neighbours, and Markdown reads the run of two backticks
    text = _checked("erlang25-kernel-logger-std-h.html.gz").text
    assert "\n- **`modes = [file:mode()]`**\n: This specifies the file modes to use" in text
    assert "see `file:open/2`. If `modes` are not specified, the default list used is " in text
    # an item's text after a newline and a tab: "-" and the text indented on the next line
    assert "\n  - If `raw` is not found in the list, it is added.\n" in text


def test_a_generators_credit_at_the_pages_end_is_no_text():
    # Doxygen's "Generated on <date> for JsonCpp by doxygen 1.9.1", texi2any's "This document
    # was generated on <date> using texi2any.", SQLite's "This page last modified on <date>
    # UTC": the last line of every such page, whose date changes with each build of the
    # documentation (and so every page's last chunk and its embedding). Before: each kept.
    doxygen = html_to_markdown(_html("jsoncpp195-class-json-reader.html.gz")).text
    assert "Generated on" not in doxygen
    assert doxygen.endswith("- include/json/reader.h\n- src/lib_json/json_reader.cpp")
    texinfo = html_to_markdown(_html("zsh59-shell-grammar.html.gz")).text
    assert "was generated" not in texinfo and "texi2any" not in texinfo
    assert texinfo.endswith("(default ‘`!`’).")
    sqlite = html_to_markdown(_html("sqlite340-faq.html.gz")).text
    assert "last modified" not in sqlite
    assert sqlite.endswith("See the sqlite3_column_name() documentation for further information.")


def test_a_credit_with_the_pages_text_after_it_is_text():
    credit = "<p>Generated on 1 May 2024 by <a href='https://example.org/gen'>gen</a> 1.0</p>"
    end = _page("Build notes", f"<p>{'The build. ' * 3}</p>{credit}")
    assert "Generated on" not in html_to_markdown(end).text
    # the same line with the page's text after it is part of that text
    middle = _page("Build notes", f"{credit}<p>{'What the build made, and how. ' * 8}</p>")
    assert "Generated on 1 May 2024 by gen 1.0" in html_to_markdown(middle).text


def test_rustdocs_version_and_source_links_beside_a_trait_method_are_no_text():
    # std::io::Seek's provided methods: "1.55.0 · source" in a div.rightside before each
    # method's <h4> (elsewhere a span.rightside). Before: a line "1.55.0 · source" each
    text = _checked("rust163-std-io-seek.html.gz").text
    assert "· source" not in text and "1.55.0" not in text
    assert "#### fn rewind(&mut self) -> Result<()>" in text


def test_a_short_paragraph_of_prose_with_short_links_is_text():
    # Haddock's module description under its "Description" caption (no heading): a sentence
    # with two module links, "Data.Int" and "Data.Word", under 300 characters, which
    # trafilatura's link-density test took for a list of links. Before: dropped
    text = _checked("ghc902-base-data-bits-cut.html.gz").text
    assert (
        "This module defines bitwise operations for signed and unsigned integers. Instances of "
        "the class `Bits` for the `Int` and `Integer` types are available from this module, "
        "and instances for explicitly sized integral types are available from the Data.Int "
        "and Data.Word modules." in text
    )
    # a line of navigation links is no prose: it stays a link list to trafilatura
    nav = "<p>Next: <a href='a.html'>Arrays</a>, <a href='b.html'>Bits</a></p>"
    assert "Arrays" not in html_to_markdown(_page("Data", nav + "<p>" + "Word. " * 80)).text


def test_haddocks_signatures_keep_their_linked_types():
    # Haddock's signatures are mostly links (each type to its declaration), and the name
    # each declares an <a id> without href: to trafilatura's link-density test the synopsis
    # items of record fields (`getAll :: Bool`) were link lists, and so were the tables of
    # constructors and fields (`Dual`; `getDual :: a`), which went whole
    text = _checked("ghc902-base-data-monoid-cut.html.gz").text
    assert "- newtype All = All {\n  - getAll :: Bool\n" in text
    assert "- class Semigroup a => Monoid a where\n  - mempty :: a\n" in text
    assert "\nnewtype Dual a\n\nThe dual of a `Monoid`" in text
    assert "| Dual |  |\n| • getDual :: a |  |" in text
    # each signature's "Source" link and "#" permalink are no text of it
    assert "Source" not in text and " #" not in text


def test_a_heading_that_is_one_link_over_prose_is_kept():
    # gi-docgen lists a type's functions and methods, each an <h6> that is one link to the
    # function's page over its summary: trafilatura pruned a heading that is all link (as it
    # does a site's banner), and with it, on most, the summary after it
    text = _checked("pango150-struct-language.html.gz").text
    found = [h for _, _, h in headings(text)]
    assert "pango_language_get_preferred" in found and "pango_language_to_string" in found
    assert (
        "###### pango_language_get_preferred\n\nReturns the list of languages that the user "
        "prefers.\n\nsince: 1.48\n"
    ) in text
    assert "Gets the RFC-3066 format string representing the given language tag." in text
    # the "[src]" link in a section's heading (to the source file) is no text of it
    assert "#### Description\n" in text and "[src]" not in text


def test_a_headings_anchor_and_permalink_and_a_listing_of_lines():
    # Apache httpd's directive headings: <span id="LDAPSharedCacheFile">, "share" in the id
    # took the name out ("## Directive ¶"); the "¶" is a permalink sign
    text = _checked("apache24-mod-ldap.html.gz").text
    assert "\n## LDAPSharedCacheFile Directive\n" in text
    assert "\n## LDAPSharedCacheSize Directive\n" in text
    assert "¶" not in text
    # an example written as one <code> of <br>-broken lines in a <p>: a code block, its
    # comment lines no headings ("##express-map.txt:" and "##" were loose lines and a heading)
    text = _checked("apache24-mod-proxy-express.html.gz").text
    assert (
        "### ProxyExpress map file\n\n```\n##\n##express-map.txt:\n##\n\n"
        "www1.example.com http://192.168.211.2:8080\n"
    ) in text
    # one line of code stays inline
    assert "### Create DBM file\n\n`httxt2dbm -i express-map.txt -o emap`" in text


def test_scaladocs_comments_are_content_once():
    # trafilatura pruned Scaladoc's `div.comment.cmt` as a blog's reader comments: every
    # description but the member's first sentence went
    text = _checked("scala211-partial-function-object.html.gz").text
    assert text.startswith("# PartialFunction\n\nscala\n\n#### object PartialFunction\n\n")
    assert "A few handy operations which leverage the extra bit of information" in text
    assert (
        "Note that the success of a cast at runtime is modulo Scala's erasure semantics."
    ) in text
    # the first sentence (the member's summary) is not written twice
    assert text.count("Test two objects for inequality.") == 1
    # bold inside inline code lost the text between two such spans ("**true****false**")
    assert "In effect, it is a `match` statement which wraps all case results in `Some(_)`" in text
    # a type with no comment keeps its attributes and the lists a click unfolds
    text = _checked("scala211-patmat-prop.html.gz").text
    assert text.startswith(
        "# Prop\n\nscala.tools.nsc.transform.patmat.Logic.PropositionalLogic\n\n"
        "#### class Prop extends AnyRef\n\n- Source\n: Logic.scala\n\nLinear Supertypes\n\n"
        "AnyRef, Any\n\nKnown Subclasses\n\nAnd, AtMostOne, Eq, False, Not, Or, Sym, True\n"
    )


def test_a_table_in_a_table_or_a_term_keeps_its_rows():
    # BoostBook's parameters: a table in a cell of a table in a list item; the inner rows
    # were glued ("ch The source character.first The bottom of the range, inclusive.last")
    text = _checked("boost181-xpressive-c-regex-traits.html.gz").text
    assert (
        "Parameters:\nch | The source character.\nfirst | The bottom of the range, inclusive.\n"
        "last | The top of the range, inclusive.\nReturns: | first <= ch && ch <= last."
    ) in text
    # odoc's record type: its fields, a table in the definition's term, were glued
    text = _checked("ocamlgraph200-dominator-make-graph.html.gz").text
    assert (
        "- `type dom_functions = {`\nidom : idom;\nidoms : idoms;\ndom_tree : dom_tree;\n" in text
    )


def test_overflow_hidden_hides_nothing():
    # cppreference's box "Members identical to std::promise" is a
    # <div style="overflow: hidden; border: ...">: trafilatura pruned it whole for "hidden"
    words = " ".join(f"word{i}" for i in range(60))
    page = _page(
        "std::experimental::promise",
        f"<p>{words}.</p>"
        '<div style="overflow: hidden; margin: 1em 0 0 0; border: 1px solid #aaa">'
        "<h2>Members identical to std::promise</h2><p>Destructs the promise object and"
        " releases its shared state when it holds the last reference to it.</p></div>"
        '<div style="visibility: hidden">An invisible note.</div>'
        '<div style="overflow-x:hidden; display: none">A folded note.</div>',
    )
    text = html_to_markdown(page).text
    assert "## Members identical to std::promise\n\nDestructs the promise object" in text
    # what a style does hide stays out
    assert "invisible" not in text and "folded" not in text


def test_scribbles_code_and_definitions_are_code_blocks():
    # Racket's documentation (Scribble) numbers its headings "5.8<tt>&nbsp;</tt>More ..."
    # (read "5.8More Structure Type Options") and writes code as tables, a row to a line:
    # each line was a paragraph, an example's ASCII drawing a rule, a grammar one glued row
    text = _checked("racket87-guide-define-struct.html.gz").text
    assert "\n#### 5.8 More Structure Type Options\n" in text
    assert (
        "```\n(struct struct-id maybe-super (field ...)\n        struct-option ...)\n\n"
        "maybe-super =\n| super-id\n\nfield = field-id\n| [field-id field-option ...]\n```"
    ) in text
    # an example: its inputs (one over several lines) and its outputs, one block
    assert "> (struct cake (candles)\n          #:methods gen:custom-write\n" in text
    assert "> (display (cake 5))\n   .....\n .-|||||-.\n |       |\n-----------\n```" in text
    # a definition's box: its signature and its arguments' contracts, its label before it
    text = _checked("racket87-reference-objectutils.html.gz").text
    assert (
        "procedure\n\n```\n(object-info object) → (or/c class? #f) boolean?\n"
        "  object : object?\n```"
    ) in text


def test_a_list_of_no_items_is_text_and_a_source_link_is_furniture():
    # LDoc's "See also:" and "Returns:" are a <ul>/<ol> of text and no <li>: an empty item
    # and an indented line, its "-" a heading's underline under the description before it
    text = _checked("penlight113-pl-list.html.gz").text
    assert (
        "- **List:__tostring ()**\n: How our list should be rendered as a string. Uses join().\n"
        "  **See also:**\n  List:join"
    ) in text
    # nimdoc's "Source" and "Edit" links under a proc: a description of them alone was a
    # link list, and trafilatura dropped it with the proc's signature
    text = _checked("nim16-socketstreams.html.gz").text
    assert ("# Procs\n\n```\nproc newReadSocketStream(s: Socket): owned ReadSocketStream") in text
    assert "Source Edit" not in text


def test_a_definitions_own_definition_list_is_content():
    # tcllib's doctools: a command's options, `<dl class="doctools_options">` in its <dd>,
    # went whole ("options" in a class is a site's option panel to trafilatura)
    text = _checked("tcllib121-tar.html.gz").text
    assert "  - **-quick**\n  : The only sure way to find the position in the *tarball*" in text


def test_a_definition_list_whose_descriptions_are_prose_is_content():
    # a definition list whose class trafilatura discards ("options", "tags") went whole,
    # outside a <dd> too: tcllib's options of a section, pldoc's "Errors", "Compatibility"
    text = _checked("tcllib121-pt-peg-to-tclparam.html.gz").text
    assert (
        "- **-name** string\n: The value of this configuration variable is the name of the"
        " grammar for which the conversion is run."
    ) in text
    text = _checked("swipl904-varnumbers.html.gz").text
    assert "- Compatibility\n: This library was introduced by Quintus and available" in text
    assert "- Errors\n  : `domain_error(acyclic_term, Term)` if `Term` is cyclic." in text


def test_a_short_description_with_a_link_in_each_sentence_is_kept():
    # Doxygen's div.memdoc of two sentences, a short class link in each: under 300
    # characters, its links all short, a link list to trafilatura's link-density test
    text = _checked("sbml5197-comp-validator.html.gz").text
    assert (
        "void Validator::clearFailures() [inherited]\n```\n"
        "Clears this Validator's list of validation failures.\n\n"
        "If you are validating multiple SBML documents with the same Validator, call this"
    ) in text


def test_a_definition_list_in_a_table_cell_is_kept():
    # cppreference indents with <dl><dd>; in the cell of a "(since C11)" row trafilatura
    # dropped it, and with it C11's thread storage duration
    text = _checked("cppreference2017-c-storage-duration.html.gz").text
    assert "| • `_Thread_local` - thread storage duration | (since C11) |" in text
    assert "| • ***thread*** storage duration. The storage duration is the entire execution" in text


def test_yard_tags_are_content_and_its_toggles_go():
    # YARD's "Parameters:", "Returns:", "Examples:" sit in a div.tags, which trafilatura
    # discards as a post's tag list; "collapse" after a summary's heading is a button
    text = _checked("yard0928-docstring-parser.html.gz").text
    assert (
        "Parameters:\n\n- content (`String`) — the docstring text to parse\n"
        "- object (`CodeObjects::Base`) *(defaults to: `nil`)* — the object that"
    ) in text
    assert "Creating a Custom DocstringParser\n\n```\n# Parses docstrings backwards!\n" in text
    assert "\n## Constant Summary\n" in text
    assert "collapse" not in text and "show all" not in text
    # "#" before a method's name in a summary starts no heading: no escape
    assert "\n- #**parse**(content, object = nil, handler = nil) ⇒ self Parses" in text


def test_sections_found_alike_are_no_content_container():
    # Tomcat writes each section's text in a div.text, a container to trafilatura
    # (@class='text'), which extracted the first section alone
    text = _checked("tomcat10-appdev-introduction.html.gz").text
    assert "\n### Overview\n" in text
    assert ("### Links\n\nThe following links provide access to selected sources of online") in text
    assert "- https://jakarta.ee/specifications/servlet/6.0/ - *Jakarta Servlet API" in text


def test_an_element_named_as_no_xml_name_is_unwrapped():
    # "<paolo.ditommaso@gmail.com>", unescaped, is an element to the HTML parser, and
    # trafilatura raised on its name: the page had no text, the job rejected it
    text = _checked("groovy2421-writable-path.html.gz").text
    assert "## [Java] Class WritablePath" in text
    assert "A Writable Path." in text
    # a member without a description is a name in a list, not a heading over nothing (which
    # trafilatura drops where it ends the page)
    assert "### Method Detail\n\n- @Override public int **compareTo**(Path other)\n" in text
    assert "- @Override public WatchKey **register**(WatchService watcher," in text
    # the bars above and below the page, outside any <nav>, are no content
    assert "Summary: Nested" not in text and "Detail: Field" not in text


def test_a_line_break_in_an_item_keeps_the_space_before_inline_code():
    # trafilatura trims the text after a <br> in a list item or a description: Go's
    # "<br>(For <code>TEXT</code> items.)" read "(For`TEXT` items.)", pldoc's "- <code>
    # library(prolog_xref)</code>" "-`library(prolog_xref)`"
    text = _checked("go119-doc-asm.html.gz").text
    assert "(For `TEXT` items.) Don't profile the marked function." in text
    assert "(For`" not in text
