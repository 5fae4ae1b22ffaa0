"""The structural invariant's own reading of a page (transforms/ingest/structure_check.py):
where the checker was wrong, not the job (issue 25, docs/structure.md)."""

import trafilatura

from transforms.ingest.structure_check import check_page, dropped_blocks


def _kinds(html: str, text: str, title: str | None = None) -> list[str]:
    return [v.kind for v in check_page(trafilatura.load_html(html), text, title)]


def _page(body: str) -> str:
    return f"<html><head><title>T</title></head><body><div>{body}</div></body></html>"


def test_a_code_block_keeps_the_lines_of_its_pre():
    # trafilatura dropped every blank line of a <pre> (zlib's listing, CMake's examples): the
    # same text, whitespace aside, but not the same lines. Trailing whitespace and the blank
    # lines around the listing do not count.
    html = _page(
        "<p>Intro.</p><pre>\ndef f():\n    return 1\n\ndef g():  \n    return 2\n  \n</pre>"
    )
    kept = "Intro.\n\n```\ndef f():\n    return 1\n\ndef g():\n    return 2\n```"
    assert _kinds(html, kept) == []
    assert _kinds(html, kept.replace("return 1\n\n", "return 1\n")) == ["fence"]
    assert _kinds(html, kept.replace("    return 2", "return 2")) == ["fence"]
    # two <pre>s of the same text but for their lines each meet their own block
    two = _page("<pre>SELECT 'foo'\n'bar';</pre><p>but:</p><pre>SELECT 'foo'   'bar';</pre>")
    text = "```\nSELECT 'foo'\n'bar';\n```\nbut:\n\n```\nSELECT 'foo'   'bar';\n```"
    assert _kinds(two, text) == []


def test_a_heading_without_its_permalink_glyph():
    # mkdocs' permalinks hold an icon font's glyph (U+F0C1), which the job drops with the
    # anchor: every heading of mkdocs' pages was a violation
    html = _page(
        "<h1 id='a'>Developing Themes<a class='headerlink' href='#a'>\uf0c1</a></h1>"
        "<p>Text of the page.</p>"
    )
    assert _kinds(html, "# Developing Themes\n\nText of the page.") == []
    assert _kinds(html, "# Developing\n\nText of the page.") == ["heading"]


def test_a_heading_without_its_source_link():
    # gi-docgen writes a "[src]" link (to the source file) in a section's heading, which the
    # job drops as it does Sphinx's "[source]": "Description" was a heading of no <hN>
    html = _page(
        "<h4 id='description'>Description <a class='srclink' href='https://x/y.c#L1'>[src]</a>"
        "</h4><p>Text of the page.</p>"
    )
    assert _kinds(html, "#### Description\n\nText of the page.") == []


def test_a_line_break_in_a_heading_is_a_space():
    # rustdoc: "fn try_collect<B>(<br>&nbsp;&nbsp;&amp;mut self<br>) -> ..."
    html = _page("<h4>fn f(<br>\u00a0\u00a0&amp;mut self<br>) -&gt; T</h4><p>Text of it.</p>")
    assert _kinds(html, "#### fn f( &mut self ) -> T\n\nText of it.") == []


def test_a_code_span_of_three_backticks_is_no_fence():
    html = _page("<p>x</p>")
    assert _kinds(html, "- literal, the equivalent of ``` ``literal`` ```") == []
    assert _kinds(html, "Example usage: ```\ncode\n```") == ["fence"]


def test_lost_counts_the_least_content_of_headings_of_one_text():
    # rustdoc's sidebar repeats "Blanket Implementations" over a list of links; the page's
    # own heading of that text is followed at once by its first item's heading
    html = _page(
        "<nav><h3>Blanket Implementations</h3><ul><li><a href='#a'>Any</a></li>"
        "<li><a href='#b'>Borrow&lt;T&gt;, BorrowMut&lt;T&gt;, From&lt;T&gt;</a></li>"
        "<li><a href='#c'>Into&lt;U&gt;, TryFrom&lt;U&gt;</a></li></ul></nav>"
        "<h2>Blanket Implementations</h2><h3>impl Any for T</h3><p>Gets the TypeId.</p>"
    )
    text = "## Blanket Implementations\n\n### impl Any for T\n\nGets the TypeId."
    assert _kinds(html, text) == []


