"""Peak memory of one PDF extraction against the size of its text: a generated PDF of N pages
(reportlab, 40 lines of text a page), extracted in a fresh process.

    python bench/pdf_memory.py [PAGES]
"""

from __future__ import annotations

import io
import resource
import subprocess
import sys
import tempfile
import time


def make(pages: int) -> bytes:
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


def child(path: str) -> None:
    from transforms.ingest.pdf import pdf_to_paged_text

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(path, "rb") as f:
        data = f.read()
    start, cpu = time.perf_counter(), time.process_time()
    text = pdf_to_paged_text(data).text
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    mb = 1024
    ratio = (peak - before) * 1024 / len(text.encode())
    print(
        f"pdf {len(data) / 1e6:.1f} MB, text {len(text.encode()) / 1e6:.1f} MB, "
        f"{seconds:.1f} s ({cpu:.1f} s CPU: what --extract_timeout_s counts); "
        f"peak RSS {peak / mb:.0f} MB (after imports {before / mb:.0f} MB, "
        f"growth {(peak - before) / mb:.0f} MB = {ratio:.1f}x "
        "the text)"
    )
    print(f"PDFium's own page and text loading of the same pages: {pdfium_seconds(data):.1f} s CPU")


def pdfium_seconds(data: bytes) -> float:
    """CPU seconds PDFium takes to load every page and its text: what no Python change cuts."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    start = time.process_time()
    for i in range(len(pdf)):
        page = pdf[i]
        textpage = page.get_textpage()
        textpage.get_text_range(0, textpage.count_chars(), force_this=True)
        textpage.close()
        page.close()
    seconds = time.process_time() - start
    pdf.close()
    return seconds


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        pages = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
        # A file of its own (two runs at once would share /tmp/pdf_memory_N.pdf), removed after.
        with tempfile.NamedTemporaryFile(prefix=f"pdf_memory_{pages}_", suffix=".pdf") as f:
            f.write(make(pages))
            f.flush()
            print(f"{pages} pages", flush=True)
            subprocess.run([sys.executable, __file__, "--child", f.name], check=True)
