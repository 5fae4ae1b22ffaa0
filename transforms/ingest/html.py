"""HTML to Markdown for the chunker: trafilatura does the boilerplate removal.

`html_to_markdown` turns one HTML page into Markdown whose ``#``/``##``/``###`` headings come
from the page's ``<h1>``-``<h6>``, so the chunker can build section paths from them. The
extraction itself (what is content, what is navigation/menus/footers/sidebars) is entirely
trafilatura's, in its default "balanced" mode; this module only prepares the tree.

Why the preparation is needed (trafilatura 2.3.1, main_extractor.py / xpaths.py):

* ``_extract()`` only runs its full converter -- the one that keeps headings
  (``handle_textelem`` -> ``handle_titles`` for ``<head>``) and lists -- on a *content
  container* found by one of the ``BODY_XPATH`` expressions (xpaths.py: an ``<article>``,
  ``<main>``, or a div/section whose id/class looks like ``article-body``, ``post-content``,
  ``content``, ``main``...). When none matches, ``result_body`` stays empty.
* ``extract_content()`` then falls back to ``recover_wild_text()``, whose search expression is
  ``.//code|.//p|.//quote|.//table|.//div[contains(@class, 'w3-code')]``: headings are not
  searched at all (its docstring: "Do not widen `search_expr` (e.g. headings ...)"), and
  lists are only searched in recall mode. So every heading is silently dropped.
* DocBook pages (PostgreSQL: ``div.refentry``/``div.sect1`` directly under ``<body>``) and
  the SQLite pages (``div.fancy`` or bare ``<body>``) have no such container; Sphinx pages
  do (``div.body[role=main]``), which is why the samples' sphinx-todo.html kept its ``<h1>``.
* ``compare_extraction()`` (external.py) can still pick readability instead; its output goes
  through ``sanitize_tree()``, which keeps ``<h2>`` etc. as ``<head>``. That is why a
  synthetic page -- or one ``refsect1`` repeated three times, where the wild-text recovery
  dedups the copies so readability is >2x longer (``_prefer_readability``) -- "kept"
  headings, while on the real pages the own (wild-text) extraction is longer and wins.

The fix (``_wrap_body_in_main``): when no ``BODY_XPATH`` expression matches, wrap the
children of ``<body>`` in a ``<main>`` element. trafilatura's last ``BODY_XPATH`` expression
then selects it and the normal extractor runs over the same region the wild-text recovery
would have searched (the whole body), with the same pruning (``prune_unwanted_sections``:
nav/footer/sidebar/menu classes, link density, link tables) and the same comparison with
readability/justext afterwards -- but now headings and lists are converted. Pages that
already have a container are left untouched, so trafilatura's choice stands there.

Sphinx/docutils permalink anchors (``<a class="headerlink">¶</a>``) are removed first, so
headings and the title read "textwrap — Text wrapping and filling", not "...filling¶".

trafilatura's Markdown then goes through `transforms.ingest.trafilatura_markdown`: a code block in a
list item or a definition starts on a line of its own (`fences_alone`), and the text loses the
backslash escapes trafilatura added to it (`without_escapes`: ``<name>``, not ``\\<name>``).
"""

from __future__ import annotations

import copy
import functools
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import trafilatura
from lxml import etree
from lxml.etree import XPath
from lxml.html import HtmlElement, HTMLParser, document_fromstring, fragment_fromstring

from transforms.ingest.definitions import definitions_as_units, ends_off_fences, mark_definitions
from transforms.ingest.layout import SECTION_NUMBER
from transforms.ingest.trafilatura_markdown import fences_alone, without_escapes

try:  # the very expressions trafilatura uses to find a content container
    from trafilatura.xpaths import BODY_XPATH as _CONTAINER_XPATHS
except ImportError:  # pragma: no cover - layout of a future trafilatura
    _CONTAINER_XPATHS = [XPath("(.//article|.//main|.//*[@role='main'])[1]")]
try:  # and those by which it discards an element as boilerplate before extracting
    from trafilatura.xpaths import OVERALL_DISCARD_XPATH as _DISCARD_XPATHS
except ImportError:  # pragma: no cover - layout of a future trafilatura
    _DISCARD_XPATHS = []
try:  # and reader comments and images' captions: extracting without them, it prunes every
    # div or section whose id starts with "comment" (a Sphinx section "Comments" is
    # `section#comments`) and every element whose id or class holds "caption" (the term of
    # Sphinx's option `:caption:` is `dt#directive-option-code-block-caption`)
    from trafilatura.xpaths import DISCARD_IMAGE_ELEMENTS as _CAPTION_XPATHS
    from trafilatura.xpaths import REMOVE_COMMENTS_AND_LISTS_XPATH as _COMMENT_XPATHS
except ImportError:  # pragma: no cover - layout of a future trafilatura
    _CAPTION_XPATHS = _COMMENT_XPATHS = []

__all__ = ["HtmlExtraction", "HtmlTooDeep", "html_to_markdown"]

LOGGER = logging.getLogger(__name__)

# Permalink anchors ("¶": Sphinx's `a.headerlink`, texi2any's `a.copiable-anchor` and
# `a.copiable-link` after every definition term) and Sphinx's viewcode links ("[source]" at the
# end of every class and function signature it documents: 422 section path entries of the
# zoo's Django and Sphinx pages said "...)[source]")
_HEADERLINK_XPATH = XPath(
    "//a[contains(concat(' ', normalize-space(@class), ' '), ' headerlink ')"
    " or contains(concat(' ', normalize-space(@class), ' '), ' copiable-anchor ')"
    " or contains(concat(' ', normalize-space(@class), ' '), ' copiable-link ')"
    " or .//span[contains(concat(' ', normalize-space(@class), ' '), ' viewcode-link ')]"
    # gi-docgen's "[src]" link to the source file in a section's heading ("Description [src]")
    " or (contains(concat(' ', normalize-space(@class), ' '), ' srclink ')"
    "    and (ancestor::h1 or ancestor::h2 or ancestor::h3 or ancestor::h4 or ancestor::h5"
    "         or ancestor::h6))"
    # Haddock's "Source" link and "#" permalink after each declaration's signature
    " or (contains(concat(' ', normalize-space(@class), ' '), ' selflink ')"
    "     or contains(concat(' ', normalize-space(@class), ' '), ' link '))"
    "    and ancestor::*[contains(concat(' ', normalize-space(@class), ' '), ' src ')]"
    # a heading's link to itself that shows a sign only (Apache httpd's `a.permalink`, "¶")
    " or (starts-with(@href, '#') and not(*)"
    "     and contains('|¶|§|#|🔗|', concat('|', normalize-space(), '|'))"
    "     and normalize-space() != ''"
    "     and (ancestor::h1 or ancestor::h2 or ancestor::h3 or ancestor::h4 or ancestor::h5"
    "          or ancestor::h6))]"
)
_LANG_META_XPATH = XPath(
    "//meta[translate(@http-equiv, 'CONTENTLAGU', 'contentlagu')='content-language']/@content"
    "|//meta[@property='og:locale']/@content"
)


@dataclass(frozen=True, slots=True)
class HtmlExtraction:
    """The Markdown text of a page (``""`` if nothing was extracted) and its metadata."""

    text: str
    title: str | None = None
    url: str | None = None  # the page's canonical URL, if it declares a valid one
    date: str | None = None  # YYYY-MM-DD, as found by trafilatura (htmldate)
    language: str | None = None
    redirect: str | None = None  # where a page that only redirects sends its reader


# A page that only sends its reader elsewhere: `<meta http-equiv="refresh" content="0;
# URL=...">` within this many seconds, with no more than this much text ("Redirecting to
# ...", "The node you are looking for is at ..."). rustdoc leaves one where an item moved,
# texi2any one for each node's old file name, mkdocs-redirects one for each moved page: 35 of
# the zoo's 554 pages (texi2any 29, rustdoc 3, mkdocs 3), each a chunk of "Redirecting..."
# in the index.
MAX_REDIRECT_DELAY_S = 10
MAX_REDIRECT_TEXT_CHARS = 500
# content="0; URL='target'": a delay, ";" or ",", an optional "url=", the target (HTML's
# "shared declarative refresh steps", quotes optional)
_REFRESH = re.compile(r"\s*(\d+(?:\.\d*)?)\s*[;,]\s*(?:url\s*=\s*)?[\'\"]?([^\'\"]*)", re.I)
_REFRESH_XPATH = XPath(
    "//meta[translate(@http-equiv, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
    "='refresh']/@content"
)


def redirect_target(tree: HtmlElement) -> str | None:
    """The target of the page's `<meta http-equiv="refresh">` when it sends the reader there
    within MAX_REDIRECT_DELAY_S seconds; else None."""
    for content in _REFRESH_XPATH(tree):
        match = _REFRESH.match(content)
        if match and float(match[1]) <= MAX_REDIRECT_DELAY_S and match[2].strip():
            return match[2].strip()
    return None


def html_to_markdown(html: str | bytes, source: str = "") -> HtmlExtraction:
    """Extract the main content of an HTML page as Markdown, with its headings, plus metadata.

    Raises HtmlTooDeep for a page nested deeper than the parser can build.
    ``source`` (a path or URI) only labels log messages. The URL comes from the page itself
    (``<link rel="canonical">``, ``og:url``...), via trafilatura's metadata extraction.
    ``language`` is trafilatura's (only set when its language detector is installed),
    else the language the page declares (``<html lang>``, Content-Language, og:locale).
    """
    tree = _load_html(html)
    if tree is None:
        LOGGER.debug("not parseable as HTML: %s", source)
        return HtmlExtraction(text="")
    redirect = redirect_target(tree)
    _unnamed_elements_unwrapped(tree)
    _drop_headerlinks(tree)
    _clipping_is_no_hiding(tree)
    _manpage_header_in_content(tree)
    _doxygen_layout_as_text(tree)
    # navigation first: a section that opens with a button bar (texi2any) opens with its
    # heading once the bar is gone, which the two after them look for
    _drop_navigation_lines(tree)
    _drop_button_bars(tree)
    credits = generator_credits(tree)
    _articles_are_no_containers(tree)
    _repeated_containers_are_no_containers(tree, _sections_are_no_containers(tree))
    _anchors_are_no_boilerplate(tree)
    _scaladoc_layout_as_content(tree)
    _yard_layout_as_content(tree)
    _admonition_titles_are_no_boilerplate(tree)
    _code_captions_are_content(tree)
    _scribble_code_as_preformatted(tree)
    _code_spans_as_code(tree)  # before _drop_widgets, which makes links to code text
    _drop_widgets(tree)
    _signature_links_as_text(tree)
    _bare_lists_as_text(tree)
    _div_text_in_paragraphs(tree)  # before links become text: a bar of links stays one
    _toctree_links_as_text(tree)
    _section_paragraph_links_as_text(tree)
    _short_prose_links_as_text(tree)
    _definition_term_links_as_text(tree)
    _field_list_links_as_text(tree)
    _prose_item_links_as_text(tree)
    _return_arrows_as_text(tree)
    _read_more_links_as_text(tree)
    _implementors_as_list(tree)
    _summaries_as_blocks(tree)
    _notes_as_blocks(tree)
    _nested_inline_code_as_text(tree)
    _adjacent_inline_code_joined(tree)
    _inline_code_on_one_line(tree)
    _headings_on_one_line(tree)
    _broken_items_as_paragraphs(tree)
    _layout_tables_unwrapped(tree)
    _div_grids_as_tables(tree)
    _layout_lists_unwrapped(tree)
    _headings_in_items_as_text(tree)
    _box_titles_as_text(tree)
    _tables_in_items_as_lines(tree)
    _lists_in_cells_as_text(tree)
    _line_broken_code_as_preformatted(tree)
    _preformatted_as_code(tree)
    _whitespace_collapsed(tree)
    mark_definitions(tree)
    if _wrap_body_in_main(tree):
        LOGGER.debug("no content container, <body> wrapped in <main>: %s", source)

    # htmldate works on its own copy. Without its extensive search, which reads dates out of
    # the page's text: a copyright line "© Copyright 2022" became the date 2022-01-01 on 421
    # of the 892 pages of the zoo, the development set and samples/ (docs/output.md: the date
    # is the HTML metadata's), and dateparser's locale scan took 3.9 of the 6.8 CPU seconds
    # of Flask's 925 KB API reference, which the default --extract_timeout_s rejected.
    meta = trafilatura.extract_metadata(tree, extensive=False)
    title = page_title(tree, meta.title)
    _ampersands_escaped(tree)  # the tree's text is trafilatura's from here on
    text = _extracted(tree, fast=True)
    found = len(text or "")
    # the page's text is measured only where the extraction is not short already
    if (found < OWN_EXTRACTION_CHARS and _rescued(tree)) or (
        found < OWN_EXTRACTION_SHARE * _page_chars(tree)
    ):
        text = _extracted(tree, fast=False)
    if not text:
        LOGGER.debug("trafilatura extracted nothing: %s", source)
    text = without_escapes(fences_alone(ends_off_fences(definition_terms_inline(text or ""))))
    text = definitions_as_units(text)
    text = title_heading_above_sections(without_credits(text.strip(), credits), title)
    return HtmlExtraction(
        text=text,
        title=title,
        url=meta.url or None,
        date=meta.date or None,
        language=meta.language or _declared_language(tree),
        redirect=redirect if len(text) <= MAX_REDIRECT_TEXT_CHARS else None,
    )


def _ampersands_escaped(tree: HtmlElement) -> None:
    """Write every "&" of the page's text as "&amp;", which trafilatura's text output undoes.

    trafilatura's Markdown (`xmltotxt`) ends with `html.unescape` of the text it joined, text
    that lxml had already unescaped: a page's literal "&lt;b&gt;" (``&amp;lt;b&amp;gt;`` in
    its HTML) came out as "<b>", and "&copy" or "&para" in code as "©" or "¶". Django's
    template language page says that `{{ data }}` with `'<b>'` in it gives "This will be
    escaped: &lt;b&gt;"; the text said "This will be escaped: <b>", the opposite of the page.
    Found by listing the page blocks the text does not hold (docs/structure.md)."""
    for element in tree.iter():
        if element.text and "&" in element.text:
            element.text = element.text.replace("&", "&amp;")
        if element.tail and "&" in element.tail:
            element.tail = element.tail.replace("&", "&amp;")


# trafilatura's own extraction is the text unless it holds less than this share of the
# page's text, or is its dump of the whole page, navigation and all (its rescue where it
# found under MIN_EXTRACTED_CHARS: Django's "Generic views", a one-line page); then
# trafilatura runs with its fallbacks (readability, jusText) and keeps the better of its own
# and theirs by its rules. Only a text of fewer than OWN_EXTRACTION_CHARS may be the dump.
OWN_EXTRACTION_SHARE = 0.25
OWN_EXTRACTION_CHARS = 500


def _extracted(tree: HtmlElement, fast: bool, rescue: bool = True) -> str | None:
    """trafilatura's Markdown of `tree` (which it copies before it prunes): its own
    extraction alone with `fast`, else compared with its fallbacks'.

    Its comparison took a fallback's text where its own was longer and kept the page's
    structure: SQLite's lang_createview and lang_attach lost their title and headings ("2.
    Details" a paragraph), two of gettext's manual pages and zsh's style index a heading.
    The fallbacks are needed where its own extraction finds next to nothing of the page: the
    index pages of zsh's manual (67 characters of 31,461 on the "Concept Index") and
    gettext's, a rustdoc page whose implementors are most of it (std::ops::Shr), each under
    a quarter of its page's text (a fifth at most on the zoo, the development set and
    samples/, where every page at a quarter or more came out the same or better on its own,
    but for one short page: docs/structure.md). Without `rescue`, MIN_EXTRACTED_SIZE is 0,
    which turns off all three of trafilatura's measures for a short text: reading `<div>`s
    where paragraphs hold little, recovering loose text, and the dump of the whole page."""
    return trafilatura.extract(
        tree,
        output_format="markdown",
        include_tables=True,
        include_links=False,
        include_images=False,
        # reader comments are not document text (and, off, trafilatura prunes comment
        # containers before every stage); identical output on the sample pages
        include_comments=False,
        config=_trafilatura_config(rescue),
        fast=fast,
    )


def _rescued(tree: HtmlElement) -> bool:
    """Whether trafilatura's own extraction of `tree`, without its measures for a short text
    (`_extracted`'s `rescue`), finds under MIN_EXTRACTED_CHARS, so that
    `_extracted(tree, fast=True)` came from those measures, the dump of the page among them.

    Short pages were all taken to the fallbacks before, whose choice lost the structure of
    Vim's short help pages (its `<pre>` as loose lines with Markdown escapes, no code block)."""
    return len(_extracted(tree, fast=True, rescue=False) or "") < MIN_EXTRACTED_CHARS


def _page_chars(tree: HtmlElement) -> int:
    """Characters of the text a reader sees on the page (whitespace runs as one)."""
    body = tree.find("body")
    return len(" ".join(shown_text(body if body is not None else tree).split()))


