"""Embedding throughput and quality: `model.encode` called directly vs the pipeline's
EmbedChunks stage on each backend (torch float32, ONNX float32, ONNX int8).

All embed the same real chunks (the samples corpus, then Python's standard library sources and
its pydoc topics, chunked with the job's defaults and given path headers). The report is a
Markdown table of word pieces/s and cl100k tokens/s, set against the FLOP bound of this
machine (a large fp32 matmul measured with torch), then the quality of each backend against
torch float32: the cosine of its vectors on every chunk, and Recall@10 and MRR@10 of the
questions in bench/data/questions.jsonl, whose answer passages are found by exact text.

    python -m bench.embedding --chunks 3000 --repeats 3
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import glob
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not __package__ and REPO not in sys.path:
    # Run as a file (`python bench/embedding.py`, as `make bench` does): the pipeline imports
    # this module as `bench.embedding` (see run_pipeline), which needs the repo on sys.path.
    sys.path.insert(0, REPO)
STDLIB = os.path.dirname(os.__file__)
CHUNK_SIZE = 192
HEADER_TOKENS = 32
MODEL_NAME = "default"
QUESTIONS = os.path.join(REPO, "bench", "data", "questions.jsonl")
BACKEND_LABELS = {"torch": "torch fp32", "onnx": "ONNX fp32", "onnx-int8": "ONNX int8"}
# Vectors the pipeline runs give back, by backend and chunk id (FnApiRunner and DirectRunner
# run the stage in this process).
PIPELINE_VECTORS: dict[str, dict[str, tuple]] = {}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the chunks -----------------------------------------------------------------------------


def _raw_documents() -> Iterator:
    """Samples corpus first, then stdlib modules and pydoc topics, alternating (code and prose)."""
    from schemas.records import RawDocument
    from transforms.ingest.jsonl import document_id, parse_jsonl_line
    from transforms.stage_base import Rejection

    samples = sorted(glob.glob(os.path.join(REPO, "samples", "**", "*"), recursive=True))
    for path in samples:
        if not os.path.isfile(path) or f"{os.sep}bad{os.sep}" in path:
            continue
        if path.endswith(".jsonl"):
            with open(path, encoding="utf-8") as f:
                for line_no, line in enumerate(f, 1):
                    try:
                        yield parse_jsonl_line(path, line_no, line)
                    except Rejection:  # a bad line: a reject in the job, left out here
                        continue
            continue
        with open(path, "rb") as f:
            yield RawDocument(source=path, doc_id=document_id(path), data=f.read())

    from pydoc_data.topics import topics

    modules = sorted(glob.glob(os.path.join(STDLIB, "*.py")))
    topic_path = os.path.join(STDLIB, "pydoc_data", "topics.py")
    names = sorted(topics)
    for i in range(max(len(modules), len(names))):
        if i < len(modules):
            with open(modules[i], "rb") as f:
                yield RawDocument(source=modules[i], doc_id=document_id(modules[i]), data=f.read())
        if i < len(names):
            source = f"{topic_path}#{names[i]}"
            yield RawDocument(
                source=source,
                doc_id=document_id(source),
                text=topics[names[i]],
                title=names[i],
                hint_type="text",
            )


def collect_chunks(n: int, model_path: str) -> list:
    """The first `n` chunks of the real corpus, with path headers and token counts set."""
    from transforms.budget import ChunkBudget
    from transforms.chunking.routing import ChunkingConfig, DocumentChunker
    from transforms.context import HeaderFitter, path_header
    from transforms.ingest.extraction import ExtractError, extract_document
    from transforms.ingest.html import html_to_markdown
    from transforms.token_budget import TokenBudget, header_reserve

    budget = TokenBudget(
        chunk_size=CHUNK_SIZE,
        chunk_overlap=32,
        header_reserve=header_reserve("path", HEADER_TOKENS, HEADER_TOKENS),
        model_tokenizer=model_path,
        model_max_tokens=256,
    )
    chunker = DocumentChunker(ChunkingConfig(budget=budget, config_fingerprint="bench"))
    fitter = HeaderFitter.for_budget(budget)
    counter = ChunkBudget(budget, "cl100k_base")
    chunks = []
    for raw in _raw_documents():
        try:
            doc = extract_document(raw, html_to_markdown)
        except ExtractError:
            continue
        for chunk in chunker.chunk_document(doc):
            fitted = fitter.fit(path_header(chunk), chunk.text, chunk.token_count, HEADER_TOKENS)
            chunk = dataclasses.replace(
                chunk,
                context=fitted.context,
                context_source="path",
                model_tokens=fitted.model_tokens,
            )
            chunks.append(counter.apply(chunk))
        if len(chunks) >= n:
            break
    return chunks[:n]


# --- measurements ---------------------------------------------------------------------------


def matmul_gflops(n: int = 2048, repeats: int = 5) -> list[float]:
    """fp32 GFLOP/s of `repeats` n x n matmuls on torch's default threads."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm up the kernels and the thread pool
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        a @ b
        rates.append(2 * n**3 / (time.perf_counter() - started) / 1e9)
    return rates