def test_a_block_start_escape_is_syntax():
    # texi2html's items that start with "- " come out as "- \- text" (else a nested list):
    # trafilatura's _escape_block_start, Markdown syntax, not an escape of the page's text
    html = _page("<ul><li>- Strings which are not entire sentences.</li></ul>")
    assert _kinds(html, "- \\- Strings which are not entire sentences.") == []
    assert _kinds(html, "- Strings \\- which are not entire sentences.") == ["escape"]


def test_an_item_is_glued_only_when_no_occurrence_of_its_words_starts_a_line():
    # Javadoc: the <dd> "a new array of possible values" first occurs inside the summary's
    # "Returns a new array of possible values (like an enum would)."; its own line comes later
    html = _page(
        "<p>Returns a new array of possible values (like an enum would).</p>"
        "<dl><dt>Returns:</dt><dd>a new array of possible values (like an enum would).</dd></dl>"
    )
    summary = "Returns a new array of possible values (like an enum would)."
    assert _kinds(html, f"{summary}\n\n- Returns:\n: a new array of possible values.") == []
    assert _kinds(html, f"{summary}\n\n- Returns, as a new array of possible values.") == ["list"]


def test_a_table_of_contents_of_the_page_is_no_lost_content():
    # DocBook: a chapter's <h2> over a <div class="toc"> of links to its own sections, which the
    # job drops; the page's text goes from the chapter's heading to its first section's
    toc = "".join(
        f"<dt><a href='page.html#s{i}'>20.9.{i}. Section number {i} of the chapter</a></dt>"
        for i in (1, 2)
    )
    sections = "".join(f"<h3 id='s{i}'>S{i}</h3><p>Text of section {i}.</p>" for i in (1, 2))
    html = _page(f"<h2>Chapter</h2><div class='toc'><dl>{toc}</dl></div>{sections}")
    text = "## Chapter\n\n### S1\n\nText of section 1.\n\n### S2\n\nText of section 2."
    assert _kinds(html, text) == []
    # links to other pages are content (CMake's toctrees of variables)
    elsewhere = html.replace("page.html#s", "other.html#x")
    assert _kinds(elsewhere, text) == ["lost"]


def test_named_anchors_and_navigation_lines_are_no_lost_content():
    # expat's reference: "Table of Contents" over links to <a name> anchors (no ids), which
    # the job drops; MPFR's Top page: the manual's title, then Texinfo's "Next: ..., Up: ..."
    # line (which the job drops) before the Top node's heading
    toc = (
        "<ul><li><a href='#overview'>Overview of the parser and its callback handlers</a></li></ul>"
    )
    html = _page(
        f"<h2>Table of Contents</h2>{toc}<h2><a name='overview'>Overview</a></h2>"
        "<p>Expat is a stream-oriented parser.</p>"
    )
    text = "## Table of Contents\n\n## Overview\n\nExpat is a stream-oriented parser."
    assert _kinds(html, text) == []
    assert _kinds(html.replace("name='overview'", "name='elsewhere'"), text) == ["lost"]
    nav = (
        "<div class='header'><p>Next: <a href='Copying.html' rel='next'>MPFR Copying "
        "Conditions and Licence</a>, Up: <a href='../dir/index.html' rel='up'>(dir)</a></p></div>"
    )
    html = _page(f"<h1>GNU MPFR 4.2.0</h1>{nav}<h1>GNU MPFR</h1><p>This manual documents.</p>")
    text = "# GNU MPFR 4.2.0\n\n# GNU MPFR\n\nThis manual documents."
    assert _kinds(html, text) == []
    assert _kinds(html.replace(" rel='next'", "").replace(" rel='up'", ""), text) == ["lost"]


def test_the_text_after_an_element_is_counted_after_what_it_holds():
    # Erlang's EDoc pages (eunit.html): "Exports" heads a <div> of functions, each under an
    # <h4>; the authors after that <div> were counted as text of "Exports" (an element's
    # tail read before its children), so its heading, rightly followed by the first
    # function's, was "lost" content
    html = _page(
        "<h3>Exports</h3><div class='exports-body'><h4>start() -&gt; term()</h4>"
        "<p>Starts the EUnit server.</p></div>Mickael Remond, Richard Carlsson, authors"
    )
    text = "### Exports\n\n#### start() -> term()\n\nStarts the EUnit server."
    assert _kinds(html, text) == []
    # the same text directly after the heading is its content, and still found lost
    heads = "Text that the heading heads, more than forty characters.<div>"
    before = html.replace("<div class='exports-body'>", heads)
    assert _kinds(before, text) == ["lost"]