# trafilatura dumps the whole page's text (baseline()) when what it extracted is shorter than
# MIN_EXTRACTED_SIZE, 250 characters by default, and the dump is longer: a short page, CMake's
# `else` command (109 characters), came out as its navigation bar, sidebar and "Quick search"
# around its one sentence (issue 25: 9 navigation violations on the zoo's Sphinx pages). Below
# this many characters the dump is still the rescue: an extraction that found next to nothing.
MIN_EXTRACTED_CHARS = 25


@functools.lru_cache(maxsize=2)
def _trafilatura_config(rescue: bool = True):  # -> configparser.ConfigParser
    from trafilatura.settings import use_config

    config = use_config()  # trafilatura's settings.cfg, a fresh copy
    config.set("DEFAULT", "MIN_EXTRACTED_SIZE", str(MIN_EXTRACTED_CHARS if rescue else 0))
    return config


# trafilatura 2.3 writes a definition list's term (`<dt>`: every API signature of Sphinx docs)
# as a line "- " and the term on the next line; CommonMark reads "term\n- " as a setext
# heading, so every signature became a false level-2 heading that the real ones nested under.
# A nested definition list's term is "  - " and the term, unindented, on the next line.
_DEFINITION_TERM = re.compile(r"^( *)- \n(?=[^\s-])", re.MULTILINE)


def definition_terms_inline(markdown: str) -> str:
    """trafilatura's "- " + newline + term, as the list item "- term" it stands for."""
    return _DEFINITION_TERM.sub(r"\1- ", markdown)


_TITLE_XPATH = XPath("(//head/title)[1]")


def _own_title(tree: HtmlElement) -> str:
    """The text of the page's `<title>`, "" where it has none."""
    titles = _TITLE_XPATH(tree)
    return _plain(titles[0].text_content()) if titles else ""


_HEADINGS_XPATH = XPath("//h1 | //h2 | //h3")  # in document order


def _plain(text: str | None) -> str:
    return " ".join((text or "").split())


def page_title(tree: HtmlElement, guess: str | None) -> str | None:
    """trafilatura's title, unless the page's own `<title>` contradicts it.

    trafilatura takes an element with a title-like class as the title: PostgreSQL's reference
    pages with an admonition were titled "Note" or "Tip" (`<h3 class="title">Note</h3>`),
    libxslt's by the site-wide banner in their `<h1>`, Underscore.js's by a download link. Its
    guess stands when it is part of the page's `<title>` (Sphinx adds " — Python 3.11
    documentation" there). Else the `<title>` does when a heading of the page says it too
    (libxslt: `<h1>The XSLT C library for GNOME</h1><h2>Module keys from libxslt</h2>`, the
    `<title>` the `<h2>`'s); else the guess when it is the page's first `<h1>`; else the
    `<title>`.
    """
    guess = _plain(guess)
    own = _own_title(tree)
    named = _named_by_title(own, tree) if own else None
    if named:
        return named
    if not own or not guess:
        return guess or own or None
    if guess.casefold() in own.casefold():
        return guess
    headings = [(h.tag, _plain(h.text_content()).casefold()) for h in _HEADINGS_XPATH(tree)]
    if any(text == own.casefold() for _, text in headings):
        return own
    first_h1 = next((text for tag, text in headings if tag == "h1"), "")
    return guess if guess.casefold() == first_h1 else own


# Where a <title> ends the page's name and begins its site's: "Introduction - The Rust
# Programming Language" (mdBook), "Arrays: GLib Reference Manual" (gtk-doc), "Caching — Flask
# Documentation (2.2.x)" (Sphinx), "Timeout (JUnit API)" (Javadoc)
# (also the structural check's: transforms/ingest/structure_check.py, `_split`)
SITE_SEPARATORS = (" - ", " — ", " – ", " | ", ": ", " · ", " » ")
SITE_IN_PARENTHESES = re.compile(r"(.*\S) \(([^()]+)\)")  # fullmatch: (page, site)
# A heading may put a word or two before the name its page's <title> gives, and type
# parameters after it: Javadoc's "Class Timeout" for "Timeout (JUnit API)", "Annotation Type
# After", "Class Diff<T>" for "Diff (Apache Commons Lang 3.12.0 API)"; a number ("11
# Arithmetic Evaluation")
_HEADING_PREFIX_WORDS = 2
_TYPE_PARAMETERS = re.compile(r"<[^<>]*>$")


def _named_by_title(own: str, tree: HtmlElement) -> str | None:
    """The heading of the page that its `<title>`, less the site's name after it, names.

    A `<title>` names the page, then its site. trafilatura guesses the title from elsewhere
    (og:title, the first `<h1>`...) and took the site's name for every page where that comes
    first: all 40 chapters of an mdBook were titled "The Rust Programming Language" (its menu
    bar's `<h1>`), so every chunk's header named the book, not its chapter. The page's part is
    what comes before a separator (" - ", ": ", " — "...) or a parenthesized tail; it counts
    only when a heading (h1-h3) of the page says it (case and punctuation aside), alone or
    after a word or two ("Class Timeout", "Annotation Type After"), and that heading is the
    title. None otherwise.
    """
    heads = []
    match = SITE_IN_PARENTHESES.fullmatch(own)
    if match:
        heads.append(match[1])
    for separator in SITE_SEPARATORS:
        if separator in own:
            heads += [own.rsplit(separator, 1)[0], own.split(separator, 1)[0]]
    if not heads:
        return None
    headings = [_plain(h.text_content()) for h in _HEADINGS_XPATH(tree)]
    keys = [_words(_TYPE_PARAMETERS.sub("", h)) for h in headings]
    for head in heads:
        wanted = _words(head)
        for heading, words in zip(headings, keys, strict=True):
            prefix = len(words) - len(wanted)
            if wanted and 0 <= prefix <= _HEADING_PREFIX_WORDS and words[prefix:] == wanted:
                return heading
    return None


def _words(text: str) -> list[str]:
    """The words of a title or heading as compared: case and punctuation aside ("Object
    Oriented" in a `<title>`, "Object-Oriented" in the heading)."""
    return re.findall(r"\w+", text.casefold())


def title_heading_above_sections(markdown: str, title: str | None) -> str:
    """The page's title heading one level above its sections when the page put it at theirs.

    DocBook reference pages (PostgreSQL's `<h2>DROP TABLE</h2>` followed by `<h2>Synopsis</h2>`,
    `<h2>Description</h2>`) give the title the level of the sections it heads: read as written,
    the sections are its siblings, not its parts, and no two of them share a path. When the
    first heading is the title, no later heading is above it and some are at its level, it
    becomes one level higher (``## DROP TABLE`` -> ``# DROP TABLE``).
    """
    if not title:
        return markdown
    from transforms.chunking.markdown import headings  # markdown-it, as the chunker reads it

    found = headings(markdown)
    if len(found) < 2:
        return markdown
    line, level, text = found[0]
    if level < 2 or _plain(text).casefold() != _plain(title).casefold():
        return markdown
    later = [lv for _, lv, _ in found[1:]]
    if min(later) < level or level not in later:
        return markdown
    lines = markdown.split("\n")
    marker = "#" * level
    if not lines[line].startswith(marker + " "):
        return markdown  # not an ATX heading (trafilatura writes no other)
    lines[line] = lines[line][1:]
    return "\n".join(lines)


class HtmlTooDeep(ValueError):
    """A page nested deeper than the HTML parser can build (libxml2's limit)."""


# libxml2 stops building the tree at 256 nested elements (2048 with XML_PARSE_HUGE, lxml's
# huge_tree) and drops everything deeper without an error the caller sees: a page of 300
# nested <div> came out empty. Such a page is parsed again with huge_tree, and one nested past
# that limit too is refused as too deep rather than extracted with its text cut off.
DEFAULT_DEPTH_LIMIT = 256
HUGE_DEPTH_LIMIT = 2048
_AT_DEFAULT_LIMIT = XPath("/*" * (DEFAULT_DEPTH_LIMIT - 1))  # an element at the deepest level


def _huge_parser() -> HTMLParser:
    # trafilatura's own parser settings (trafilatura.utils.HTML_PARSER), with huge_tree
    return HTMLParser(
        collect_ids=False,
        default_doctype=False,
        encoding="utf-8",
        remove_comments=True,
        remove_pis=True,
        huge_tree=True,
    )


_A_TAG = re.compile(r"<[A-Za-z]")


@functools.lru_cache(maxsize=256)
def _valid_tag(tag: str) -> bool:
    """Whether lxml makes an element named `tag` (an XML name without a prefix)."""
    try:
        etree.Element(tag)
    except ValueError:
        return False
    return True


def _unnamed_elements_unwrapped(tree: HtmlElement) -> None:
    """Unwrap each element whose name is no XML name, its text and children kept in place.

    The HTML parser makes an element of any "<...>" that opens like a tag: groovydoc's
    ``@author`` line "Paolo Di Tommaso <paolo.ditommaso@gmail.com>", unescaped, is an element
    named "paolo.ditommaso@gmail.com" (a browser shows nothing of it), and trafilatura,
    building its output tree with lxml, raised on the name and returned nothing: the job
    rejected the whole page of WritablePath as "no main text". So would a Word export's
    ``<o:p>``. A browser shows such an element's content, and so does the job."""
    for element in _ODD_NAMES_XPATH(tree):  # the few with more than letters and digits
        if not _valid_tag(element.tag):
            element.drop_tag()


_ODD_NAMES_XPATH = XPath(
    "//*[translate(name(), 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', '')]"
)


def _load_html(html: str | bytes) -> HtmlElement | None:
    """trafilatura's `load_html`, parsed again past libxml2's default depth when it hit it,
    or as a document where it is a fragment.

    A fragment (Go's documentation pages are their content alone, no ``<html>`` or
    ``<body>``) came back from trafilatura as an ``<html>`` around one ``<div>``, without a
    ``<body>``: its extraction took trafilatura's path for pages without a container, which
    dropped inline code met before and the text up to the next one ("For ``<<``, left shift
    ``R0`` by the count in ``R1``" became "For ``R1``"). Parsed as a document, it has one.

    Raises HtmlTooDeep for a page nested deeper than HUGE_DEPTH_LIMIT elements.
    """
    tree = trafilatura.load_html(html)
    if tree is None:
        # it refuses a fragment of one block ("<p>A short note.</p>") as no HTML: one with a
        # tag is parsed as a document (the job rejected such a page as "no main text")
        if not _A_TAG.search(html if isinstance(html, str) else html.decode("latin-1")):
            return None
    else:
        root = tree.getroottree().getroot()
        if root.find("body") is not None and not _AT_DEFAULT_LIMIT(root):
            return tree
    parser = _huge_parser()
    data = html.encode("utf-8", "surrogatepass") if isinstance(html, str) else html
    deep = document_fromstring(data, parser=parser)
    limit = next((e for e in parser.error_log if e.type_name == "ERR_RESOURCE_LIMIT"), None)
    if limit is not None:
        raise HtmlTooDeep(
            f"HTML nested deeper than {HUGE_DEPTH_LIMIT} elements, the limit of the HTML parser "
            f"(libxml2 with XML_PARSE_HUGE: {limit.message})"
        )
    return deep


_CLIPPING = re.compile(r"overflow(?:-[xy])?\s*:\s*hidden\s*(?:!important\s*)?;?", re.IGNORECASE)


def _clipping_is_no_hiding(tree: HtmlElement) -> None:
    """Take ``overflow: hidden`` out of inline styles: it clips what overflows, and hides nothing.

    trafilatura prunes every element whose style says "hidden" (``visibility: hidden`` and
    ``overflow: hidden`` alike): cppreference's box "Members identical to std::promise",
    ``<div style="overflow: hidden; border: ...">``, went whole, heading, member table and
    all. ``visibility: hidden`` and ``display: none`` stay, and so does their pruning.
    """
    for element in tree.xpath("//*[contains(@style, 'hidden')]"):
        style = _CLIPPING.sub("", element.get("style", ""))
        if style.strip():
            element.set("style", style)
        else:
            del element.attrib["style"]


def _drop_headerlinks(tree: HtmlElement) -> None:
    """Remove permalink anchors ("¶") and Sphinx's "[source]" links, keeping the text that
    follows them."""
    for anchor in _HEADERLINK_XPATH(tree):
        anchor.drop_tree()


def _has_class(element: HtmlElement, name: str) -> bool:
    return name in (element.get("class") or "").split()


_DOXYGEN_XPATH = XPath("//meta[@name='generator' and starts-with(@content, 'Doxygen')]")
_SPACE_BEFORE = re.compile(r"\s+([),])")
_SPACE_AFTER_PAREN = re.compile(r"\(\s+")
_SPACE_BEFORE_PAREN = re.compile(r"(?<=[\w>\]])\s+\(")


def _signature(text: str) -> str:
    """A C++ declaration written in table cells as one line: ``bool Json::Reader::parse(const
    char *beginDoc, bool collectComments = true) const``."""
    line = _plain(text)
    line = _SPACE_BEFORE.sub(r"\1", _SPACE_AFTER_PAREN.sub("(", line))
    return _SPACE_BEFORE_PAREN.sub("(", line)


# Doxygen's title of a page (the pages have no <title>)
_DOXYGEN_TITLE_XPATH = XPath("//div[contains(@class, 'headertitle')]/div[@class='title']")


# AsciiDoc's (and Asciidoctor's) manual page: the title and the NAME section in a
# ``div#header`` beside the ``div#content`` of the other sections
_MANPAGE_HEADER_XPATH = XPath(
    "//body/div[@id='header'][h2 and div[contains(concat(' ', @class, ' '), ' sectionbody ')]]"
    "[following-sibling::div[@id='content']]"
)


def _manpage_header_in_content(tree: HtmlElement) -> None:
    """An AsciiDoc manual page's header (its ``<h1>`` and NAME section) as the start of its
    content.

    AsciiDoc writes a man page's title and NAME section ("git-add - Add file contents to the
    index") in ``div#header``, the other sections in ``div#content``, which trafilatura takes
    as the page's content container: 39 of the zoo's 40 git pages lost their one-line
    purpose and began at SYNOPSIS. A header that holds a section (an ``<h2>`` and its
    ``div.sectionbody``) goes first into the content; an article's header (title, author,
    revision) does not match and stays as it was.
    """
    for header in _MANPAGE_HEADER_XPATH(tree):
        content = header.xpath("following-sibling::div[@id='content'][1]")[0]  # as matched
        content.insert(0, header)  # moves it, its tail with it


def _doxygen_layout_as_text(tree: HtmlElement) -> None:
    """Doxygen's layout tables as the text they lay out, its page title as the `<h1>`.

    Doxygen writes a member's declaration as a table (``table.memname``: the return type and
    name, "(", a parameter's type and name to a row, ")"), and trafilatura wrote it as one:
    ``| bool Json::Reader::parse | ( | const char * | *beginDoc*, |``, the name walled off
    from its parameters. It becomes a code block of the declaration's lines, a row to a line,
    as its source writes them: ``bool Json::Reader::parse(const char * beginDoc,``, ``const
    char * endDoc,``..., after its ``template<...>`` lines and with its labels
    (``[static]``). The summaries of a class's members (``table.memberdecls``: a ``<h2>`` in
    a row, then a row per member and a row of its brief) came out as tables headed "Public
    Member Functions", half their cells empty: each becomes its heading's text as a label and
    a list of the members, each with its brief (its "More..." link goes). The title
    (``div.headertitle > div.title``, "Json::Reader Class Reference"; the pages have no
    ``<title>``, and trafilatura titled them by their first member, "◆ Char") becomes the
    `<h1>` it stands for, and the "◆" permalink before every member's heading goes. A code
    fragment (``div.fragment``, a ``div.line`` to a line) becomes the code block it shows, and
    the tooltips in it (``div.ttc``: a linked name's declaration and "Definition: config.h:132",
    shown on hover) go: trafilatura dropped the lines and wrote the tooltips' "Definition:"
    lines in their place (and as paragraphs, `_div_text_in_paragraphs`, the lines would be
    no code).
    """
    if not _DOXYGEN_XPATH(tree):
        return
    for title in _DOXYGEN_TITLE_XPATH(tree):
        title.tag = "h1"
        title.attrib.clear()
        for badges in title.xpath(".//span[@class='mlabels']"):
            badges.drop_tree()  # "abstract", glued to the title: "Class Referenceabstract"
    for permalink in tree.xpath("//span[@class='permalink']"):
        permalink.drop_tree()  # keeps its tail
    for link in tree.xpath("//a[normalize-space()='More...']"):
        link.drop_tree()
    for proto in tree.xpath("//div[@class='memproto']"):
        tables = [t for t in proto if t.tag == "table"]
        if not tables:
            continue
        lines = [
            _signature(row.text_content())
            for table in proto.iter("table")
            if _has_class(table, "memname")
            for row in table.iter("tr")
        ]
        lines = [line for line in lines if line] or [_signature(tables[0].text_content())]
        while len(lines) > 1 and lines[-1].startswith(")"):
            lines[-2:] = [lines[-2] + lines[-1]]  # the closing row: ")" and its qualifiers
        labels = [_plain(s.text_content()) for s in proto.iter("span") if _has_class(s, "mlabel")]
        if labels:
            lines[-1] += " " + " ".join(f"[{label}]" for label in labels)
        templates = [d for d in proto if d.tag == "div" and _has_class(d, "memtemplate")]
        lines[:0] = [_plain(d.text_content()) for d in templates]  # template<typename T>
        for template in templates:
            proto.remove(template)
        block = proto.makeelement("pre", {})
        block.text = "\n".join(lines) + "\n"
        for table in tables[1:]:
            proto.remove(table)
        block.tail = tables[0].tail
        proto.replace(tables[0], block)
    for tooltip in tree.xpath("//div[@class='ttc']"):
        tooltip.drop_tree()
    for fragment in tree.xpath("//div[@class='fragment']"):
        lines = [
            line.text_content().rstrip()
            for line in fragment.iter("div")
            if _has_class(line, "line")
        ]
        if not any(lines):
            continue
        block = fragment.makeelement("pre", {})
        block.text = "\n".join(lines) + "\n"
        block.tail = fragment.tail
        fragment.getparent().replace(fragment, block)
    for table in tree.xpath("//table[@class='memberdecls']"):
        blocks: list[HtmlElement] = []
        items: HtmlElement | None = None
        for row in table.iter("tr"):
            kind = (row.get("class") or "").split(":")[0]
            if kind == "heading":
                label = table.makeelement("p", {})
                strong = label.makeelement("strong", {})
                strong.text = _plain(row.text_content())
                label.append(strong)
                blocks.append(label)
                items = None
            elif kind == "memitem":
                if items is None:
                    items = table.makeelement("ul", {})
                    blocks.append(items)
                item = items.makeelement("li", {})
                code = item.makeelement("code", {})
                code.text = _plain(row.text_content())
                item.append(code)
                items.append(item)
            elif kind == "memdesc" and items is not None and len(items):
                brief = _plain(row.text_content())
                if brief:
                    items[-1][-1].tail = ": " + brief
        if not blocks:
            continue
        parent = table.makeelement("div", {})
        parent.extend(blocks)
        parent.tail = table.tail
        table.getparent().replace(table, parent)