def timed(run) -> tuple[float, float]:
    """(wall, CPU) seconds of `run()`; CPU counts every thread of this process."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def padding_efficiency(texts: list[str], pieces: list[int], batch_size: int) -> float:
    """Real / padded word pieces when `encode` sorts one call by characters, as it does."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    padded = 0
    for start in range(0, len(order), batch_size):
        batch = [pieces[i] for i in order[start : start + batch_size]]
        padded += max(batch) * len(batch)
    return sum(pieces) / padded


def padding_efficiency_sorted(pieces: list[int], batch_size: int) -> float:
    """Real / padded word pieces when the whole set is cut in word-piece order."""
    return pipeline_padding_efficiency(pieces, len(pieces), batch_size)


def pipeline_padding_efficiency(pieces: list[int], beam_batch: int, batch_size: int) -> float:
    """Real / padded word pieces when each Beam batch (arrival order) is cut as the handler does."""
    from transforms.embedding.embed import length_sorted_batches

    padded = 0
    for start in range(0, len(pieces), beam_batch):
        part = pieces[start : start + beam_batch]
        padded += sum(
            max(part[i] for i in run) * len(run) for run in length_sorted_batches(part, batch_size)
        )
    return sum(pieces) / padded


def encode_sorted(model, texts: list[str], pieces: list[int], batch_size: int) -> None:
    """`encode` one pass at a time over the whole set in word-piece order (the least padding)."""
    from transforms.embedding.embed import length_sorted_batches

    for run in length_sorted_batches(pieces, batch_size):
        model.encode(
            [texts[i] for i in run],
            batch_size=len(run),
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )


def encode_direct(model, texts: list[str], batch_size: int) -> None:
    model.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )


def _keep_vector(chunk, backend: str) -> None:
    # A module function (pickled by name), so the runner's copy writes to this module's dict.
    PIPELINE_VECTORS.setdefault(backend, {})[chunk.chunk_id] = chunk.embedding


