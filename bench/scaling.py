"""How the job scales with workers, and what Beam costs over a plain loop of the same functions.

On the multi-process DirectRunner, with 1 and then 2 SDK worker processes:

* chunk stage: the whole job with --embedding_model=none (read, extract, boilerplate, chunk,
  context header, count, write, account) on a corpus of real files (Python's standard library
  .py and .txt/.rst files, and samples/), copied into 16 folders;
* embed stage: chunks from that corpus through EmbedChunks (RunInference with the default
  model) alone, one torch thread per worker (--torch_threads).

Each is timed once on a one-document input as well: that is the start-up, reported as a
share of the big run (it should stay under 10 %, or the corpus is too small to tell). Each
process's CPU seconds are sampled too: on a machine shared with other jobs the wall clock is
noisy, and the busiest process's CPU time shows how evenly the work split.

Then the overhead: the job (in-process DirectRunner, --boilerplate=off --context=none)
against a plain loop over the same pure functions on the same files: `extract_document`,
`DocumentChunker.chunk_document_counted`, `ChunkBudget.apply`, the row functions and one
`pyarrow.parquet.write_table` per table. That ratio is the one held to the target; the ratio
to a loop of extract + chunk alone (no counts, nothing written) is printed too.

    python -m bench.scaling                  # about 17 minutes on 2 cores
    python -m bench.scaling --docs 800 --embed_chunks 200 --parts chunk,overhead
    python -m bench.scaling --smoke          # a check that every part runs (about 25 s)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import io
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.chunk_corpus import run
from pipelines.options import config_from_options
from schemas.arrow import DOCUMENT_SCHEMA, chunk_row, chunk_schema, document_row
from schemas.records import Document, RawDocument
from transforms.budget import ChunkBudget
from transforms.chunking.routing import DocumentChunker
from transforms.ingest.extraction import ExtractError, extract_document
from transforms.ingest.html import html_to_markdown
from transforms.ingest.jsonl import document_id, parse_jsonl_line
from transforms.stage_base import Rejection

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STDLIB = os.path.dirname(os.__file__)
FOLDERS = 16
TARGETS = {"speed-up on 2 workers": 1.8, "Beam over the plain loop": 1.2}  # issue 26


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the corpus -----------------------------------------------------------------------------


def source_files() -> list[str]:
    """Real files in a fixed order: stdlib .py and .txt/.rst, with samples/ interleaved."""
    code = sorted(glob.glob(os.path.join(STDLIB, "**", "*.py"), recursive=True))
    prose = sorted(
        p
        for ext in ("txt", "rst")
        for p in glob.glob(os.path.join(STDLIB, "**", f"*.{ext}"), recursive=True)
    )
    samples = sorted(
        p for p in glob.glob(os.path.join(REPO, "samples", "*", "*")) if "/bad/" not in p
    )
    keep = [
        p
        for p in code + prose
        if "site-packages" not in p and 1_000 <= os.path.getsize(p) <= 200_000
    ]
    # Interleave so any prefix of the list has every kind in it.
    step = max(1, len(keep) // max(1, len(samples)))
    mixed: list[str] = []
    for i, path in enumerate(keep):
        mixed.append(path)
        if i % step == 0 and samples:
            mixed.append(samples[(i // step) % len(samples)])
    return mixed


def make_corpus(folder: str, n_docs: int) -> list[str]:
    """`n_docs` copies of real files (cycling if needed) spread over FOLDERS subfolders."""
    sources = source_files()
    paths = []
    for i in range(n_docs):
        src = sources[i % len(sources)]
        sub = os.path.join(folder, f"part{i % FOLDERS:02d}")
        os.makedirs(sub, exist_ok=True)
        dst = os.path.join(sub, f"{i:06d}-{os.path.basename(src)}")
        shutil.copyfile(src, dst)
        paths.append(dst)
    return paths


# --- timing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    seconds: float
    runner_cpu: float  # CPU seconds of this process (the runner, or the whole in-process job)
    worker_cpu: tuple[float, ...]  # CPU seconds of each SDK worker process, largest first


@dataclass(frozen=True)
class Timing:
    name: str
    usage: Usage
    startup: float  # seconds of the same run on one input
    items: int
    unit: str

    @property
    def seconds(self) -> float:
        return self.usage.seconds

    @property
    def cpu(self) -> float:
        return self.usage.runner_cpu + sum(self.usage.worker_cpu)

    @property
    def busiest(self) -> float:
        """CPU seconds of the busiest process: the wall time it needs even on free cores."""
        return max(self.usage.runner_cpu, *self.usage.worker_cpu)

    def line(self) -> str:
        text = (
            f"{self.name:<34} {self.seconds:6.2f} s {self.items / self.seconds:6.1f} {self.unit}/s"
        )
        if self.startup:
            steady = self.items / (self.seconds - self.startup)
            text += f" ({steady:.1f} without the {self.startup:.1f} s start-up, "
            text += f"{100 * self.startup / self.seconds:.0f} %)"
        workers = "+".join(f"{c:.0f}" for c in self.usage.worker_cpu)
        text += f"  CPU s: runner {self.usage.runner_cpu:.0f}"
        return text + (f", workers {workers}" if workers else "")


def _descends_from_me(pid: str) -> bool:
    for _ in range(4):  # worker <- /bin/sh -c <- this process
        with open(f"/proc/{pid}/stat") as f:
            pid = f.read().rsplit(")", 1)[1].split()[1]
        if pid == str(os.getpid()):
            return True
    return False


def _worker_cpu() -> dict[str, float]:
    """CPU seconds so far of each SDK worker process this process started (Linux /proc)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            if b"sdk_worker_main" not in cmdline or cmdline.startswith(b"/bin/sh"):
                continue
            if not _descends_from_me(pid):
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            found[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError):
            continue  # gone meanwhile
    return found