def test_a_definition_that_opens_with_code_is_not_glued():
    # texi2html (gettext's manual): <dd><code>'...%(ident)d...' % { 'ident': value }</code>
    # written ": `'...%(ident)d...' % { 'ident': value }`"
    html = _page(
        "<dl><dt>Python</dt><dd><code>'...%(ident)d...' % { 'ident': value }</code></dd></dl>"
    )
    dd = "`'...%(ident)d...' % { 'ident': value }`"
    assert _kinds(html, f"- Python\n: {dd}") == []
    assert _kinds(html, f"- Python, in Python {dd}") == ["list"]


def test_a_navigation_item_is_not_a_glued_item():
    # MkDocs' menu item "Customizing Your Theme", all link, is dropped with the menu; its words
    # in a sentence of the text are not the item glued to that sentence
    html = _page(
        "<ul><li><a href='../customizing/'>Customizing Your Theme</a></li></ul>"
        "<ul><li>Customizing Your Theme, in one line</li></ul>"
    )
    text = "See the documentation for Customizing Your Theme."
    assert _kinds(html, f"{text}\n\n- Customizing Your Theme, in one line") == []
    assert _kinds(html, f"{text} Customizing Your Theme, in one line") == ["list"]


def test_a_table_row_is_matched_by_its_cells():
    # a table in a list item, written a row to a line with "|" between the cells
    html = _page(
        "<table><tr><td>0-99</td><td>Fix invalid nodes by docutils.</td></tr>"
        "<tr><td>100-299</td><td>Preparation of the doctree</td></tr></table>"
    )
    rows = "0-99 | Fix invalid nodes by docutils.\n  100-299 | Preparation of the doctree"
    assert _kinds(html, f"- Priority\n  {rows}") == []
    glued = "0-99 | Fix invalid nodes by docutils. 100-299 | Preparation of the doctree"
    assert _kinds(html, f"- Priority\n  {glued}") == ["list"]


def test_a_list_in_a_table_cell_keeps_its_items_apart_by_their_markers():
    # a Markdown table row is one line: the job writes a cell's list items one after the
    # other on it, each after its marker (html.py, _lists_in_cells_as_text)
    html = _page(
        "<table><tr><td><p>Rules in order:</p><ol><li>Create the new table</li>"
        "<li>Copy the old rows</li></ol></td><td><ul><li>Rename the old table</li></ul></td>"
        "</tr></table>"
    )
    head = "| a | b |\n|---|---|\n"
    kept = "| Rules in order: 1. Create the new table 2. Copy the old rows | • Rename the old table"
    kept += " |"
    assert _kinds(html, head + kept) == []
    glued = "| Rules in order: Create the new table Copy the old rows | Rename the old table |"
    # in a cell an item's marker is its boundary: one that starts its cell without it too
    assert _kinds(html, head + glued) == ["list", "list", "list"]
    # a table inside a <dd> (docutils' field list in a method's description) is text there,
    # its list's items on lines of their own
    field_list = _page(
        "<dl><dt id='send'>send()</dt><dd><p>Sends the mail.</p><table><tr><th>Parameters:"
        "</th><td><ul><li>subject_template_name - the template for the subject</li>"
        "<li>email_template_name - the template for the body</li></ul></td></tr></table>"
        "</dd></dl>"
    )
    items = "- subject_template_name - the template for the subject\n  - email_template_name"
    text = f"- send()\n: Sends the mail.\n  Parameters:\n  {items} - the template for the body"
    assert _kinds(field_list, text) == []
    assert _kinds(field_list, text.replace("subject\n  - ", "subject ")) == ["list"]


def test_a_pre_in_a_table_cell_is_a_code_span_of_its_row():
    # PostgreSQL's function tables show an example's result in a <pre> of the cell; a Markdown
    # table row holds no block, so the job writes it as a code span, `|` escaped
    html = _page(
        '<table><tr><td><p>json_each(\'{"a":"foo"}\')</p>'
        '<pre>key | value\n-----+-------\n a   | "foo"</pre></td></tr></table>'
    )
    row = '| json_each(\'{"a":"foo"}\') `key \\| value -----+------- a \\| "foo"` |'
    assert _kinds(html, f"| function |\n|---|\n{row}") == []
    # outside a cell, a <pre> is still a fenced block
    bare = _page('<pre>key | value\n-----+-------\n a   | "foo"</pre>')
    assert _kinds(bare, '`key | value -----+------- a | "foo"`') == ["fence"]


