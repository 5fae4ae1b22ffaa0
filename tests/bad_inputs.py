"""A corpus of every kind of bad input the job must survive, generated into a folder.

`write_bad_corpus(root)` writes one file (or link, FIFO, socket) per kind under `root/in/`, and
a file outside it for the symlinks that lead out. `EXPECTED` says what the job must make of
each: chunked, rejected at a stage with a reason, or skipped with a reason.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import socket
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 2_000_000  # the limit the suite runs with: small enough to write past quickly


@dataclass(frozen=True)
class Outcome:
    what: str  # "chunked", "rejected" or "skipped"
    stage: str | None = None  # of a reject
    reason: str | None = None  # of a reject or a skip


CHUNKED = Outcome("chunked")


def _rejected(stage: str, reason: str) -> Outcome:
    return Outcome("rejected", stage, reason)


def _skipped(reason: str) -> Outcome:
    return Outcome("skipped", reason=reason)


def jsonl_stream_bomb(copies: int = 1000, block: int = 10_000_000) -> bytes:
    """A .jsonl.bz2 of one good record, then bz2 streams joined into one line of `copies` x
    `block` spaces (10 GB by default) in a few hundred KB."""
    first = bz2.compress(b'{"id": "first", "text": "A good record before the bomb."}\n')
    return first + bz2.compress(b" " * block) * copies


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00" + b"\xff\x00\x00" * 4 * 4)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _zip() -> bytes:
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("inside.txt", "a file inside a zip archive\n" * 20)
    return buffer.getvalue()


def _elf() -> bytes:
    # the 64-byte ELF header of an x86-64 executable, then zeroed program headers
    ident = b"\x7fELF\x02\x01\x01" + b"\x00" * 9
    return (
        ident
        + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0x401000, 64, 0, 0, 64, 56, 1, 0, 0, 0)
        + b"\x00" * 200
    )


def _deep_html(levels: int) -> str:
    text = "<p>A paragraph of real text, deep inside the page, that a reader came for.</p>"
    body = "<div>" * levels + text + "</div>" * levels
    return f"<html><head><title>Deep</title></head><body>{body}</body></html>"


PROSE = (
    "The corpus chunker reads every file it is given. It decodes the text, finds its type, "
    "and cuts it into chunks under a hard token limit. "
)

# name under in/ -> what the job must make of it
EXPECTED: dict[str, Outcome] = {
    "binary/image.png": _rejected("extract", "binary"),
    "binary/archive.zip": _rejected("extract", "binary"),
    "binary/program": _rejected("extract", "binary"),
    # PDF and Office files (tests/paged/make.py makes them)
    "paged/encrypted.pdf": _rejected("extract", "encrypted"),
    "paged/scanned.pdf": _rejected("extract", "no_text_layer"),
    "paged/truncated.pdf": _rejected("extract", "corrupt_pdf"),
    "paged/broken.docx": _rejected("extract", "corrupt_docx"),
    "paged/broken.pptx": _rejected("extract", "corrupt_pptx"),
    "paged/page_count_bomb.pdf": _rejected("extract", "no_text_layer"),  # 5,000 empty pages
    "paged/deep_nesting.pdf": _rejected("extract", "no_text_layer"),  # PDFium stops at its depth
    "paged/stream_bomb.pdf": CHUNKED,  # 100 KB inflating to 100 MB: under the memory cap
    "paged/marked.pdf.gz": CHUNKED,
    "paged/sample.docx": CHUNKED,
    "paged/slides.pptx": CHUNKED,
    "text/invalid_utf8.txt": _rejected("extract", "invalid_utf8"),
    "text/latin1.txt": _rejected("extract", "invalid_utf8"),
    "text/latin1_declared.html": CHUNKED,
    "text/utf16_bom.txt": CHUNKED,
    "text/utf32_bom.md": CHUNKED,
    "text/utf16_no_bom.txt": _rejected("extract", "invalid_encoding"),
    "text/empty.txt": _rejected("extract", "empty"),
    "text/whitespace.md": _rejected("extract", "empty"),
    "text/nul_inside.txt": CHUNKED,
    "text/nul_at_start.txt": _rejected("extract", "binary"),
    "text/cjk_arabic_emoji.txt": CHUNKED,
    "text/million_spaces.txt": CHUNKED,
    "big/single_line_50mb.txt": _rejected("read", "too_large"),
    "big/over_limit.md": _rejected("read", "too_large"),
    "big/bomb.txt.gz": _rejected("read", "too_large"),
    "big/bomb.txt.zst": _rejected("read", "too_large"),
    "big/bomb.txt.bz2": _rejected("read", "too_large"),
    "big/bomb.txt.xz": _rejected("read", "too_large"),
    "big/corrupt.txt.gz": _rejected("read", "corrupt_compressed"),
    "big/small.txt.gz": CHUNKED,
    # bz2 streams joined into one 10 GB line: the file stops at its decompressed budget (N5)
    "big/stream_bomb.jsonl.bz2#L1": CHUNKED,
    "big/stream_bomb.jsonl.bz2": _rejected("read", "too_large"),
    "html/deep_300.html": CHUNKED,
    "html/deep_100000.html": _rejected("extract", "too_deep"),
    "html/mostly_script.html": CHUNKED,
    "html/only_script.html": _rejected("extract", "empty_after_extraction"),
    "html/unclosed_tags.html": CHUNKED,
    # a run of `&nbsp;` that only extraction makes whitespace: cut after extraction (N1)
    "html/nbsp_run.html": CHUNKED,
    "markdown/unclosed_fence.md": CHUNKED,
    "markdown/table_10000_rows.md": CHUNKED,
    "markdown/long_heading_line.md": CHUNKED,
    "code/syntax_error.py": CHUNKED,
    "code/minified.js": CHUNKED,
    "odd names/a..b\nnewline.txt": CHUNKED,
    # terminal control sequences in a name and a text: chunked, and printed escaped (N12)
    "odd names/\x1b[31mred\x07.txt": CHUNKED,
    "special/pipe.txt": _skipped("fifo"),
    "special/socket.txt": _skipped("socket"),
    "links/dangling.txt": _skipped("dangling_symlink"),
    "links/loop_a.txt": _skipped("symlink_loop"),
    "links/loop_b.txt": _skipped("symlink_loop"),
    "links/outside.txt": _skipped("outside_input_root"),
    "links/inside.txt": CHUNKED,
    "records.jsonl#L1": CHUNKED,
    "records.jsonl#L2": _rejected("read", "invalid_json"),
    "records.jsonl#L3": _rejected("read", "duplicate_id"),
    "records.jsonl#L4": _rejected("read", "too_deep"),
    "records.jsonl#L5": _rejected("read", "invalid_json"),
    "records.jsonl#L6": _rejected("read", "record_not_object"),
    "records.jsonl#L7": _rejected("read", "missing_text"),
    "records.jsonl#L8": CHUNKED,
}


def _put_paged(put) -> None:
    from tests.paged import make

    put("paged/encrypted.pdf", make.marked_pdf(2, encrypt="secret"))
    put("paged/scanned.pdf", make.image_only_pdf(3))
    put("paged/truncated.pdf", make.marked_pdf(3)[:400])
    put("paged/broken.docx", make.sample_docx()[:500])
    put("paged/broken.pptx", make.sample_pptx()[:300])
    put("paged/page_count_bomb.pdf", make.page_count_bomb(5_000))
    put("paged/deep_nesting.pdf", make.deep_pdf(100_000))
    put("paged/stream_bomb.pdf", make.stream_bomb(100))
    put("paged/marked.pdf.gz", gzip.compress(make.marked_pdf(3)))
    put("paged/sample.docx", make.sample_docx())
    put("paged/slides.pptx", make.sample_pptx())


def write_bad_corpus(root: Path) -> Path:
    """Write every kind of EXPECTED under root/in (and a file outside it); returns root/in."""
    base = root / "in"
    folders = ("binary", "text", "big", "html", "markdown", "code", "odd names", "special", "paged")
    for folder in folders:
        (base / folder).mkdir(parents=True, exist_ok=True)
    (base / "links").mkdir(exist_ok=True)

    def put(name: str, data: bytes | str) -> None:
        path = base / name
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)

    put("binary/image.png", _png())
    put("binary/archive.zip", _zip())
    put("binary/program", _elf())
    _put_paged(put)
    put("text/invalid_utf8.txt", PROSE.encode() + b"\x80\x81 broken bytes \xc3\x28 here\n")
    put("text/latin1.txt", ("Café crème, déjà vu, naïve façade. " * 20).encode("latin-1"))
    put(
        "text/latin1_declared.html",
        (
            '<html><head><meta charset="iso-8859-1"><title>Café</title></head><body><article>'
            f"<h1>Crème brûlée</h1><p>{'Déjà vu, naïve façade, à la carte. ' * 20}</p>"
            "</article></body></html>"
        ).encode("latin-1"),
    )
    put("text/utf16_bom.txt", codecs.BOM_UTF16_LE + (PROSE * 3).encode("utf-16-le"))
    put("text/utf32_bom.md", codecs.BOM_UTF32_LE + f"# UTF-32\n\n{PROSE}".encode("utf-32-le"))
    put("text/utf16_no_bom.txt", (PROSE * 3).encode("utf-16-le"))
    put("text/empty.txt", b"")
    put("text/whitespace.md", " \n\t\n   \n\n")
    put("text/nul_inside.txt", PROSE * 40 + "\x00 a NUL byte past the first 4 KB\n" + PROSE)
    put("text/nul_at_start.txt", "start\x00" + PROSE)
    put(
        "text/cjk_arabic_emoji.txt",
        "中文文本的分块必须遵守令牌限制。" * 60
        + "\n\n"
        + "يجب أن يحترم تقسيم النص العربي حدود الرموز. " * 60
        + "\n\n"
        + "🙂👍🏽🇫🇷🧑‍🚀🎉" * 300
        + "\n",
    )
    put("text/million_spaces.txt", " " * 1_000_000 + "x\n")
    with open(base / "big/single_line_50mb.txt", "wb") as f:
        f.truncate(0)
        block = b"word " * 200_000  # 1 MB, no newline
        for _ in range(50):
            f.write(block)
    put(
        "big/over_limit.md", ("# Over\n\n" + PROSE * ((MAX_FILE_BYTES // len(PROSE)) + 10)).encode()
    )
    zeros = b"\x00" * 50_000_000  # 50 MB that compress to kilobytes
    put("big/bomb.txt.gz", gzip.compress(zeros, compresslevel=9))
    put("big/bomb.txt.bz2", bz2.compress(zeros, 9))
    put("big/bomb.txt.xz", lzma.compress(zeros))
    import zstandard

    put("big/bomb.txt.zst", zstandard.ZstdCompressor(level=19).compress(zeros))
    put("big/corrupt.txt.gz", gzip.compress((PROSE * 50).encode())[:-40] + b"\x00garbage")
    put("big/small.txt.gz", gzip.compress((PROSE * 5).encode()))
    put("big/stream_bomb.jsonl.bz2", jsonl_stream_bomb())
    put("html/deep_300.html", _deep_html(300))
    put("html/deep_100000.html", _deep_html(100_000))
    put(
        "html/mostly_script.html",
        "<html><head><style>"
        + "body { color: red; } " * 3000
        + "</style><script>"
        + "var x = 1; " * 5000
        + f"</script></head><body><article><h1>Small</h1><p>{PROSE}</p></article></body></html>",
    )
    put(
        "html/only_script.html",
        "<html><head><script>" + "var y = 2; " * 2000 + "</script></head><body></body></html>",
    )
    put(
        "html/unclosed_tags.html",
        f"<html><body><div><p>{PROSE}<p><b>bold <i>and italic {PROSE}<ul><li>one<li>two"
        f"<table><tr><td>cell<td>{PROSE}",
    )
    put(
        "html/nbsp_run.html",
        f"<html><body><article><h1>Spaces</h1><p>{PROSE}</p><pre>"
        + "&nbsp;" * 300_000
        + "x</pre></article></body></html>",
    )
    put(
        "markdown/unclosed_fence.md",
        f"# Fence\n\n{PROSE}\n\n```python\ndef f():\n    return 1\n" + "x = 1\n" * 300,
    )
    rows = "".join(f"| {i} | row {i} | {i * 7 % 13} |\n" for i in range(10_000))
    put("markdown/table_10000_rows.md", f"# Table\n\n| n | name | v |\n|---|---|---|\n{rows}")
    put("markdown/long_heading_line.md", "# a" + " " * 20_000 + "x\n\n" + PROSE)
    put(
        "code/syntax_error.py",
        "def ok():\n    return 1\n\n\ndef broken(:\n    x = (1, 2\n    return x +\n\n"
        "class K:\n    def m(self):\n        pass\n" + "".join(f"v{i} = {i}\n" for i in range(400)),
    )
    put(
        "code/minified.js",
        "".join(
            f"function f{i}(a,b){{return a*{i}+b-{i}}}var v{i}=f{i}({i},{i + 1});"
            for i in range(3000)
        ),
    )
    put("odd names/a..b\nnewline.txt", PROSE * 2)
    put("odd names/\x1b[31mred\x07.txt", "Title\x1b]0;pwned\x07 then \x1b[2J. " + PROSE * 2)
    os.mkfifo(base / "special/pipe.txt")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(base / "special/socket.txt"))
    sock.close()  # the socket file stays
    (root / "outside_secret.txt").write_text("a secret that lies outside the input folder\n")
    os.symlink("missing-target.txt", base / "links/dangling.txt")
    os.symlink("loop_b.txt", base / "links/loop_a.txt")
    os.symlink("loop_a.txt", base / "links/loop_b.txt")
    os.symlink("../../outside_secret.txt", base / "links/outside.txt")
    os.symlink("../text/cjk_arabic_emoji.txt", base / "links/inside.txt")
    deep_json = "[" * 100_000 + "]" * 100_000
    lines = [
        '{"id": "a", "text": "A good record with its own text."}',
        '{"id": "b", "text": "a broken line',
        '{"id": "a", "text": "the id of line 1 again"}',
        '{"id": "deep", "text": "x", "nested": ' + deep_json + "}",
        '{"id": "big", "text": "x", "n": ' + "9" * 5000 + "}",
        '["not", "an", "object"]',
        '{"id": "no text"}',
        '{"id": "c", "text": "Another good record after all the bad ones."}',
    ]
    put("records.jsonl", "\n".join(lines) + "\n")
    return base


def fake_run(folder: Path) -> list[Path]:
    """A folder that looks like a complete run: shards, reports and a manifest."""
    files = [folder / t / "part-00000-of-00001.parquet" for t in ("chunks", "documents", "rejects")]
    files += [folder / "cost_report.json", folder / "cost_report.md"]
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
    from runs.manifest import file_inventory

    # its file list is right (a manifest without one is refused before any shard is read)
    inventory = file_inventory(str(folder), [str(f) for f in files])
    manifest = folder / "run_manifest.json"
    from transforms.fingerprint import CONFIG_VERSION, FINGERPRINT_KEYS, config_fingerprint

    # a config of this version whose fingerprint is its own (no job's: nothing is reused)
    config = {key: None for key in FINGERPRINT_KEYS} | {"config_version": CONFIG_VERSION}
    fingerprint = config_fingerprint(config)
    manifest.write_text(
        json.dumps(
            {"run_id": "r0", "config": config, "config_fingerprint": fingerprint, "mode": "run",
             "files": inventory}
        )
    )  # fmt: skip
    return [*files, manifest]
