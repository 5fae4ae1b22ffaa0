"""Document type detection: html, markdown, code (with its language), text, or the binary
paged types pdf, docx and pptx.

The extension decides when it is known; otherwise the first bytes are sniffed (doctype, html
tag, shebang, Markdown headings and fences; %PDF- and the Office zip's parts for the binary
types, which `binary_type` finds before any decoding).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

CODE_LANGUAGE_BY_EXTENSION = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".rb": "ruby",
    ".sh": "bash",
    ".bash": "bash",
    # Recognised as code, chunked by lines (no grammar bundled).
    ".kt": "kotlin",
    ".scala": "scala",
    ".swift": "swift",
    ".php": "php",
    ".cs": "csharp",
    ".lua": "lua",
    ".pl": "perl",
    ".sql": "sql",
}
HTML_EXTENSIONS = {".html", ".htm", ".xhtml"}
MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
TEXT_EXTENSIONS = {".txt", ".text", ".rst", ".adoc", ".asciidoc", ".org", ".tex", ".csv", ""}
JSONL_EXTENSIONS = {".jsonl", ".ndjson"}
BINARY_TYPE_BY_EXTENSION = {".pdf": "pdf", ".docx": "docx", ".pptx": "pptx"}
PAGED_TYPES = ("pdf", "pptx")  # documents whose chunks carry pages (slides for pptx)
BINARY_TYPES = ("pdf", "docx", "pptx")
# What Beam's fileio decompresses by name, so `a.pdf.gz` is a PDF.
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".lzma", ".deflate")

_SHEBANG = {
    "python": "python",
    "bash": "bash",
    "sh": "bash",
    "zsh": "bash",
    "node": "javascript",
    "ruby": "ruby",
}
_MD_SIGNS = re.compile(r"^(#{1,6} \S|```|~~~|\* \S|- \S|\d+\. \S|\|.*\|)", re.MULTILINE)
# reStructuredText's own signs, which Markdown does not have: a directive (".. note::"), an
# interpreted-text role (":meth:`x`"), a title underlined with a character Markdown does not
# underline with (setext headings take "=" and "-"). A reST title underlined with backticks or
# tildes would open a Markdown code fence that swallows the rest of the document.
_RST_SIGNS = re.compile(r"^\.\. [\w:-]+::|:[a-z]+(?::[a-z]+)?:`", re.MULTILINE)
_RST_TITLE = re.compile(r"^(\S[^\n]*?)[ \t]*\n(([`~^:'\"*+#.])\3*)[ \t]*$", re.MULTILINE)
# The first line of a Debian changelog: "package (version) distribution; urgency=level". Debian
# trims installed changelogs to a few entries and ends them with two "# ..." lines, which read
# as Markdown headings.
_DEBIAN_CHANGELOG = re.compile(r"[a-z0-9][a-z0-9+.-]+ \([^()\s]+\) [^;\n]+; urgency=\w+")


@dataclass(frozen=True)
class DetectedType:
    doc_type: str  # html | markdown | code | text (pdf | docx | pptx: see binary_type)
    language: str | None = None


def extension(source: str) -> str:
    """Lower-case extension of a path or URI, ignoring a `#L<line>` record suffix and a
    compression suffix (.gz, .bz2, .xz, .zst ...)."""
    path = source.split("#", 1)[0]
    base = os.path.basename(path).lower()
    for suffix in COMPRESSED_SUFFIXES:
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return os.path.splitext(base)[1]


def binary_type(source: str, data: bytes) -> str | None:
    """pdf, docx or pptx when the bytes say so (%PDF- near the start; a zip holding
    word/document.xml or ppt/presentation.xml), or the name does; else None."""
    head = data[:1024]
    if b"%PDF-" in head:
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        window = data[:65536]
        if b"word/" in window:
            return "docx"
        if b"ppt/" in window:
            return "pptx"
    return BINARY_TYPE_BY_EXTENSION.get(extension(source))


def is_binary(head: bytes) -> bool:
    """NUL bytes, or mostly control bytes, in the first KB mean binary."""
    if b"\x00" in head:
        return True
    if not head:
        return False
    control = sum(1 for b in head if b < 9 or 13 < b < 32)
    return control / len(head) > 0.1


def sniff(head: str) -> DetectedType:
    """Type from content, for files without a known extension."""
    start = head.lstrip()[:512].lower()
    if start.startswith(("<!doctype html", "<html", "<?xml")) and "<html" in head[:4096].lower():
        return DetectedType("html")
    if start.startswith("#!"):
        first = start.splitlines()[0]
        for word, lang in _SHEBANG.items():
            if re.search(rf"\b{word}[\d.]*\b", first):
                return DetectedType("code", lang)
    if _DEBIAN_CHANGELOG.match(head.lstrip()):
        return DetectedType("text")
    start = head[:8192]
    if len(_MD_SIGNS.findall(start)) >= 2 and _rst_signs(start) < 2:
        return DetectedType("markdown")
    return DetectedType("text")


def _rst_signs(text: str) -> int:
    """How many signs of reStructuredText `text` holds that Markdown has not (directives,
    roles, titles underlined with other characters than "=" and "-")."""
    titles = sum(1 for m in _RST_TITLE.finditer(text) if len(m.group(2)) >= len(m.group(1)))
    return titles + len(_RST_SIGNS.findall(text))


def detect(source: str, head: str) -> DetectedType:
    """Type of a document from its name and the start of its decoded text."""
    ext = extension(source)
    if ext in HTML_EXTENSIONS:
        return DetectedType("html")
    if ext in MARKDOWN_EXTENSIONS:
        return DetectedType("markdown")
    if ext in CODE_LANGUAGE_BY_EXTENSION:
        return DetectedType("code", CODE_LANGUAGE_BY_EXTENSION[ext])
    if ext in TEXT_EXTENSIONS and ext:
        return DetectedType("text")
    return sniff(head)