_SLUG_SEPARATORS = re.compile(r"[^0-9a-z]+")


def _opening_heading(element: HtmlElement) -> HtmlElement | None:
    """The heading `element` opens with: its first child with text, after empty anchors."""
    if (element.text or "").strip():
        return None
    for child in element:
        if not isinstance(child.tag, str):
            continue
        if child.tag in _HEADING_TAGS:
            return child
        if child.text_content().strip():
            return None
    return None


def _is_section_of_content(element: HtmlElement) -> bool:
    """Whether `element` is a section of the page, as docutils writes one: its id is the
    anchor of the heading it opens with (``<section id="primary-comparison-expressions"><h3>
    Primary Comparison Expressions</h3>``), or it is a ``div.section`` with an id that opens
    with a heading (docutils' HTML4 writer; Django's theme prefixes the ids, ``<div
    class="section" id="s-template-tags"><span id="template-tags"></span><h3>``). texi2any
    names a section by its node, which is the heading without its number (``<div
    class="subsection" id="Comments">`` ... ``<h4>3.1.3 Comments</h4>``, the button bar
    before the heading gone by now), in any case, its characters other than letters, digits
    and spaces encoded (``id="Comment_002dLines"`` for "Comment-Lines": `texinfo_node_name`)."""
    own = element.get("id")
    heading = _opening_heading(element)
    if not own or heading is None:
        return False
    if element.tag == "div" and _has_class(element, "section"):
        return True
    text = _plain(heading.text_content())
    slugs = {_slug(text), _slug(SECTION_NUMBER.sub("", text, count=1))} - {""}
    return own.lower() in slugs or _slug(texinfo_node_name(own)) in slugs


def _slug(text: str) -> str:
    return _SLUG_SEPARATORS.sub("-", text.lower()).strip("-")


_TEXINFO_ESCAPE = re.compile(r"_([0-9a-f]{4})")


def texinfo_node_name(anchor: str) -> str:
    """The node name that texi2any wrote as `anchor`: a space as "-", any other character but
    a letter or a digit as "_" and its four hex digits ("Foo_002dbar-baz" for "Foo-bar baz"),
    "g_t" before a name that would not start with a letter (the Texinfo manual, "HTML Xref
    Node Name Expansion"). An anchor that is no such name comes back with its "-" as spaces."""
    if anchor.startswith("g_t"):
        anchor = anchor[3:]
    return _TEXINFO_ESCAPE.sub(lambda m: chr(int(m[1], 16)), anchor.replace("-", " "))


def _articles_are_no_containers(tree: HtmlElement) -> None:
    """Make each ``<article>`` a ``<div>`` where the page holds several, none inside another.

    trafilatura takes the page's first ``<article>`` for its content container (one of its
    ``BODY_XPATH`` expressions, before ``div#content``). Erlang/OTP's reference pages put each
    function, and the data types before them, in an ``<article>`` of its own: trafilatura's
    own extraction of stdlib's beam_lib was its first one, the data types (160 characters of
    the page's 19,335), and the fallback it fell back to wrote the rest without its code
    spans and code blocks. Items of a page are not the page; the container trafilatura finds
    without them is the page's (Erlang's ``div#content``). A page of one ``<article>``, or of
    articles nested in one, keeps them.
    """
    articles = [a for a in tree.iter("article") if next(a.iterancestors("article"), None) is None]
    if len(articles) > 1:
        for article in tree.iter("article"):
            article.tag = "div"


def _sections_are_no_containers(tree: HtmlElement) -> int:
    """Take from a section of the content the id that made trafilatura take it for the page's
    content container; the index of the expression that finds the container then.

    trafilatura extracts the first element that one of its ``BODY_XPATH`` expressions finds,
    in their order, and one of the first looks for an id starting with "primary" (a site's
    ``div#primary``). Sphinx gives a section the id of its heading: on CMake's
    cmake-generator-expressions(7), ``<section id="primary-comparison-expressions">`` (1,169
    characters of 57,214) was extracted for the page, readability's text of the whole page
    won over it, and readability had written three ``<pre>`` as plain lines, their ``#``
    comments as headings (issue 25: 2 heading and 3 fence violations on the zoo's CMake
    pages). A section whose id is its own heading's anchor loses that id, and trafilatura
    finds the container it would have found without it (Sphinx's ``div[role=main]``).
    """
    for k, expr in enumerate(_CONTAINER_XPATHS):
        found = expr(tree)
        while found and _is_section_of_content(found[0]):
            section = found[0]
            del section.attrib["id"]
            found = expr(tree)
            if found and found[0] is section:
                break  # found by its class as well: left as trafilatura finds it
        if found:
            return k  # the expression that finds the container trafilatura takes
    return len(_CONTAINER_XPATHS)


# the attributes by which trafilatura's container expressions (`_CONTAINER_XPATHS`) find one
_CONTAINER_ATTRIBUTES = ("class", "id", "role", "itemprop")


def _repeated_containers_are_no_containers(tree: HtmlElement, start: int = 0) -> None:
    """Take from each of several elements apart, which a content-container expression of
    trafilatura finds alike, the attribute that makes it find them.

    trafilatura extracts the first element that the first of its ``BODY_XPATH`` expressions
    to find one finds (`_sections_are_no_containers`). Tomcat's manual writes each section's
    text in a ``div.text`` after the section's ``<h3>``, and ``@class='text'`` is one of
    those expressions: trafilatura's extraction of appdev/introduction.html was its first
    section, "Overview"; the section "Links" and its two specifications went. Elements that
    one expression finds side by side are parts of the page, not its container; without
    them the expression finds nothing, and the next finds the page's (Tomcat's
    ``div#content``). One element, or one inside the other, is left as trafilatura finds it.
    The expressions before `start` find nothing (`_sections_are_no_containers` asked them).
    """
    for expr in _CONTAINER_XPATHS[start:]:
        found = expr(tree)
        if not found:
            continue
        first = found[0]
        if not _repeated_alike(first):
            return  # the common case, told by one cheap look
        attribute = _finding_attribute(expr, first)
        if attribute is None:
            return  # found by its tag (an <article>, a <main>): the page's container
        value = first.attrib.pop(attribute)
        again = expr(tree)
        other = again[0] if again else None
        if (
            other is None
            or other is first
            or first in other.iterancestors()
            or other in first.iterancestors()
        ):
            first.set(attribute, value)  # the one container, or one inside the other
            return
        parts = [(first, attribute, value)]
        while other is not None and len(parts) < _MAX_REPEATED_CONTAINERS:
            attribute = _finding_attribute(expr, other)
            if attribute is None:
                break
            parts.append((other, attribute, other.attrib.pop(attribute)))
            again = expr(tree)
            other = again[0] if again else None
        if other is not None:  # more than parts of a page: put them back as they were
            for element, attribute, value in parts:
                element.set(attribute, value)
            return


def _repeated_alike(element: HtmlElement) -> bool:
    """Whether another element of `element`'s tag, neither inside nor around it, has the same
    value of one of the attributes a container expression reads."""
    values = [(a, element.get(a)) for a in _CONTAINER_ATTRIBUTES if element.get(a) is not None]
    for other in element.getroottree().getroot().iter(element.tag):
        if other is element or not any(other.get(a) == v for a, v in values):
            continue
        if element not in other.iterancestors() and other not in element.iterancestors():
            return True
    return False


# a page of this many sections found alike is a listing, not parts of one page's text
_MAX_REPEATED_CONTAINERS = 200


def _finding_attribute(expr: Callable[[HtmlElement], list], element: HtmlElement) -> str | None:
    """The attribute of `element` without which `expr` no longer finds it first, if any."""
    for attribute in _CONTAINER_ATTRIBUTES:
        value = element.get(attribute)
        if value is None:
            continue
        del element.attrib[attribute]
        found = expr(element.getroottree().getroot())
        element.set(attribute, value)
        if not found or found[0] is not element:
            return attribute
    return None


def _anchors_are_no_boilerplate(tree: HtmlElement) -> None:
    """Take from a section, or an entry of a list in one, the id that made trafilatura
    discard it whole.

    trafilatura discards, while it extracts, every ``div``, ``section``, ``p`` or ``span``,
    and every item of a ``ul``, ``ol`` or ``dl`` (``li``, ``dt``, ``dd``, which it renames
    ``item`` first), whose id matches its boilerplate words ("tags", "author", "share",
    "menu", "nav", "related", "footer", "button", "sidebar", "banner"...: a site's
    ``div#tags``, ``div#author-box``). Sphinx gives a section the id of its heading, a
    definition's term (``dt``) the id of what it defines, and a labelled list item its label,
    so these went, heading, term or item and all: Sphinx's own "Including content based on
    tags" (the ``only`` directive) and "Using Intersphinx with inventory file under Basic
    Authorization", a section on template tags or related objects (issue 25: found by
    listing the zoo's headings that no text holds), the sections "Comments" of CMake's
    cmake-language(7), of Sphinx's reStructuredText basics and of the zsh manual's shell
    grammar (found by listing the page's text blocks that the text does not hold: trafilatura
    prunes an id starting "comment" as reader comments); the terms of Sphinx's configuration
    values ``author``, ``show_authors``, ``html_sidebars`` (``dt#confval-author``: its
    description was left under the term before it), Python's ``socket.fromshare()`` and
    ``SSLSocket.shared_ciphers()``, and the item ``li#conf-tags`` of Sphinx's conf.py page
    (found by listing the elements that their id alone discards). These lose the id; their
    class or role still count:

    - a section whose id is its own heading's anchor (`_is_section_of_content`);
    - within a section that opens with a heading (``<section><h1>``, docutils' ``<div
      class="section">``; Sphinx's page section ``section#module-conf`` has a module's id,
      no anchor of its heading), a definition's term or description (``dt``, ``dd``), and a
      list item that holds a paragraph (``<li id=...><p>``, as docutils writes the items of
      a list that is not compact). An author box, share bar or list of related posts outside
      the page's sections stays discarded, and so does a menu's item, a link and no paragraph
      (SQLite's ``li#search_menubutton``).
    - an element inside a heading (``h1``-``h6``): a heading names its section, and what
      it holds is its text, never a site's widget (and a definition list inside a
      definition's description loses its class, below). Apache httpd's manual writes a
      directive's heading ``<h2><span id="LDAPSharedCacheFile">LDAPSharedCacheFile</span>
      Directive</h2>``, and "share" in the id took the name out ("## Directive").
    """
    for heading in tree.iter(*_HEADING_TAGS):
        for element in heading.iterdescendants():
            if element.get("id") and _discarded_for(element.tag, "id", element.get("id")):
                del element.attrib["id"]
    # a definition list inside a definition's description, or one whose descriptions say
    # something in words of their own: its class too. tcllib's doctools write options as
    # `<dl class="doctools_options">`, and trafilatura discards a list whose class holds
    # "options", a site's option panel; pldoc writes a predicate's "Errors",
    # "Compatibility" and "See also" as `<dl class="tags">` (its SAML section's text sits in
    # such a "See also"). A widget's list of links (share, tag and author links) stays.
    for listed in tree.iter("dl"):
        classes = listed.get("class")
        if (
            classes
            and _discarded_for("list", "class", classes)
            and (
                any(a.tag == "dd" for a in listed.iterancestors())
                or any(_words_outside_and_in_links([d])[0] for d in listed.iter("dd"))
            )
        ):
            del listed.attrib["class"]
    for element in _ANCHORED_XPATH(tree):
        tag = element.tag
        listed = tag in ("dt", "dd", "li")
        # what trafilatura's discard sees: it renames li, dt and dd `item` first (the probe is
        # cached per id: most ids are no boilerplate, and the DOM is not walked for them)
        if not _discarded_for("item" if listed else tag, "id", element.get("id")):
            continue
        if listed:
            of_content = (tag != "li" or element.find("p") is not None) and any(
                _is_headed_section(a) for a in element.iterancestors()
            )
        else:
            of_content = _is_section_of_content(element)
        if of_content:
            del element.attrib["id"]


_ANCHORED_XPATH = XPath("//section[@id] | //div[@id] | //dt[@id] | //dd[@id] | //li[@id]")


def _is_headed_section(element: HtmlElement) -> bool:
    """A ``section`` or docutils' ``div.section`` that opens with a heading."""
    is_section = element.tag == "section" or (
        element.tag == "div" and _has_class(element, "section")
    )
    return is_section and _opening_heading(element) is not None


@functools.lru_cache(maxsize=1024)
def _discarded_for(tag: str, attribute: str, value: str) -> bool:
    """Whether trafilatura discards a `tag` element for its `attribute` (id or class) alone:
    its discard expressions, run on an element with that attribute and nothing else."""
    probe = fragment_fromstring(f"<div><{tag}></{tag}></div>")
    probe[0].set(attribute, value)
    return any(expr(probe) for expr in (*_DISCARD_XPATHS, *_COMMENT_XPATHS, *_CAPTION_XPATHS))


_ADMONITIONS_XPATH = XPath(
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' admonition ')]"
    "[contains(@class, 'admonition-')]"
)


# Scaladoc's doc comments (`cmt`) and a type's comment block (`div#comment.fullcommenttop`,
# which holds its attributes, "Source", "Since", even where no comment was written)
_DOC_COMMENTS_XPATH = XPath(
    "//*[contains(@class, 'cmt') or contains(@class, 'fullcommenttop')]"  # the cheap test first
    "[contains(concat(' ', normalize-space(@class), ' '), ' cmt ')"
    " or contains(concat(' ', normalize-space(@class), ' '), ' fullcommenttop ')]"
)
_FOLDED_XPATH = XPath(
    "//*[contains(@class, 'toggleContainer')]"
    "[contains(concat(' ', normalize-space(@class), ' '), ' toggleContainer ')]"
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' hiddenContent ')]"
)
_DOC_COMMENT_IN_XPATH = XPath(".//*[contains(concat(' ', normalize-space(@class), ' '), ' cmt ')]")
_SHORT_COMMENTS_XPATH = XPath(
    "//p[contains(@class, 'shortcomment')]"
    "[contains(concat(' ', normalize-space(@class), ' '), ' shortcomment ')]"
    "[following-sibling::*[1][self::div]"
    "[contains(concat(' ', normalize-space(@class), ' '), ' fullcomment ')]]"
)


def scaladoc_page(tree: HtmlElement) -> bool:
    """Whether Scaladoc made the page: it names itself nowhere, but its pages load its
    lib/template.js."""
    return any((s.get("src") or "").endswith("lib/template.js") for s in tree.iter("script"))


_YARD_CREDIT_XPATH = XPath("//div[@id='footer']//a[contains(@href, 'yardoc.org')]")


def yard_page(tree: HtmlElement) -> bool:
    """Whether YARD (Ruby) made the page: its footer credits yardoc.org."""
    return bool(_YARD_CREDIT_XPATH(tree))


