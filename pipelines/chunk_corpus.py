"""corpus-chunker: raw documents -> retrieval-ready chunks, embeddings and a cost report.

    corpus-chunker --input 'docs/**/*.md' --output out/ [--chunk_size 256 ...] [Beam flags]

`run(argv)` parses the flags, validates them into a JobConfig and runs `build_pipeline` on the
runner that --runner names.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, TestOptions
from apache_beam.runners.runner import PipelineResult

from commands.terminal import for_terminal
from pipelines import live_progress as progress
from pipelines import local_runner
from pipelines.flags import reject_unknown_flags
from pipelines.options import ChunkCorpusOptions, JobConfig, config_from_options
from runs.manifest import REPORT_FILES
from runs.run_folder import RunFolder, previous_output_folder
from schemas.columns import BOILERPLATE, CHANGES, CHUNKS, DOCUMENTS, REJECTS, TABLES
from transforms.account import Account, AccountInputs, run_manifest
from transforms.boilerplate import (
    CountLines,
    DecideLines,
    RemoveBoilerplate,
    with_line_digests,
)
from transforms.boilerplate_delta import REJECTED as REGROUP_REJECTED
from transforms.boilerplate_delta import AsRecorded, LinesOfRejects, UpdateCounts, id_of_entry
from transforms.budget import CountChunkTokens
from transforms.changes import ChangeInputs, ChangeLog, PreviousTables
from transforms.chunking.routing import ChunkDocuments
from transforms.commit import Commit, CommitRun
from transforms.context import AddContext
from transforms.cost_report import CostReport
from transforms.embedding.embed_stage import Embed
from transforms.incremental import (
    KEPT_IDS,
    MOVED,
    NOT_REUSED_IDS,
    UNCOUNTED,
    PreviousRun,
    RebuildResult,
    ReuseBeforeRemoval,
    ReuseRows,
    previous_run,
    read_previous,
    stand_in_previous_run,
)
from transforms.ingest.extract import ExtractText
from transforms.ingest.matching import check_patterns, has_wildcard, input_root
from transforms.ingest.read import ReadDocuments
from transforms.ingest.reread import ReadAgain
from transforms.write import REUSED_CHUNK_ROWS, SHARD_NAME, WriteShards

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


def _account(config: JobConfig, output: str, previous: PreviousRun | None) -> Account:
    manifest = run_manifest(
        config.run_id,
        config.settings,
        config.inputs,
        config.output,
        config.estimate,
        previous.output if previous is not None else None,
        previous.run_id if previous is not None else None,
    )
    manifest["embedding_cache_key"] = config.embedding.cache_key
    return Account(output, config.pricing, manifest, config.embedding.max_seq_length)


def _cached_vectors(
    p: beam.Pipeline, config: JobConfig, previous: PreviousRun | None, rows: beam.PCollection | None
) -> beam.PCollection | None:
    """The embedding cache's vectors of this model: the previous run's (when its model key is
    this run's) and the --embedding_cache folder's; None when there is neither."""
    key = config.embedding.cache_key
    if key is None or not config.embeds:
        return None
    if previous is None or previous.embedding_cache_key != key:
        rows = None
    if rows is None and config.embedding_cache is None:
        return None
    from transforms.embedding.embedding_cache import CachedVectors

    return p | "Cached vectors" >> CachedVectors(
        key, rows, config.embedding_cache, config.embedding.dimension
    )


def _rebuild_changed(
    config: JobConfig,
    extracted: beam.PCollection,
    previous: PreviousRun,
    tables: PreviousTables,
    early_rejects: beam.PCollection,
) -> tuple[RebuildResult, beam.PCollection, beam.PCollection | None]:
    """A rebuild against a previous run of this config: (what it reuses, with the changed
    documents cleaned of their boilerplate; every reject so far; the `boilerplate` table's
    rows, None with --boilerplate off).

    The unchanged documents are found from their extracted hashes on a small index
    (`ReuseBeforeRemoval`); no text waits for boilerplate counts. Only the documents that
    changed are read and extracted again; their lines, and those the previous run recorded of
    what changed or went, update the previous run's counts (`UpdateCounts`), and a group whose
    boilerplate lines change has its other documents read again too. Those are spread over the
    workers and cleaned. A document whose extraction runs over its time limit when read again
    keeps its previous rows, as at the first reading (`ReuseRows`).
    """
    counted = config.boilerplate.enabled
    split = extracted | "Find unchanged documents" >> ReuseBeforeRemoval(
        previous, counted, early_rejects, input_root(config.read.patterns)
    )
    again = split.to_read | "Read changed documents again" >> ReadAgain(config.read)
    again_extracted = again.documents | "Extract changed documents" >> ExtractText(
        config.extract_timeout_s
    )
    to_clean = again_extracted.documents
    late_rejects = [again_extracted.rejects]  # their transient ones keep their rows
    other_rejects: list[beam.PCollection] = [again[REJECTS]]
    lines, regrouped_ids, rows = None, None, None
    if counted:
        to_clean = to_clean | "Line digests" >> beam.Map(with_line_digests)
        verdicts = split.verdicts
        decided = (
            split.to_read | "Ids read again" >> beam.Map(id_of_entry),
            verdicts[NOT_REUSED_IDS],
            verdicts[KEPT_IDS],
        ) | "Documents decided" >> beam.Flatten()
        update = to_clean | "Update boilerplate counts" >> UpdateCounts(
            previous, config.boilerplate, verdicts[UNCOUNTED], decided, verdicts[MOVED]
        )
        lines, regrouped_ids, rows = update.lines, update.regrouped_ids, update.rows
        regroup = update.regroup | "Read regrouped documents again" >> ReadAgain(config.read)
        regroup_extracted = regroup.documents | "Extract regrouped documents" >> ExtractText(
            config.extract_timeout_s
        )
        as_recorded = regroup_extracted.documents | "As recorded" >> AsRecorded(update.expected)
        to_clean = merge("Changed and regrouped documents", to_clean, as_recorded.documents)
        late_rejects.append(regroup_extracted.rejects)
        regroup_rejects = merge(
            "Regrouped documents' rejects",
            regroup[REJECTS],
            regroup_extracted.rejects,
            as_recorded[REGROUP_REJECTED],
        ) | "Lines of regrouped rejects" >> LinesOfRejects(update.expected)
        other_rejects.append(regroup_rejects)
    changed = to_clean | "Remove boilerplate" >> RemoveBoilerplate(
        config.boilerplate, spread=True, lines=lines
    )
    rebuild = merge("Late rejects", *late_rejects) | "Reuse unchanged rows" >> ReuseRows(
        previous, tables, split.verdicts, regrouped_ids
    )
    rejects = merge(
        "Early and later reading rejects",
        early_rejects,
        again_extracted.rejects,
        *other_rejects,
    )
    return rebuild._replace(changed=changed), rejects, rows


def build_pipeline(
    p: beam.Pipeline,
    config: JobConfig,
    write_to: str | None = None,
    dry_run: bool = False,
    commit: Commit | None = None,
) -> JobOutputs:
    """Connect the stages, in the order the data flows through them.

    `write_to`: where the run's files go (the staging folder of --output; default --output);
    `dry_run`: only translate the job (DataflowRunner --dry_run): no data path is read, not
    even --previous_output's manifest, which stands in as a reusable run of this config;
    `commit`: how the run, once written, becomes --output's current run: the job's last step
    (transforms/commit.py; None: nothing commits: a dry run's translation, whose run id is
    fixed when it is translated and so cannot serve as a template launched night after night,
    and the tests that build the graph only).
    Boilerplate removal spreads the documents evenly over the workers (after its line counts),
    and chunking, context, counting and embedding fuse with it into one stage.
    """
    write_to = write_to or config.output
    # and the folders of earlier runs that the inputs match, found where the job lists them
    never_read = [config.output, write_to, config.previous_output or ""]
    read = p | "Read documents" >> ReadDocuments(config.read, exclude=never_read)
    extracted = read.documents | "Extract text" >> ExtractText(config.extract_timeout_s)
    if config.estimate:
        previous = None
    elif dry_run:
        previous = stand_in_previous_run(
            config.previous_output, config.fingerprint, config.embedding.cache_key
        )
    else:
        previous = previous_run(config.previous_output, config.fingerprint)
    tables = read_previous(p, previous) if previous is not None else None
    # documents rejected at reading or extraction for a reason that may pass are kept
    early_rejects = merge("Early rejects", read.rejects, extracted.rejects)
    boilerplate_rows = None
    if previous is not None and previous.reusable and tables is not None:
        rebuild, early_rejects, boilerplate_rows = _rebuild_changed(
            config, extracted.documents, previous, tables, early_rejects
        )
    else:
        lines, documents = None, extracted.documents
        if config.boilerplate.enabled:
            documents = documents | "Line digests" >> beam.Map(with_line_digests)
            counts = documents | "Count boilerplate lines" >> CountLines()
            lines = counts | "Boilerplate lines" >> DecideLines(config.boilerplate)
            boilerplate_rows = counts.rows()
        documents = documents | "Remove boilerplate" >> RemoveBoilerplate(
            config.boilerplate, spread=True, lines=lines
        )
        # nothing is reused but, from another config's run, the vectors of identical texts
        other_rows = tables.chunks if tables is not None else None
        rebuild = RebuildResult(documents, None, None, None, other_rows)
    chunked = rebuild.changed | "Chunk documents" >> ChunkDocuments(
        config.chunking, config.pricing_tokenizer
    )
    with_context = chunked.by_document | "Add context" >> AddContext(config.context, config.budget)
    counted = with_context | "Count chunk tokens" >> CountChunkTokens(
        config.budget, config.pricing_tokenizer
    )
    cached = _cached_vectors(p, config, previous, rebuild.other_rows)
    other_writes: list[beam.PCollection] = []  # the commit waits for these too
    embedded = counted | "Embed chunks" >> Embed(
        config.embedding, config.embeds, cached, count_duplicates=config.estimate
    )
    if config.embedding_cache and embedded.new_vectors is not None:
        from transforms.embedding.embedding_cache import WriteCache, WriteCacheUse

        assert config.embedding.cache_key is not None
        other_writes.append(
            embedded.new_vectors
            | "Add to the embedding cache"
            >> WriteCache(config.embedding_cache, config.embedding.cache_key, config.run_id)
        )
        if embedded.reused_keys is not None:  # dates the entries it used, for compact-cache
            other_writes.append(
                embedded.reused_keys
                | "Record the cache's use"
                >> WriteCacheUse(config.embedding_cache, config.embedding.cache_key, config.run_id)
            )

    chunks = merge("Chunks and parents", embedded.chunks, chunked.parents)
    rejects = merge("All rejects", early_rejects, chunked.rejects, embedded.rejects)
    documents = merge("All documents", chunked.documents, rebuild.unchanged)
    # the reused documents' change rows are made where they are: only the others are joined
    changed = documents if rebuild.reused is None else chunked.documents
    changes = ChangeInputs(changed, chunks, rejects) | "Changes" >> ChangeLog(
        tables, rebuild.reused
    )
    tables_out = {CHUNKS: chunks, DOCUMENTS: documents, REJECTS: rejects, CHANGES: changes.rows}
    if rebuild.reused_rows is not None:  # Beam takes no None in a dict of inputs
        tables_out[REUSED_CHUNK_ROWS] = rebuild.reused_rows
    if boilerplate_rows is not None:
        tables_out[BOILERPLATE] = boilerplate_rows
    written = tables_out | "Write tables" >> WriteShards(
        write_to, config.written_embedding_dim, write_chunks=not config.estimate
    )
    events = merge(
        "Stage events",
        read.events,
        chunked.events,
        rebuild.events,
        embedded.events,
        changes.events,
    )
    account = AccountInputs(events, chunks, rejects, written, read.earlier_runs)
    manifest = account | "Account" >> _account(config, write_to, previous)
    if commit is not None:
        _ = manifest | "Commit the run" >> CommitRun(commit, tuple(other_writes))
    return JobOutputs(chunks, documents, rejects, manifest)


def prepare_output(output: str, overwrite: bool, previous_output: str | None = None) -> None:
    """Refuse, before anything runs, an --output the run may not replace; delete nothing.

    The run is written beside --output and replaces it only once complete
    (runs/staging.py). Refused: a wildcard in --output; files in a table folder that no run
    writes; files of a run without its run_manifest.json (an incomplete run, or not one of
    this job: the swap would delete them); a complete run without --overwrite; and a
    --previous_output that is not a complete run. --previous_output may be --output itself
    (compared by real path): the new run reads the old one, then replaces it.
    """
    if has_wildcard(output):
        raise ValueError(
            f"--output {output} holds a wildcard (*, ? or [): the output is one folder, "
            "named as it is"
        )
    if previous_output:  # its manifest checked before anything runs
        previous_output_folder(previous_output).check()
    current = RunFolder(output)
    folder = current.path  # on an object store, the run CURRENT names (runs/pointer.py)
    shards, foreign = [], []
    for name in TABLES:
        for m in FileSystems.match([FileSystems.join(folder, name, "*")])[0].metadata_list:
            entry = m.path.rstrip("/").rsplit("/", 1)[-1]
            if entry.startswith("beam-temp-"):  # a failed run's temporary files: replaced too
                continue
            (shards if SHARD_NAME.fullmatch(entry) else foreign).append(m.path)
    reports = [
        path
        for path in (FileSystems.join(folder, name) for name in REPORT_FILES)
        if FileSystems.exists(path)
    ]
    if foreign:
        raise ValueError(
            f"--output {output} holds files that no run of this job writes "
            f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}): nothing was "
            "deleted; choose another folder"
        )
    existing = shards + reports
    if not existing:
        return
    if not current.is_complete():
        raise ValueError(
            f"--output {output} holds {len(existing)} files of a run but no valid "
            "run_manifest.json (an incomplete run, or not one of this job); --overwrite "
            "replaces only a complete run, so nothing was deleted: remove them yourself or "
            "choose another folder"
        )
    if not overwrite:
        same = previous_output and _real(previous_output) == _real(output)
        raise ValueError(
            f"--output {output} already holds a run ({len(existing)} files); "
            + (
                "pass --overwrite to rebuild it in place from itself"
                if same
                else "pass --overwrite to replace it or choose another folder"
            )
        )


def _real(path: str) -> str:
    return os.path.realpath(path) if "://" not in path else path.rstrip("/")


def _discard(output: RunFolder, staging: str) -> None:
    try:
        output.discard(staging)
    except Exception:
        logging.warning("could not delete %s; the next run into this output will", staging)


def check_runner(options: PipelineOptions) -> None:
    runner = (options.view_as(StandardOptions).runner or "").lower()
    for name, why in UNSUPPORTED_RUNNERS.items():
        if runner.endswith(name) or runner == name.removesuffix("runner"):
            raise ValueError(
                f"--runner={runner} is refused: {why}. Use DirectRunner, "
                "PortableRunner (Flink/Spark job server) or DataflowRunner."
            )


def summary(
    report: CostReport,
    output: str,
    seconds: float,
    output_sizes: dict[str, int] | None = None,
    extra_lines: Sequence[str] = (),
) -> str:
    """The run's closing lines: documents, rejects by reason, chunks, tokens, cost and output.

    `output_sizes`: bytes per part of the output folder (RunFolder.output_bytes);
    `extra_lines`: more lines before the output line (the --estimate embedding projection).
    """
    r = report
    lines = [
        f"corpus-chunker {r.mode}: {r.documents_in} documents in -> "
        f"{r.documents_chunked} chunked, {r.documents_rejected} rejected, "
        f"{r.documents_unchanged} unchanged",
        *r.reject_lines("  "),
        *r.change_lines("  "),
    ]
    if r.reused_tokens:
        lines.append(
            f"  reused: {r.reused_tokens:,} tokens not embedded again "
            f"({r.chunks_reused} chunks of unchanged documents, "
            f"{r.chunks_cached} from the embedding cache, "
            f"{r.chunks_deduplicated} identical texts), saving "
            f"${r.saved_usd:.6f}"
        )
    lines += [
        f"  chunks: {r.chunks} ({r.chunks_rejected} rejected, "
        f"{r.chunks_truncated} truncated by the model)",
        f"  tokens: {r.document_tokens:,} in documents, {r.embedded_tokens:,} "
        f"embedded (inflation {r.overlap_inflation})"
        + (
            f", {r.model_read_tokens:,} read by the model"
            if r.model_read_tokens != r.embedded_tokens
            else ""
        ),
        f"  cost: ${r.cost_usd:.6f} at ${r.price_per_million_tokens}/M tokens"
        + (f"; projected whole corpus {r.projection.text()}" if r.projection is not None else ""),
        *extra_lines,
        f"  wall time: {seconds:.1f} s",
        f"  output: {output}" + _size_note(output_sizes),
    ]
    return "\n".join(lines) + _skipped_lines(r.files_skipped)


def _size_note(sizes: dict[str, int] | None) -> str:
    if not sizes:
        return ""
    from pipelines.sizes import human_bytes

    parts = ", ".join(f"{name} {human_bytes(n)}" for name, n in sorted(sizes.items()))
    return f" ({human_bytes(sum(sizes.values()))}: {parts})"


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
    others = {why: n for why, n in skipped.items() if why not in ("hidden", "output_folder")}
    if others:  # FIFOs, sockets, broken symlinks, symlinks out of the input folders
        lines.append(
            "  skipped files that are not regular files inside the inputs: "
            + ", ".join(f"{n} {why}" for why, n in sorted(others.items()))
        )
    return "".join("\n" + line for line in lines)


def _estimate_lines(config: JobConfig, report: CostReport) -> list[str]:
    """--estimate: the embedding time projected from a calibration of the model here."""
    if not config.estimate:
        return []
    if config.embedding.path is None:
        return ["  embedding time: none (--embedding_model=none)"]
    from pipelines.calibrate import calibrate, projection_lines, sample_chunk_texts

    texts = sample_chunk_texts(config, config.output)
    if not texts:
        return ["  embedding time: nothing to embed"]
    projected = report.projection
    tokens = projected.embedded_tokens if projected is not None else report.embedded_tokens
    return projection_lines(calibrate(config, texts), tokens)


def run(argv: list[str] | None = None) -> PipelineResult:
    """Parse flags, build the pipeline, run it on --runner and wait for it."""
    reject_unknown_flags(sys.argv[1:] if argv is None else argv)  # a typo must not run a job
    options = PipelineOptions(argv)
    quiet = options.view_as(ChunkCorpusOptions).quiet  # also registers the project flags
    check_runner(options)
    FileSystems.set_options(options)  # the launcher's own reads of s3:// (its endpoint, keys)
    config = config_from_options(options)
    # A dry run (DataflowRunner --dry_run) only translates the job: it must not touch the data
    # paths, which for gs:// would need credentials (without them GCS retries for minutes).
    dry_run = bool(options.view_as(TestOptions).dry_run)
    if dry_run:
        pipeline = local_runner.pipeline(options)
        build_pipeline(pipeline, config, dry_run=True)
        return _run_with_progress(pipeline, options, config, quiet=True)
    check_patterns(config.inputs)  # each pattern listed up to its first file
    started = time.time()
    output = RunFolder(config.output)
    with output.lock(run_id=config.run_id):  # one run at a time writes into a folder
        for line in output.recover():  # what a killed run left beside the output
            logging.warning("--output %s: %s", config.output, line)
        prepare_output(config.output, config.overwrite, config.previous_output)
        staging = output.staging_folder(config.run_id)
        # the job's last step commits the run (a job submitted and not waited for too)
        commit = Commit(config.output, staging, config.keep_runs, output.start)
        pipeline = local_runner.pipeline(options)
        build_pipeline(pipeline, config, write_to=staging, commit=commit)
        try:
            result = _run_with_progress(pipeline, options, config, quiet=quiet)
        except BaseException:
            _discard(output, staging)  # --output is as it was; a kill leaves this to the next run
            raise
    # The report the run wrote: on every runner, the way the workers' totals reach here.
    report = RunFolder(config.output).cost_report()
    if report is not None:
        seconds = time.time() - started
        sizes = output.output_bytes()
        lines = summary(report, config.output, seconds, sizes, _estimate_lines(config, report))
        print(for_terminal(lines))
        check_something_chunked(report, config.output)
    return result


def _run_with_progress(
    pipeline: beam.Pipeline, options: PipelineOptions, config: JobConfig, quiet: bool
) -> PipelineResult:
    """Run and wait; progress lines on stderr on the DirectRunner, else a pointer to the UI."""
    if quiet:
        result = pipeline.run()
        result.wait_until_finish()
        return result
    if not progress.is_local(options):
        result = pipeline.run()
        print(progress.remote_pointer(options, result), file=sys.stderr)
        try:
            result.wait_until_finish()
        except BaseException:
            # the job would go on without this process, and commit the staged run that the
            # launcher is about to discard: stop it first (a job that failed is left as it is)
            with contextlib.suppress(Exception):
                result.cancel()
            raise
        return result
    estimator = progress.Estimator(
        files_matched=progress.matched_files(config.inputs), embeds=config.embeds
    )
    with progress.Progress(sys.stderr, estimator) as shown:
        result = pipeline.run()
        result.wait_until_finish()
        shown.finish(result)
    return result


# Commands beside the job: `corpus-chunker NAME ...` runs "module:function" with the rest of
# the arguments.
SUBCOMMANDS = {
    "evaluate": "commands.evaluate:main",
    "inspect": "commands.inspect:main",
    "load": "pipelines.load:main",
    "structure": "commands.structure:main",
    "compact-cache": "commands.compact_cache:main",
}


def version() -> str:
    """'corpus-chunker 0.1.0 (apache-beam 2.77.0, Python 3.11.7)'."""
    import importlib.metadata
    import platform

    try:
        ours = importlib.metadata.version("corpus-chunker")
    except importlib.metadata.PackageNotFoundError:
        ours = "unknown (not installed)"
    python = platform.python_version()
    return f"corpus-chunker {ours} (apache-beam {beam.__version__}, Python {python})"


class NothingChunkedError(RuntimeError):
    """The job ran to the end, and every input it read was rejected (or there was none)."""


def check_something_chunked(report: CostReport, output: str) -> None:
    """Raise NothingChunkedError, saying why, when the run chunked no document and reused none:
    every input was rejected, or none was read (the tables and reports are written)."""
    if report.documents_chunked or report.documents_unchanged:
        return
    if report.documents_in == 0:
        skipped = report.files_skipped
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items())) or "none"
        why = f"no document was read (files the inputs matched but the job skipped: {reasons})"
    else:
        why = (
            f"all {report.documents_in} documents were rejected "
            f"(see {FileSystems.join(output, 'rejects')}/ and cost_report.md)"
        )
    raise NothingChunkedError(f"nothing was chunked: {why}")


def print_help() -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="corpus-chunker",
        usage="corpus-chunker --input PATTERN [--input PATTERN ...] --output DIR [flags] "
        "[Beam flags]\n       corpus-chunker inspect DIR [--show DOC_ID_OR_SOURCE]\n"
        "       corpus-chunker --version",
        description="Chunk, embed and cost a document corpus on Apache Beam. --input and "
        "--output are required. Beam's own flags (--runner, --direct_num_workers, "
        "--job_endpoint, --project, ...) also apply. `corpus-chunker inspect --help` describes "
        "the inspection of a finished run.",
    )
    ChunkCorpusOptions._add_argparse_args(parser)
    parser.print_help()


def interrupted_line(argv: list[str]) -> str:
    """What an interrupted run left, in one line."""
    output = next(
        (
            a.split("=", 1)[1] if "=" in a else argv[i + 1]
            for i, a in enumerate(argv)
            if a.split("=", 1)[0] == "--output" and ("=" in a or i + 1 < len(argv))
        ),
        None,
    )
    if output is None:
        return "interrupted before the job started; nothing was written"
    if RunFolder(output).has_manifest():
        return (
            f"interrupted: the run in {output} was not replaced (its run_manifest.json is the "
            "previous run's)"
        )
    return (
        f"interrupted: {output} holds no complete run (no run_manifest.json); nothing outside "
        "it was touched"
    )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        import importlib

        module, function = SUBCOMMANDS[argv[0]].split(":")
        sys.exit(getattr(importlib.import_module(module), function)(argv[1:]))
    logging.getLogger().setLevel(logging.WARNING)
    if "--version" in argv:
        print(version())
        return
    if any(a in ("-h", "--help") for a in argv):
        print_help()
        return
    interrupted = threading.Event()

    def on_interrupt(signum: int, frame: object) -> None:
        # Beam's runner re-raises the KeyboardInterrupt wrapped in its own errors, and its
        # threads log their way down: note the interrupt, and silence the rest.
        interrupted.set()
        logging.disable(logging.CRITICAL)
        signal.default_int_handler(signum, frame)

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_interrupt)
    try:
        try:
            run(argv)
        except BaseException as e:
            if interrupted.is_set() or isinstance(e, KeyboardInterrupt):
                print(f"corpus-chunker: {interrupted_line(argv)}", file=sys.stderr)
                sys.exit(130)
            raise
    except ValueError as e:
        print(f"corpus-chunker: error: {for_terminal(e)}", file=sys.stderr)
        sys.exit(2)
    except NothingChunkedError as e:
        print(f"corpus-chunker: {for_terminal(e)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