def test_an_escaped_backtick_next_to_a_code_span_is_syntax():
    # zsh's FAQ (texi2any): "test: `<code>[[ -o multibyte ]]</code>'" is written
    # "test: \``[[ -o multibyte ]]`'": unescaped, the page's backtick joins the span's run
    html = _page("<p>standard option test: `<code>[[ -o multibyte ]]</code>'.</p>")
    assert _kinds(html, "standard option test: \\``[[ -o multibyte ]]`'.") == []
    assert _kinds(html, "standard option test: \\` [[ -o multibyte ]]'.") == ["escape"]
    # a code span of a backslash (PostgreSQL's `\k`) holds no escape of text
    pg = _page("<p><code>\\</code><em><code>k</code></em> where k is a character</p>")
    assert _kinds(pg, "`\\`*`k`* where k is a character") == []


def test_an_item_is_matched_without_its_emphasis_marks():
    # Flask's "Return type:" <dd>: Sphinx emphasizes each name of the type, written
    # "*Union*[*Callable*[...", and the same words first occur glued after a parameter
    names = ["Union", "Callable", "R", "R", "Callable", "R", "Awaitable", "R"]
    shape = "{}[{}[[{}], {}], {}[[{}], {}[{}]]]"
    html = _page(
        "<dl><dt>Return type:</dt><dd>"
        + shape.format(*(f"<em>{n}</em>" for n in names))
        + "</dd></dl>"
    )
    param = f"- Parameters:\n: **f** (*{shape.format(*names)}*) –"
    typed = shape.format(*(f"*{n}*" for n in names))
    assert _kinds(html, f"{param}\n- Return type:\n: {typed}") == []
    assert _kinds(html, f"{param}\n- Return type: and {typed}") == ["list"]


def test_doxygen_title_and_member_headings():
    # Doxygen's pages have no <title>: their title is `div.headertitle > div.title`, which the
    # job writes as the <h1>; a member's heading loses its "◆" permalink, as a headerlink does
    html = (
        "<html><body><div class='header'><div class='headertitle'><div class='title'>"
        "Json::Reader Class Reference</div></div></div><div class='contents'>"
        "<h2 class='memtitle'><span class='permalink'><a href='#a1'>\u25c6\u00a0</a></span>"
        "good()</h2><p>Return whether there are any errors.</p></div></body></html>"
    )
    text = "# Json::Reader Class Reference\n\n## good()\n\nReturn whether there are any errors."
    assert _kinds(html, text, "Json::Reader Class Reference") == []
    assert _kinds(html, text.replace("## good()", "## bad()")) == ["heading"]


def test_a_title_that_is_only_the_sites_name_is_a_violation():
    # mdBook's <title> names the chapter, then the book; the menu bar's <h1> names the book
    html = (
        "<html><head><title>Method Syntax - The Rust Programming Language</title></head><body>"
        "<h1 class='menu-title'>The Rust Programming Language</h1><main><h1>Method Syntax</h1>"
        "<p>Methods are similar to functions.</p></main></body></html>"
    )
    text = "# Method Syntax\n\nMethods are similar to functions."
    assert _kinds(html, text, "Method Syntax") == []
    assert _kinds(html, text, "The Rust Programming Language") == ["title"]
    # the doc set's name in parentheses (Javadoc 8, texi2any)
    javadoc = "<html><head><title>Timeout (JUnit API)</title></head><body><h2>Timeout</h2>"
    assert _kinds(f"{javadoc}<p>x</p></body></html>", "## Timeout\n\nx", "JUnit API") == ["title"]
    # texi2html puts the manual first: its page's part is the title, not the site's
    texi = (
        "<html><head><title>GNU gettext utilities: 1. Introduction</title></head><body>"
        "<h1>1. Introduction</h1><p>x</p></body></html>"
    )
    assert _kinds(texi, "# 1. Introduction\n\nx", "1. Introduction") == []
    # a Doxygen title's badge ("abstract") is no part of it
    doxygen = (
        "<html><body><div class='headertitle'><div class='title'>Json::CharReader Class "
        "Reference<span class='mlabels'><span class='mlabel'>abstract</span></span></div></div>"
        "<div class='contents'><p>Interface for reading JSON.</p></div></body></html>"
    )
    text = "# Json::CharReader Class Reference\n\nInterface for reading JSON."
    assert _kinds(doxygen, text, "Json::CharReader Class Reference") == []


