"""Extract clean text, the pure core: decode, detect the type, run trafilatura on HTML and
PDFium or python-docx/pptx on PDF and Office files; and what runs in the extraction child
(`within_cpu_time`, its environment, its start).

The stage (transforms/ingest/extract.py) runs HTML and paged files in a child process that
imports this module, not Beam: a child starts in a fraction of the time (it is started again
after each document over its time limit). Nothing here imports apache_beam.

Every RawDocument becomes a Document or a Reject naming the reason (binary, invalid_utf8,
invalid_encoding, empty, too_deep, extract_timeout, extract_failed, empty_after_extraction,
redirect; for PDF and Office files encrypted, no_text_layer, corrupt_pdf, corrupt_docx,
corrupt_pptx, extract_memory).
"""

from __future__ import annotations

import codecs
import os
import re
import signal
from collections.abc import Callable

from schemas.records import DOC_TYPES, Document, RawDocument, content_hash
from transforms.chunking.markdown import without_html_comments, without_link_definitions
from transforms.ingest.detect import PAGED_TYPES, binary_type, detect, is_binary

# The heading's text is taken greedily and its closing "#"s stripped after: a lazy group
# before `[ \t#]*$` backtracked quadratically on a long line ("# a" + 20,000 spaces + "x").
_ATX_HEADING = re.compile(r"^#{1,6}[ \t]+(\S.*)$", re.MULTILINE)
MAX_WHITESPACE_RUN = 1000
"""Longer runs of spaces and tabs (no newline) are cut to this many characters: they carry no
text, and tiktoken's pre-tokenizer overflows its stack on a run of about a million of them
followed by a word (a panic that no `except Exception` catches)."""
_LONG_WHITESPACE_RUN = re.compile(rf"[^\S\n]{{{MAX_WHITESPACE_RUN + 1},}}")


class ExtractError(Exception):
    """A document that cannot be extracted; `reason` is the machine-readable cause."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):  # it comes back from the extraction child process pickled
        return type(self), (self.reason, str(self))


# Byte order marks, UTF-32 before UTF-16 (FF FE 00 00 starts with FF FE).
_UTF16_32_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


# The legacy encodings of the WHATWG Encoding Standard (what browsers decode pages with), as
# Python names them once w3lib has resolved a page's label (iso-8859-1 -> cp1252, shift_jis ->
# cp932, euc-kr -> cp949, gb2312 -> gb18030, big5 -> big5hkscs). Any other codec a label could
# name (utf-16 on a page that is not, unicode_escape, EBCDIC) is not decoded.
WEB_LEGACY_ENCODINGS = frozenset(
    {"cp866", "cp874", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "gbk", "gb18030"}
    | {"big5", "big5hkscs", "euc_jp", "iso2022_jp", "shift_jis", "cp932", "euc_kr", "cp949"}
    | {f"cp{n}" for n in range(1250, 1259)}
    | {f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)}
)


def declared_html_encoding(source: str, data: bytes) -> str | None:
    """The encoding an HTML file declares (meta charset, http-equiv, XML declaration), resolved
    as browsers do (iso-8859-1 is read as windows-1252); None for other files or none declared.

    A declared encoding that is not one of the web's legacy encodings comes back as its Python
    name, for `decode` to refuse.
    """
    head = data[:4096]
    if detect(source, head.decode("latin-1")).doc_type != "html":  # typed as the text will be
        return None
    from w3lib.encoding import html_body_declared_encoding

    declared = html_body_declared_encoding(head)
    if declared is None:
        return None
    try:
        return codecs.lookup(declared).name
    except LookupError:
        return declared


def decode(raw: RawDocument) -> str:
    """The document's text: the record's text, or the file's bytes.

    Bytes are read as their byte order mark says (UTF-8, UTF-16, UTF-32), else as strict UTF-8;
    HTML that is not UTF-8 is read in the encoding it declares. Anything else is a reject.
    """
    if raw.text is not None:
        text = raw.text
    else:
        data = raw.data
        bom = next((enc for mark, enc in _UTF16_32_BOMS if data.startswith(mark)), None)
        if bom is not None:  # NUL bytes are part of these encodings: no binary test
            text = _strict(data, bom, "by its byte order mark")
        else:
            utf16 = _utf16_without_bom(data[:4096])
            if utf16 is not None:
                raise ExtractError(
                    "invalid_encoding",
                    f"looks like {utf16} without a byte order mark (a NUL byte in every other "
                    "position); save it with a byte order mark, or as UTF-8",
                )
            if is_binary(data[:4096]):
                raise ExtractError("binary", "NUL or control bytes in the first 4 KB")
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError as e:
                # A UTF-8 byte order mark wins over what the page declares, as in browsers,
                # and so does a declared UTF-16 or UTF-32 on a page that is not (read as UTF-8).
                declared = None
                if not data.startswith(codecs.BOM_UTF8):
                    declared = declared_html_encoding(raw.source, data)
                if declared is None or declared == "utf-8" or declared.startswith("utf-"):
                    raise ExtractError("invalid_utf8", _where(e, data)) from None
                if declared not in WEB_LEGACY_ENCODINGS:
                    raise ExtractError(
                        "invalid_encoding",
                        f"the page declares {declared}, which is not an encoding of the web",
                    ) from None
                text = _strict(data, declared, "as the page declares")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _utf16_without_bom(head: bytes) -> str | None:
    """ "UTF-16-LE" or "UTF-16-BE" when `head` reads as mostly ASCII text in that encoding
    (NUL in nearly every high byte, hardly any in the low ones), else None."""
    if len(head) < 32 or b"\x00" not in head:
        return None
    even, odd = head[0::2], head[1::2]
    for name, high, low in (("UTF-16-LE", odd, even), ("UTF-16-BE", even, odd)):
        if high.count(0) >= 0.9 * len(high) and low.count(0) <= 0.05 * len(low):
            try:
                head[: len(head) // 2 * 2].decode(name.lower())
            except UnicodeDecodeError:
                continue
            return name
    return None


def _whatwg_c1(error: UnicodeError) -> tuple[str, int]:
    """The five bytes cp1252 leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D) as the C1 controls
    of the same number, as the WHATWG Encoding Standard's windows-1252 (browsers) reads them."""
    if not isinstance(error, UnicodeDecodeError) or error.reason != "character maps to <undefined>":
        raise error
    return "".join(map(chr, error.object[error.start : error.end])), error.end


