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


def _raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (1 0 obj is the catalog), with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def page_count_bomb(pages: int = 20_000) -> bytes:
    """A small PDF of `pages` pages: one empty page object that the page tree lists again and
    again (20,000 pages in about 160 KB)."""
    kids = b" ".join(b"3 0 R" for _ in range(pages))
    return _raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
        ]
    )


def deep_pdf(depth: int = 100_000) -> bytes:
    """A PDF whose page dictionary holds an array nested `depth` deep."""
    return _raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Deep "
            + b"[" * depth
            + b"]" * depth
            + b" >>",
        ]
    )


def stream_bomb(megabytes: int = 300) -> bytes:
    """A one-page PDF whose content stream inflates from about 300 KB to `megabytes` MB of
    spaces around one line of text."""
    import zlib

    z = zlib.compressobj(9)
    body = z.compress(b"BT /F1 12 Tf 72 720 Td (A line of text in a bomb) Tj ET\n")
    chunk = b" " * (1 << 20)
    for _ in range(megabytes):
        body += z.compress(chunk)
    body += z.flush()
    return _raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(body) + body + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ]
    )


def two_column_pdf(table: bool = False) -> bytes:
    """A page with a title across the top and two columns of 12 lines each that fill their
    column: the left column's lines say "left line k", the right column's "right line k", at
    the same heights. With `table`, the page is a two-column table of short cells instead."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    width, height = A4
    c.setFont("Helvetica-Bold", 14)
    c.drawString(72, height - 60, "A title set across both columns of the page")
    c.setFont("Helvetica", 10)
    for k in range(12):
        y = height - 100 - 13 * k
        if table:
            c.drawString(60, y, f"key {'abcdefghijkl'[k]}")
            c.drawString(width / 2 + 20, y, f"value {'abcdefghijkl'[k]}")
            continue
        c.drawString(60, y, f"left line {k} of the first column, which is prose")
        c.drawString(width / 2 + 20, y, f"right line {k} of the second column, prose too")
    c.showPage()
    c.save()
    return buf.getvalue()


def contents_and_index_pdf() -> bytes:
    """Page 1: a table of contents (dot leaders, page numbers); pages 2-4: body text, one
    section each (BODYPAGE<n>); page 5: a back-of-book index (terms, then page numbers)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    _, height = A4
    c.setFont("Helvetica-Bold", 16)
    c.drawString(72, height - 72, "Contents")
    c.setFont("Helvetica", 11)
    for k, name in enumerate(["Getting started", "Configuration", "Running the tool"]):
        y = height - 110 - 18 * k
        c.drawString(72, y, f"{k + 1} {name} " + "." * 40 + f" {k + 2}")
    for k, name in enumerate(["Options", "Files", "Environment", "Errors"]):
        y = height - 170 - 18 * k
        c.drawString(90, y, f"3.{k + 1} {name} " + "." * 40 + f" {4}")
    c.showPage()
    for n in range(2, 5):
        c.setFont("Helvetica-Bold", 16)
        c.drawString(72, height - 72, f"{n - 1} Section on page {n}")
        c.setFont("Helvetica", 11)
        for k in range(10):
            words = " ".join(["lorem", "ipsum", "dolor", "amet", "elit"][(k + n) % 5 :])
            c.drawString(72, height - 110 - 14 * k, f"Body {words} sentence BODYPAGE{n}.")
        c.showPage()
    c.setFont("Helvetica-Bold", 16)
    c.drawString(72, height - 72, "Index")
    c.setFont("Helvetica", 11)
    terms = ["alpha option", "beta file", "configuration", "environment, 4", "errors",
             "files", "options", "running", "tool, starting", "zeta"]  # fmt: skip
    for k, term in enumerate(terms):
        c.drawString(72, height - 110 - 14 * k, f"{term}, {2 + k % 3}, {3 + k % 2}")
    c.showPage()
    c.save()
    return buf.getvalue()