def measure(fn: Callable[[], object]) -> Usage:
    """Run fn (its stdout swallowed: the job prints a summary), sampling its workers' CPU."""
    seen: dict[str, float] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.25):
            for pid, cpu in _worker_cpu().items():
                seen[pid] = max(seen.get(pid, 0.0), cpu)

    sampler = threading.Thread(target=sample, daemon=True)
    cpu_before = time.process_time()
    started = time.perf_counter()
    sampler.start()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            fn()
    finally:
        done.set()
        sampler.join()
    seconds = time.perf_counter() - started
    runner = time.process_time() - cpu_before
    return Usage(seconds, runner, tuple(sorted(seen.values(), reverse=True)))


def compare(results: dict[str, float], stage: str, one: Timing, two: Timing) -> None:
    results[f"{stage} speed-up on 2 workers"] = one.seconds / two.seconds
    # On a machine shared with other jobs the wall clock says little; CPU seconds say how
    # well the work splits: the busiest process bounds the wall time on 2 free cores.
    results[f"{stage} speed-up ceiling from CPU s (not a measurement)"] = one.busiest / two.busiest


def _workers(n: int) -> list[str]:
    return ["--direct_running_mode=multi_processing", f"--direct_num_workers={n}"]


def runner_setups(smoke: bool) -> list[tuple[str, list[str]]]:
    """(name, runner flags) of each run of the chunk and embed stages: 1 and 2 workers of the
    multi-process DirectRunner, or, with --smoke, the in-process one alone (no worker start)."""
    if smoke:
        return [("in-process", ["--direct_running_mode=in_memory"])]
    return [(f"{n} worker(s)", _workers(n)) for n in (1, 2)]


def time_job(name: str, pattern: str, tiny: str | None, out: str, flags: list[str]) -> Timing:
    """The job on `pattern` with `flags`, and its start-up (the job on the one file `tiny`;
    None: not measured)."""

    def job(inputs: str, output: str) -> Callable[[], object]:
        return lambda: run(["--input", inputs, "--output", output, "--overwrite", *flags])

    startup = measure(job(tiny, os.path.join(out, "tiny"))).seconds if tiny else 0.0
    usage = measure(job(pattern, os.path.join(out, "big")))
    with open(os.path.join(out, "big", "cost_report.json")) as f:
        docs = json.load(f)["documents_in"]
    return Timing(name, usage, startup, docs, "docs")


# --- the embed stage alone ------------------------------------------------------------------


def chunks_for_embedding(paths: list[str], n_chunks: int) -> list:
    """The first `n_chunks` chunks of the corpus, as the chunker makes them (no header)."""
    options = PipelineOptions(["--input", "x", "--output", "x"])
    config = config_from_options(options)
    chunker = DocumentChunker(config.chunking)
    chunks: list = []
    for doc in documents(paths):
        chunks += chunker.chunk_document(doc)
        if len(chunks) >= n_chunks:
            break
    return chunks[:n_chunks]