def run_pipeline(
    chunks: list,
    model_path: str,
    dimension: int,
    runner: str,
    encode_batch_size: int,
    max_batch: int,
    backend: str = "torch",
    prepared=None,
) -> dict:
    """A whole Beam run of EmbedChunks (model load included); returns its metrics.

    `prepared`: the launcher's `embed_setup.prepare_model` (built or found before timing)."""
    import apache_beam as beam
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.options.pipeline_options import PipelineOptions

    from transforms.embedding.embed import EmbedChunks, SentenceTransformerHandler
    from transforms.embedding.embed_setup import prepare_model

    prepared = prepared or prepare_model(MODEL_NAME, model_path, backend, None)
    p = beam.Pipeline(options=PipelineOptions([f"--runner={runner}"]))
    handler = SentenceTransformerHandler(
        model_path,
        dimension,
        device="cpu",
        encode_batch_size=encode_batch_size,
        max_batch_size=max_batch,
        backend=backend,
        onnx_sha256=prepared.onnx_sha256,
    )
    embedded = (
        p | "Chunks" >> beam.Create(chunks) | "Embed" >> EmbedChunks(handler, prepared.model_id)
    ).chunks
    # By its importable name: run as __main__, the function would be pickled by value, with a
    # copy of the dict it writes to.
    from bench import embedding as importable

    _ = embedded | "Keep vectors" >> beam.Map(importable._keep_vector, backend)
    result = p.run()
    result.wait_until_finish()

    metrics = result.metrics().query(MetricsFilter())
    out: dict = {}
    for counter in metrics["counters"]:
        out[counter.key.metric.name] = counter.committed
    for dist in metrics["distributions"]:
        out[dist.key.metric.name] = dist.committed
    if out.get("chunks_embedded") != len(chunks):
        raise RuntimeError(f"the pipeline embedded {out.get('chunks_embedded')} of {len(chunks)}")
    return out


# --- quality --------------------------------------------------------------------------------


def _plain(text: str) -> str:
    """Text for exact-answer matching: whitespace runs collapsed, emphasis asterisks dropped."""
    return " ".join(text.replace("*", "").split())