def words_pdf(pages: int = 7) -> bytes:
    """Page n holds a distinct marker word (`page_word(n)`, letters only) in every line, with
    paragraph breaks and a running footer: every chunk's first character has a known page."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    _, height = A4
    for n in range(1, pages + 1):
        word = page_word(n)
        c.setFont("Helvetica", 9)
        c.drawString(300, 40, f"Page {n}")
        c.setFont("Helvetica", 11)
        y = height - 72
        for k in range(40):
            if k % 9 == 8:
                y -= 10  # a paragraph break
            c.drawString(72, y, f"{word} sentence {k} carries {word} words to the {word} end")
            y -= 14
        c.showPage()
    c.save()
    return buf.getvalue()


def page_word(n: int) -> str:
    """The marker word of page n in words_pdf (letters only: no page number to confuse)."""
    return "pagemark" + "abcdefghijklmnopqrstuvwxyz"[n - 1] * 3


def long_pdf(pages: int) -> bytes:
    """`pages` pages of 40 lines of Helvetica each (as bench/pdf_memory.py makes them)."""
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf)
    for n in range(pages):
        c.setFont("Helvetica", 10)
        for k in range(40):
            c.drawString(60, 780 - 18 * k, f"Line {k} of page {n}: the quick brown fox jumps over")
        c.showPage()
    c.save()
    return buf.getvalue()


def numeric_table_pdf() -> bytes:
    """Page 1: a heading and a table of figures (a name and three numbers a row, the last
    column in no order), which ends every row with a number as a contents page does; pages
    2-4: body text (BODYPAGE<n>)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    _, height = A4
    c.setFont("Helvetica-Bold", 16)
    c.drawString(72, height - 72, "Measured compression")
    c.setFont("Helvetica", 11)
    rows = [("zstd", 2.887, 530, 1700), ("zlib", 2.743, 95, 400), ("brotli", 2.702, 395, 450),
            ("quicklz", 2.238, 540, 760), ("lzo1x", 2.106, 660, 845), ("lz4", 2.101, 740, 4500),
            ("snappy", 2.073, 550, 1750)]  # fmt: skip
    for k, (name, ratio, comp, decomp) in enumerate(rows):
        y = height - 110 - 16 * k
        c.drawString(72, y, name)
        c.drawString(200, y, f"TABLEROW {ratio}")
        c.drawString(320, y, f"{comp}")
        c.drawString(420, y, f"{decomp}")
    c.showPage()
    for n in range(2, 5):
        c.setFont("Helvetica", 11)
        for k in range(10):
            line = f"Body {'wxyz'[n - 1] * 3} text, line {'abcdefghij'[k]}, BODYPAGE{n}."
            c.drawString(72, height - 110 - 14 * k, line)
        c.showPage()
    c.save()
    return buf.getvalue()


def code_pdf() -> bytes:
    """A page of prose in Times with a Courier example of three lines (one indented), a
    Courier name that a prose line ends with, and a one-line Courier term over its indented
    description."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    _, height = A4
    y = height - 100

    def line(font: str, x: float, text: str, step: float = 14) -> None:
        nonlocal y
        c.setFont(font, 10)
        c.drawString(x, y, text)
        y -= step

    line("Times-Roman", 72, "The function below adds two numbers and returns their sum to the", 24)
    line("Courier", 72, "def add(a, b):")
    line("Courier", 96, "return a + b")
    line("Courier", 72, "print(add(1, 2))", 24)
    c.setFont("Times-Roman", 10)
    c.drawString(72, y, "Call it as often as needed; the name of the helper is")
    c.setFont("Courier", 10)
    c.drawString(310, y, "add_numbers")
    y -= 24
    line("Courier", 72, "badarg", 14)
    line("Times-Roman", 96, "If an argument is of the wrong type.", 24)
    line("Times-Roman", 72, "That is all there is to say about adding numbers in this manual.")
    c.showPage()
    c.save()
    return buf.getvalue()


def courier_pdf() -> bytes:
    """A page of prose typeset in Courier throughout, as a text file printed to PDF is."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    _, height = A4
    c.setFont("Courier", 10)
    y = height - 100
    for paragraph in range(3):
        for k in range(4):
            c.drawString(72, y, f"Line {k} of paragraph {paragraph} of a memo typed in Courier.")
            y -= 12
        y -= 12
    c.showPage()
    c.save()
    return buf.getvalue()