codecs.register_error("corpus_chunker_whatwg_c1", _whatwg_c1)


def _strict(data: bytes, encoding: str, why: str) -> str:
    try:
        if encoding == "cp1252":  # never fails in a browser: Vim's digraph.html, a page that
            # declares ISO-8859-1 and holds UTF-8's "\xc3\x81" (shown as "Ã" and U+0081)
            return data.decode(encoding, errors="corpus_chunker_whatwg_c1")
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise ExtractError(
            "invalid_encoding", f"not {encoding} ({why}): {_where(e, data)}"
        ) from None


def _where(e: UnicodeDecodeError, data: bytes) -> str:
    """Where decoding failed, with the bytes around it."""
    return f"byte {e.start}: {e.reason}; near {data[max(0, e.start - 20) : e.end + 20]!r}"


def first_heading(text: str) -> str | None:
    """The text of the document's first ATX heading, without its closing sequence: a run of
    "#" after a space (CommonMark's rule), so that "# C#" is titled "C#" and "## Title ##"
    "Title"."""
    m = _ATX_HEADING.search(text[:20_000])
    if not m:
        return None
    heading = m.group(1).rstrip(" \t")
    without_closing = heading.rstrip("#")
    if not without_closing or without_closing[-1] in " \t":
        heading = without_closing
    return heading.strip() or None


# A line of one repeated punctuation character: a reST or setext over/underline.
_ADORNMENT = re.compile(r"([=\-~^\"'`#*+_.:])\1{2,}")
MAX_TITLE_LINE = 100


def title_line(text: str) -> str | None:
    """The title a plain-text document gives itself: its first line, when that line is short
    and set apart (underlined, as reST and setext titles are, or followed by a blank line).

    Without it a text file's header was its file name alone (`copyright`, `changelog`).
    """
    lines = [line.strip() for line in text[:4096].splitlines()]
    i = 0
    while i < len(lines) and (
        not lines[i] or _ADORNMENT.fullmatch(lines[i]) or lines[i].startswith(".. ")
    ):
        i += 1  # leading blank lines, reST labels and comments (".. _label:"), an overline
    if i >= len(lines) or len(lines[i]) > MAX_TITLE_LINE:
        return None
    after = lines[i + 1] if i + 1 < len(lines) else ""
    if after and not _ADORNMENT.fullmatch(after):
        return None
    return lines[i]


def cut_whitespace_runs(text: str) -> str:
    """`text` with every run of more than MAX_WHITESPACE_RUN whitespace characters other than
    a newline (spaces, tabs, no-break spaces, any Unicode space) cut to that many.

    Run on the extracted text, the last step of extraction: a run that only extraction makes
    (entities, a PDF's layout) is cut as well as one in the file."""
    return _LONG_WHITESPACE_RUN.sub(lambda m: m.group()[:MAX_WHITESPACE_RUN], text)


