"""Fault injection for the crash and retry tests: a test-only plugin, never in the job's code.

A spec names a counter (one of the job's `stat` names) and what happens when it reaches N in
a process:

- "kill:COUNTER:N": the process SIGKILLs itself;
- "raise_once:COUNTER:N:MARKER": `InjectedFault` is raised once, where the file MARKER does
  not exist yet (it is created first), so that a runner's retry of the bundle goes through.

And for the steps of the commit, which count no `stat`, a spec names a function instead
(`module.attribute`, or `module.Class.method`) and the call that is killed:

- "kill_before:FUNCTION:N": the process SIGKILLs itself when FUNCTION is called the Nth time,
  before it runs;
- "kill_after:FUNCTION:N": the same, right after the Nth call returned.

`injected(monkeypatch, spec)` installs it in this process (an in-process job). A job in its
own process, to be killed, runs as `python -m tests.faults SPEC JOB_ARGS...`: this module
installs the spec there and Beam's memos as the test process has them (tests/beam_memo.py:
2 s of a small job's 6.6), then runs `pipelines.chunk_corpus.main(JOB_ARGS)`. Both patch
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


def _kill_at_call(spec: str) -> None:
    """Install a kill_before/kill_after spec in this process (see the module's doc)."""
    import importlib

    when, target, at = spec.split(":")
    module_name, _, name = target.rpartition(".")
    owner: Any = None
    while module_name:  # the longest importable prefix is the module, the rest attributes
        try:
            owner = importlib.import_module(module_name)
            break
        except ModuleNotFoundError:
            module_name, _, outer = module_name.rpartition(".")
            name = f"{outer}.{name}"
    if owner is None:
        raise ValueError(f"bad fault spec {spec!r}: no module in {target}")
    *path, name = name.split(".")
    for part in path:
        owner = getattr(owner, part)
    real = getattr(owner, name)
    seen = {"n": 0}

    def call(*args: Any, **kwargs: Any) -> Any:
        seen["n"] += 1
        if when == "kill_before" and seen["n"] == int(at):
            os.kill(os.getpid(), signal.SIGKILL)
        result = real(*args, **kwargs)
        if when == "kill_after" and seen["n"] == int(at):
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, call)


def injected(monkeypatch: Any, spec: str) -> None:
    """Install `spec` in this process until the test ends."""
    monkeypatch.setattr(
        progress.ProgressCounter, "inc", _faulty_inc(spec, progress.ProgressCounter.inc)
    )


def main(argv: list[str]) -> None:
    spec, *job_args = argv
    if spec.startswith(("kill_before:", "kill_after:")):
        _kill_at_call(spec)
    else:
        progress.ProgressCounter.inc = _faulty_inc(spec, progress.ProgressCounter.inc)
    if any(a.startswith("--s3_endpoint_url") for a in job_args):
        from tests.s3_server import share_botocore_data

        share_botocore_data()  # as in the test process: a run costs its own work
    from pipelines.chunk_corpus import main as job_main
    from tests import beam_memo

    beam_memo.install()  # the graph and its specs are the in-process runs' (conftest.py)

    job_main(job_args)


if __name__ == "__main__":
    main(sys.argv[1:])
