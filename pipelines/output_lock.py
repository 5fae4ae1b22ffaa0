"""One run at a time per --output: a lock file taken before the folder is touched.

Two runs writing into one folder would mix their shards and both report success. The lock is
a file created exclusively (O_EXCL) beside the output folder (`.NAME.lock`: the folder itself
is swapped for the new run at the end, pipelines/staging.py), holding the owner's host, pid and
start time; a lock whose owner process is gone (a killed run) is taken over with a warning.
Local folders only: an object store has no exclusive create, so a run there says so and
relies on the job's own staging.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import socket
from types import TracebackType

from pipelines.staging import resolved
from transforms.read import lock_beside


def lock_path(output: str) -> str:
    """The lock file of a local output folder: `.NAME.lock` beside it."""
    return lock_beside(resolved(output))


class OutputLocked(ValueError):
    """Another run holds the output folder."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


class OutputLock:
    """`with OutputLock(output):` holds the lock of `output` for the block."""

    def __init__(self, output: str, label: str | None = None, holder: str = "run") -> None:
        self.output = output
        self.path = None if "://" in output else lock_path(output)
        self.label = label or f"--output {output}"  # what the messages name
        self.holder = holder  # what holds it: a "run", a "load"
        self._held = False

    def __enter__(self) -> OutputLock:
        if self.path is None:
            logging.info("%s is not local: no lock against a second %s", self.label, self.holder)
            return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        owner = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": datetime.datetime.now(datetime.UTC).isoformat(),
        }
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._take_over_if_stale()
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(owner, f)
            self._held = True
            return self
        raise OutputLocked(f"{self.label}: could not take the lock {self.path}")

    def _take_over_if_stale(self) -> None:
        assert self.path is not None
        try:
            with open(self.path) as f:
                holder = json.load(f)
        except (OSError, ValueError):
            holder = {}
        pid, host = holder.get("pid"), holder.get("host")
        if isinstance(pid, int) and host == socket.gethostname() and not _alive(pid):
            logging.warning(
                "%s: taking over the lock of %s %s, which ended without releasing it",
                self.label,
                self.holder,
                pid,
            )
            os.unlink(self.path)
            return
        raise OutputLocked(
            f"{self.label} is in use by another {self.holder} (pid {pid} on {host}, since "
            f"{holder.get('started_at')}); wait for it, or remove {self.path} if that "
            f"{self.holder} is gone"
        )

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._held and self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            self._held = False