def _yard_layout_as_content(tree: HtmlElement) -> None:
    """YARD's tags of a method or class as content.

    YARD writes what a docstring's tags say, "Parameters:", "Returns:", "Raises:",
    "Examples:" with their code, "See Also:", in a ``div.tags``, and trafilatura discards
    a class holding "tags" (a post's tag list): every parameter, return value and example
    of Ruby's documentation went (yard-doc's 35 pages: 7.7% of their text, among it 41
    examples' code). Its toggles are widgets (`_WIDGETS_XPATH`)."""
    if not yard_page(tree):
        return
    for box in tree.iter("div"):
        if box.get("class") == "tags":
            del box.attrib["class"]


def _scaladoc_layout_as_content(tree: HtmlElement) -> None:
    """Scaladoc's documentation comments as content, each once, and its folded lists.

    Scaladoc marks every doc comment with the class ``cmt`` and writes a type's or member's
    description as ``<div class="comment cmt">`` (a type's inside ``div#comment``), which
    trafilatura prunes as a blog's reader comments (an id or class starting "comment"): of
    the Scala library's pages, every description but a member's first sentence went (37% of
    their text). Those ids and class names go from a doc comment and the elements around it.
    A member's first sentence, shown in its summary (``p.shortcomment``) beside the whole
    comment that a click unfolds (``div.fullcomment``), goes where the whole comment starts
    with it: the description is then written once. A type's lists that a click unfolds
    ("Linear Supertypes", "Known Subclasses": ``div.toggleContainer`` > ``div.hiddenContent``,
    which trafilatura prunes for "hidden") are kept with their label, as a ``<details>`` is.
    The type's owner ("scala.tools.nsc.transform.patmat.Logic.PropositionalLogic", a link to
    each package, above its ``<h1>``) is text, under the heading: a line of links before it,
    trafilatura took the heading for boilerplate too and the page lost its title.
    """
    if not scaladoc_page(tree):
        return
    for owner in tree.xpath("//div[@id='definition']/p[@id='owner']"):
        heading = owner.getnext()
        if heading is None or heading.tag != "h1":
            continue
        for link in owner.findall(".//a"):
            link.drop_tag()
        owner.tail = None  # the whitespace between it and the heading
        heading.addnext(owner)  # moves it
    for folded in _FOLDED_XPATH(tree):
        folded.set(
            "class", " ".join(c for c in folded.get("class", "").split() if c != "hiddenContent")
        )
    for comment in _DOC_COMMENTS_XPATH(tree):
        for element in (comment, *comment.iterancestors()):
            if element.tag in ("body", "html"):
                break
            if _discarded_for(element.tag, "id", element.get("id") or ""):
                del element.attrib["id"]
            classes = (element.get("class") or "").split()
            kept = [c for c in classes if not _READER_COMMENT.match(c)]
            if kept != classes:
                element.set("class", " ".join(kept))
    for short in _SHORT_COMMENTS_XPATH(tree):
        full = short.getnext()
        text = _plain(short.text_content())
        whole = next(iter(_DOC_COMMENT_IN_XPATH(full)), None)
        if text and whole is not None and _plain(whole.text_content()).startswith(text):
            short.drop_tree()


_READER_COMMENT = re.compile(r"[Cc]omment(?!ary)")  # trafilatura's class of reader comments


def _admonition_titles_are_no_boilerplate(tree: HtmlElement) -> None:
    """Take from a docutils admonition the class made of its title when trafilatura would
    discard the admonition for it.

    docutils gives an admonition with a title of its own (``.. admonition:: Accelerating
    build speed``) the class ``admonition-`` + the title's slug, and trafilatura discards
    an element whose class holds one of its boilerplate words, "elated" (for "related")
    among them: Sphinx's configuration page lost its note "Accelerating build speed" (the
    stemmers that speed up its search index) for "acc-elerat-ing". The classes
    ``admonition`` and any other stay; note, warning and the rest have no slug class.
    Found by listing the page blocks the text does not hold (docs/structure.md)."""
    for element in _ADMONITIONS_XPATH(tree):
        classes = element.get("class", "").split()
        kept = [
            c
            for c in classes
            if not (c.startswith("admonition-") and _discarded_for(element.tag, "class", c))
        ]
        if len(kept) < len(classes):
            element.set("class", " ".join(kept))


def _code_captions_are_content(tree: HtmlElement) -> None:
    """Keep the caption of a code listing: take "caption" out of its class and id.

    Extracting without images, trafilatura discards every element whose class or id holds
    "caption", an image's to it. A code listing's caption says what the code is: the Rust
    book's "Listing 17-4: Definition of the `Screen` struct with a `components` field holding
    a vector of trait objects that implement the `Draw` trait" (``<p><span
    class="caption">`` after the ``<pre>``: 138 on the zoo's 40 mdBook pages), Sphinx's
    ``div.code-block-caption``, the file a snippet goes in ("wsgi.py", "settings.py",
    click's "hello.py"). Found by listing the page blocks the text does not hold
    (docs/structure.md). A caption is a listing's when the block it is in (itself, or the
    paragraph or ``<div>`` around it) has a ``<pre>`` beside it, or a ``<div>`` holding one
    ``<pre>`` and no heading; a figure's caption, or a sidebar's ("Get started" above a list
    of links), stays an image's to trafilatura.
    """
    # the elements trafilatura discards as an image's caption (_CAPTION_XPATHS)
    captions = [element for expr in _CAPTION_XPATHS for element in expr(tree)]
    for element in captions:
        if not _beside_code(element):
            continue
        for node in element.iter():
            if not isinstance(node.tag, str):
                continue
            if "caption" in (node.get("id") or ""):
                del node.attrib["id"]
            classes = (node.get("class") or "").split()
            if any("caption" in c for c in classes):
                node.set("class", " ".join(c for c in classes if "caption" not in c))
        if element.tag == "div" and not element.xpath(_CAPTION_BLOCKS):
            element.tag = "p"  # trafilatura keeps a <div>'s text only on pages of little <p>


_CAPTION_BLOCKS = "./div | ./p | ./ul | ./ol | ./dl | ./table | ./pre | ./blockquote"


def _beside_code(element: HtmlElement) -> bool:
    """Whether the block `element` is in sits beside a code listing."""
    block = element
    while block.tag not in ("p", "div") and block.getparent() is not None:
        block = block.getparent()
    if block.xpath(".//img | .//svg | .//pre"):
        return False
    for sibling in (block.getprevious(), block.getnext()):
        if sibling is None or not isinstance(sibling.tag, str):
            continue
        if sibling.tag == "pre":
            return True
        if sibling.tag == "div" and len(sibling.xpath(".//pre")) == 1:
            return next(sibling.iter(*_HEADING_TAGS), None) is None
    return False


_NAVIGATION_LINKS_XPATH = XPath(
    "//a[@rel='next' or @rel='prev' or @rel='previous' or @rel='up' or @rel='index']"
)
_NAVIGATION_BLOCKS = frozenset({"p", "div", "td", "nav", "header", "footer", "li"})
# What a navigation line holds besides its links: "Next: ..., Previous: ..., Up: ... [Index]"
_NAVIGATION_WORDS = re.compile(
    r"[\s,;:|\[\]()]*(?:(?:next|previous|prev|up|top|contents|index)\b[\s,;:|\[\]()]*)*",
    re.IGNORECASE,
)


def navigation_lines(tree: HtmlElement) -> list[HtmlElement]:
    """The blocks that hold nothing but links to the next, previous and parent page.

    Texinfo's HTML (makeinfo, texi2any) heads and ends every node with one such line, "Next:
    Thread Safety, Previous: The Closure API, Up: Using libffi [Index]", in a plain
    ``<div class="header"><p>``: trafilatura kept it as the first line of the page (issue
    11, section 3). A block is one when its links include one with ``rel`` next, prev or up
    and its other text is only those words and punctuation (the outermost such block).
    """
    out: list[HtmlElement] = []
    for link in _NAVIGATION_LINKS_XPATH(tree):
        block = link.getparent()
        while block is not None and block.tag not in _NAVIGATION_BLOCKS:
            block = block.getparent()
        if block is None or any(b is block or b in block.iterancestors() for b in out):
            continue  # no block, or one found with an earlier link
        rest = block.text_content()
        for anchor in block.iter("a"):
            rest = rest.replace(anchor.text_content(), " ", 1)
        if _NAVIGATION_WORDS.fullmatch(rest):
            out.append(block)
    return out


def _drop_navigation_lines(tree: HtmlElement) -> None:
    """Remove the page's `navigation_lines`."""
    for block in navigation_lines(tree):
        if block.getparent() is not None:
            block.drop_tree()


# A page's credit to the tool that made it, or its date of change, as a block of its own at
# the page's end: Doxygen's "Generated on Wed Mar 30 2022 07:20:36 for JsonCpp by doxygen
# 1.9.1", Texinfo's "This document was generated on February 5, 2023 using texi2any.",
# SQLite's "This page last modified on 2021-07-27 23:51:29 UTC"
_CREDIT = re.compile(
    r"(?:this\s+(?:document|page|manual|file|site|documentation)\s+(?:(?:was|is|has\s+been)\s+)?)?"
    r"(?:(?:generated|created|built|produced)\b.{0,120}?\b(?:by|using|with)\b.{0,80}"
    r"|last\s+(?:modified|updated|changed)\b.{1,80})",
    re.IGNORECASE | re.DOTALL,
)
_CREDIT_BLOCKS_XPATH = XPath("//p[.//a] | //address[.//a] | //footer[.//a] | //div[.//a]")
_TEXT_AFTER_XPATH = XPath("following::text()[not(ancestor::script) and not(ancestor::style)]")
MAX_CREDIT_CHARS = 250  # a credit is a line
MAX_AFTER_CREDIT_CHARS = 100  # zsh's manual ends with "Zsh version 5.9, released on ..."


def generator_credits(tree: HtmlElement) -> list[tuple[str, ...]]:
    """The words of the page's credit to its generator, or its date of change, at its end.

    Doxygen ends every page with "Generated on <date and time> for <project> by doxygen
    <version>" (an ``<address class="footer">``), Texinfo's HTML with "This document was
    generated on <date> using texi2any", SQLite's pages with "This page last modified on
    <date>": trafilatura kept each as the last line of the page's text (all 35 Doxygen, 29
    of 40 texi2any and 27 of 33 texi2html pages of the zoo, SQLite's 37 of the development
    set). It is no content, and its date, which changes with every build of the
    documentation, changed every page's last chunk (so its id and its embedding) on a
    rebuild of unchanged text. A credit is a block whose whole text is such a line (under
    MAX_CREDIT_CHARS, with a link: the generator's site, the date's) with at most
    MAX_AFTER_CREDIT_CHARS of the page's text after it. `without_credits` drops its line from
    the extracted text: removed from the tree before trafilatura instead, it changed what
    trafilatura made of the rest of a page (zsh's concept index, whose own extraction had
    found that line alone, came out as loose lines instead of its table).
    """
    out = []
    for block in _CREDIT_BLOCKS_XPATH(tree):
        text = " ".join(block.text_content().split())
        if not text or len(text) > MAX_CREDIT_CHARS or not _CREDIT.fullmatch(text):
            continue
        after = " ".join("".join(_TEXT_AFTER_XPATH(block)).split())
        words = tuple(_WORD.findall(text))
        if len(after) <= MAX_AFTER_CREDIT_CHARS and words not in out:
            out.append(words)
    return out


def without_credits(markdown: str, credits: list[tuple[str, ...]]) -> str:
    """`markdown` without the lines of its end (at most MAX_AFTER_CREDIT_CHARS after them)
    whose words are those of one of the page's `credits` (`generator_credits`)."""
    if not credits:
        return markdown
    lines = markdown.split("\n")
    after = 0
    for i in range(len(lines) - 1, -1, -1):
        if after > MAX_AFTER_CREDIT_CHARS:
            break
        if tuple(_WORD.findall(lines[i])) in credits:
            del lines[i]
            continue
        after += len(lines[i].strip())
    return "\n".join(lines).rstrip()


_BUTTON_BAR_BLOCKS_XPATH = XPath("//table[.//a] | //p[.//a]")
# what a Texinfo navigation button says, in brackets: "[ << ] [ < ] [ Up ] [ > ] [ >> ] [Top]
# [Contents] [Index] [ ? ]" (the structural check's navigation pattern uses it too)
NAVIGATION_BUTTON_WORDS = r"<<?|>>?|Up|Top|Contents|Index|About|\?"
# a bar of such buttons and nothing else
_BUTTON_BAR = re.compile(rf"\s*(?:\[\s*(?:{NAVIGATION_BUTTON_WORDS})\s*\]\s*){{2,}}", re.IGNORECASE)


def _drop_button_bars(tree: HtmlElement) -> None:
    """Remove the tables and paragraphs that are a bar of navigation buttons and nothing else.

    texi2html and texi2any (in its texi2html style, as zsh's and gettext's manuals are built)
    head every node with a table of bracketed links, "[ << ] [ < ] [ Up ] [ > ] [ >> ]
    [Top] [Contents] [Index] [ ? ]", whose links have titles ("Next chapter") but no ``rel``:
    trafilatura kept each as a table row of the text (issue 25: 391 "navigation" violations of
    the zoo's 73 Texinfo pages, 338 of them in zsh's). A block goes when its whole text is
    such buttons, two at least, and it holds a link.
    """
    for block in _BUTTON_BAR_BLOCKS_XPATH(tree):
        if block.getparent() is not None and _BUTTON_BAR.fullmatch(block.text_content()):
            block.drop_tree()


# rustdoc's page furniture: each item's "1.0.0 · source" link and the page's "[−]" toggle
# (`span.rightside`, `span.out-of-band`), and the "Notable traits" tooltip written inside a
# method's heading (`span.notable-traits`)
_WIDGETS_XPATH = XPath(
    "//span[contains(concat(' ', normalize-space(@class), ' '), ' rightside ')"
    " or contains(concat(' ', normalize-space(@class), ' '), ' out-of-band ')"
    " or contains(concat(' ', normalize-space(@class), ' '), ' notable-traits ')]"
    # the same "1.55.0 · source" as a `div.rightside` before a trait item's `<h4>`
    " | //div[contains(concat(' ', normalize-space(@class), ' '), ' rightside ')]"
    # Scaladoc's member filter over a type's members ("Ordering: Alphabetic, By Inheritance;
    # Inherited: ...; Hide All, Show All; Visibility: Public, All"), around its text input
    " | //div[@id='mbrsel'][.//input]"
    # and its "Related Docs: object ArrayStack | package mutable" under a type's `<h1>`, in an
    # `<h3>`: a heading of links beside it, trafilatura dropped the `<h1>` too
    " | //span[contains(concat(' ', normalize-space(@class), ' '), ' morelinks ')]"
    # nimdoc's "Source" and "Edit" links under each proc's signature (the repository's file
    # and its editor): a proc's description of these links alone was a link list to
    # trafilatura, which dropped it with the proc's signature
    " | //a[contains(concat(' ', normalize-space(@class), ' '), ' link-seesrc ')]"
    # YARD's toggles: "collapse" after each summary's heading ("## Constant Summary
    # collapse"), "show all" of a class's inheritance tree
    " | //a[@class='inheritanceTree' or @class='summary_toggle'"
    " or @class='constants_summary_toggle']"
    # Javadoc's (8 and before) and groovydoc's bars above and below a page ("Overview
    # Package Class ...", "Summary: Nested | Field | Constructor | Method"), outside any
    # <nav>: groovydoc's "Summary:" lists came out as the first lines of every page
    " | //div[@class='topNav' or @class='subNav' or @class='bottomNav']"
)


def page_widgets(tree: HtmlElement) -> list[HtmlElement]:
    """The page's furniture that `_drop_widgets` removes (`_WIDGETS_XPATH`): no content."""
    return _WIDGETS_XPATH(tree)


# a link target with nothing to show (rustdoc's `<a class="anchor">` before each heading)
_EMPTY_ANCHORS_XPATH = XPath("//a[not(*) and not(normalize-space())]")


# a cross-reference to an API name: a link whose text is code, or in code
_CODE_LINKS_XPATH = XPath(
    "//a[ancestor::code or (count(*) = 1 and (code or tt) and not(normalize-space(text())))]"
)


_CODE_SPANS_XPATH = XPath("//span[contains(concat(' ', normalize-space(@class), ' '), ' code ')]")


def _code_spans_as_code(tree: HtmlElement) -> None:
    """Erlang's inline code, ``<span class="code">``, as ``<code>``.

    trafilatura writes a ``<span>`` as its text: Erlang's pages (erl_docgen) mark each name,
    call and literal of their prose so (6,648 spans on the zoo's 40 Erlang pages), and their
    text lost the marking that the other generators' keeps. A link that is the code alone
    (``<span class="bold_code"><a><span class="code">file:mode()</span></a></span>``) is then
    a link to code, which `_drop_widgets` makes text, and a ``<span>`` that wraps code whole
    goes (`_adjacent_inline_code_joined`).
    """
    for span in _CODE_SPANS_XPATH(tree):
        if not _in_pre(span):
            span.tag = "code"


