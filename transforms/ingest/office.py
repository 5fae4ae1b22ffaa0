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


_CODE_STYLES = ("source code", "html preformatted", "plain text", "code")


def _numbering(document) -> dict[tuple[str, str], tuple[str, str]]:
    """(numId, level) -> (number format, level text) from the file's numbering part: "bullet"
    or "decimal", "lowerLetter" ...; a bullet whose text is blank continues an item (pandoc
    writes a list item's second paragraph so)."""
    from docx.oxml.ns import qn

    try:
        root = document.part.numbering_part.element
    except (KeyError, NotImplementedError, AttributeError):
        return {}
    abstract = {}
    for a in root.findall(qn("w:abstractNum")):
        levels = {}
        for lvl in a.findall(qn("w:lvl")):
            fmt, text = lvl.find(qn("w:numFmt")), lvl.find(qn("w:lvlText"))
            levels[lvl.get(qn("w:ilvl"))] = (
                fmt.get(qn("w:val")) if fmt is not None else "bullet",
                text.get(qn("w:val")) if text is not None else "",
            )
        abstract[a.get(qn("w:abstractNumId"))] = levels
    out = {}
    for num in root.findall(qn("w:num")):
        ref = num.find(qn("w:abstractNumId"))
        levels = abstract.get(ref.get(qn("w:val")) if ref is not None else None, {})
        for level, kind in levels.items():
            out[(num.get(qn("w:numId")), level)] = kind
    return out


def _list_place(paragraph) -> tuple[str, str] | None:
    """(numId, level) of a paragraph with Word numbering (a list item whose style may not say
    so), else None."""
    ppr = paragraph._p.pPr
    if ppr is None or ppr.numPr is None:
        return None
    num = ppr.numPr
    num_id = str(num.numId.val) if num.numId is not None else "0"
    level = str(num.ilvl.val) if num.ilvl is not None else "0"
    return num_id, level


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
    numbering = _numbering(document)
    counters: dict[tuple[str, str], int] = {}
    code: list[str] = []  # the lines of the code block being read (a paragraph a line, or
    # one paragraph with line breaks)

    def block_start() -> None:
        """A blank line before a heading, table or paragraph that follows a list or a line."""
        if out and not out[-1].endswith("\n\n"):
            out.append("\n")

    def end_code() -> None:
        if code:
            block_start()
            out.append("```\n" + "\n".join(code) + "\n```\n\n")
            code.clear()

    for block in document.iter_inner_content():
        if isinstance(block, Table):
            end_code()
            block_start()
            rows = [[cell.text for cell in row.cells] for row in block.rows]
            out.append(table_markdown(rows))
            continue
        assert isinstance(block, Paragraph)
        style = (block.style.name if block.style is not None else "") or ""
        if style.lower() in _CODE_STYLES:
            code.extend(normalise(block.text).rstrip("\n").split("\n"))
            continue
        end_code()
        text = " ".join(normalise(block.text).split())
        if not text:
            continue
        m = _HEADING_STYLE.match(style)
        place = _list_place(block)
        if m or style.lower() == "title":
            level = int(m.group(1)) if m else 1
            block_start()
            out.append("#" * min(level, 6) + " " + text + "\n\n")
            title = title or text
        elif place is not None or "list" in style.lower():
            fmt, marker = numbering.get(place, ("bullet", "•")) if place else ("bullet", "•")
            depth = int(place[1]) if place else 0
            indent = "   " * depth
            if fmt == "bullet" and not marker.strip():  # a list item's later paragraph
                out.append(indent + "   " + text + "\n")
                continue
            if place is None and "number" in style.lower():
                fmt = "decimal"
            if fmt in ("bullet", "none"):
                out.append(indent + "- " + text + "\n")
                continue
            key = place or ("style", style)
            counters[key] = counters.get(key, 0) + 1
            for other in [k for k in counters if k[0] == key[0] and k[1] > key[1]]:
                del counters[other]  # a deeper list starts again under the next item
            out.append(f"{indent}{counters[key]}. {text}\n")
        else:
            block_start()
            out.append(text + "\n\n")
    end_code()
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
