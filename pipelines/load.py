"""`corpus-chunker load DIR --to URI`: make a vector store hold exactly the chunks of the
finished run in DIR (a Beam pipeline: batched idempotent upserts, then deletes, then a record
of the run the store holds).

    corpus-chunker load out/night2 --to postgresql://me@localhost:5432/rag
    corpus-chunker load out/night2 --to lancedb:///srv/rag/lancedb --table docs
    python -m pipelines.load out/night2 --to lancedb:///srv/rag/lancedb --full
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser
from apache_beam.runners.runner import PipelineResult

from commands.terminal import for_terminal
from pipelines import local_runner
from transforms.stores import StoreSpec
from transforms.stores.base import DEFAULT_TABLE
from transforms.stores.loading import (
    CURRENT,
    DEFAULT_BATCH_SIZE,
    LoadChunks,
    RunToLoad,
    choose_mode,
    open_run,
)

USAGE = "corpus-chunker load DIR --to URI [--table NAME] [--full] [--batch_size N] [Beam flags]"


class LoadOptions(PipelineOptions):
    """Flags of `corpus-chunker load` (Beam's own flags, e.g. --runner, also apply)."""

    @classmethod
    def _add_argparse_args(cls, parser: Any) -> None:
        g = parser.add_argument_group("corpus-chunker load")
        g.add_argument(
            "--to",
            default=None,
            help="Required. The store: postgresql://user@host:port/db (pgvector) or "
            "lancedb:///path/to/db (embedded LanceDB).",
        )
        g.add_argument(
            "--table",
            default=DEFAULT_TABLE,
            help=f"Table of chunks in the store, created if missing (default {DEFAULT_TABLE}).",
        )
        g.add_argument(
            "--full",
            action="store_true",
            default=False,
            help="Upsert every chunk of DIR and delete every other chunk, even when the store "
            "holds the run DIR was rebuilt from (default: incremental then, from DIR/changes/).",
        )
        g.add_argument(
            "--batch_size",
            type=int,
            default=DEFAULT_BATCH_SIZE,
            help=f"Rows per upsert or delete (default {DEFAULT_BATCH_SIZE}).",
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="corpus-chunker load",
        allow_abbrev=False,  # --ful must not mean --full
        usage=USAGE,
        description="Make a vector store hold exactly the chunks of the finished run in DIR: "
        "incremental when the store holds the run DIR was rebuilt from (--previous_output), "
        "else full. Deletes follow the upserts; the store records the run last.",
    )
    parser.add_argument("dir", metavar="DIR", help="A finished corpus-chunker run folder.")
    LoadOptions._add_argparse_args(parser)
    return parser


def _unknown_flag(args: list[str]) -> str | None:
    """The first argument that neither load nor Beam knows (Beam only logs and drops it)."""
    parser = _BeamArgumentParser(allow_abbrev=False, add_help=False, exit_on_error=False)
    for cls in PipelineOptions.__subclasses__():
        if cls.__module__.startswith("apache_beam."):  # not this project's other commands
            cls._add_argparse_args(parser)
    try:
        _, unknown = parser.parse_known_args(args)
    except argparse.ArgumentError as e:
        return str(e)
    return unknown[0] if unknown else None


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(load's arguments, Beam's flags); ValueError naming a missing or unknown flag."""
    args, beam_args = _parser().parse_known_args(argv)
    if not args.to:
        raise ValueError("--to is required: postgresql://... or lancedb:///path/to/db")
    unknown = _unknown_flag(beam_args)
    if unknown is not None:
        raise ValueError(f"unknown argument {unknown}: neither load nor Beam knows it ({USAGE})")
    return args, beam_args


def summary(result: dict[str, int], mode: str, why: str, seconds: float, spec: StoreSpec) -> str:
    return (
        f"corpus-chunker load: upserted {result['upserted']}, deleted {result['deleted']}, "
        f"mode {mode} ({why}); {spec.kind} table {spec.table} holds {result['chunks']} chunks; "
        f"{seconds:.1f} s"
    )


def _summary_of(result: PipelineResult) -> dict[str, int]:
    from apache_beam.metrics.metric import MetricsFilter

    from transforms.common import NAMESPACE

    counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    totals = {"upserted": 0, "deleted": 0}
    for c in counters:
        name = c.key.metric.name.removeprefix("chunks_")
        if name in totals:
            totals[name] += c.committed or c.attempted or 0
    return totals


@contextlib.contextmanager
def load_lock(spec: StoreSpec) -> Iterator[None]:
    """One load at a time into a table: held from the first look at the store to the last
    count, so that a second load fails at once, naming the table, instead of mixing its
    upserts and deletes with the first's. PostgreSQL: an advisory lock of the launcher's
    session (gone with its connection, even if the process is killed). LanceDB: a lock file
    beside the table's folder, as `--output` has (runs/output_lock.py)."""
    label = f"--table={spec.table} in {spec.printable}"
    if spec.kind == "lancedb":
        from runs.output_lock import OutputLock

        with OutputLock(os.path.join(spec.uri[len("lancedb://") :], spec.table), label, "load"):
            yield
        return
    store = spec.open()
    try:
        if not store.try_lock():
            raise ValueError(
                f"{label} is in use by another load (another session holds its advisory lock); "
                "wait for it to end"
            )
        yield
    finally:
        store.close()


def run(argv: list[str] | None = None) -> PipelineResult | None:
    """Load DIR into --to; None when the store already holds DIR's run (nothing to do)."""
    from pipelines.chunk_corpus import check_runner

    args, beam_args = parse(sys.argv[1:] if argv is None else argv)
    check_runner(PipelineOptions(beam_args))  # refuses the DaskRunner, as the job does
    # DIR's reads here (on an object store, its CURRENT run) with Beam's --s3_* options too
    FileSystems.set_options(PipelineOptions(beam_args))
    started = time.time()
    loaded = open_run(args.dir)
    spec = StoreSpec(args.to, args.table)
    with load_lock(spec):
        store = spec.open()
        try:
            store.prepare(loaded.embedding_dim)
            mode, why = choose_mode(store.state(), loaded, full=args.full)
            if mode == CURRENT:
                print(
                    summary(
                        {"upserted": 0, "deleted": 0, "chunks": store.count()}, mode, why, 0, spec
                    )
                )
                return None
            # Before the first write: a later load sees this one unfinished until it records itself.
            store.begin(loaded.run_id)
        finally:
            store.close()
        result = _run_pipeline(loaded, spec, mode, args.batch_size, beam_args)
        totals = _summary_of(result)
        held = spec.open()
        try:
            totals["chunks"] = held.count()
        finally:
            held.close()
        print(summary(totals, mode, why, time.time() - started, spec))
        return result


def _run_pipeline(
    loaded: RunToLoad, spec: StoreSpec, mode: str, batch_size: int, beam_args: list[str]
) -> PipelineResult:
    pipeline = local_runner.pipeline(PipelineOptions(beam_args))
    _ = pipeline | "Load chunks" >> LoadChunks(loaded, spec, mode, batch_size)
    result = pipeline.run()
    result.wait_until_finish()
    return result


def main(argv: list[str] | None = None) -> int:
    logging.getLogger().setLevel(logging.WARNING)
    try:
        run(sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        print(f"corpus-chunker load: error: {for_terminal(e)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