def _words_outside_and_in_links(
    elements: Iterable[HtmlElement], read: Callable[[HtmlElement], str] = HtmlElement.text_content
) -> tuple[int, int]:
    """The words of `elements` (as `read` gives their text) outside their links, and in them."""
    elements = list(elements)
    words = sum(len(_WORD.findall(read(el))) for el in elements)
    in_links = sum(len(_WORD.findall(read(a))) for el in elements for a in el.iter("a"))
    return words - in_links, in_links


def _heads_prose(heading: HtmlElement) -> bool:
    """Whether the section `heading` opens holds more words outside links than in them (not
    Django's banner, ``<h1><a>Django 3.2.25 documentation</a></h1>`` over a bar of links)."""
    outside, in_links = _words_outside_and_in_links(_section_body(heading), shown_text)
    return outside > in_links


def _drop_widgets(tree: HtmlElement) -> None:
    """Remove rustdoc's links, toggles and tooltips that sit in or beside its headings.

    In a method's `<summary>` they came out as headings of their own (``## source``,
    ``## 1.5.0 · source``: 364 and 44 of the zoo's rustdoc pages' headings), and the tooltip
    put "ⓘNotable traits for Vec<u8, A>" into the method's heading. An empty link (rustdoc's
    ``<a class="anchor">`` beside each heading) goes too: to trafilatura's link-density test a
    short block with a link and no link text is boilerplate, and it dropped every method whose
    signature was short. The links of a heading go too, their text kept (the job keeps no
    links): a signature's type names made rustdoc's `<h1>` (``Struct std::io::Bytes``, four
    links) a link list to that test, and the page lost its title heading (a heading that is
    all link, Django's banner ``<h1><a>Django 3.2.25 documentation</a></h1>``, keeps it, and
    is pruned as before, unless its section is prose: gi-docgen's `<h6>` over a function's
    summary, `_heads_prose`). So do links to code (an API name in prose,
    ``<a><code>bytes</code></a>``): a short paragraph with two of them read as a link list,
    and rustdoc's description of `std::io::Bytes` was lost.
    """
    for widget in page_widgets(tree):
        if widget.getparent() is not None:
            widget.drop_tree()  # keeps its tail
    for anchor in _EMPTY_ANCHORS_XPATH(tree):
        anchor.drop_tree()
    own_title = _own_title(tree)
    named = _named_by_title(own_title, tree) if own_title else None
    for heading in list(tree.iter(*_HEADING_TAGS)):
        links = list(heading.iter("a"))
        outside = heading.text_content()
        for link in links:
            outside = outside.replace(link.text_content(), "", 1)
        # a heading that is one link is a site's banner: left to prune; not where it heads
        # prose (gi-docgen's list of a type's functions and methods, each an `<h6>` that
        # links to the function's page over its summary: PangoLayout's kept 24 of 67), nor
        # where it is the heading the page's `<title>` names (Scaladoc's `<h1><a>ArrayStack
        # </a></h1>`, a link to the companion object, under "ArrayStack - Scala Standard
        # Library 2.11.12 - ...")
        if (
            outside.strip()
            or _heads_prose(heading)
            or (
                named is not None
                and heading.tag in ("h1", "h2")
                and _plain(heading.text_content()) == named
            )
        ):
            for link in links:
                link.drop_tag()
            continue
        # ... unless the link is the heading's permalink, to the heading itself or its section
        # (rustdoc's `<h5 id="examples-4"><a href="#examples-4">Examples</a></h5>`, mdBook's
        # `<a class="header">`): with the "Run" link of its example, it made a method's
        # docblock a link list to trafilatura, and 12 methods lost their descriptions
        own = {heading.get("id"), *(a.get("id") for a in heading.iterancestors())} - {None}
        for link in links:
            href = link.get("href") or ""
            if href.startswith("#") and href[1:] in own:
                link.drop_tag()
    for link in _CODE_LINKS_XPATH(tree):
        link.drop_tag()


# Haddock's signatures: a declaration's (`p.src`), a synopsis item's (`li.src`), a record
# field's (`dfn.src`), an instance's (`td.src`); no other generator of the zoo, the
# development set or samples/ has an element of class "src"
_SIGNATURE_LINKS_XPATH = XPath(
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' src ')]//a"
)


def _signature_links_as_text(tree: HtmlElement) -> None:
    """The links of Haddock's signatures as their text: code, each type a link to its
    declaration, and the name it declares an ``<a id="v:Dual" class="def">`` (no ``href``).

    A signature is mostly such names, so to trafilatura's link-density test it was a list
    of links. Haddock's synopsis, a list of the module's signatures (``newtype All = All
    {getAll :: Bool}``), lost the items of a record's fields or a class's methods whose types
    were links (``getAll :: Bool``, ``mempty :: a``) and kept the others; a declaration's
    table of constructors and fields (``Dual``; ``getDual :: a``) went whole, and with its
    instances gone too a heading "Instances" was left over nothing (the zoo's Haddock
    pages: 11 `list` and 10 `lost` violations). The signatures' "Source" links and "#"
    permalinks go before (`_HEADERLINK_XPATH`), as Sphinx's "[source]" does.
    """
    for link in _SIGNATURE_LINKS_XPATH(tree):
        link.drop_tag()


_TOCTREE_LINKS_XPATH = XPath(
    "//div[contains(concat(' ', normalize-space(@class), ' '), ' toctree-wrapper ')]//a"
)


def _toctree_links_as_text(tree: HtmlElement) -> None:
    """The links of a Sphinx ``toctree`` in the page's body as their text.

    A toctree lists the pages under this one, and on an index page that list is the content:
    CMake's cmake-variables(7) is eight headings, each over a toctree of hundreds of variable
    names (CMAKE_AR, CMAKE_ARGC...). To trafilatura's link-density test a list of links is
    navigation, and the page came out as eight empty headings in a row (issue 25; 12 "lost"
    violations on the zoo's CMake pages). The sidebar's toctree is no ``div.toctree-wrapper``
    (Sphinx writes that class only for a toctree directive in the body), and is pruned as
    before.
    """
    for link in _TOCTREE_LINKS_XPATH(tree):
        link.drop_tag()


_NAVIGATION_TAGS = frozenset({"nav", "aside", "header", "footer"})


def _in_navigation(element: HtmlElement) -> bool:
    return any(
        a.tag in _NAVIGATION_TAGS or a.get("role") == "navigation"
        for a in (element, *element.iterancestors())
    )


def _section_body(heading: HtmlElement) -> list[HtmlElement]:
    """The elements after `heading` in its parent up to the next that holds a heading."""
    body = []
    for sibling in heading.itersiblings():
        if not isinstance(sibling.tag, str):
            continue
        if sibling.tag in _HEADING_TAGS or next(sibling.iter(*_HEADING_TAGS), None) is not None:
            break
        body.append(sibling)
    return body


# trafilatura's link-density test looks no further than this many characters into a block
# that ends its parent (htmlprocessing.link_density_test: limitlen 300)
SHORT_SECTION_CHARS = 300


# elements whose text a reader does not see as the page's text: drawings, scripts, controls
NOT_TEXT = frozenset(
    {"svg", "script", "style", "template", "noscript", "button", "input", "select"}
)


def shown_text(element: HtmlElement, line_break: str = "") -> str:
    """`element`'s text without that of drawings, scripts and controls (`NOT_TEXT`: SQLite's
    syntax diagrams are ``<svg>`` with a ``<text>`` to a label, after a "hide" button), each
    ``<br>`` written as `line_break`. Walked with a stack, not recursion: a page may nest
    deeper than Python's recursion limit (`HUGE_DEPTH_LIMIT`)."""
    out = [element.text or ""]
    stack = [(child, False) for child in reversed(element)]
    while stack:
        node, read = stack.pop()
        if read:
            out.append(node.tail or "")
            continue
        stack.append((node, True))
        if node.tag == "br":
            out.append(line_break)
        elif isinstance(node.tag, str) and node.tag not in NOT_TEXT:
            out.append(node.text or "")
            stack.extend((child, False) for child in reversed(node))
    return "".join(out)


def _section_paragraph_links_as_text(tree: HtmlElement) -> None:
    """The links of a section that is one paragraph, or shorter than SHORT_SECTION_CHARS, as
    their text.

    To trafilatura's link-density test a short block that is mostly link text is navigation,
    and a section of one such paragraph went: Django's page "Generic views" is its heading and
    "See Built-in class-based views API." (whose extraction, then next to nothing, was
    replaced by the whole page's text, its sidebar "Previous topic", "Next topic" and "Quick
    search" included), git's "SEE ALSO" a list of three command links, an attribute of
    mkdocstrings' `Page` one sentence with two (issue 25: 3 "navigation" and 3 "lost"
    violations on the zoo). Under a heading, outside the page's navigation (``nav``,
    ``aside``, ``header``, ``footer``, ``role="navigation"``), a paragraph that is all the
    section holds is content. The job keeps no links: only their text is written.

    So is a short section (drawings aside: SQLite's "Syntax" is labels of syntax diagrams,
    "upsert-clause:", each a link): Javadoc's signature of a method, ``public String nextToken()``
    (a link on its type), went from sections of under 300 characters (it changes 16 of the
    zoo's 40 Javadoc pages), and a Doxygen member's "Definition at line 38 of file reader.h"
    (two short links) with it. Links to the page's own anchors stay links: a short section
    of them is a table of contents (Sphinx's ``div.contents.local``), pruned as before; but
    not in a paragraph of more words outside its links than in them (`_in_prose`).
    """
    for heading in list(tree.iter(*_HEADING_TAGS)):
        if _in_navigation(heading):
            continue
        body = _section_body(heading)
        if sum(len(_plain(shown_text(el))) for el in body) < SHORT_SECTION_CHARS:
            for link in [a for el in body for a in el.iter("a")]:
                if not (link.get("href") or "").startswith("#") or _in_prose(link):
                    link.drop_tag()  # not a table of the page's own contents
            continue
        paragraphs = [p for el in body for p in el.iter("p")]
        text = [el for el in body if el.text_content().strip()]
        if len(paragraphs) != 1 or len(text) != 1:
            continue
        if _plain(paragraphs[0].text_content()) != _plain(text[0].text_content()):
            continue  # the section holds more than its paragraph
        for link in list(paragraphs[0].iter("a")):
            link.drop_tag()


# trafilatura's link-density test (htmlprocessing.link_density_test) calls a block under
# this many characters with two or more links, 80% of them short, a list of links
_LINK_TEST_CHARS = 300


def _short_prose_links_as_text(tree: HtmlElement) -> None:
    """The links of a short paragraph of prose as their text.

    trafilatura's link-density test takes a block of under 300 characters whose links are
    two or more, nearly all short, for a list of links and drops it, whatever the words
    around them: Haddock's module descriptions ("This module defines bitwise operations
    ... available from the Data.Int and Data.Word modules.", two module links) went so,
    each under its "Description" caption, which is no heading for
    `_section_paragraph_links_as_text` to find. A paragraph outside the page's navigation
    with twice as many words outside its links as in them is prose; the job keeps no links,
    only their text.

    The test runs on a ``<div>`` of paragraphs too: Doxygen's description of a member
    (``div.memdoc``) of two sentences, each with one link to a class ("Clears this
    Validator's list of validation failures. If you are validating ... with the same
    Validator, call this method ..."), went whole, the member a heading over its
    declaration alone. Not on any other ``<div>``: one that holds a page's banner and its
    scripts has words outside its links too."""
    for block in list(tree.iter("p", "div")):
        if block.tag == "div" and not _paragraphs_only(block):
            continue
        links = list(block.iter("a"))
        if len(links) < 2 or _in_navigation(block):
            continue
        if len(_plain(block.text_content())) >= _LINK_TEST_CHARS:
            continue
        outside, in_links = _words_outside_and_in_links([block])
        if outside >= 2 * in_links:
            for link in links:
                link.drop_tag()


def _paragraphs_only(element: HtmlElement) -> bool:
    """Whether `element` holds paragraphs and nothing else but whitespace."""
    children = [c for c in element if isinstance(c.tag, str)]
    return (
        bool(children)
        and all(c.tag == "p" for c in children)
        and not (element.text or "").strip()
        and not any((c.tail or "").strip() for c in element)
    )


def _in_prose(link: HtmlElement) -> bool:
    """Whether `link` is in a paragraph with more words outside its links than in them: a
    sentence that refers to the page's own anchors, not a table of contents (Erlang's type
    ``info_keys()``: "Defines the information elements of the table(s) printed by the i/0,
    i/1 and i/2 functions.", three links to the functions below, which trafilatura's
    link-density test dropped, the section then a heading over nothing)."""
    paragraph = next(link.iterancestors("p"), None)
    if paragraph is None:
        return False
    outside, in_links = _words_outside_and_in_links([paragraph])
    return outside > in_links


def _definition_term_links_as_text(tree: HtmlElement) -> None:
    """The links of a definition's term (``<dt>``) as their text.

    Sphinx links the types of a signature to their documentation (``connect(name: str,
    callback: Callable, priority: int) -> int``, each type a link), and to trafilatura's
    link-density test a list of such terms with one-line descriptions is a link list: the
    last section of Sphinx's own "Utilities" page (``EventManager`` and its five methods) went
    whole. A term is the name of what its description defines, not navigation; the job keeps
    no links, only their text. Only a term that is an anchor (``id``, as Sphinx writes every
    object's signature) and holds text besides its links: a term that is one link and nothing
    else (DocBook's table of a page's contents, ``9.18.1. CASE``) or a plain ``<dt>`` of
    links (gtk-doc's list of a part's chapters) is a link list's entry, and stays one.
    """
    for term in list(tree.iter("dt")):
        links = list(term.iter("a"))
        if not links or term.get("id") is None or _in_navigation(term):
            continue
        linked = "".join(_plain(a.text_content()) for a in links)
        if not re.search(r"\w", _plain(term.text_content()).replace(linked, "", 1)):
            continue  # nothing but its link(s)
        for link in links:
            link.drop_tag()


# docutils' field lists: "Parameters", "Returns", "Raises" of an object's description, as a
# <dl class="field-list"> (HTML5 writer) or a <table class="docutils field-list"> (HTML4)
_FIELD_LIST_LINKS_XPATH = XPath(
    "//dl[contains(concat(' ', @class, ' '), ' field-list ')]//a"
    " | //table[contains(concat(' ', @class, ' '), ' field-list ')]//a"
)


def _field_list_links_as_text(tree: HtmlElement) -> None:
    """The links of a docutils field list ("Parameters", "Returns", "Raises") as their text.

    Sphinx links each parameter's type to its documentation (``choices (Sequence[str])``: two
    links), so to trafilatura's link-density test a field list whose items are short is a
    link list, and it went whole: click's ``Choice`` lost "case_sensitive (bool) - Set to false
    to make choices case insensitive", 94 of the 362 field items of click's pages. A field
    list describes its object's parameters and results; its links are cross-references whose
    text is the description's, and the job keeps no links, only their text.
    """
    for link in _FIELD_LIST_LINKS_XPATH(tree):
        if not _in_navigation(link):
            link.drop_tag()


# An item is prose, not a link list's entry, when at most this share of its text is links'
PROSE_ITEM_LINK_SHARE = 1 / 3
PROSE_ITEM_MIN_CHARS = 40


def _prose_item_links_as_text(tree: HtmlElement) -> None:
    """The links of a list item or description that is prose (``<li>``, ``<dd>``) as their
    text.

    trafilatura drops an item under 100-300 characters whose links are all short (under 10
    characters) as a link list's entry, however much text it holds besides them:
    Werkzeug's optional dependencies ("Colorama provides request log highlighting when using
    the development server on Windows", "Colorama" a link), git-config(1)'s
    GIT_CONFIG_NOSYSTEM ("... See git(1) for details"). An item of 40 characters or more
    whose links hold at most a third of its text is prose with a reference in it; the job
    keeps no links, only their text. A menu's or a table of contents' entries are mostly
    link text and stay links.
    """
    for item in list(tree.iter("li", "dd")):
        links = list(item.iter("a"))
        if not links or _in_navigation(item):
            continue
        text = len(_plain(item.text_content()))
        linked = sum(len(_plain(a.text_content())) for a in links)
        if text >= PROSE_ITEM_MIN_CHARS and linked <= PROSE_ITEM_LINK_SHARE * text:
            for link in links:
                link.drop_tag()


# Sphinx's return arrow in a signature (`connect(name) -> int`): a span whose class trafilatura
# discards as an icon's ("-icon", xpaths.py), taking the arrow with it
_RETURN_ARROW_XPATH = XPath("//span[contains(concat(' ', @class, ' '), ' sig-return-icon ')]")


