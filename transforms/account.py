"""The accounting step of the job: every stat event, chunk and reject folded into the cost
report (cost_report.json and .md, written after the data), then run_manifest.json, last."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from runs.manifest import file_entry, inventory_of, write_atomically
from runs.staging import delete_folder
from transforms.cost_combine import CostReportFn
from transforms.cost_report import REPORT_JSON, REPORT_MARKDOWN, CostReport, Pricing, build_report
from transforms.stat_events import chunk_events, reject_event
from transforms.write import HASHES_FOLDER, recorded_entry


def write_text(path: str, text: str) -> None:
    with FileSystems.create(path) as f:
        f.write(text.encode("utf-8"))


class _WriteReport(beam.DoFn):
    def __init__(
        self, output: str, pricing: Pricing, mode: str, previous_output: str | None = None
    ) -> None:
        self.output = output
        self.pricing = pricing
        self.mode = mode
        self.previous_output = previous_output

    def process(self, acc: dict[str, Any], written_files: list[str]) -> Iterator[CostReport]:
        report = dataclasses.replace(
            build_report(acc, self.pricing, self.mode),
            previous_output=self.previous_output,
            files_written=len(written_files),
        )
        write_text(FileSystems.join(self.output, REPORT_JSON), report.to_json())
        write_text(FileSystems.join(self.output, REPORT_MARKDOWN), report.markdown())
        yield report


def _hashed(path: str, hashes: str) -> tuple[str, dict[str, Any]]:
    return path, recorded_entry(path, hashes)


class _WriteManifest(beam.DoFn):
    def __init__(self, output: str, manifest: dict[str, Any]) -> None:
        self.output = output
        self.manifest = manifest

    def process(
        self,
        report: CostReport,
        hashed_files: list[tuple[str, dict[str, Any]]],
        earlier_runs: list[str],
    ) -> Iterator[str]:
        manifest = dict(self.manifest)
        # run folders the inputs matched, not read (found where the job lists its inputs)
        manifest["earlier_runs_not_read"] = sorted(earlier_runs)
        # Every file of the run with its size and hash: a later run reuses exactly these, and
        # checks them first (transforms/incremental.py). The data files were hashed as they
        # were written (their records read in parallel, Account); the two reports, small, here.
        reports = [FileSystems.join(self.output, n) for n in (REPORT_JSON, REPORT_MARKDOWN)]
        manifest["files"] = inventory_of(
            self.output, [*hashed_files, *((path, file_entry(path)) for path in reports)]
        )
        manifest["finished_at"] = datetime.datetime.now(datetime.UTC).isoformat()
        manifest["counts"] = {
            k: getattr(report, k)
            for k in (
                "documents_in",
                "documents_chunked",
                "documents_rejected",
                "documents_unchanged",
                "chunks",
                "chunks_rejected",
                "embedded_tokens",
                "cost_usd",
            )
        }
        delete_folder(FileSystems.join(self.output, HASHES_FOLDER))  # in the manifest now
        path = FileSystems.join(self.output, "run_manifest.json")
        write_atomically(path, json.dumps(manifest, indent=2, sort_keys=True))
        yield path


def run_manifest(
    run_id: str,
    settings: dict[str, Any],
    inputs: Sequence[str],
    output: str,
    estimate: bool,
    previous_output: str | None,
    previous_run_id: str | None = None,
) -> dict[str, Any]:
    """What run_manifest.json says of the run before it ends (the counts are added last).

    `run_id` names this run (a vector store records the run it holds, so that `load` can tell
    whether changes/ applies to it); `previous_run_id` is the run_id of --previous_output.
    """
    return {
        "run_id": run_id,
        "previous_run_id": previous_run_id,
        "config": settings,
        "config_fingerprint": settings["config_fingerprint"],
        "inputs": list(inputs),
        "earlier_runs_not_read": [],  # run folders the inputs matched: set when it is written
        "output": output,
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "mode": "estimate" if estimate else "run",
        "previous_output": previous_output,
    }


class AccountInputs(NamedTuple):
    events: beam.PCollection  # the stages' stat events
    chunks: beam.PCollection  # Chunk: every chunk the run writes (parents included)
    rejects: beam.PCollection  # Reject: every reject of the run
    written: beam.PCollection  # str: the data files written
    earlier_runs: beam.PCollection  # str: earlier runs' folders the inputs matched


class Account(beam.PTransform):
    """AccountInputs -> cost_report.{json,md} after the data files, then run_manifest.json.

    Each written chunk and each reject is one event; the chunks' events are folded where the
    chunks are made (the combine is lifted into that stage), so only their totals join the
    other events.
    """

    def __init__(
        self,
        output: str,
        pricing: Pricing,
        manifest: dict[str, Any],
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__()
        self.output = output
        self.pricing = pricing
        self.manifest = manifest
        self.max_seq_length = max_seq_length

    def expand(self, inputs: AccountInputs) -> beam.PCollection:
        chunk_totals = (
            inputs.chunks
            | "Chunk events"
            >> beam.FlatMap(chunk_events, self.max_seq_length, self.pricing.sample_fraction < 1.0)
            | "Chunk totals" >> beam.CombineGlobally(CostReportFn())
        )
        events = (
            inputs.events,
            chunk_totals,
            inputs.rejects | "Reject events" >> beam.Map(reject_event),
        ) | "All events" >> beam.Flatten()
        totals = events | "Total stats" >> beam.CombineGlobally(CostReportFn())
        written_list = beam.pvalue.AsList(inputs.written)
        mode = self.manifest["mode"]
        report = totals | "Write cost report" >> beam.ParDo(
            _WriteReport(self.output, self.pricing, mode, self.manifest.get("previous_output")),
            written_list,
        )
        # Each data file's size and sha256 were recorded as it was written: here only its
        # footer and that record are read, spread over the workers, not one file after another
        # in the one step that writes the manifest.
        hashes = FileSystems.join(self.output, HASHES_FOLDER)
        hashed = (
            inputs.written
            | "Spread files to hash" >> beam.Reshuffle()
            | "Hash files"
            >> beam.Map(_hashed, hashes).with_output_types(tuple[str, dict[str, Any]])
        )
        return report | "Write manifest" >> beam.ParDo(
            _WriteManifest(self.output, self.manifest),
            beam.pvalue.AsList(hashed),
            beam.pvalue.AsList(inputs.earlier_runs),
        )
