"""A night of a nightly rebuild: a full build of real documents, then a rebuild with 1% of them
edited (small edits), 0.5% added and 0.5% removed, each loaded into a real PostgreSQL.

Prints wall time and embedded tokens of the build, the rebuild and both loads, against the
targets of issue 13: the rebuild embeds at most 2% of the full build's tokens and takes at most
15% of its wall time; the incremental load takes at most 10% of the full load's time.

Documents: the HTML, Markdown and Python files of the Debian documentation packages that
`make eval` unpacks (PostgreSQL's manual, SQLite's, Node.js's API, python3-requests), under
`--source` (default .cache/eval/unpacked, which `python -m eval.fetch` fills: 2,000 HTML
pages and 100 more), in a fixed shuffled order; 2,000 of them by default. The documents are
copied into a scratch corpus, so the cache is never changed.

    python -m bench.nightly                       # 2,000 documents
    python -m bench.nightly --docs 300 --json_out out/nightly.json
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SOURCE = os.path.join(REPO, ".cache", "eval", "unpacked")
EXTENSIONS = (".html", ".md", ".md.gz", ".py")
TARGETS = {
    "rebuild tokens embedded / build tokens embedded": 0.02,
    "rebuild time / build time": 0.15,
    "incremental load time / full load time": 0.10,
}
EDIT = "Edited for tonight's rebuild: one sentence more."


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def source_files(source: str) -> list[str]:
    """Every document file under `source`, in a fixed order that mixes the packages."""
    found = []
    for root, _, files in os.walk(source):
        found += [os.path.join(root, f) for f in files if f.endswith(EXTENSIONS)]
    return sorted(found, key=lambda p: hashlib.sha1(os.path.relpath(p, source).encode()).digest())


def copy_document(path: str, source: str, corpus: str) -> str:
    """Copy one document into the scratch corpus (a .md.gz unpacked to .md); its new path."""
    name = os.path.relpath(path, source).removesuffix(".gz")
    target = os.path.join(corpus, name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f, open(target, "wb") as out:
            shutil.copyfileobj(f, out)
    else:
        shutil.copyfile(path, target)
    return target


def edit_document(path: str) -> None:
    """A small edit: one sentence more in the first paragraph (HTML), or one line more in the
    middle (Markdown, Python)."""
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    if path.endswith(".html") and "</p>" in text:
        text = text.replace("</p>", f" {EDIT}</p>", 1)
    else:
        lines = text.split("\n")
        middle = len(lines) // 2
        line = f"# {EDIT}" if path.endswith(".py") else EDIT
        text = "\n".join([*lines[:middle], line, *lines[middle:]])
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text)


@dataclass
class Step:
    name: str
    seconds: float
    embedded_tokens: int | None = None  # of the chunks the run made (cached ones included)
    chunks: int | None = None
    detail: str = ""
    model_read_tokens: int | None = None  # what the model embedded: the bill


def build(corpus: str, output: str, previous: str | None, flags: Sequence[str]) -> Step:
    from pipelines.chunk_corpus import run

    argv = ["--input", os.path.join(corpus, "**"), "--output", output, *flags]
    if previous:
        argv += ["--previous_output", previous]
    started = time.perf_counter()
    run(argv)
    seconds = time.perf_counter() - started
    with open(os.path.join(output, "cost_report.json")) as f:
        report = json.load(f)
    chunks = report["chunks"] + report.get("chunks_reused", 0)
    detail = ", ".join(
        f"{k} {report[k]}"
        for k in (
            "documents_in",
            "documents_unchanged",
            "documents_removed",
            "chunks_reused",
            "model_read_tokens",
        )
        if k in report
    )
    return Step(
        "rebuild" if previous else "build",
        seconds,
        report["embedded_tokens"],
        chunks,
        detail,
        report.get("model_read_tokens"),
    )


def load(output: str, uri: str, name: str) -> Step:
    import io
    from contextlib import redirect_stdout

    from pipelines.load import run

    out = io.StringIO()
    started = time.perf_counter()
    with redirect_stdout(out):
        run([output, "--to", uri])
    seconds = time.perf_counter() - started
    line = out.getvalue().strip().splitlines()[-1]
    print(line, flush=True)
    return Step(name, seconds, detail=line.removeprefix("corpus-chunker load: "))


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2000, help="documents in the full build")
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="folder of the documents")
    parser.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--json_out", default=None)
    parser.add_argument(
        "--job_flag",
        action="append",
        default=[],
        help="a flag for both builds, e.g. --job_flag=--embedding_backend=torch",
    )
    args = parser.parse_args(argv)
    import pgserver

    files = source_files(args.source)
    added_n = max(1, round(args.docs * 0.005))
    if len(files) < args.docs + added_n:
        raise SystemExit(
            f"{args.source} has {len(files)} documents, fewer than {args.docs} + {added_n}"
        )
    work = args.work or tempfile.mkdtemp(prefix="corpus-chunker-nightly-")
    corpus = os.path.join(work, "corpus")
    shutil.rmtree(corpus, ignore_errors=True)
    docs = [copy_document(p, args.source, corpus) for p in files[: args.docs]]
    held_back = files[args.docs : args.docs + added_n]
    edited_n, removed_n = max(1, round(args.docs * 0.01)), max(1, round(args.docs * 0.005))
    _log(
        f"{len(docs)} documents in {corpus}; then {edited_n} edited, {added_n} added, "
        f"{removed_n} removed"
    )

    steps = [build(corpus, os.path.join(work, "night1"), None, args.job_flag)]
    # documents spread evenly over the corpus edited, others between them removed, and the
    # held-back ones added
    edited_at = {i * len(docs) // edited_n for i in range(edited_n)}
    removed_at: list[int] = []
    for i in range(removed_n):
        j = (2 * i + 1) * len(docs) // (2 * removed_n)
        while j in edited_at or j in removed_at:
            j += 1
        removed_at.append(j)
    edited = [docs[i] for i in sorted(edited_at)]
    removed = [docs[i] for i in removed_at]
    for path in edited:
        edit_document(path)
    for path in removed:
        os.remove(path)
    for path in held_back:
        copy_document(path, args.source, corpus)
    steps.append(
        build(corpus, os.path.join(work, "night2"), os.path.join(work, "night1"), args.job_flag)
    )

    server = pgserver.get_server(
        tempfile.mkdtemp(prefix="corpus-chunker-pg-"), cleanup_mode="delete"
    )
    try:
        uri = server.get_uri()
        steps.append(load(os.path.join(work, "night1"), uri, "load of the build"))
        steps.append(load(os.path.join(work, "night2"), uri, "load of the rebuild"))
    finally:
        server.cleanup()

    by = {s.name: s for s in steps}
    measured = {
        # "embeds": what the model read (a chunk re-made with a text it embedded before takes
        # the cached vector); the chunks' own tokens are shown beside it
        "rebuild tokens embedded / build tokens embedded": ratio(
            by["rebuild"].model_read_tokens, by["build"].model_read_tokens
        ),
        "rebuild chunk tokens / build chunk tokens (cached included)": ratio(
            by["rebuild"].embedded_tokens, by["build"].embedded_tokens
        ),
        "rebuild time / build time": ratio(by["rebuild"].seconds, by["build"].seconds),
        "incremental load time / full load time": ratio(
            by["load of the rebuild"].seconds, by["load of the build"].seconds
        ),
    }
    print("\n| step | wall s | embedded tokens | chunks | detail |\n|---|---|---|---|---|")
    for s in steps:
        tokens = "" if s.embedded_tokens is None else f"{s.embedded_tokens:,}"
        chunks = "" if s.chunks is None else f"{s.chunks:,}"
        print(f"| {s.name} | {s.seconds:.1f} | {tokens} | {chunks} | {s.detail} |")
    print("\n| ratio | measured | target | met |\n|---|---|---|---|")
    for name, value in measured.items():
        target = TARGETS.get(name)
        if target is None:
            print(f"| {name} | {'n/a' if value is None else f'{value:.3f}'} | | |")
            continue
        shown = "n/a" if value is None else f"{value:.3f}"
        met = "n/a" if value is None else ("yes" if value <= target else "no")
        print(f"| {name} | {shown} | <= {target} | {met} |")
    if args.json_out:
        result = {
            "docs": args.docs,
            "edited": edited_n,
            "added": added_n,
            "removed": removed_n,
            "job_flags": args.job_flag,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
            f"load average {os.getloadavg()[0]:.1f} at the end",
            "steps": [asdict(s) for s in steps],
            "ratios": measured,
        }
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=2)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
