"""Live progress counts of a local run: Beam counters that also tell the launcher how far along.

Beam's local runners report metrics only when a bundle ends, and the in-process runner's read
stage is one bundle: nothing arrives while it works. So a stage's counter (`counter`) also adds
to a per-process tally, which a daemon thread writes every `WRITE_INTERVAL_S` to its own small
JSON file in the folder named by the `PROGRESS_DIR_ENV` environment variable. The launcher sets
it for the DirectRunner only (whose worker processes inherit its environment) and sums the
files; elsewhere the variable is unset and the counter is a plain Beam counter.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from typing import Any

from apache_beam.metrics import Metrics

PROGRESS_DIR_ENV = "CORPUS_CHUNKER_PROGRESS_DIR"
WRITE_INTERVAL_S = 0.5


class _Tally:
    """The counts of one process, written to `folder/<host>-<pid>.json` by a daemon thread."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.path = os.path.join(folder, f"{socket.gethostname()}-{os.getpid()}.json")
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.version = 0  # bumped on every change; the writer skips a write when it is unchanged
        self.written = -1
        self.stop = threading.Event()
        thread = threading.Thread(target=self._write_loop, name="corpus-chunker-progress")
        thread.daemon = True
        thread.start()

    def add(self, name: str, n: int) -> None:
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + n
            self.version += 1

    def write(self) -> None:
        with self.lock:
            if self.version == self.written:
                return
            snapshot, version = dict(self.counts), self.version
        tmp = f"{self.path}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(snapshot, f)
            os.replace(tmp, self.path)  # the reader never sees half a file
        except OSError:
            return  # the folder is gone: the launcher has finished reading
        self.written = version

    def _write_loop(self) -> None:
        while not self.stop.wait(WRITE_INTERVAL_S):
            if not os.path.isdir(self.folder):  # the launcher has finished and removed it
                with _TALLIES_LOCK:
                    _TALLIES.pop((os.getpid(), self.folder), None)
                return
            self.write()


# One tally per process and progress folder: every DoFn instance of a worker process adds to
# the same counts. A process-wide registry is the point here (the counts of all the stages
# running in one worker), so it is module state, keyed by pid to survive a fork.
_TALLIES: dict[tuple[int, str], _Tally] = {}
_TALLIES_LOCK = threading.Lock()


def tally() -> _Tally | None:
    """This process's tally, or None when no launcher asked for progress."""
    folder = os.environ.get(PROGRESS_DIR_ENV)
    if not folder or not os.path.isdir(folder):
        return None
    key = (os.getpid(), folder)
    found = _TALLIES.get(key)
    if found is None:
        with _TALLIES_LOCK:
            found = _TALLIES.get(key)
            if found is None:
                found = _TALLIES[key] = _Tally(folder)
    return found


class ProgressCounter:
    """A Beam counter (`Metrics.counter`) whose increments also go to the progress tally."""

    def __init__(self, namespace: str, name: str) -> None:
        self.name = name
        self.counter = Metrics.counter(namespace, name)
        self._tally: _Tally | bool | None = False  # False: not looked up yet in this process

    def inc(self, n: int = 1) -> None:
        self.counter.inc(n)
        if self._tally is False:
            self._tally = tally()
        if self._tally is not None:
            self._tally.add(self.name, n)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_tally"] = False  # looked up again where the DoFn is unpickled
        return state


def counter(namespace: str, name: str) -> ProgressCounter:
    """`Metrics.counter(namespace, name)` that also reports to a local launcher's progress."""
    return ProgressCounter(namespace, name)
