"""corpus-chunker: raw documents -> retrieval-ready chunks, embeddings and a cost report.

    corpus-chunker --input 'docs/**/*.md' --output out/ [--chunk_size 256 ...] [Beam flags]

`run(argv)` parses the flags, validates them into a JobConfig and runs `build_pipeline` on the
runner that --runner names.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, TestOptions
from apache_beam.runners.runner import PipelineResult

from pipelines.options import ChunkCorpusOptions, JobConfig, config_from_options
from schemas.columns import CHUNKS, DOCUMENTS, REJECTS, TABLES
from transforms.accounting import Account, AccountInputs, run_manifest
from transforms.boilerplate import RemoveBoilerplate
from transforms.budget import CountChunkTokens
from transforms.chunking.routing import ChunkDocuments
from transforms.context import AddContext
from transforms.embed_stage import Embed
from transforms.extract import ExtractText
from transforms.incremental import PreviousRun, ReuseUnchanged, previous_run
from transforms.read import ReadDocuments, check_patterns
from transforms.write import REUSED_CHUNK_ROWS, WriteShards

REPORT_FILES = ("cost_report.json", "cost_report.md", "run_manifest.json")
UNSUPPORTED_RUNNERS = {
    "daskrunner": "Beam 2.77's DaskRunner drops elements emitted in finish_bundle (the Parquet "
    "sinks and RunInference batches), so it would report success with data missing",
}


class JobOutputs(NamedTuple):
    chunks: beam.PCollection  # Chunk: the chunks this run made (embedded) and their parents
    documents: beam.PCollection  # Document: every document with chunks, reused ones included
    rejects: beam.PCollection  # Reject
    manifest: beam.PCollection  # str: the path of run_manifest.json, written last


def merge(label: str, *parts: beam.PCollection | None) -> beam.PCollection:
    """One PCollection of the parts that exist; a Flatten only where there are several (it is a
    stage boundary on some runners: every element materialised once more)."""
    present = [part for part in parts if part is not None]
    return present[0] if len(present) == 1 else tuple(present) | label >> beam.Flatten()


def _account(
    config: JobConfig, previous: PreviousRun | None, skip_folders: Sequence[str]
) -> Account:
    manifest = run_manifest(
        config.settings,
        config.inputs,
        config.output,
        config.estimate,
        previous.output if previous is not None else None,
        skip_folders,
    )
    return Account(config.output, config.pricing, manifest, config.embedding.max_seq_length)


def build_pipeline(
    p: beam.Pipeline, config: JobConfig, skip_folders: Sequence[str] = ()
) -> JobOutputs:
    """Connect the stages, in the order the data flows through them.

    `skip_folders`: folders under the inputs whose files are not read (earlier runs' output).
    Boilerplate removal spreads the documents evenly over the workers (after its line counts),
    and chunking, context, counting and embedding fuse with it into one stage.
    """
    never_read = [config.output, config.previous_output or "", *skip_folders]
    read = p | "Read documents" >> ReadDocuments(config.read, exclude=never_read)
    extracted = read.documents | "Extract text" >> ExtractText(config.extract_timeout_s)
    documents = extracted.documents | "Remove boilerplate" >> RemoveBoilerplate(
        config.boilerplate, spread=True
    )
    previous = None if config.estimate else previous_run(config.previous_output, config.fingerprint)
    rebuild = documents | "Find unchanged documents" >> ReuseUnchanged(
        previous, (read.rejects, extracted.rejects)
    )
    chunked = rebuild.changed | "Chunk documents" >> ChunkDocuments(
        config.chunking, config.pricing_tokenizer
    )
    with_context = chunked.by_document | "Add context" >> AddContext(config.context)
    counted = with_context | "Count chunk tokens" >> CountChunkTokens(config.budget)
    embedded = counted | "Embed chunks" >> Embed(config.embedding, enabled=config.embeds)

    chunks = merge("Chunks and parents", embedded.chunks, chunked.parents)
    rejects = merge(
        "All rejects", read.rejects, extracted.rejects, chunked.rejects, embedded.rejects
    )
    documents = merge("All documents", chunked.documents, rebuild.unchanged)
    tables = {CHUNKS: chunks, DOCUMENTS: documents, REJECTS: rejects}
    if rebuild.reused_rows is not None:  # Beam takes no None in a dict of inputs
        tables[REUSED_CHUNK_ROWS] = rebuild.reused_rows
    written = tables | "Write tables" >> WriteShards(
        config.output, config.embedding.dimension, write_chunks=not config.estimate
    )
    events = merge("Stage events", read.events, chunked.events, rebuild.events)
    account = AccountInputs(events, chunks, rejects, written)
    manifest = account | "Account" >> _account(config, previous, skip_folders)
    return JobOutputs(chunks, documents, rejects, manifest)


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
