"""Word and PowerPoint files to Markdown: python-docx and python-pptx.

DOCX: heading styles become headings, list paragraphs list items, tables Markdown tables, in
body order. PPTX: one section per slide (its title the heading, else "Slide N"), the text of
its shapes and tables, then its speaker notes; each slide is a page of the page map.
"""

from __future__ import annotations

import io
import re
import zipfile

from transforms.ingest.layout import PagedError, PagedText, normalise

_HEADING_STYLE = re.compile(r"(?i)^heading\s*(\d)$")
MAX_ZIP_MEMBER_BYTES = 256 << 20  # a decompression bomb inside the zip is refused before XML


def _check_zip(data: bytes, kind: str) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for info in z.infolist():
                if info.file_size > MAX_ZIP_MEMBER_BYTES:
                    raise PagedError(
                        f"corrupt_{kind}",
                        f"{info.filename} decompresses to {info.file_size} bytes (over "
                        f"{MAX_ZIP_MEMBER_BYTES}): a decompression bomb?",
                    )
    except zipfile.BadZipFile as e:
        raise PagedError(f"corrupt_{kind}", f"not a readable zip: {e}") from None


def _cell(text: str) -> str:
    return " ".join(normalise(text).split()).replace("|", "\\|")


def table_markdown(rows: list[list[str]]) -> str:
    """Rows of cell texts as a Markdown table, the first row its header."""
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    lines = []
    for n, row in enumerate(rows):
        cells = [_cell(c) for c in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if n == 0:
            lines.append("|" + "---|" * width)
    return "\n".join(lines) + "\n\n"


def _numbered(paragraph) -> bool:
    """A paragraph with Word numbering (a list item whose style does not say so)."""
    ppr = paragraph._p.pPr
    return ppr is not None and ppr.numPr is not None


def docx_to_paged_text(data: bytes) -> PagedText:
    """Pure core: a DOCX's bytes to Markdown (no pages: Word files have no fixed pages)."""
    _check_zip(data, "docx")
    try:
        import docx
        from docx.table import Table
        from docx.text.paragraph import Paragraph
    except ImportError as e:  # pragma: no cover
        raise ImportError("DOCX input needs python-docx: pip install python-docx==1.2.0") from e
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as e:  # python-docx raises many kinds on a broken package
        raise PagedError("corrupt_docx", f"python-docx cannot open it: {e!r}") from None
    out: list[str] = []
    title = (document.core_properties.title or "").strip() or None
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            rows = [[cell.text for cell in row.cells] for row in block.rows]
            out.append(table_markdown(rows))
            continue
        assert isinstance(block, Paragraph)
        text = " ".join(normalise(block.text).split())
        if not text:
            continue
        style = (block.style.name if block.style is not None else "") or ""
        m = _HEADING_STYLE.match(style)
        if m or style.lower() == "title":
            level = int(m.group(1)) if m else 1
            out.append("#" * min(level, 6) + " " + text + "\n\n")
            title = title or text
        elif "list" in style.lower() or _numbered(block):
            out.append(("1. " if "number" in style.lower() else "- ") + text + "\n")
        else:
            if out and not out[-1].endswith("\n\n"):
                out.append("\n")
            out.append(text + "\n\n")
    text = "".join(out)
    if not text.strip():
        raise PagedError("empty_after_extraction", "the Word file holds no text")
    return PagedText(text, (), None, title)


def pptx_to_paged_text(data: bytes) -> PagedText:
    """Pure core: a PPTX's bytes to Markdown, one section (and one page) per slide."""
    _check_zip(data, "pptx")
    try:
        import pptx
    except ImportError as e:  # pragma: no cover
        raise ImportError("PPTX input needs python-pptx: pip install python-pptx==1.0.2") from e
    try:
        deck = pptx.Presentation(io.BytesIO(data))
    except Exception as e:
        raise PagedError("corrupt_pptx", f"python-pptx cannot open it: {e!r}") from None
    out: list[str] = []
    starts: list[int] = []
    length = 0
    first_title = None
    for n, slide in enumerate(deck.slides, start=1):
        starts.append(length)
        title_shape = slide.shapes.title
        heading = " ".join(normalise(title_shape.text).split()) if title_shape is not None else ""
        first_title = first_title or heading or None
        parts = [f"# {heading or f'Slide {n}'}\n\n"]
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            if shape.has_text_frame:
                for para in shape.text_frame.paragraphs:
                    text = " ".join(normalise(para.text).split())
                    if text:
                        parts.append("  " * para.level + "- " + text + "\n")
                parts.append("\n")
            elif getattr(shape, "has_table", False) and shape.has_table:
                rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
                parts.append(table_markdown(rows))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            text = normalise(notes.text).strip() if notes is not None else ""
            if text:
                parts.append("Notes: " + "\n".join(" ".join(t.split()) for t in text.splitlines()))
                parts.append("\n\n")
        piece = "".join(parts)
        out.append(piece)
        length += len(piece)
    text = "".join(out)
    if not starts:
        raise PagedError("empty_after_extraction", "the presentation has no slides")
    title = (deck.core_properties.title or "").strip() or first_title
    return PagedText(text, tuple(starts), None, title)
