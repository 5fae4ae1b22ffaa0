"""Small PDF, DOCX and PPTX files made at test time (reportlab, python-docx, python-pptx)."""

from __future__ import annotations

import io


def marked_pdf(pages: int = 5, encrypt: str | None = None, outline: bool = True) -> bytes:
    """A PDF whose page n says "marker page n" (MARKERPAGE<n>), with a running header and
    footer, a heading per page in a larger font, bookmarks and page labels from iii."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, encrypt=encrypt)
    c.setTitle("Marked test document")
    _, height = A4
    for n in range(1, pages + 1):
        c.setFont("Helvetica", 9)
        c.drawString(72, height - 40, "The Marked Manual running header")
        c.drawString(300, 40, str(n))
        c.setFont("Helvetica-Bold", 16)
        c.drawString(72, height - 100, f"{n} Chapter number {n}")
        c.bookmarkPage(f"p{n}")
        if outline:
            c.addOutlineEntry(f"{n} Chapter number {n}", f"p{n}", level=0)
        c.setFont("Helvetica", 11)
        y = height - 140
        for k in range(8 + n):
            c.drawString(72, y, f"Sentence {k} of the body text on this page, MARKERPAGE{n}, says")
            y -= 14
        c.drawString(72, y, "hello to the reader of an exam-")
        c.drawString(72, y - 14, "ple that the word example joins again.")
        c.showPage()
    if outline:
        c.addPageLabel(0, style="ROMAN_LOWER", start=3)  # iii, iv, ...
    c.save()
    return buf.getvalue()


def image_only_pdf(pages: int = 3) -> bytes:
    """A PDF of pages with drawings and no text (what a scan without OCR looks like)."""
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf)
    for _ in range(pages):
        c.rect(100, 100, 300, 400, fill=1)
        c.showPage()
    c.save()
    return buf.getvalue()


def sample_docx() -> bytes:
    import docx

    d = docx.Document()
    d.core_properties.title = "Sample Word file"
    d.add_heading("Installation", level=1)
    d.add_paragraph("Install the package before you start.")
    d.add_heading("Requirements", level=2)
    d.add_paragraph("Python 3.11", style="List Bullet")
    d.add_paragraph("A C compiler", style="List Bullet")
    t = d.add_table(rows=3, cols=2)
    for r, (a, b) in enumerate([("Name", "Value"), ("alpha", "1"), ("beta", "2")]):
        t.cell(r, 0).text, t.cell(r, 1).text = a, b
    d.add_heading("Usage", level=1)
    d.add_paragraph("Run the command with one argument.")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def sample_pptx() -> bytes:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    for n in range(1, 4):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide title {n}"
        slide.placeholders[1].text_frame.text = f"Point one of slide {n}"
        slide.notes_slide.notes_text_frame.text = f"Speaker notes of slide {n}"
    slide = deck.slides[0]
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(0, 1).text = "Key", "Value"
    table.cell(1, 0).text, table.cell(1, 1).text = "speed", "fast"
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()
