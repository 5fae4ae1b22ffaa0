"""The job's last step: the run written in its own folder becomes --output's current run.

The launcher no longer commits after `wait_until_finish`: a job submitted and left (a
Dataflow template, a Flex Template, an Airflow operator that does not wait) commits itself, as
one that is waited for does. The step follows the manifest, which is written once every data
file is (transforms/account.py), and runs once:

- on a local disk, the staged folder is renamed into --output's place (runs/staging.py);
- on an object store, CURRENT is written with the precondition that it is still what the
  launcher read when the run started (runs/pointer.py), then the runs that retention does not
  keep are deleted.

A retry of the step after the commit went through does nothing (RunFolder.commit).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import apache_beam as beam

from runs.pointer import Pointer
from runs.run_folder import RunFolder


@dataclass(frozen=True)
class Commit:
    """Where the run is staged and how it replaces --output."""

    output: str
    staged: str
    keep_runs: int
    start: Pointer | None = None  # CURRENT as the launcher read it (object stores)


class _CommitFn(beam.DoFn):
    def __init__(self, commit: Commit) -> None:
        self.commit = commit

    def process(self, manifest_path: str, *written) -> Iterator[str]:
        c = self.commit
        for line in RunFolder(c.output).commit(c.staged, c.keep_runs, c.start):
            logging.info("--output %s: %s", c.output, line)
        yield c.output


class CommitRun(beam.PTransform):
    """The manifest's path (one element, written last) -> --output, once the run is its
    current run.

    `after`: the outputs of the job's other writes (the embedding cache's files), waited for
    as side inputs, so that a job that fails in them has committed nothing. A Reshuffle
    stands between the manifest's write and the commit: a retry of the commit (a worker lost
    after the rename or CURRENT's write) runs the commit again, never the writes of the
    report and manifest before it, which would recreate a staged folder of reports only or
    change a committed manifest."""

    def __init__(self, commit: Commit, after: tuple[beam.PCollection, ...] = ()) -> None:
        super().__init__()
        self.commit = commit
        self.after = after

    def expand(self, manifest: beam.PCollection) -> beam.PCollection:
        waits = [beam.pvalue.AsList(p) for p in self.after]
        return (
            manifest
            | "Written" >> beam.Reshuffle()
            | "Commit" >> beam.ParDo(_CommitFn(self.commit), *waits)
        )