def test_escapes_that_markdown_needs_are_syntax():
    # the zsh FAQ (texi2any): items that start with "* ", a <dd> that starts with "- ", and
    # Texinfo's `quotes' in a heading, where two unescaped backticks would open a code span
    html = _page(
        "<ul><li>* Shell word splitting: see question 3.1.</li></ul>"
        "<dl><dt><tt>-2</tt>, <tt>+-</tt></dt><dd><p>- sign, +/- sign, -/+ sign</p></dd></dl>"
        "<h2>3.27: What are these `^' and `~' pattern characters, anyway?</h2><p>x</p>"
    )
    text = (
        "- \\* Shell word splitting: see question 3.1.\n\n"
        "- `-2`, `+-`\n: \\- sign, +/- sign, -/+ sign\n\n"
        "## 3.27: What are these \\`^' and \\`~' pattern characters, anyway?\n\nx"
    )
    assert _kinds(html, text) == []
    # an escape the page's text does not need is still one
    assert _kinds(html, text.replace("-/+ sign", "-/\\+ sign")) == ["escape"]


def test_a_table_row_may_be_a_line_of_a_code_block():
    # Doxygen's declaration, a parameter to a row of `table.memname`, is a code block of a
    # parameter to a line; the summary's line holds the same words after the name
    html = _page(
        "<table class='memname'><tr><td>void construct</td><td>(</td><td>pointer</td>"
        "<td>p,</td></tr><tr><td></td><td></td><td>Args &amp;&amp;...</td><td>args</td></tr>"
        "<tr><td></td><td>)</td><td></td><td></td></tr></table>"
    )
    summary = "- `void construct (pointer p, Args &&... args)`: Construct an item."
    code = "```\nvoid construct(pointer p,\nArgs &&... args)\n```"
    assert _kinds(html, f"{summary}\n\n{code}") == []
    assert _kinds(html, summary) == ["list"]


def test_an_item_whose_words_hold_code_is_found_where_it_starts_its_line():
    # Werkzeug's run_wsgi_app: its "Returns" field reads "tuple in the form `(app_iter, status,
    # headers)`" in the text, and its words also follow "Return a" in the description; the
    # field, found only there, was counted glued
    html = _page(
        "<dl><dt>run_wsgi_app(app)</dt><dd><p>Return a tuple in the form (app_iter, status, "
        "headers) of the application output.</p><dl class='field-list'><dt>Returns</dt>"
        "<dd><p>tuple in the form <code>(app_iter, status, headers)</code></p></dd></dl>"
        "</dd></dl>"
    )
    text = (
        "- run_wsgi_app(app)\n: Return a tuple in the form (app_iter, status, headers) of the "
        "application output.\n  - Returns\n  : tuple in the form `(app_iter, status, headers)`"
    )
    assert _kinds(html, text) == []
    glued = text.replace("\n  : tuple in", " tuple in")
    assert _kinds(html, glued) == ["list"]


def test_dropped_blocks_are_the_page_text_the_document_lacks():
    kept = "The ingest service copies documents from the upload bucket into the search index."
    gone = "A task that fails is retried with exponential back-off, at most eight times."
    # a <div> that holds no block is a block of text too
    div_text = "Each shard is written to a temporary name and renamed when it is complete."
    html = (
        "<html><head><title>T</title></head><body>"
        "<nav><p>Home, Guides, Reference, Community, Blog, Download, Search, Donate</p></nav>"
        '<div class="sphinxsidebar"><p>Table of contents of this page and of the pages nearby</p>'
        f"</div><main><p>{kept}</p><ul><li>{gone}</li></ul><p>Too short to count.</p>"
        f"<div>{div_text}</div>"
        "<p>Zero\u200bwidth spaces and soft hy\u00adphens are not words of their own here.</p>"
        "</main></body></html>"
    )
    tree = trafilatura.load_html(html)
    text = f"{kept}\n\nZerowidth spaces and soft hyphens are not words of their own here."
    chars, dropped = dropped_blocks(tree, text)
    # the navigation and the sidebar are not counted, nor a block under 60 characters
    zero_width = "Zero\u200bwidth spaces and soft hy\u00adphens are not words of their own here."
    assert chars == len(kept) + len(gone) + len(zero_width) + len(div_text)
    assert dropped == [gone, div_text]
    assert dropped_blocks(tree, f"{text}\n- {gone}\n\n{div_text}") == (chars, [])