def time_embedding(chunks: list, runner_flags: list[str]) -> Usage:
    # Imported here, not at the top: the job's HTML extraction child re-imports this module
    # (multiprocessing's spawn loads __main__), and torch would add seconds to its start.
    from transforms.embedding.embed import (
        EmbedChunks,
        SentenceTransformerHandler,
        read_model_info,
        resolve_model_path,
    )

    path = resolve_model_path("default")
    info = read_model_info(path)

    def embed(items: list) -> None:
        options = PipelineOptions(["--runner=DirectRunner", *runner_flags])
        with beam.Pipeline(options=options) as p:
            chunks = p | "Chunks" >> beam.Create(items)
            handler = SentenceTransformerHandler(path, info.dimension)
            embedded = (chunks | "Embed chunks" >> EmbedChunks(handler, "default")).chunks
            _ = embedded | "Count" >> beam.combiners.Count.Globally()

    return measure(lambda: embed(chunks))


# --- the plain loop -------------------------------------------------------------------------


def raw_documents(path: str) -> list[RawDocument]:
    """What ReadDocuments makes of a file: one RawDocument, or one per JSONL record."""
    with open(path, "rb") as f:
        data = f.read()
    if not path.endswith(".jsonl"):
        return [RawDocument(source=path, doc_id=document_id(path), data=data)]
    records = []
    for i, line in enumerate(data.decode("utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(parse_jsonl_line(path, i, line))
            except Rejection:  # a bad line: a reject in the job, left out here
                continue
    return records


def documents(paths: list[str]) -> Iterator[Document]:
    for path in paths:
        for raw in raw_documents(path):
            try:
                yield extract_document(raw, html_to_markdown)
            except ExtractError:
                continue


def time_plain_loop(paths: list[str], flags: list[str], out: str | None = None) -> Timing:
    """Seconds of extract_document + chunk_document over the files, in this one process.

    With `out`, also the rest of the job's work on them, still without Beam: the token counts
    of every document and chunk, taken as the job takes them (a document's from its chunking,
    a chunk's from its token_count where exact), and the chunk and document tables written to
    Parquet.
    """
    config = config_from_options(PipelineOptions(["--input", "x", "--output", "x", *flags]))
    cpu_before = time.process_time()
    started = time.perf_counter()
    chunker = DocumentChunker(config.chunking)
    # the pricing counts only, as before the budget held the model (its word pieces uncounted)
    unmodelled = dataclasses.replace(config.budget, model_tokenizer=None, model_max_tokens=None)
    budget = ChunkBudget(unmodelled, config.pricing_tokenizer)
    chunk_rows: list[dict] = []
    doc_rows: list[dict] = []
    for doc in documents(paths):
        chunks, _ = chunker.chunk_document_counted(doc)
        if out is not None:
            if config.pricing_tokenizer != config.budget.tokenizer:
                budget.pricing.count(doc.text)
            doc_rows.append(document_row(doc))
            chunk_rows += [chunk_row(budget.apply(chunk)) for chunk in chunks]
    if out is not None:
        os.makedirs(out, exist_ok=True)
        for name, rows, schema in (
            ("chunks", chunk_rows, chunk_schema(None)),
            ("documents", doc_rows, DOCUMENT_SCHEMA),
        ):
            table = pa.Table.from_pylist(rows, schema=schema)
            pq.write_table(table, os.path.join(out, f"{name}.parquet"), compression="zstd")
    usage = Usage(time.perf_counter() - started, time.process_time() - cpu_before, ())
    name = "plain loop: extract + chunk" if out is None else "plain loop: + counts and Parquet"
    return Timing(name, usage, 0.0, len(paths), "docs")


# --- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=None, help="documents in the corpus (8000)")
    parser.add_argument(
        "--embed_chunks", type=int, default=None, help="chunks for the embed stage (4000)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="check that every part runs: --docs 8 --embed_chunks 4 unless given, the "
        "in-process DirectRunner in place of 1 and 2 workers, no start-up runs; no figure "
        "means anything",
    )
    parser.add_argument(
        "--torch_threads",
        type=int,
        default=1,
        help="OMP_NUM_THREADS of each embed worker (default 1: one core per worker, as on a "
        "cluster with one SDK process per core; 0 leaves torch's default, all cores each)",
    )
    parser.add_argument("--parts", default="chunk,embed,overhead", help="what to measure")
    parser.add_argument("--keep", default=None, help="work folder to keep (default: temp)")
    args = parser.parse_args(argv)
    if args.docs is None:
        args.docs = 8 if args.smoke else 8000
    if args.embed_chunks is None:
        args.embed_chunks = 4 if args.smoke else 4000
    parts = set(args.parts.split(","))
    setups = runner_setups(args.smoke)
    logging.getLogger().setLevel(logging.ERROR)  # the workers' start-up warnings
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    work = args.keep or tempfile.mkdtemp(prefix="bench-scaling-")
    corpus = os.path.join(work, "corpus")
    shutil.rmtree(corpus, ignore_errors=True)
    paths = make_corpus(corpus, args.docs)
    pattern = os.path.join(corpus, "*", "*")
    tiny = None if args.smoke else paths[0]  # the start-up runs (--smoke: none)
    megabytes = sum(os.path.getsize(p) for p in paths) / 1e6
    print(
        f"corpus: {len(paths)} files, {megabytes:.1f} MB in {FOLDERS} folders; "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average before {os.getloadavg()[0]:.1f}"
    )
    results: dict[str, float] = {}

    if "chunk" in parts:
        flags = ["--embedding_model=none"]
        timings = []
        for i, (runner, runner_flags) in enumerate(setups):
            name = f"chunk stage, {runner}"
            _log(f"{name}...")
            out = os.path.join(work, f"chunk-{i + 1}")
            timings.append(time_job(name, pattern, tiny, out, [*flags, *runner_flags]))
            print(timings[-1].line(), flush=True)
        if len(timings) == 2:
            compare(results, "chunk", *timings)

    if "embed" in parts:
        chunks = chunks_for_embedding(paths, args.embed_chunks)
        if args.torch_threads:
            os.environ["OMP_NUM_THREADS"] = str(args.torch_threads)  # the workers inherit it
        timings = []
        for runner, runner_flags in setups:
            name = f"embed stage, {runner}"
            _log(f"{name}...")
            startup = time_embedding(chunks[:1], runner_flags).seconds if tiny else 0.0
            usage = time_embedding(chunks, runner_flags)
            timings.append(Timing(name, usage, startup, len(chunks), "chunks"))
            print(timings[-1].line(), flush=True)
        if len(timings) == 2:
            compare(results, "embed", *timings)

    if "overhead" in parts:
        flags = ["--embedding_model=none", "--boilerplate=off", "--context=none"]
        _log("overhead: plain loops...")
        loop = time_plain_loop(paths, flags)
        print(loop.line(), flush=True)
        whole = time_plain_loop(paths, flags, os.path.join(work, "loop"))
        print(whole.line(), flush=True)
        _log("overhead: the job on the in-process DirectRunner...")
        out = os.path.join(work, "overhead")
        name = "job, in-process DirectRunner"
        job = time_job(name, pattern, tiny, out, [*flags, "--runner=DirectRunner"])
        print(job.line(), flush=True)
        # The target: the job over a loop of the same functions (counts and Parquet included).
        results["Beam over the plain loop of the same functions"] = job.seconds / whole.seconds
        results["Beam over the plain loop of the same functions, start-up excluded"] = (
            job.seconds - job.startup
        ) / whole.seconds
        # CPU seconds depend less on what else the machine is running.
        results["Beam over the plain loop of the same functions, in CPU seconds"] = (
            job.cpu / whole.cpu
        )
        # For scale: what counting and writing the output add (no verdict).
        results["job over a loop of extract + chunk only (writes nothing)"] = (
            job.seconds / loop.seconds
        )

    print(f"load average after {os.getloadavg()[0]:.1f}")
    for name, value in results.items():
        target = next((t for key, t in TARGETS.items() if key in name), None)
        verdict = ""
        if target is not None and "ceiling" not in name:
            better = value >= target if "speed-up" in name else value <= target
            verdict = f"  (target {'>=' if 'speed-up' in name else '<='} {target}: "
            verdict += "met)" if better else "missed)"
        print(f"{name}: {value:.2f}x{verdict}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
