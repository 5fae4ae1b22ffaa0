"""corpus-chunker: raw documents -> retrieval-ready chunks, embeddings and a cost report.

    corpus-chunker --input 'docs/**/*.md' --output out/ [--chunk_size 256 ...] [Beam flags]

`run(argv)` parses the flags, validates them into a JobConfig and runs `build_pipeline` on the
runner that --runner names.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, TestOptions
from apache_beam.runners.runner import PipelineResult

from pipelines.options import ChunkCorpusOptions, JobConfig, config_from_options
from schemas.records import Chunk
from transforms import accounting
from transforms.accounting import Account
from transforms.boilerplate import RemoveBoilerplate
from transforms.budget import BudgetConfig, CountChunkTokens
from transforms.chunking.routing import ChunkDocuments
from transforms.context import AddContext
from transforms.extract import ExtractText
from transforms.incremental import (
    PreviousRun,
    ReuseChunks,
    SplitUnchanged,
    load_previous_run,
    unchanged_event,
)
from transforms.read import ReadDocuments, check_patterns
from transforms.write import TABLES, WriteShards

REPORT_FILES = ("cost_report.json", "cost_report.md", "run_manifest.json")
UNSUPPORTED_RUNNERS = {
    "daskrunner": "Beam 2.77's DaskRunner drops elements emitted in finish_bundle (the Parquet "
    "sinks and RunInference batches), so it would report success with data missing",
}


def _split_parents(item: tuple) -> Any:
    doc, chunks = item
    children = [c for c in chunks if not c.is_parent]
    parents = [c for c in chunks if c.is_parent]
    yield beam.pvalue.TaggedOutput("parents", parents)
    yield doc.text, children


def _chunk_events(chunk: Chunk, max_seq_length: int | None) -> Any:
    truncated = bool(max_seq_length and (chunk.model_tokens or 0) > max_seq_length)
    yield accounting.chunk_event(chunk, truncated, chunk.embed_seconds)
    llm = accounting.llm_event(chunk)
    if llm is not None:
        yield llm


def previous_run(config: JobConfig) -> PreviousRun | None:
    """The run to reuse chunks from, or None when there is none or its config differs."""
    if not config.previous_output or config.estimate:
        return None
    previous = load_previous_run(config.previous_output)
    if previous.fingerprint != config.fingerprint:
        logging.warning(
            "--previous_output %s was made with config %s, this run is %s: rebuilding everything",
            previous.output,
            previous.fingerprint,
            config.fingerprint,
        )
        return None
    return previous


def build_pipeline(
    p: beam.Pipeline, config: JobConfig, skip_folders: Sequence[str] = ()
) -> dict[str, beam.PCollection]:
    """Wire every stage; returns the main PCollections (for tests and callers).

    `skip_folders`: folders under the inputs whose files are not read (earlier runs' output).
    """
    read = p | "Read documents" >> ReadDocuments(
        config.inputs,
        config.max_file_bytes,
        config.estimate_sample,
        # an output folder inside an input folder is never read back as input
        exclude=[config.output, config.previous_output or "", *skip_folders],
    )
    extracted = read.documents | "Extract text" >> ExtractText(config.extract_timeout_s)
    # Boilerplate removal, chunking, context, counting and embedding fuse into one stage:
    # its documents are spread evenly over the workers first (in RemoveBoilerplate, after the
    # line counts have been taken). Without this a JSONL file's records all stay on the worker
    # that read the file, and a runner that splits a materialised collection by its encoded
    # blocks (Beam's multi-process DirectRunner, at the boilerplate side input) gave one of two
    # workers a quarter more work than the other.
    if config.boilerplate.enabled:
        documents = extracted.documents | "Remove boilerplate" >> RemoveBoilerplate(
            config.boilerplate, spread=True
        )
    else:
        documents = extracted.documents | "Spread documents" >> beam.Reshuffle()
    previous = previous_run(config)
    if previous is not None:
        rejected_ids = (
            (read.rejects, extracted.rejects)
            | "Rejected so far" >> beam.Flatten()
            | "Their ids" >> beam.FlatMap(lambda r: [r.doc_id] if r.doc_id else [])
        )
        routed = documents | "Find unchanged documents" >> SplitUnchanged(previous, rejected_ids)
        documents = routed.changed
    chunked = documents | "Chunk documents" >> ChunkDocuments(
        config.chunking, config.pricing_tokenizer
    )

    split = chunked.chunked | "Set parents aside" >> beam.FlatMap(_split_parents).with_outputs(
        "parents", main="children"
    )
    with_context = split.children | "Add context" >> AddContext(config.context)
    parents = split.parents | "Flatten parents" >> beam.FlatMap(lambda chunks: chunks)
    counted = with_context | "Count chunk tokens" >> CountChunkTokens(
        BudgetConfig(
            pricing_tokenizer=config.pricing_tokenizer,
            model_tokenizer=config.embedding.model if config.embedding.path else None,
            model_max_tokens=config.embedding.max_seq_length,
            chunk_tokenizer=config.chunking.tokenizer,
        )
    )

    reject_parts = [read.rejects, extracted.rejects, chunked.rejects]
    if config.embeds:
        # Imported here: RunInference brings Beam's ML stack and torch (about 2 s), which a
        # worker should load only when the job embeds.
        from transforms.embed import EmbedChunks, SentenceTransformerHandler

        handler = SentenceTransformerHandler(
            config.embedding.model,
            config.embedding.dimension,
            device=config.embedding.device,
            encode_batch_size=config.embedding.batch_size,
            max_batch_size=config.embedding.max_batch,
            backend=config.embedding.backend,
            onnx_sha256=config.embedding.onnx_sha256,
            cache_dir=config.embedding.cache_dir,
        )
        embedded, embed_rejects, duplicate_events = counted | "Embed chunks" >> EmbedChunks(
            handler, config.embedding.model_id or config.embedding.model
        )
        reject_parts.append(embed_rejects)
        embed_events = [duplicate_events]
    else:
        embedded = counted
        embed_events = []
    # Parents are written for small-to-big retrieval, never embedded or priced. A Flatten is
    # a stage boundary on some runners (every chunk materialised once more, a seventh of the
    # chunk stage's time on the multi-process DirectRunner), so only when there are parents.
    if config.chunking.parent_chunk_size is not None:
        final_chunks = (embedded, parents) | "Chunks and parents" >> beam.Flatten()
    else:
        final_chunks = embedded
    rejects = tuple(reject_parts) | "All rejects" >> beam.Flatten()
    out_documents = chunked.chunked | "Chunked documents" >> beam.Map(lambda item: item[0])
    tables = {"chunks": final_chunks, "rejects": rejects}
    extra_events = []
    if previous is not None:
        reused = routed.unchanged | "Reuse chunks" >> ReuseChunks(previous)
        tables["reused_chunk_rows"] = reused
        out_documents = (out_documents, routed.unchanged) | "All documents" >> beam.Flatten()
        extra_events = [
            routed.unchanged | "Unchanged events" >> beam.Map(unchanged_event),
            reused
            | "Reused events"
            >> beam.Map(lambda row: (accounting.REUSED, row["embed_tokens"] or 0)),
            routed.removed | "Removed events" >> beam.Map(lambda _: (accounting.REMOVED,)),
        ]
    tables["documents"] = out_documents

    written = tables | "Write tables" >> WriteShards(
        config.output, config.embedding.dimension, write_chunks=not config.estimate
    )

    events = (
        read.documents | "Input events" >> beam.Map(lambda _: (accounting.INPUT,)),
        read.rejects | "Unread input events" >> beam.Map(lambda _: (accounting.INPUT,)),
        read.skipped | "Skip events" >> beam.Map(lambda why: (accounting.SKIPPED, why)),
        chunked.doc_events,
        # One event per chunk: folded where the chunks are made (the combine is lifted into
        # that stage), so only their totals join the other events.
        final_chunks
        | "Chunk events" >> beam.FlatMap(_chunk_events, config.embedding.max_seq_length)
        | "Chunk totals" >> beam.CombineGlobally(accounting.CostReportFn()),
        rejects | "Reject events" >> beam.Map(accounting.reject_event),
        *embed_events,
        *extra_events,
    ) | "All events" >> beam.Flatten()
    manifest = {
        "config": config.settings,
        "config_fingerprint": config.fingerprint,
        "inputs": list(config.inputs),
        "earlier_runs_not_read": list(skip_folders),  # run folders the inputs matched
        "output": config.output,
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "mode": "estimate" if config.estimate else "run",
        "previous_output": previous.output if previous is not None else None,
    }
    manifest_path = (events, written) | "Account" >> Account(
        config.output, config.pricing, manifest["mode"], manifest
    )
    return {
        "chunks": final_chunks,
        "documents": out_documents,
        "rejects": rejects,
        "manifest": manifest_path,
    }


def prepare_output(output: str, overwrite: bool) -> None:
    """Refuse to mix two runs' shards in one folder unless --overwrite is given."""
    existing = []
    for name in TABLES:
        existing += [
            m.path
            for m in FileSystems.match([FileSystems.join(output, name, "*")])[0].metadata_list
        ]
    for name in REPORT_FILES:
        path = FileSystems.join(output, name)
        if FileSystems.exists(path):
            existing.append(path)
    if existing and not overwrite:
        raise ValueError(
            f"--output {output} already holds a run ({len(existing)} files); "
            "pass --overwrite to replace it or choose another folder"
        )
    if existing:
        FileSystems.delete(existing)


def check_runner(options: PipelineOptions) -> None:
    runner = (options.view_as(StandardOptions).runner or "").lower()
    for name, why in UNSUPPORTED_RUNNERS.items():
        if runner.endswith(name) or runner == name.removesuffix("runner"):
            raise ValueError(
                f"--runner={runner} is refused: {why}. Use DirectRunner, "
                "PortableRunner (Flink/Spark job server) or DataflowRunner."
            )


def summary(report: dict, output: str, seconds: float) -> str:
    return (
        f"corpus-chunker {report['mode']}: {report['documents_in']} documents in -> "
        f"{report['documents_chunked']} chunked, {report['documents_rejected']} rejected, "
        f"{report['documents_unchanged']} unchanged\n"
        f"  chunks: {report['chunks']} ({report['chunks_rejected']} rejected, "
        f"{report['chunks_truncated']} truncated by the model)\n"
        f"  tokens: {report['document_tokens']:,} in documents, {report['embedded_tokens']:,} "
        f"embedded (inflation {report['overlap_inflation']})\n"
        f"  cost: ${report['cost_usd']:.6f} at ${report['price_per_million_tokens']}/M tokens"
        + (
            f"; projected whole corpus ${report['projection']['cost_usd']:.4f}"
            if "projection" in report
            else ""
        )
        + f"\n  wall time: {seconds:.1f} s\n  output: {output}"
        + _skipped_lines(report.get("files_skipped", {}))
    )


def _skipped_lines(skipped: dict[str, int]) -> str:
    lines = []
    if skipped.get("hidden"):
        lines.append(
            f"  skipped {skipped['hidden']} hidden files that wildcards matched (.git/, "
            "dotfiles); name them in an --input pattern to read them"
        )
    if skipped.get("output_folder"):
        lines.append(
            f"  skipped {skipped['output_folder']} files of this job's output folders that "
            "the inputs matched"
        )
    return "".join("\n" + line for line in lines)


def run(argv: list[str] | None = None) -> PipelineResult:
    """Parse flags, build the pipeline, run it on --runner and wait for it."""
    options = PipelineOptions(argv)
    options.view_as(ChunkCorpusOptions)  # registers the project flags for --help
    check_runner(options)
    config = config_from_options(options)
    # A dry run (DataflowRunner --dry_run) only translates the job: it must not touch the data
    # paths, which for gs:// would need credentials (without them GCS retries for minutes).
    dry_run = bool(options.view_as(TestOptions).dry_run)
    earlier_runs: list[str] = []
    if not dry_run:
        earlier_runs = check_patterns(config.inputs)
        prepare_output(config.output, config.overwrite)
    started = time.time()
    pipeline = beam.Pipeline(options=options)
    build_pipeline(pipeline, config, earlier_runs)
    result = pipeline.run()
    result.wait_until_finish()
    if dry_run:
        return result
    report_path = FileSystems.join(config.output, "cost_report.json")
    if FileSystems.exists(report_path):
        with FileSystems.open(report_path) as f:
            report = json.loads(f.read().decode("utf-8"))
        print(summary(report, config.output, time.time() - started))
    return result


def print_help() -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="corpus-chunker",
        description="Chunk, embed and cost a document corpus on Apache Beam. Beam's own flags "
        "(--runner, --direct_num_workers, --job_endpoint, --project, ...) also apply.",
    )
    ChunkCorpusOptions._add_argparse_args(parser)
    parser.print_help()


def main() -> None:
    logging.getLogger().setLevel(logging.WARNING)
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print_help()
        return
    try:
        run(sys.argv[1:])
    except ValueError as e:
        print(f"corpus-chunker: error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