# rustdoc's "Read more" after a trait item's summary, a link to the trait's documentation
_READ_MORE_XPATH = XPath(
    '//div[contains(concat(" ", @class, " "), " docblock ")]//a[normalize-space()="Read more"]'
)


def _read_more_links_as_text(tree: HtmlElement) -> None:
    """rustdoc's "Read more" links (the end of a trait item's one-line summary: "Returns a
    copy of the value. Read more") as text.

    Each is a small share of its block's text, but a trait implementation of two items has
    two, and their signatures' type links besides: trafilatura's link-density test took such
    an implementation's items for boilerplate, signature and summary (`clone` and
    `clone_from` of every `Clone` implementation, `to_owned` and `clone_into` of `ToOwned`'s:
    13 of the zoo's 40 rustdoc pages lost 2 to 7 methods each). The words stay, as on the
    items that were kept.
    """
    for link in _READ_MORE_XPATH(tree):
        link.drop_tag()


def _return_arrows_as_text(tree: HtmlElement) -> None:
    """Sphinx's ``span.sig-return-icon`` as its text, the arrow before a return type: the
    signature read ``add(name: str)  None`` where the page shows ``add(name: str) → None``."""
    for span in _RETURN_ARROW_XPATH(tree):
        span.drop_tag()


# rustdoc's list of a trait's implementors: a section per implementation, its heading alone
_IMPLEMENTORS_XPATH = XPath('//div[@id="implementors-list"]')
_CODE_HEADER_XPATH = XPath('./h3[contains(concat(" ", @class, " "), " code-header ")]')


def _implementors_as_list(tree: HtmlElement) -> None:
    """rustdoc's implementors of a trait (``div#implementors-list``, a ``section.impl`` and
    its ``h3`` signature for each) as lists of code items: ``- `impl AsRef<str> for String```.

    Each signature is a heading, of nothing (or of a short description, ``div.docblock``:
    Extend's for `Vec`), its types links: trafilatura's extraction drops a heading with no
    text after it, and a paragraph that is mostly link text, so the section "Implementors" of
    std's AsRef (43), Seek, DerefMut went, heading and list, or kept only the implementations
    with a ``where`` clause, in pieces. Each becomes an item, its description under it in the
    item; an implementation that holds items (``details``: Shr's 685) is left as it is and
    ends the list before it.
    """
    for container in _IMPLEMENTORS_XPATH(tree):
        listed: HtmlElement | None = None
        for child in list(container):
            if child.getparent() is not container:
                continue  # a description moved into the item before it
            header = _CODE_HEADER_XPATH(child) if child.tag == "section" else []
            if not (header and _has_class(child, "impl")):
                listed = None
                continue
            if listed is None:
                listed = fragment_fromstring("<ul></ul>")
                child.addprevious(listed)
            item = fragment_fromstring("<li><code></code></li>")
            item[0].text = _plain(header[0].text_content())  # a `where` clause's lines joined
            listed.append(item)
            described = child.getnext()
            container.remove(child)
            if described is not None and _has_class(described, "docblock"):
                item.append(described)


def _summaries_as_blocks(tree: HtmlElement) -> None:
    """A ``<details>``' ``<summary>`` as a plain block, not a heading.

    trafilatura turns every ``<summary>`` into a heading (htmlprocessing.convert_details), the
    whole of it: rustdoc puts each method's ``<h4>`` and its source link in one, so the link
    became the heading and the ``<h4>`` a heading under it, and its "Expand description"
    toggle (``<summary class="hideme">``, a label for the collapsed text) headed every page's
    description. A summary's own headings stay headings; the rest of it is a paragraph; a
    ``hideme`` summary, only a toggle's label, goes.
    """
    for summary in list(tree.iter("summary")):
        if _has_class(summary, "hideme"):
            summary.drop_tree()  # keeps its tail
            continue
        summary.tag = "div"


# docutils 0.18+ writes footnotes and citations as <aside> (`aside.footnote` in an
# `aside.footnote-list`, `aside.citation`; before 0.18 a `dl.footnote` of label and text),
# which trafilatura drops wholesale
# (settings.MANUALLY_CLEANED) with every other aside. A topic (`aside.topic`: the "Contents"
# directive, a local table of contents) is navigation and stays an aside; a sidebar
# (`aside.sidebar`) is left to trafilatura, whose class test takes a site's sidebar for chrome.
NOTE_CLASSES = ("footnote", "footnote-list", "citation", "citation-list")
_IS_NOTE = " or ".join(f"contains(concat(' ', @class, ' '), ' {c} ')" for c in NOTE_CLASSES)
_NOTES_XPATH = XPath(f"//aside[{_IS_NOTE}]")
_NOTE_LISTS_XPATH = XPath(f"//dl[{_IS_NOTE}]")
_BACKREFS_XPATH = XPath("./span[@class='backrefs']")
_LABEL_XPATH = XPath("./span[@class='label']")


def _notes_as_blocks(tree: HtmlElement) -> None:
    """A page's footnotes and citations as blocks of its text, not asides.

    Their text is the page's (a footnote's explanation, a citation's reference), its label
    (``[1]``) opening its first paragraph; only the list of links back to where a footnote is
    cited (``(1,2,3)``) goes, as it points at the page itself.
    """
    for dl in _NOTE_LISTS_XPATH(tree):
        # docutils before 0.18: <dl class="footnote"><dt class="label">1</dt><dd>...</dd>, the
        # label a link back to where the footnote is cited
        for term in dl.findall("dt"):
            label = _plain(term.text_content()).strip("[]")
            body = term.getnext()
            paragraphs = body.xpath("./p") if body is not None and body.tag == "dd" else []
            if label and paragraphs:
                paragraphs[0].text = f"[{label}] {paragraphs[0].text or ''}"
            term.drop_tree()  # keeps its tail
        for body in dl.findall("dd"):
            body.tag = "div"
        dl.tag = "div"
    for aside in _NOTES_XPATH(tree):
        for backrefs in _BACKREFS_XPATH(aside):
            backrefs.drop_tree()  # keeps its tail
        labels = _LABEL_XPATH(aside)
        paragraphs = aside.xpath("./p")
        if labels and paragraphs:  # "[1]" opens the note's text, as the page shows it
            label = _plain(labels[0].text_content())
            labels[0].drop_tree()
            first = paragraphs[0]
            first.text = f"{label} {first.text or ''}"
        aside.tag = "div"


_HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_INLINE_CODE = ("code", "tt", "kbd", "samp")


def _nested_inline_code_as_text(tree: HtmlElement) -> None:
    """Inline code that holds inline code as one span of its text.

    DocBook marks a command's replaceable part inside its literal (``<code class="literal">SET
    NAMES <em class="replaceable"><code>value</code></em></code>``), and trafilatura writes
    the inner code after the outer one's tail: PostgreSQL's SET page read "`SET NAMES` is an
    alias for `value``SET client_encoding TO` .`value`" (192 such spans on 52 of its
    reference pages; DocBook's, Texinfo's and gtk-doc's manuals write them too). Markdown has
    no code inside code, nor emphasis in it: the span becomes its text, in the page's order
    ("`SET NAMES value` is an alias for `SET client_encoding TO value`.").

    So does inline code that holds emphasis: trafilatura wrote the emphasis apart from the
    code, out of order, and lost text after it (Go's "of the form <code><i>type</i>_<i>field
    </i></code>. Struct sizes are ..." came out "of the form *type*_*field**type*__size", two
    sentences gone; Sphinx's ``./locale/<em>language</em>/LC_MESSAGES/sphinx.mo`` had its
    tail moved after the next sentence; Texinfo's ``<code><var>ll</var>.po</code>``). Bold
    too: Scaladoc's "``<code><b>true</b></code> if this collection is known to have finite
    size, <code><b>false</b></code> otherwise." came out "**true****false**".
    """
    for code in list(tree.iter(*_INLINE_CODE)):
        if not any(d.tag in _INLINE_CODE or d.tag in _MARKED for d in code.iterdescendants()):
            continue
        if any(a.tag == "pre" or a.tag in _INLINE_CODE for a in code.iterancestors()):
            continue  # in a block of code, or inside the outer span flattened here
        text = code.text_content()
        for child in list(code):
            code.remove(child)  # with its tail: `text` holds it
        code.text = text


_EMPHASIS = ("em", "i", "var", "cite")
_MARKED = (*_EMPHASIS, "b", "strong")  # what trafilatura writes with marks of its own


def _in_pre(element: HtmlElement) -> bool:
    """Whether `element` is inside a ``<pre>``, a block of code."""
    return any(a.tag == "pre" for a in element.iterancestors())


def _adjacent_inline_code_joined(tree: HtmlElement) -> None:
    """Inline code that emphasis or a ``<span>`` wraps whole as the code alone, and inline code
    right after inline code (nothing between them, not even a space) as one span.

    trafilatura writes two code spans that touch as "`a``b`", which Markdown reads as one
    span holding "a``b", and loses the space after emphasis that holds only code: DocBook's
    replaceable parts (``<em class="replaceable"><code>signal_name</code></em>
    <em ...><code>process_id</code></em>``) read "`signal_name``process_id`" (261 such joins
    on the zoo's DocBook pages, 35 on Doxygen's include lines, PostgreSQL's "`x``::`" in the
    development set; Sphinx's ``<code><span class="pre">AppConfig.</span></code><code>
    <span class="pre">name</span></code>``, a term's class and name, 164 on Django's pages).
    Found by the listing of page text the document does not hold, whose
    words these joins glued (docs/structure.md). Emphasis is no text of code; the span says
    it is code. Erlang's linked code between two code spans (logger_std_h's term ``modes =
    [file:mode()]``, the middle one in ``<span class="bold_code">``) read "`modes =
    [``file:mode()``]`" while the ``<span>`` kept it from its neighbours.
    """
    for emphasis in list(tree.iter(*_EMPHASIS, "span")):
        children = [c for c in emphasis if isinstance(c.tag, str)]
        if (
            len(children) == 1
            and children[0].tag in _INLINE_CODE
            and not (emphasis.text or "").strip()
            and not (children[0].tail or "").strip()
            and not _in_pre(emphasis)
        ):
            emphasis.drop_tag()
    for code in list(tree.iter(*_INLINE_CODE)):
        if code.getparent() is None or _in_pre(code):
            continue
        following = code.getnext()
        while (
            following is not None
            and following.tag in _INLINE_CODE
            and not code.tail
            and _plain_code(code)
            and _plain_code(following)
        ):
            text = code.text_content() + following.text_content()
            for child in list(code):
                code.remove(child)
            code.text = text
            code.tail = following.tail
            code.getparent().remove(following)
            following = code.getnext()


def _plain_code(code: HtmlElement) -> bool:
    """Whether inline code holds text alone, or text in spans alone (Sphinx's
    ``<span class="pre">``, which Markdown does not write)."""
    return all(d.tag == "span" for d in code.iterdescendants())


def _inline_code_on_one_line(tree: HtmlElement) -> None:
    """Collapse the whitespace of inline code (outside ``<pre>``) as a browser shows it.

    trafilatura fences a ``<code>`` whose text holds a newline (```` ``` ```` on lines of their
    own, in the middle of a paragraph): DocBook wraps long commands over lines
    (``<code class="command">REVOKE ALL\n    PRIVILEGES</code>`` on PostgreSQL's REVOKE
    page, 74 of its 189 reference pages have one). The lone fence line opens a code block
    that swallows the text after it, and every later fence and heading is read inverted.

    Empty inline code goes: trafilatura wrote PostgreSQL's ``<code class="returnvalue"></code>``
    before an example's result as an empty fenced block in the middle of a table row. Inline
    code of whitespace alone is the space a browser shows: Scribble (Racket's documentation)
    numbers its headings ``1.13<tt>&nbsp;</tt>Signaturen``, which read "1.13Signaturen".
    """
    for code in list(tree.iter(*_INLINE_CODE)):
        if _in_pre(code):
            continue
        content = code.text_content()
        if not content.strip():
            if code.getparent() is not None:
                if content:
                    code.tail = " " + (code.tail or "")
                code.drop_tree()  # keeps its tail
            continue
        for node in code.iter():
            if node.text and "\n" in node.text:
                node.text = re.sub(r"\s+", " ", node.text)
            if node is not code and node.tail and "\n" in node.tail:
                node.tail = re.sub(r"\s+", " ", node.tail)


def _headings_on_one_line(tree: HtmlElement) -> None:
    """Collapse the whitespace of each ``<h1>``-``<h6>`` to single spaces, as a browser shows it.

    trafilatura writes a heading's text with its newlines: mkdocstrings' ``<h5><code>title:
    str</code>``, a blank line, ``<span><small><code>class-attribute</code>`` became the heading
    ``##### `title: str``` and, after a blank line, an indented code block of the label (408
    headings of the zoo's mkdocs pages lost their second half so). A ``<br>`` in a heading is
    a space: rustdoc breaks a signature before its ``where`` clause, and the clause became a
    paragraph under a heading that ended in "where". So is a ``<div>`` or ``<p>`` in a heading,
    which a browser shows on a line of its own: Erlang's function headings end with a ``<div>``
    of the release that added the function ("OTP 20.0"), which trafilatura wrote on the line
    below the heading, and its section headings hold their number and name in one.
    """
    for heading in tree.iter(*_HEADING_TAGS):
        for br in list(heading.iter("br")):
            br.tail = " " + (br.tail or "")
            br.drop_tag()  # its tail joins the text before it
        for block in [el for el in heading.iter("div", "p") if el is not heading]:
            block.tag = "span"
            block.text = " " + (block.text or "")
            block.tail = " " + (block.tail or "")
        for node in heading.iter():
            if node.text and "\n" in node.text:
                node.text = re.sub(r"\s+", " ", node.text)
            if node is not heading and node.tail and "\n" in node.tail:
                node.tail = re.sub(r"\s+", " ", node.tail)


_TABLE_ROWS_XPATH = XPath("./tr|./thead/tr|./tbody/tr|./tfoot/tr")
_LINE_NUMBERS = re.compile(r"[\s\d\u00a0]*")


def _layout_tables_unwrapped(tree: HtmlElement) -> None:
    """Replace a table that only lays out ``<pre>`` blocks with the cells that hold them.

    gtk-doc puts each listing in a ``<table class="listing_frame">`` of two cells, the line
    numbers' ``<pre>`` and the code's; Pygments' ``linenos`` does the same; texi2html indents
    every example with ``<table><tr><td>&nbsp;</td><td><pre class="example">``. As a table
    row, the code became ```` | ``` 1 2 3 ``` | ``` typedef struct {...} ``` | ````: its lines
    joined, its fences mid-line. A table each of whose rows has one cell of content (its
    other cells hold nothing but whitespace and digits), and some of those a ``<pre>``,
    becomes those cells' content, a row after a row: Scribble (Racket's documentation) lays
    out an example's inputs and results so, a row each. A table of several rows with a
    header cell is data (PostgreSQL's function tables, a function to a row): left.
    """
    for table in reversed(list(tree.iter("table"))):  # inner tables first
        rows = _TABLE_ROWS_XPATH(table)
        if not rows or table.getparent() is None:
            continue
        if len(rows) > 1 and next(table.iter("th"), None) is not None:
            continue  # a table of data, headed (PostgreSQL's function tables, a row each)
        content = []
        for row in rows:
            cells = [c for c in row if c.tag in ("td", "th")]
            kept = [c for c in cells if not _LINE_NUMBERS.fullmatch(c.text_content())]
            if len(kept) > 1:
                break
            content += kept
        else:
            if not any(next(c.iter("pre"), None) is not None for c in content):
                continue
            block = table.makeelement("div", {})
            for cell in content:
                part = block.makeelement("div", {})
                part.text = cell.text
                part.extend(list(cell))  # moves the children, tails included
                block.append(part)
            block.tail = table.tail
            table.getparent().replace(table, block)


# Scribble's code and grammars: a table of a row to a line, its indentation in `span.hspace`
# no-break spaces
_SCRIBBLE_CODE_XPATH = XPath(
    "//table[contains(concat(' ', normalize-space(@class), ' '), ' RktBlk ')"
    " or contains(concat(' ', normalize-space(@class), ' '), ' specgrammar ')]"
    "[not(ancestor::table[contains(concat(' ', normalize-space(@class), ' '), ' RktBlk ')"
    " or contains(concat(' ', normalize-space(@class), ' '), ' specgrammar ')])]"
)


def _text_at_breaks(element: HtmlElement) -> list[str]:
    """`element`'s text in the pieces its ``<br>``s break it into (the text alone without one)."""
    if next(element.iter("br"), None) is None:
        return [element.text_content()]
    marked = copy.deepcopy(element)
    for br in marked.iter("br"):
        br.tail = "\ue000" + (br.tail or "")
    return marked.text_content().split("\ue000")


def _replaced_by_pre(element: HtmlElement, lines: list[str]) -> HtmlElement:
    """Put a ``<pre>`` of `lines` in `element`'s place (its tail kept); returns the ``<pre>``."""
    pre = element.makeelement("pre", {})
    pre.text = "\n".join(lines)
    pre.tail = element.tail
    element.getparent().replace(element, pre)
    return pre