HtmlExtractor = Callable[[str], "object"]

# What the HTML extraction child keeps of the environment: where programs, the home folder,
# temporary files and Python's own settings are, and the locale. Nothing else, so no API key
# (CORPUS_CHUNKER_LLM_API_KEY, OPENAI_API_KEY, cloud credentials) reaches the parser of
# untrusted pages.
CHILD_ENV_NAMES = frozenset(
    {"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP", "VIRTUAL_ENV"}
)
CHILD_ENV_PREFIXES = ("LC_", "PYTHON")


def child_environment(environ: dict[str, str]) -> dict[str, str]:
    """The part of `environ` the extraction child may see (CHILD_ENV_NAMES, LC_*, PYTHON*)."""
    return {
        k: v for k, v in environ.items() if k in CHILD_ENV_NAMES or k.startswith(CHILD_ENV_PREFIXES)
    }


def restrict_environment() -> None:
    """The extraction child's first act: drop every variable but the allowed ones.

    (The spawn start method gives the child the parent's environment and takes none of its
    own; what remains of it is the process's initial environment block, which only the same
    user can read, in /proc/PID/environ.)
    """
    keep = child_environment(dict(os.environ))
    for name in list(os.environ):
        if name not in keep:
            del os.environ[name]


PagedExtractor = Callable[[str, bytes], "object"]
PAGED_MEMORY_BYTES = 2 << 30
"""What one PDF or Office extraction may add to the child's address space (RLIMIT_AS)."""


def extract_paged(doc_type: str, data: bytes, memory_bytes: int = PAGED_MEMORY_BYTES):
    """A PDF, DOCX or PPTX file to its PagedText, under a memory cap when the system has one
    (in the extraction child: the cap is lifted again after)."""
    from transforms.ingest.layout import PagedError
    from transforms.ingest.office import docx_to_paged_text, pptx_to_paged_text
    from transforms.ingest.pdf import pdf_to_paged_text

    convert = {
        "pdf": lambda data: pdf_to_paged_text(data, on_page_count=allow_pages),
        "docx": docx_to_paged_text,
        "pptx": pptx_to_paged_text,
    }
    try:
        with _memory_cap(memory_bytes):
            return convert[doc_type](data)
    except PagedError as e:
        raise ExtractError(e.reason, str(e)) from None
    except MemoryError:
        raise ExtractError(
            "extract_memory", f"{doc_type} extraction needed over {memory_bytes} bytes"
        ) from None


class _memory_cap:
    """RLIMIT_AS at the address space in use plus `extra` bytes, for the block's duration."""

    def __init__(self, extra: int) -> None:
        self.extra = extra
        self.previous = None

    def __enter__(self) -> None:
        try:
            import resource

            with open("/proc/self/statm") as f:
                in_use = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            cap = in_use + self.extra
            if hard != resource.RLIM_INFINITY:
                cap = min(cap, hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
            self.previous = (soft, hard)
        except (ImportError, OSError, ValueError):
            self.previous = None  # no /proc or no rlimits here: the time limit alone bounds it

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, self.previous)


def paged_document(raw: RawDocument, doc_type: str, paged) -> Document:
    """The Document of a PDF, DOCX or PPTX file from its PagedText."""
    text = cut_whitespace_runs(paged.text)
    if not text.strip():
        raise ExtractError("empty_after_extraction", f"no text in the {doc_type} file")
    has_pages = doc_type in PAGED_TYPES and len(text) == len(paged.text)
    return Document(
        doc_id=raw.doc_id,
        source=raw.source,
        doc_type=doc_type,
        text=text,
        content_hash=content_hash(text),
        title=raw.title or paged.title,
        url=raw.url,
        page_count=len(paged.page_starts) if doc_type in PAGED_TYPES else None,
        page_starts=tuple(paged.page_starts) if has_pages else None,
        page_labels=paged.page_labels if has_pages else None,
        contents_pages_removed=paged.removed.get("contents_pages", 0),
        index_pages_removed=paged.removed.get("index_pages", 0),
    )


def extracted_html(html: str, html_extractor: HtmlExtractor):
    """The HTML extractor's result for a page, or ExtractError for a page that only
    redirects or holds no main text (the job's HTML step; `corpus-chunker structure` takes
    it too, so it checks the pages the job keeps)."""
    result = html_extractor(html)
    if result.redirect:
        raise ExtractError("redirect", f"only redirects (meta refresh) to {result.redirect[:200]}")
    if not result.text.strip():
        raise ExtractError("empty_after_extraction", "trafilatura found no main text")
    return result