def load_questions(path: str, chunks: list) -> tuple[list[str], list[set[int]], int]:
    """Questions whose answer text is in at least one chunk, their relevant chunk indexes, and
    how many questions of the file had none in this set of chunks."""
    plain = [_plain(c.text) for c in chunks]
    questions, relevant, missing = [], [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            q = json.loads(line)
            answer = _plain(q["answer"])
            found = {i for i, text in enumerate(plain) if answer in text}
            if not found:
                missing += 1
                continue
            questions.append(q["question"])
            relevant.append(found)
    return questions, relevant, missing


def retrieval_scores(
    query_vectors: np.ndarray, chunk_vectors: np.ndarray, relevant: list[set[int]], k: int = 10
) -> tuple[float, float]:
    """Recall@k (a relevant chunk in the top k) and MRR@k, by dot product of unit vectors."""
    if not relevant:
        return float("nan"), float("nan")
    scores = query_vectors @ chunk_vectors.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    hits, reciprocal = 0, 0.0
    for ranked, good in zip(top, relevant, strict=True):
        for rank, index in enumerate(ranked, 1):
            if int(index) in good:
                hits += 1
                reciprocal += 1.0 / rank
                break
    return hits / len(relevant), reciprocal / len(relevant)


def query_encoder(backend: str, model_path: str):
    """The backend's model, to embed the questions the way its chunks were embedded."""
    if backend == "torch":
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(model_path, device="cpu")
    from transforms.embedding.onnx_model import OnnxSentenceEncoder, ensure_onnx_model

    built = ensure_onnx_model(model_path, MODEL_NAME, backend)
    return OnnxSentenceEncoder(model_path, built.path, "cpu")


@dataclass
class Quality:
    backend: str
    cosine_mean: float
    cosine_min: float
    cosine_p01: float  # 1st percentile
    recall: float
    mrr: float


def quality(chunks: list, model_path: str, backends: list[str]) -> tuple[list[Quality], int, int]:
    """Each backend's pipeline vectors against torch float32's, and its retrieval scores."""
    from bench import embedding as importable

    ids = [c.chunk_id for c in chunks]
    kept = importable.PIPELINE_VECTORS
    vectors = {b: np.asarray([kept[b][i] for i in ids], dtype=np.float32) for b in backends}
    questions, relevant, missing = load_questions(QUESTIONS, chunks)
    out = []
    for backend in backends:
        cosine = (vectors[backend] * vectors["torch"]).sum(axis=1)
        queries = query_encoder(backend, model_path).encode(
            questions, batch_size=32, normalize_embeddings=True
        )
        recall, mrr = retrieval_scores(np.asarray(queries, np.float32), vectors[backend], relevant)
        out.append(
            Quality(
                backend,
                float(cosine.mean()),
                float(cosine.min()),
                float(np.percentile(cosine, 1)),
                recall,
                mrr,
            )
        )
    return out, len(questions), missing


# --- report ---------------------------------------------------------------------------------


@dataclass
class Row:
    path: str
    batch: str
    padding_kept: float  # real / padded word pieces of this way of batching
    seconds: list[float] = dataclasses.field(default_factory=list)
    cpu_seconds: list[float] = dataclasses.field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


@dataclass
class Bench:
    chunks: list
    texts: list[str]
    pieces: list[int]  # model word pieces a chunk, specials included, capped at max_seq_length
    cl100k: int
    params: int
    embedding_params: int
    gflops: list[float]  # fp32 matmul rates, measured before every round


def report(
    bench: Bench,
    rows: list[Row],
    pipeline_metrics: dict,
    args,
    qualities: tuple[list[Quality], int, int] | None = None,
) -> str:
    import torch

    pieces = sum(bench.pieces)
    n = len(bench.chunks)
    directs = [r for r in rows if r.path == "direct encode"]
    best_direct = min(directs, key=lambda r: r.median) if directs else None
    pipelines = [r for r in rows if r.path.startswith("pipeline")]
    torch_pipeline = next((r for r in pipelines if "torch" in r.path), None)
    # The speed column's reference: direct encode at its best batch size, else torch's pipeline.
    reference = best_direct or torch_pipeline
    reference_name = "best direct" if best_direct else "torch pipeline"
    best_peak, median_peak = max(bench.gflops), statistics.median(bench.gflops)
    dense = bench.params - bench.embedding_params
    bound = best_peak * 1e9 / (2 * bench.params)
    dense_bound = best_peak * 1e9 / (2 * dense)
    doc_types: dict[str, int] = {}
    for c in bench.chunks:
        doc_types[c.doc_type] = doc_types.get(c.doc_type, 0) + 1
    lines = [
        f"{datetime.date.today().isoformat()}; {os.cpu_count()} cores "
        f"({platform.machine()}), torch {torch.__version__} on {torch.get_num_threads()} threads; "
        f"median of {args.repeats} runs, interleaved.",
        "",
        f"{n} chunks ({', '.join(f'{k} {v}' for k, v in sorted(doc_types.items()))}): "
        f"{pieces:,} model word pieces (specials included), {bench.cl100k:,} cl100k tokens, "
        f"{pieces / n:.0f} word pieces a chunk.",
        "",
        "| path | forward pass | median s (min-max) | CPU s | chunks/s | word pieces/s "
        f"| cl100k tok/s | vs {reference_name} | padding kept | % of 2NT bound "
        "| % of dense bound |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        rate = pieces / r.median
        lines.append(
            f"| {r.path} | {r.batch} | {r.median:.1f} ({min(r.seconds):.1f}-{max(r.seconds):.1f}) "
            f"| {statistics.median(r.cpu_seconds):.1f} | {n / r.median:.1f} | {rate:,.0f} "
            f"| {bench.cl100k / r.median:,.0f} "
            f"| {reference.median / r.median:.2f} | {r.padding_kept:.2f} "
            f"| {100 * rate / bound:.0f}% | {100 * rate / dense_bound:.0f}% |"
        )
    lines += [
        "",
        f"- 2NT bound: {bench.params:,} parameters x 2 FLOP a word piece at the fp32 matmul peak "
        f"of {best_peak:.0f} GFLOP/s (best of {len(bench.gflops)} 2048x2048 torch matmuls, "
        f"median {median_peak:.0f}) = "
        f"{bound:,.0f} word pieces/s, {pieces / bound:.0f} s for this set.",
        f"- Dense bound: {bench.embedding_params:,} of those parameters are the embedding "
        f"tables, looked up and not multiplied; the other {dense:,} give {dense_bound:,.0f} "
        "word pieces/s. Attention scores and padded positions are extra work that neither bound "
        "counts.",
        "- CPU s: CPU time of the whole process, all threads (less disturbed than wall time by "
        "other jobs on the machine, but spinning threads count too).",
        "- Padding kept: real / padded word pieces. `encode` sorts one call by characters; the "
        "pipeline sorts each Beam batch by word pieces.",
    ]
    if torch_pipeline is not None and best_direct is not None:
        # Runs next to each other in time share the machine's other load: compare them in pairs.
        for kind, direct, piped in (
            ("wall", best_direct.seconds, torch_pipeline.seconds),
            ("CPU", best_direct.cpu_seconds, torch_pipeline.cpu_seconds),
        ):
            paired = [d / p for d, p in zip(direct, piped, strict=True)]
            lines.append(
                f"- Pipeline (torch) speed / best direct encode ({best_direct.batch}), run by "
                f"run, in {kind} time: median {statistics.median(paired):.2f} "
                f"({min(paired):.2f}-{max(paired):.2f})."
            )
    if torch_pipeline is not None:
        for row in pipelines:
            if row is torch_pipeline:
                continue
            for kind, base, other in (
                ("wall", torch_pipeline.seconds, row.seconds),
                ("CPU", torch_pipeline.cpu_seconds, row.cpu_seconds),
            ):
                paired = [b / o for b, o in zip(base, other, strict=True)]
                lines.append(
                    f"- {row.path} / torch pipeline, speed run by run in {kind} time: median "
                    f"{statistics.median(paired):.2f}x ({min(paired):.2f}-{max(paired):.2f})."
                )
    batch_size = pipeline_metrics.get("batch_size")
    load = pipeline_metrics.get("load_model_latency_milli_secs")
    if batch_size is not None and batch_size.count:
        lines.append(
            f"- Pipeline (last run): {batch_size.count} Beam batches of {batch_size.min} to "
            f"{batch_size.max} chunks (mean {batch_size.mean:.1f})"
            + (f"; model load {load.mean / 1000:.1f} s, included" if load and load.count else "")
            + f"; chunks_truncated {pipeline_metrics.get('chunks_truncated', 0)}."
        )
    if qualities:
        results, asked, missing = qualities
        lines += [
            "",
            f"Quality against torch float32, on the pipeline's vectors of these {n} chunks; "
            f"retrieval: {asked} questions of bench/data/questions.jsonl (answer text found in "
            f"the chunks; {missing} not found in this set), the chunks ranked by cosine to the "
            "question embedded by the same backend.",
            "",
            "| backend | cosine to torch fp32: mean | min | 1st percentile | Recall@10 | MRR@10 "
            "| Recall@10 vs fp32 | MRR@10 vs fp32 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        base = next(q for q in results if q.backend == "torch")
        for q in results:
            lines.append(
                f"| {BACKEND_LABELS[q.backend]} | {q.cosine_mean:.5f} | {q.cosine_min:.5f} "
                f"| {q.cosine_p01:.5f} | {q.recall:.3f} | {q.mrr:.3f} "
                f"| {q.recall - base.recall:+.3f} | {q.mrr - base.mrr:+.3f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=3000, help="Chunks to embed (3000).")
    parser.add_argument("--repeats", type=int, default=3, help="Runs of each measurement (3).")
    parser.add_argument(
        "--batch-sizes",
        default="16,32,64,128",
        help="encode batch sizes to try (16,32,64,128; empty: no direct encode).",
    )
    parser.add_argument("--runner", default="FnApiRunner", help="Beam runner (FnApiRunner).")
    parser.add_argument(
        "--encode-batch-size", type=int, default=32, help="The pipeline's forward pass (32)."
    )
    parser.add_argument("--max-batch", type=int, default=256, help="The pipeline's Beam batch.")
    parser.add_argument(
        "--skip-sorted", action="store_true", help="Skip encode in word-piece order."
    )
    parser.add_argument("--skip-pipeline", action="store_true", help="Skip the pipeline.")
    parser.add_argument(
        "--backends",
        default="torch,onnx,onnx-int8",
        help="Pipeline backends, torch first (torch,onnx,onnx-int8).",
    )
    args = parser.parse_args(argv)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from sentence_transformers import SentenceTransformer

    from transforms.embedding.embed import read_model_info, resolve_model_path

    info = read_model_info(resolve_model_path(MODEL_NAME))
    started = time.perf_counter()
    chunks = collect_chunks(args.chunks, info.path)
    _log(f"{len(chunks)} chunks in {time.perf_counter() - started:.1f} s")
    texts = [c.embed_text() for c in chunks]
    model = SentenceTransformer(info.path, device="cpu")
    ids = model.tokenizer(texts, add_special_tokens=True)["input_ids"]
    bench = Bench(
        chunks=chunks,
        texts=texts,
        pieces=[min(len(i), model.max_seq_length) for i in ids],
        cl100k=sum(c.embed_tokens for c in chunks),
        params=sum(p.numel() for p in model.parameters()),
        embedding_params=sum(
            p.numel() for name, p in model.named_parameters() if "embeddings" in name
        ),
        gflops=[],
    )
    model.encode(texts[:64], batch_size=32, show_progress_bar=False)  # warm-up

    ebs = args.encode_batch_size
    runs = [
        (
            Row("direct encode", str(bs), padding_efficiency(texts, bench.pieces, bs)),
            lambda bs=bs: encode_direct(model, texts, bs),
        )
        for bs in batch_sizes
    ]
    if not args.skip_sorted:
        runs.append(
            (
                Row(
                    "direct encode, word-piece order",
                    str(ebs),
                    padding_efficiency_sorted(bench.pieces, ebs),
                ),
                lambda: encode_sorted(model, texts, bench.pieces, ebs),
            )
        )
    pipeline_metrics: dict = {}
    backends = [] if args.skip_pipeline else args.backends.split(",")
    if backends and backends[0] != "torch":
        raise SystemExit("--backends must start with torch: the others are compared with it")
    from transforms.embedding.embed_setup import prepare_model

    for backend in backends:
        # Built (or found) before timing, as the job's launcher does.
        prepared = prepare_model(MODEL_NAME, info.path, backend, None)
        _log(f"{backend}: {prepared.model_id}")

        def pipeline(backend: str = backend, prepared=prepared) -> None:
            pipeline_metrics.update(
                run_pipeline(
                    chunks,
                    info.path,
                    info.dimension,
                    args.runner,
                    ebs,
                    args.max_batch,
                    backend,
                    prepared,
                )
            )

        runs.append(
            (
                Row(
                    f"pipeline: EmbedChunks, {BACKEND_LABELS[backend]}, {args.runner}",
                    f"{ebs}, Beam batches of {args.max_batch}",
                    pipeline_padding_efficiency(bench.pieces, args.max_batch, ebs),
                ),
                pipeline,
            )
        )
    for repeat in range(args.repeats):
        bench.gflops += matmul_gflops()
        _log(f"[{repeat}] matmul: best {max(bench.gflops):.0f} GFLOP/s so far")
        for row, run in runs:
            wall, cpu = timed(run)
            row.seconds.append(wall)
            row.cpu_seconds.append(cpu)
            _log(
                f"[{repeat}] {row.path} {row.batch}: {wall:.1f} s, CPU {cpu:.1f} s "
                f"(load average {os.getloadavg()[0]:.1f})"
            )
    qualities = quality(chunks, info.path, backends) if backends else None
    print(report(bench, [row for row, _ in runs], pipeline_metrics, args, qualities))


if __name__ == "__main__":
    main()
