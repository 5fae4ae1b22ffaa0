"""Fault injection for the crash and retry tests: a test-only plugin, never in the job's code.

A spec names a counter (one of the job's `stat` names) and what happens when it reaches N in
a process:

- "kill:COUNTER:N": the process SIGKILLs itself;
- "raise_once:COUNTER:N:MARKER": `InjectedFault` is raised once, where the file MARKER does
  not exist yet (it is created first), so that a runner's retry of the bundle goes through.

`injected(monkeypatch, spec)` installs it in this process (an in-process job). A job in its
own process, to be killed, runs as `python -m tests.faults SPEC JOB_ARGS...`: this module
installs the spec there, then runs `pipelines.chunk_corpus.main(JOB_ARGS)`. Both patch
`transforms.progress.ProgressCounter.inc`, where every `stat` of every stage ends.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from transforms import progress
from transforms.stage_base import WorkerFailure


class InjectedFault(WorkerFailure):
    """The failure a raise_once spec asked for: the worker's, so the bundle fails and is
    retried (a stage does not take it for a bad input)."""


def _parse(spec: str) -> tuple[str, str, int, str]:
    action, counter, at, *marker = spec.split(":", 3)
    if action not in ("kill", "raise_once") or (action == "raise_once" and not marker):
        raise ValueError(f"bad fault spec {spec!r}: kill:COUNTER:N or raise_once:COUNTER:N:MARKER")
    return action, counter, int(at), marker[0] if marker else ""


def _faulty_inc(spec: str, real_inc: Callable[..., None]) -> Callable[..., None]:
    action, counter, at, marker = _parse(spec)
    seen = {"n": 0}
    lock = threading.Lock()

    def inc(self: progress.ProgressCounter, n: int = 1) -> None:
        real_inc(self, n)
        if self.name != counter:
            return
        with lock:
            seen["n"] += n
            due = seen["n"] >= at
        if not due:
            return
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        raise InjectedFault(f"a fault injected at {counter}={seen['n']}")

    return inc


def injected(monkeypatch: Any, spec: str) -> None:
    """Install `spec` in this process until the test ends."""
    monkeypatch.setattr(
        progress.ProgressCounter, "inc", _faulty_inc(spec, progress.ProgressCounter.inc)
    )


def main(argv: list[str]) -> None:
    spec, *job_args = argv
    progress.ProgressCounter.inc = _faulty_inc(spec, progress.ProgressCounter.inc)
    from pipelines.chunk_corpus import main as job_main

    job_main(job_args)


if __name__ == "__main__":
    main(sys.argv[1:])
