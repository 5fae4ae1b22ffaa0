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
    # the launcher did not read CURRENT (a job only translated, as --dry_run's): read it at
    # the commit, which then guards against a run that commits in the same moment only
    read_start: bool = False


class _CommitFn(beam.DoFn):
    def __init__(self, commit: Commit) -> None:
        self.commit = commit

    def process(self, manifest_path: str) -> Iterator[str]:
        c = self.commit
        for line in RunFolder(c.output).commit(c.staged, c.keep_runs, c.start, c.read_start):
            logging.info("--output %s: %s", c.output, line)
        yield c.output


class CommitRun(beam.PTransform):
    """The manifest's path (one element, written last) -> --output, once the run is its
    current run."""

    def __init__(self, commit: Commit) -> None:
        super().__init__()
        self.commit = commit

    def expand(self, manifest: beam.PCollection) -> beam.PCollection:
        return manifest | "Commit" >> beam.ParDo(_CommitFn(self.commit))