def test_dropped_blocks_read_a_content_column_and_line_breaks():
    # the Read the Docs theme's main column is div.wy-nav-content inside div.wy-grid-for-nav:
    # content, though "nav" is in both; a search box inside the content is chrome
    sentence = "A task that fails is retried with exponential back-off, at most eight times."
    html = (
        "<html><head><title>T</title></head><body><div class='wy-grid-for-nav'>"
        f"<section class='wy-nav-content-wrap'><div class='wy-nav-content'><p>{sentence}</p>"
        "<div id='search-modal'><div class='modal-body'><p>From here you can search these"
        " documents. Enter your search terms below.</p></div></div>"
        "<dl><dt>SUPERUSER<br>NOSUPERUSER<br>CREATEDB<br>NOCREATEDB<br>CREATEROLE<br>"
        "NOCREATEROLE</dt><dd>x</dd></dl></div></section></div></body></html>"
    )
    tree = trafilatura.load_html(html)
    chars, dropped = dropped_blocks(tree, "")
    assert dropped == [
        sentence,
        "SUPERUSER NOSUPERUSER CREATEDB NOCREATEDB CREATEROLE NOCREATEROLE",
    ]
    # a term's alternatives are words apart; a code span's marks are no part of a word
    term = "- `SUPERUSER`\n  `NOSUPERUSER` `CREATEDB` `NOCREATEDB`\n  `CREATE`ROLE `NOCREATEROLE`"
    text = f"{sentence}\n{term}"
    assert dropped_blocks(tree, text) == (chars, [])


def test_dropped_blocks_hold_a_code_blocks_asterisks():
    # Javadoc 17's SimpleTimeZone (openjdk-17-doc): a code block whose asterisks are
    # multiplication, not emphasis; the text holds it as it is
    code = "setStartRule(Calendar.APRIL, 1, Calendar.SUNDAY, 2*60*60*1000);"
    tree = trafilatura.load_html(
        f"<html><body><main><pre><code>{code}</code></pre></main></body></html>"
    )
    assert dropped_blocks(tree, "")[1] == [code]
    assert dropped_blocks(tree, f"```\n{code}\n```") == (len(code), [])
    # emphasis marks are still no part of a word
    emphasised = "A task that fails is *retried* with exponential back-off, at most eight times."
    tree = trafilatura.load_html(f"<html><body><p>{emphasised.replace('*', '')}</p></body></html>")
    assert dropped_blocks(tree, emphasised)[1] == []