def _code_lines(element: HtmlElement) -> list[str]:
    """The lines of code `element` shows, broken at its ``<br>``s, no-break spaces as spaces."""
    return [line.replace("\xa0", " ").rstrip() for line in _text_at_breaks(element)]


def _scribble_lines(table: HtmlElement) -> list[str]:
    """The lines of a Scribble code table: a row's text (a row of several cells, a grammar's
    or a signature's, one line), or the lines of the tables in it, each a block (an expression
    over several lines after the row's "> " prompt, a procedure's arguments' contracts)."""
    lines: list[str] = []
    for row in _TABLE_ROWS_XPATH(table):
        cells = [c for c in row if c.tag in ("td", "th")]
        inner = [t for t in row.iterdescendants("table") if _outer_table(t) is table]
        if not inner:
            if len(cells) > 1:
                text = " ".join(c.text_content().replace("\xa0", " ").strip() for c in cells)
                lines.append(" ".join(text.split()))
            else:
                lines += _code_lines(row)
            continue
        marked = copy.deepcopy(row)
        for t in [t for t in marked.iterdescendants("table") if _outer_table(t) is None]:
            marker = t.makeelement("span", {})
            marker.text = "\ue001"
            marker.tail = t.tail
            t.getparent().replace(t, marker)
        texts = marked.text_content().replace("\xa0", " ").split("\ue001")
        if len(cells) > 1:  # a signature's cells around a table of its results
            texts = [" ".join(t.split()) for t in texts]
            texts = [t and (f"{t} " if k == 0 else f" {t}") for k, t in enumerate(texts)]
        prefix = texts[0]
        for k, t in enumerate(inner):
            nested = _scribble_lines(t) or [""]
            if prefix.strip():
                nested[0] = prefix + nested[0]
            lines += nested
            prefix = texts[k + 1]
            if prefix.strip() and k + 1 == len(inner):
                lines[-1] += prefix  # after the last table, on its line
            elif prefix.strip():
                lines.append(prefix.strip())
                prefix = ""
        lines[-1] = lines[-1].rstrip()
    return lines


def scribble_code_tables(tree: HtmlElement) -> list[HtmlElement]:
    """Scribble's tables that `_scribble_code_as_preformatted` writes as code blocks."""
    return [*_SCRIBBLE_BOXES_XPATH(tree), *_SCRIBBLE_CODE_XPATH(tree)]


def _outer_table(element: HtmlElement) -> HtmlElement | None:
    """The nearest ``<table>`` around `element`, None where there is none."""
    return next(element.iterancestors("table"), None)


_SCRIBBLE_BOXES_XPATH = XPath(
    "//table[contains(concat(' ', normalize-space(@class), ' '), ' RBoxed ')]"
    "[not(ancestor::table[contains(concat(' ', normalize-space(@class), ' '), ' RBoxed ')])]"
)
_SCRIBBLE_LABELS_XPATH = XPath(
    ".//div[contains(concat(' ', normalize-space(@class), ' '), ' RBackgroundLabel ')]"
)


def _scribble_code_as_preformatted(tree: HtmlElement) -> None:
    """Scribble's code blocks (``table.RktBlk``, a row to a line) as a ``<pre>`` of their lines.

    Racket's documentation writes its examples and listings so: trafilatura wrote each line
    a paragraph, an example's comment or ASCII drawing a heading or a rule ("-----------").
    A form's grammar (``table.specgrammar``: "maybe-super = ", "| super-id", a cell each) is
    lines of code too, its cells joined by a space, and so is a definition's box
    (``table.RBoxed``: the form or the procedure's signature, its arguments' contracts), whose
    cells trafilatura wrote as one row ("(object-info object) | → | (or/c class? #f) |
    boolean?"); the box's label ("procedure", "syntax") is a line before it.
    """
    for box in _SCRIBBLE_BOXES_XPATH(tree):
        labels = _SCRIBBLE_LABELS_XPATH(box)
        kind = _plain(labels[0].text_content()) if labels else ""
        for label in labels:
            label.drop_tree()
        pre = _replaced_by_pre(box, _scribble_lines(box))
        if kind:
            line = pre.makeelement("p", {})
            line.text = kind
            pre.addprevious(line)
    for table in _SCRIBBLE_CODE_XPATH(tree):
        _replaced_by_pre(table, _scribble_lines(table))


_BLOCK_TAGS = frozenset(
    {"p", "div", "section", "article", "ul", "ol", "dl", "pre", "table", "blockquote"}
    | {"details", "summary", *_HEADING_TAGS}
)


def _div_grids_as_tables(tree: HtmlElement) -> None:
    """Make a table of a grid of ``<div>``s headed by ``div.table-header`` cells.

    Javadoc's newer layout (commons-lang3 3.12's pages; JUnit 4.13's still use ``<table>``)
    writes its summaries of fields, constructors and methods as a CSS grid: a
    ``div.summary-table`` whose first children are N ``div.table-header`` cells ("Modifier and
    Type", "Method", "Description") and the rest the cells, N to a row. To trafilatura it was
    text: a summary's rows glued on one line (``static boolean``and(boolean... array)`Performs
    an 'and'...`static Boolean``and(...``). A grid whose cell count is a multiple of its
    header count becomes the table it draws.
    """
    for grid in list(tree.iter("div")):
        cells = [c for c in grid if isinstance(c.tag, str)]
        width = 0
        while width < len(cells) and _has_class(cells[width], "table-header"):
            width += 1
        if width < 2 or len(cells) % width or any(c.tag != "div" for c in cells):
            continue
        table = grid.makeelement("table", {})
        for start in range(0, len(cells), width):
            row = table.makeelement("tr", {})
            for cell in cells[start : start + width]:
                cell.tag = "th" if start == 0 else "td"
                cell.attrib.clear()
                cell.tail = None
                row.append(cell)  # moves it out of the grid
            table.append(row)
        table.tail = grid.tail
        grid.getparent().replace(grid, table)


def _broken_items_as_paragraphs(tree: HtmlElement) -> None:
    """The content of a list item, term or description that holds line breaks and no block
    as one paragraph of it.

    trafilatura trims the text after a ``<br>`` in such an item, so a space before an
    inline element went: pldoc's "See also" lines ("- <code>library(prolog_xref)</code>
    implements ...") read "-`library(prolog_xref)`", "and <b>bold</b>" read "and**bold**".
    In a paragraph it keeps both the line breaks and the spaces."""
    for item in tree.iter("li", "dd", "dt"):
        if item.find("br") is None or any(child.tag in _BLOCK_TAGS for child in item):
            continue
        paragraph = item.makeelement("p", {})
        paragraph.text, item.text = item.text, None
        for child in list(item):
            paragraph.append(child)  # with its tail
        item.append(paragraph)


def _heading_alone(item: HtmlElement) -> HtmlElement | None:
    """The heading `item` holds when it holds no other text.

    groovydoc lists a member without a description as a list of one item, an ``<h4>`` (its
    signature) and an empty ``<p>``; unwrapped as a section of nothing, each such member was
    a heading over nothing, and trafilatura drops the headings that end a page: WritablePath's
    "Method Detail", all 30 members, went. A list whose items are headings alone is a list of
    names, not of sections; where some item has text besides (Scaladoc's members, one
    without a comment among them), each item is a section."""
    heading = next(item.iter(*_HEADING_TAGS), None)
    if heading is None or heading is item:
        return None
    if _plain(item.text_content()) != _plain(heading.text_content()):
        return None
    return heading


def _layout_lists_unwrapped(tree: HtmlElement) -> None:
    """Replace a list whose every item holds a heading with the items' content.

    Javadoc lays a class page out as lists of sections (``<ul class="member-list"><li><section>
    <h3>toIntValue</h3>``), and trafilatura writes a list item on one line, its headings
    included: ``- ### toIntValue Converts the character...``, no heading to the chunker (524
    of the zoo's Javadoc headings, issue 25). Such a list lays sections out; it is no list.

    Then the text of every ``<div>`` of the page (Javadoc's descriptions, ``div.block``, and
    signatures, ``div.member-signature``) becomes paragraphs (`_div_text_as_paragraphs`). In a
    list item trafilatura kept a ``<div>``'s text; outside one it keeps it only while the page
    has little ``<p>`` text (main_extractor._extract: ``div`` is a potential tag only then),
    and the unwrapped sections have a lot: without this, every description lost its words
    before its first inline code (``Helps work with `ClassLoader`.`` became
    ``ClassLoader`.``).
    """
    unwrapped = False
    for lst in reversed(list(tree.iter("ul", "ol"))):  # inner lists first
        items = [c for c in lst if isinstance(c.tag, str)]
        alone = [_heading_alone(li) for li in items]
        if items and all(h is not None for h in alone):  # names (in sections, one is one)
            for heading in alone:
                heading.drop_tag()
        if not items or any(
            li.tag != "li" or next(li.iter(*_HEADING_TAGS), None) is None for li in items
        ):
            continue
        for li in items:
            li.drop_tag()
        lst.drop_tag()
        unwrapped = True
    if unwrapped:
        for div in list(tree.iter("div")):
            _div_text_as_paragraphs(div)


def _headings_in_items_as_text(tree: HtmlElement) -> None:
    """A heading inside a list item, a definition's description or a block quote as a
    paragraph of bold text.

    DocBook heads an admonition with a heading (``<div class="note"><h3
    class="title">Note</h3>``), also where the admonition sits in a ``<dd>`` (PostgreSQL's
    option lists). trafilatura writes a list item's blocks on its lines, the heading glued
    to the paragraph after it: ``  ### Note When `-e` is specified,``, a heading in the middle
    of the definition, that took the paragraph's first line for its text and would head the
    chunks after it (43 of the zoo's DocBook headings). Inside an item it is the label of a
    block, as a browser shows it, not a section of the page. Run after
    `_layout_lists_unwrapped`, whose lists are no lists.

    So is a heading inside a ``<blockquote>``: the Rust book's asides (``<blockquote><h3>Where’s
    the <code>-&gt;</code> Operator?</h3>``) came out of trafilatura's quote handling as ``###
    Where’s the``, the code and the rest of the heading on the lines after it.
    """
    for heading in list(tree.iter(*_HEADING_TAGS)):
        if not any(a.tag in ("li", "dd", "blockquote") for a in heading.iterancestors()):
            continue
        label = heading.makeelement("strong", {})
        label.text = heading.text
        label.extend(list(heading))  # moves the children, tails included
        heading.text = None
        heading.attrib.clear()
        heading.tag = "p"
        heading.append(label)


_ANY_HEADING = " or ".join(f"self::{tag}" for tag in _HEADING_TAGS)
# DocBook's admonition titles and Erlang's function types titles (below)
_BOX_TITLES_XPATH = XPath(
    "//div[@class='note' or @class='tip' or @class='caution' or @class='warning'"
    f" or @class='important']/*[{_ANY_HEADING}][@class='title'][1]"
    f" | //*[{_ANY_HEADING}]"
    "[contains(concat(' ', normalize-space(@class), ' '), ' func-types-title ')]"
)


def _box_titles_as_text(tree: HtmlElement) -> None:
    """The title of a box inside a section as a paragraph, not a heading: the word stays, as
    the paragraph that opens the box's text, as a browser shows it.

    - DocBook's admonitions (``<div class="note"><h3 class="title">Note</h3>``): the
      stylesheets head every note, tip, caution, warning and important with an ``<h3>``,
      whatever the level of the section it sits in. Read as written, the note is a section,
      and the section's text after it, its tables and even its next subsections lay under
      "Note" (PostgreSQL's JSON functions chapter: "Note > Table 9.47. JSON Creation
      Functions", "Note > 9.16.2.3. SQL/JSON Regular Expressions"; a reference page's "Notes
      > Note" over the paragraphs after the box). Inside a list item or a definition the
      title is already a label (`_headings_in_items_as_text`, which runs first).
    - Erlang's "Types" of a function: erl_docgen writes ``<h3
      class="func-types-title">Types</h3>`` inside the function's ``div.fun-types``, after
      the function's own ``<h4>`` headings and before its description: a heading above the
      function's, so every function after the first with types lay under a section "Types"
      beside "Exports", and its description under "Types" alone (beam_lib's ``('beam_lib',
      'Types')``; 262 such headings on the zoo's Erlang pages). As text, the function's
      signature heads its types and description.
    """
    for heading in _BOX_TITLES_XPATH(tree):
        heading.attrib.clear()
        heading.tag = "p"


_LISTS_IN_CELLS_XPATH = XPath("//td//ul | //td//ol | //td//dl | //th//ul | //th//ol | //th//dl")


def _lists_in_cells_as_text(tree: HtmlElement) -> None:
    """A list inside a table cell as a paragraph per item, each opening with its marker ("• ",
    or its number and "." in an ordered list).

    trafilatura keeps a cell's paragraphs and drops a list there whole: PostgreSQL's
    ``json_populate_record`` lost, in its cell of the JSON functions' table, the five rules by
    which a JSON value becomes a column's value ("A JSON null value is converted to an SQL
    null in all cases. ..."), and SQLite's ALTER TABLE page its two procedures side by side,
    "1. Create new table 2. Copy data 3. Drop old table 4. Rename new into old" and the
    incorrect one (found by listing the page blocks the text does not hold,
    docs/structure.md). A cell is one line of a Markdown table, so the items follow each
    other on it, each with its marker; nested lists first, their items inside their item's.
    A table inside a list item or a ``<dd>`` is left as it is: trafilatura writes it there as
    text, its lists' items on lines of their own (docutils' field lists, "Parameters:").
    The bullet is "•", no Markdown: where trafilatura writes the table's cells as paragraphs
    (Sphinx's general index, whose entries are lists in the cells of a layout table), a
    paragraph "- name" would read as escaped text ("\\- name").

    A definition list in a cell went whole too: cppreference (MediaWiki) indents with
    ``<dl><dd>``, and C's storage-class specifiers lost "``_Thread_local`` - thread storage
    duration", the cell of a row "(since C11)". Its terms and descriptions are paragraphs.
    """
    for listing in reversed(_LISTS_IN_CELLS_XPATH(tree)):  # nested lists first
        if not in_cell_of_a_top_table(listing):
            continue
        if listing.tag == "dl":
            for part in listing:
                if part.tag in ("dt", "dd"):
                    holds_blocks = any(child.tag in _BLOCK_TAGS for child in part)
                    part.tag = "div" if holds_blocks else "p"
            listing.tag = "div"
            continue
        number = _list_start(listing)
        for item in listing.findall("li"):
            marker = f"{number}. " if listing.tag == "ol" else "• "
            number += 1
            for paragraph in item.findall("p"):
                paragraph.drop_tag()  # its text joins the item's
            item.text = marker + (item.text or "").lstrip()
            item.tag = "p"
        listing.tag = "div"


def in_cell_of_a_top_table(element: HtmlElement) -> bool:
    """Whether `element` is in a table cell, of a table outside list items, ``<dd>``s and
    block quotes (`_TABLES_AS_LINES_IN`):
    where `_lists_in_cells_as_text` writes a list's items on the row's line. A cell outside
    any table (broken HTML) is no table row; a table in an item is text there, its lists'
    items on lines of their own. The structural check asks the same of a list item."""
    table = next((a for a in element.iterancestors() if a.tag == "table"), None)
    if table is None or not in_cell(element):
        return False
    return not any(a.tag in _TABLES_AS_LINES_IN for a in table.iterancestors())


def _list_start(listing: HtmlElement) -> int:
    """The number of an ordered list's first item (its ``start``, else 1)."""
    try:
        return int(listing.get("start", "1"))
    except ValueError:
        return 1


# where trafilatura writes a table as one run of text, and the job writes a row to a line
_TABLES_AS_LINES_IN = ("li", "dt", "dd", "blockquote")


def _cell_lines(cell: HtmlElement) -> list[str]:
    """The lines of a table cell's text, as a browser breaks them at its ``<br>``s."""
    return [line for line in map(_plain, _text_at_breaks(cell)) if line]