def extract_document(
    raw: RawDocument, html_extractor: HtmlExtractor, paged_extractor: PagedExtractor = extract_paged
) -> Document:
    """Pure core: one raw input to one Document, or ExtractError."""
    kind = binary_type(raw.source, raw.data) if raw.text is None else None
    if kind is not None:
        return paged_document(raw, kind, paged_extractor(kind, raw.data))
    text = decode(raw)
    if not text.strip():
        raise ExtractError("empty", "no text (empty or whitespace only)")
    detected = detect(raw.source, text[:8192])
    doc_type, language = detected.doc_type, detected.language
    if raw.hint_type in DOC_TYPES:
        doc_type, language = raw.hint_type, None if raw.hint_type != "code" else language
    title, url, date, lang = raw.title, raw.url, None, None
    if doc_type == "html":
        result = extracted_html(text, html_extractor)
        text = result.text
        title = title or result.title
        url = url or result.url
        date = result.date
        lang = result.language
    elif doc_type == "markdown":
        text = without_link_definitions(without_html_comments(text))
        if not text.strip():
            raise ExtractError(
                "empty_after_extraction", "nothing but HTML comments and link definitions"
            )
        title = title or first_heading(text)
    elif doc_type == "code":
        title = title or raw.source.split("#", 1)[0].rsplit("/", 1)[-1]
    else:
        title = title or title_line(text)
    # One pass over the text as it will be chunked, after extraction: a run that only
    # extraction makes (a million `&nbsp;` in a page's <pre>) is cut like one in the file.
    text = cut_whitespace_runs(text)
    return Document(
        doc_id=raw.doc_id,
        source=raw.source,
        doc_type=doc_type,
        text=text,
        content_hash=content_hash(text),
        language=language,
        title=title,
        url=url,
        date=date,
        lang=lang,
    )


def extract_html(html: str):
    from transforms.ingest.html import HtmlTooDeep, html_to_markdown

    try:
        return html_to_markdown(html)
    except HtmlTooDeep as e:
        raise ExtractError("too_deep", str(e)) from None


class CpuTimeUp(BaseException):
    """Raised in the extraction child when it has used its CPU time on one document. A
    BaseException, like KeyboardInterrupt: the parsers run under it catch `Exception` in many
    places (trafilatura falls back to another extractor when one raises), and a time limit
    they could swallow would be no limit."""


_time_up: list[bool] = []  # set by the signal: the document's CPU time was used up


def _cpu_time_up(signum: int, frame: object) -> None:
    _time_up[:] = [True]
    raise CpuTimeUp()


PAGES_PER_LIMIT = 1000
"""A PDF gets --extract_timeout_s of CPU time per this many pages (at least once): a
2,000-page PDF takes 5-6 s of CPU here, half of it PDFium's own loading of the pages."""

_running_limit: list[float] = []  # the limit within_cpu_time is running under, if it is


def within_cpu_time(limit_s: float, fn: Callable, *args):
    """Run in the extraction child: `fn(*args)`, stopped with CpuTimeUp once this process has
    used `limit_s` seconds of CPU time on it (ITIMER_PROF: user and system time), or more
    where `allow_pages` grants it."""
    signal.signal(signal.SIGPROF, _cpu_time_up)
    _time_up.clear()
    _running_limit[:] = [limit_s]
    # after the limit the signal comes again every REPEAT_S of CPU time, and a result that
    # arrives after it came at all is not one: whatever catches the first, the limit holds
    signal.setitimer(signal.ITIMER_PROF, limit_s, REPEAT_S)
    try:
        result = fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        _running_limit.clear()
    if _time_up:
        raise CpuTimeUp()
    return result


REPEAT_S = 0.05


def allow_pages(pages: int) -> None:
    """Called by the PDF extraction once it knows its page count: under `within_cpu_time`, the
    CPU-time limit becomes limit x pages / PAGES_PER_LIMIT where that is more. Elsewhere it
    does nothing. The parent's wall-clock backstop (WALL_CLOCK_FACTOR x the flag + margin,
    80 s at the default) is not raised: a PDF of over 16,000 pages meets it first."""
    if not _running_limit or pages <= PAGES_PER_LIMIT:
        return
    remaining, _ = signal.getitimer(signal.ITIMER_PROF)
    if remaining > 0:
        extra = _running_limit[0] * (pages / PAGES_PER_LIMIT - 1)
        signal.setitimer(signal.ITIMER_PROF, remaining + extra, REPEAT_S)


def child_ready() -> bool:
    """Run in the extraction child once it starts: what extraction imports is imported, and
    what it sets up on first use (trafilatura's, lxml's) is set up, by one small page."""
    extract_html("<html><head><title>t</title></head><body><p>A page.</p></body></html>")
    return True