def test_the_structure_command_lists_dropped_text_per_generator(tmp_path, capsys):
    from commands.structure import main

    words = " ".join(f"word{i}" for i in range(80))
    comment = "Great article, it fixed my retries at last. Thanks for writing it all down!"
    folder = tmp_path / "pages" / "handmade"
    folder.mkdir(parents=True)
    (folder / "a.html").write_text(
        "<html><head><title>Retries</title></head><body><main><h1>Retries</h1>"
        f"<p>{words}.</p></main>"
        f'<div id="comments" class="comments-area"><p>{comment}</p></div></body></html>'
    )
    assert main([str(tmp_path / "pages"), "--by_folder", "--dropped", "--show", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    # the violations' table, then the dropped text's: the reader comment, which the job drops
    assert out[2].startswith("| handmade | 1 | 0 |")
    at = out.index("| generator | text chars | dropped chars | dropped blocks | dropped % |")
    total = len(words) + 1 + len(comment)
    share = 100 * len(comment) / total
    assert out[at + 2] == f"| handmade | {total:,} | {len(comment)} | 1 | {share:.2f} |"
    assert out[at + 3] == out[at + 2].replace("handmade", "all")
    assert out[at + 5 :] == ["handmade dropped:", f"  {folder / 'a.html'}: (75) {comment}"]


def test_the_structure_command_lists_the_pages_the_job_rejects(tmp_path, capsys):
    # a page the job rejects (here: declared Shift_JIS, bytes that are not) is listed with its
    # reason, and the other pages are still checked (before: the command stopped at it)
    from commands.structure import main

    (tmp_path / "good.html").write_text("<html><body><h1>Good</h1><p>Some text.</p></body></html>")
    (tmp_path / "bad.html").write_bytes(
        b'<html><head><meta charset="shift_jis"></head><body>\x81\x20</body></html>'
    )
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| all | 1 | 0 |" in out
    assert (
        f"1 pages the job rejects, not checked:\n  {tmp_path / 'bad.html'}: invalid_encoding:"
        in out
    )


def test_the_structure_command_lists_a_page_of_no_text_as_rejected(tmp_path, capsys):
    # a page whose extraction is empty is rejected by the job ("no main text"): the command
    # lists it so, not as a page of no violation
    from commands.structure import main

    (tmp_path / "good.html").write_text("<html><body><h1>Good</h1><p>Some text.</p></body></html>")
    (tmp_path / "empty.html").write_text("<html><body><div><img src='a.png'></div></body></html>")
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| all | 1 | 0 |" in out
    assert (
        f"1 pages the job rejects, not checked:\n  {tmp_path / 'empty.html'}:"
        " empty_after_extraction: trafilatura found no main text"
    ) in out


def test_a_table_row_of_code_spans_is_matched_by_its_cells():
    # Javadoc's method summary: each cell a code span ("`abstract Description` |
    # `getDescription()`"); with the backticks counted the row matched no line, and its words
    # were found only in the method's signature further down ("public abstract Description
    # getDescription()"), after "public": JUnit's Runner.html read as a glued row
    html = _page(
        "<table><tr><td><code>abstract Description</code></td>"
        "<th><code>getDescription()</code></th><td>&#160;</td></tr></table>"
        "<h4>getDescription</h4><pre>public abstract Description getDescription()</pre>"
    )
    head = "| Modifier and Type | Method | Description |\n|---|---|---|\n"
    detail = "\n\n#### getDescription\n\n```\npublic abstract Description getDescription()\n```"
    row = "| `abstract Description` | `getDescription()` |  |"
    assert _kinds(html, head + row + detail) == []
    # and a row of code spans glued to the text before it is found, as a row of plain cells is
    glued = "The methods `abstract Description` `getDescription()`"
    assert _kinds(html, glued + detail) == ["list"]


def test_a_term_read_as_a_thematic_break_is_a_list_violation():
    # the job writes no rule (trafilatura drops a page's <hr>): a rule in the text is an item
    # or a term read as one, git's and CMake's option "--" written "- --"
    html = _page("<hr><dl><dt>--</dt><dd><p>Do not interpret any more arguments.</p></dd></dl>")
    assert _kinds(html, "- --\n: Do not interpret any more arguments.") == ["list"]
    assert _kinds(html, "- \\--\n: Do not interpret any more arguments.") == []


def test_the_generator_is_named_from_the_pages_own_marks():
    # Without --by_folder the table groups pages by the generator they name: Erlang's pages
    # load erl_docgen's erlresolvelinks.js, Haddock's and gi-docgen's footers credit them,
    # and Texinfo's say "generated ... using texi2any" in their last line. Before: "unknown";
    # Django's Sphinx theme credits no one (Sphinx's own scripts name it) and Debian's MkDocs
    # pages lost their footer (the theme's inline "var base_url" names it)
    import gzip
    import os

    from transforms.ingest.structure_check import generator_of

    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

    def named(name: str) -> str:
        with gzip.open(os.path.join(data, name)) as f:
            return generator_of(trafilatura.load_html(f.read()))

    assert named("erlang25-stdlib-math.html.gz") == "erlang"
    assert named("ghc902-base-data-monoid-cut.html.gz") == "haddock"
    assert named("pango150-struct-language.html.gz") == "gi-docgen"
    assert named("zsh59-shell-grammar.html.gz") == "texi2any"
    assert named("jsoncpp195-class-json-reader.html.gz") == "doxygen"
    assert named("django32-ref-urls.html.gz") == "sphinx"
    assert named("mkdocs142-dev-guide-themes.html.gz") == "mkdocs"
    assert generator_of(trafilatura.load_html(_page("<p>Text.</p>"))) == "unknown"