def _tables_in_items_as_lines(tree: HtmlElement) -> None:
    """A table inside a list item, a ``<dd>`` or a block quote as a paragraph per row, cells
    joined by " | ".

    trafilatura writes a list item's content on its lines and a table there as one run of
    text: Sphinx's table of transform priorities inside the ``<dd>`` of
    ``Sphinx.add_transform`` came out as ``Priority Main purpose in Sphinx 0-99 Fix invalid
    nodes by docutils. ... 900-999 Finalize and clean up.``, its rows glued (19 of the zoo's
    Sphinx "list" violations). Each row is now a line of the item (``0-99 | Fix invalid nodes
    by docutils. Translate a doctree.``), the caption a line before them. A table whose cells
    hold lists or code is left as it was: its text would lose their lines. SQLite indents
    tables with ``<blockquote>`` (the strftime() substitutions, "%d day of month: 00 %f
    fractional seconds: SS.SSS ...", on one line: 27 "list" violations of the development
    set's SQLite pages).
    """
    made: set[HtmlElement] = set()  # the blocks made of tables: a cell holding one has lines
    for table in reversed(list(tree.iter("table"))):  # inner tables first
        if table.getparent() is None:
            continue
        if not any(a.tag in _TABLES_AS_LINES_IN for a in table.iterancestors()):
            continue
        if next(table.iter("ul", "ol", "dl", "pre"), None) is not None:
            continue  # a cell of lists or code (Django's field lists): its lines are its own
        block = table.makeelement("p", {})
        lines = [_plain(c.text_content()) for c in table.iter("caption")]
        for row in table.iter("tr"):
            cells = [
                _cell_lines(c)
                if any(p in made for p in c.iter("p"))
                else [_plain(c.text_content())]
                for c in row
                if c.tag in ("td", "th")
            ]
            cells = [c for c in cells if c and c[0]]
            if all(len(c) == 1 for c in cells):
                lines.append(" | ".join(c[0] for c in cells))
            else:  # a cell of lines (a table in it, made lines first): each a line
                lines.extend(line for c in cells for line in c)
        for line in filter(None, lines):  # each after a line break: the first one too
            br = block.makeelement("br", {})
            br.tail = line
            block.append(br)
        block.tail = table.tail
        table.getparent().replace(table, block)
        made.add(block)


def _is_block(el: HtmlElement) -> bool:
    return el.tag in _BLOCK_TAGS or any(d.tag in _BLOCK_TAGS for d in el.iterdescendants())


def _bare_lists_as_text(tree: HtmlElement) -> None:
    """A ``<ul>`` or ``<ol>`` with no item, only text and inline elements, as a paragraph.

    LDoc (Lua's) writes a function's "Returns:" and "See also:" so (``<ol>true or
    false</ol>``, ``<ul><a href=...>List:join</a></ul>``), which a browser shows as indented
    text, no marker. trafilatura wrote an empty item and the text on an indented line after
    it ("-\n         List:join"): a line of "-" alone under the paragraph before it, which
    Markdown reads as a heading's underline ("List:__tostring () : How our list ..." a
    heading).
    """
    for bare in list(tree.iter("ul", "ol")):
        if not (bare.text or "").strip() and not len(bare):
            continue
        if any(child.tag == "li" or _is_block(child) for child in bare):
            continue
        bare.tag = "p"
        bare.attrib.clear()


def _div_text_in_paragraphs(tree: HtmlElement) -> None:
    """The text a ``<div>`` holds itself (not in a ``<p>`` or another block), each run of it
    and its inline children in a ``<p>`` inside the ``<div>``.

    trafilatura keeps a ``<div>``'s own text only while the page has little ``<p>`` text
    (main_extractor._extract: ``div`` is a potential tag only then); on a page of paragraphs
    ``<div>Text with <a>a link</a> inside.</div>`` went whole and ``<div>Run <code>make
    </code> then ...`` lost "Run ", the words before its first inline element. Doxygen's file
    pages list their includes so (``<div class="textblock"><code>#include ...</code><br/>``,
    written "`#include <cstring>``#include <memory>`", one code span). The ``<div>`` stays, with
    its class and id, for trafilatura's boilerplate rules; a ``<div>`` inside ``<pre>``, a
    table cell's, one of blocks alone and one whose words in links are more than twice those
    outside them (`_holds_text_itself`) are left as they are. The paragraphs' links are
    text, as the job writes every link: to trafilatura's link-density test rustdoc's one-line notes
    ("🔬 This is a nightly-only experimental API. (`is_sorted` #53485)", the number a link)
    made the last methods of an implementation boilerplate, and they went.
    """
    for div in list(tree.iter("div")):
        if not (_in_pre(div) or in_cell(div)) and _holds_text_itself(div):
            _runs_as_paragraphs(div, _is_container, links_as_text=True)


def _runs_as_paragraphs(
    div: HtmlElement, is_block: Callable[[HtmlElement], bool], links_as_text: bool = False
) -> None:
    """Each run of `div`'s text and inline children (between its `is_block` children) in a
    ``<p>`` of its own, in place; with `links_as_text` the paragraphs' links become text."""
    children: list[HtmlElement] = []

    def end_run(text: str | None, run: list[HtmlElement]) -> None:
        if (text or "").strip() or any(c.text_content().strip() for c in run):
            paragraph = div.makeelement("p", {})
            paragraph.text = text
            paragraph.extend(run)  # moves them, tails included
            if links_as_text:
                for link in list(paragraph.iter("a")):
                    link.drop_tag()
            children.append(paragraph)

    text, run = div.text, []  # a run of text and inline children
    div.text = None
    for child in list(div):
        if isinstance(child.tag, str) and is_block(child):
            end_run(text, run)
            text, run = child.tail, []
            child.tail = None
            children.append(child)
        else:
            run.append(child)
    end_run(text, run)
    for child in list(div):
        div.remove(child)
    div.extend(children)


# What a <p> cannot hold: blocks, and the page's landmarks and list or table parts
_CONTAINERS = _BLOCK_TAGS | {
    *("nav", "header", "footer", "aside", "main", "figure", "figcaption", "form", "fieldset"),
    *("address", "center", "hr", "li", "dd", "dt", "tr", "td", "th", "thead", "tbody", "tfoot"),
    *("caption", "noscript", "iframe", "video", "audio", "canvas", "svg", "math", "object"),
}


_WORD = re.compile(r"\w+")


def _is_container(el: HtmlElement) -> bool:
    return el.tag in _CONTAINERS or any(d.tag in _CONTAINERS for d in el.iterdescendants())


def in_cell(element: HtmlElement) -> bool:
    """Whether `element` is inside a table cell."""
    return any(a.tag in ("td", "th") for a in element.iterancestors())


def _holds_text_itself(div: HtmlElement) -> bool:
    """Whether `div` has words of its own or in inline children (outside any block child), at
    least half as many outside links as in them (Javadoc's "Package org.junit", the package a
    link): a bar of links ("Home | Table of contents | Index", "« previous | up | next »") or
    of cross-references (PostgreSQL's "See Also": "BEGIN, COMMIT, ROLLBACK") is left to
    trafilatura, which takes such text for navigation on a page of paragraphs."""
    text, linked = [div.text or ""], []
    for child in div:
        if isinstance(child.tag, str) and not _is_container(child) and child.tag not in NOT_TEXT:
            text.append(child.text_content())
            links = [child] if child.tag == "a" else child.iter("a")
            linked.extend(a.text_content() for a in links)
        text.append(child.tail or "")
    words = len(_WORD.findall(" ".join(text)))
    in_links = len(_WORD.findall(" ".join(linked)))
    return words > in_links and 2 * (words - in_links) >= in_links


def _div_text_as_paragraphs(div: HtmlElement) -> None:
    """A ``<div>`` of text and inline markup as a ``<p>``; in one that also holds blocks, each
    run of its text and inline children as a ``<p>`` of its own (Javadoc's ``div.block``:
    ``Gets a new tokenizer instance ... <p> You must call ...``)."""
    if not div.text_content().strip():
        return
    if not any(d.tag in _BLOCK_TAGS for d in div.iterdescendants()):
        div.tag = "p"
        return
    _runs_as_paragraphs(div, _is_block)


_BLANK_LINE = re.compile(r"(?<=\n)(?=\n)")  # the place of an empty line's text


def _line_broken_code_as_preformatted(tree: HtmlElement) -> None:
    """Inline code of several lines (``<br>`` between them) that is all of its paragraph, as
    a ``<pre>`` of those lines.

    Hand-written pages show a listing so: Apache httpd's manual writes its examples
    ``<div class="example"><p><code># Unknown HTTP method<br>WOW / HTTP/1.0<br>...</code>
    </p></div>``, which a browser shows as lines of code and trafilatura wrote as one inline
    code span and loose lines, a comment line ("# Lowercase HTTP method") a heading. Each line
    is what a browser shows: its whitespace collapsed (no-break spaces, the pages'
    indentation, kept). Code of one line, code inside a ``<pre>`` and code beside other text of
    its paragraph stay inline.
    """
    for code in list(tree.iter(*_INLINE_CODE)):
        parent = code.getparent()
        if parent is None or parent.tag != "p" or next(code.iter("br"), None) is None:
            continue
        if _in_pre(code) or any(a.tag in _INLINE_CODE for a in code.iterancestors()):
            continue
        if len(parent) != 1 or (parent.text or "").strip() or (code.tail or "").strip():
            continue
        lines = [
            _HTML_WHITESPACE.sub(" ", line).strip(" ").replace("\xa0", " ")
            for line in _text_at_breaks(code)
        ]
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if len(lines) < 2:
            continue
        _replaced_by_pre(parent, lines)


def _preformatted_as_code(tree: HtmlElement) -> None:
    r"""Make every ``<pre>`` one that trafilatura writes as a fenced code block.

    trafilatura fences a ``<pre>`` only when it looks like code to it (one ``<span>`` child,
    highlight.js spans, or "{", "('" or a four-space indent in its text); any other is written
    as plain lines, so a line that starts with "#" became a heading (``#  include <fcntl.h>``
    on zlib's how-to page, whose listings are ``<pre><b>``) and PostgreSQL's synopses became
    paragraphs of escaped Markdown (``DROP TABLE \[ IF EXISTS \] *`name`*``). The text of
    each ``<pre>`` is put in one ``<span>``, the first of those rules; its inline markup goes
    (a code block has none). It ends with a newline: trafilatura writes code of one line as
    inline code (git's one-line ``<pre>`` examples came out as `` `$ git config ...` `` glued
    to the next paragraph).

    A ``<pre>`` in a table cell (after `_layout_tables_unwrapped`) becomes inline code, its
    whitespace collapsed: a Markdown table row holds no block, and trafilatura wrote the fences
    of a code block in the middle of the row (PostgreSQL's function tables show each example's
    result in one).
    """
    for pre in list(tree.iter("pre")):
        text = pre.text_content()
        if in_cell(pre):
            if not text.strip():
                pre.drop_tree()  # keeps its tail
                continue
            code = pre.makeelement("code", {})
            code.text = " ".join(text.split())
            code.tail = pre.tail
            pre.getparent().replace(pre, code)
            continue
        for child in list(pre):
            pre.remove(child)  # lxml's remove keeps a child's tail with the child: text had it
        pre.text = None
        span = pre.makeelement("span", {})
        if text.strip():
            # its blank lines kept: trafilatura drops every empty line of its output but
            # those it marks "\u2424" (between its blocks), so a function's blank line before
            # the next was lost; the page's leading and trailing blank lines go
            text = _BLANK_LINE.sub("\u2424", text.strip("\n")) + "\n"
        span.text = text
        pre.append(span)


# Elements whose whitespace a browser keeps as written.
_WHITESPACE_KEPT = ("pre", "textarea", "listing", "xmp", "plaintext", "script", "style")
# Where a line ends or a block starts or ends: whitespace beside them is left as it is (what
# trafilatura makes of it separates blocks: "```\nas they are", not "``` as they are").
_LINE_BREAKS = _BLOCK_TAGS | {
    "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot", "caption", "br", "hr",
    "main", "body", "html", "header", "footer", "nav", "aside", "figure", "figcaption",
    "form", "fieldset", "address", "center", "dir", "menu",
}  # fmt: skip
_ITEM_TAGS = ("li", "dt", "dd")
_EDGES = re.compile(r"^(\s*)(.*?)(\s*)$", re.S)
_HTML_WHITESPACE = re.compile(r"[ \t\r\n\f]+")


def _collapsed(text: str, keep_start: bool, keep_end: bool, after_space: bool) -> str:
    """`text` with each inner run of whitespace one space, and so its edges unless kept; an
    edge not kept that follows whitespace (`after_space`: the text before it ends with some, or
    a line starts there) goes. A text of whitespace alone is left as it is where an edge is
    kept or it holds a no-break space."""
    start, body, end = _EDGES.match(text).groups()
    if not body:
        if not _HTML_WHITESPACE.fullmatch(text):
            return text  # "&nbsp;", which a browser does not collapse, stays
        if keep_end:
            return _unindented(text)
        if keep_start:
            return text
        return "" if after_space else " "
    body = _HTML_WHITESPACE.sub(" ", body)
    if start and not keep_start:
        start = "" if after_space and _HTML_WHITESPACE.fullmatch(start) else " "
    end = _unindented(end) if keep_end else " " if end else end
    return start + body + end


def _unindented(edge: str) -> str:
    """Whitespace before a block or a line break, less what follows its last line break: the
    indentation of the source line that the block starts on, which no browser shows."""
    return edge[: edge.rfind("\n") + 1] if "\n" in edge else edge


def _breaks(el: HtmlElement) -> bool:
    return el.tag in _LINE_BREAKS


def _whitespace_collapsed(tree: HtmlElement) -> None:
    """Collapse each run of HTML whitespace in running text to one space, as a browser shows it.

    trafilatura keeps a text node's newlines and indentation: DocBook, hand-written pages and
    Sphinx wrap their source lines inside a paragraph, so PostgreSQL's Description read
    "`DELETE` deletes rows that satisfy the\n   `WHERE` clause", a list item's continuation
    lines kept six spaces, and the indentation cost tokens in every chunk (3.5% of the
    development corpora's embedded tokens). Whitespace inside ``<pre>`` (run after
    `_preformatted_as_code`) and ``<textarea>`` is kept, and so is whitespace beside a block
    or a line break (``<br>``, a list item), which trafilatura uses to end lines.

    The text is read in the page's order, so a run is one space across elements too: the
    whitespace between two inline elements (Erlang's definition term ``<strong>\n\t<span><a>
    \n\t  <span>state_functions``, which trafilatura wrote as "- " and a tab-indented term
    three lines below, a description of nothing) is one space, or none after a space or at a
    line's start, and texi2any's index anchors (empty ``<span>``s, each on its own line) no
    longer leave their newlines in a paragraph.

    Whitespace before a block or a line break loses what follows its last newline, the
    indentation of the source line the block starts on (`_unindented`): trafilatura wrote it
    before an opening fence ("Example:", a newline and six spaces, then Erlang's ``<div
    class="example"><pre>`` in a ``<dd>``), the code at the margin, and CommonMark read the
    fence as paragraph text and its closing fence as the opening of a code block. And a list
    item's or a definition's own text starts at its marker: whitespace there goes (zsh's FAQ,
    ``<li> Syntax:``, came out as "-  Syntax:", whose nested list then read as the outer
    one's items; the GPL's sections in gettext's manual as "1." and the text on the next line).
    """
    kept = {el for top in tree.iter(*_WHITESPACE_KEPT) for el in top.iter()}
    after_space = True  # the text read last ends with whitespace, or a line starts here

    def read(text: str | None, keep_start: bool, keep_end: bool, own: bool) -> str | None:
        nonlocal after_space
        if text and own:
            text = _collapsed(text, keep_start, keep_end, after_space)
        if text:
            after_space = text[-1] in " \t\r\n\f"  # not "&nbsp;"
        return text

    # elements only: a comment's or a processing instruction's tail is left as it is
    for event, el in etree.iterwalk(tree, events=("start", "end")):
        if _breaks(el):
            after_space = True  # a block starts or ends, a line ends
        if event == "start":
            # the text ends at the first child, or at the element's own end
            # an item's text starts at its marker: whitespace there goes (a browser shows none)
            start = _breaks(el) and el.tag not in _ITEM_TAGS
            el.text = read(el.text, start, _breaks(el[0] if len(el) else el), el not in kept)
        elif el.tail and (parent := el.getparent()) is not None:
            # the tail ends at the next sibling, or at the parent's end
            after = el.getnext()
            el.tail = read(
                el.tail,
                _breaks(el),
                _breaks(parent if after is None else after),
                parent not in kept,
            )


def _wrap_body_in_main(tree: HtmlElement) -> bool:
    """Move all of ``<body>`` into one ``<main>`` if trafilatura would find no content container.

    See the module docstring: without a container, trafilatura's wild-text recovery drops
    every heading. An element without text is no container (trafilatura skips it too):
    Doxygen's empty ``<div id="main-nav"></div>`` matched, and its pages came out without a
    heading. Returns whether the tree was changed.
    """
    found = (match[0] for expr in _CONTAINER_XPATHS if (match := expr(tree)))
    if any(element.text_content().strip() for element in found):
        return False
    body = tree.find("body") if tree.tag == "html" else None
    if body is None:
        body = tree.find(".//body")
    if body is None or len(body) == 0:
        return False
    main = body.makeelement("main", {})
    main.text, body.text = body.text, None
    main.extend(list(body))  # moves the children, tails included
    body.append(main)
    return True


def _declared_language(tree: HtmlElement) -> str | None:
    """The language the page declares: ``<html lang>``, else Content-Language or og:locale."""
    candidates = [tree.get("lang"), tree.get("xml:lang"), *_LANG_META_XPATH(tree)]
    for value in candidates:
        if value and (tag := value.split(",")[0].strip().replace("_", "-")):
            return tag
    return None
