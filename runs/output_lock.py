"""One run at a time per --output: a lock file taken before the folder is touched.

Two runs writing into one folder would mix their shards and both report success. The lock is
a file beside the output folder (`.NAME.lock`: the folder itself is swapped for the new run at
the end, runs/staging.py) that its owner holds `flock`-ed, writing in it its host, pid and
start time. Taking it is one atomic `flock`, whoever else tries at the same moment; the kernel
releases it when its owner's process ends however it ends, so a killed run's lock is taken over
(with a warning) by the next run, and by one run only. Its owner alone removes it, while still
holding it, and only while the file is still its own.
Local folders only: an object store's lock is an object created with a precondition, with a
lease (runs/pointer.py `ObjectLock`, which RunFolder.lock gives for gs:// and s3://).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import logging
import os
import socket
from types import TracebackType

from runs.staging import resolved
from transforms.ingest.matching import lock_beside

MAX_TRIES = 10  # a lock file removed under a taker this many times in a row: give up


def lock_path(output: str) -> str:
    """The lock file of a local output folder: `.NAME.lock` beside it."""
    return lock_beside(resolved(output))


class OutputLocked(ValueError):
    """Another run holds the output folder."""


def _read_holder(path: str) -> dict:
    """The owner record a lock file holds ({} when it cannot be read)."""
    try:
        with open(path) as f:
            holder = json.load(f)
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


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
        self._fd: int | None = None  # the lock file, flock-ed, while held

    def __enter__(self) -> OutputLock:
        if self.path is None:  # (RunFolder.lock gives an object store's output an ObjectLock)
            logging.info("%s is not local: no lock against a second %s", self.label, self.holder)
            return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        for _ in range(MAX_TRIES):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                taken = self._lock(fd)
            finally:
                if self._fd != fd:
                    os.close(fd)  # not taken: the descriptor holds nothing
            if taken:
                return self
        raise OutputLocked(f"{self.label}: could not take the lock {self.path}")

    def _lock(self, fd: int) -> bool:
        """Take the lock through `fd` (True: `self._fd` is then `fd`), or find the file gone
        under it (False: try again); OutputLocked when a live holder has it."""
        assert self.path is not None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._locked(_read_holder(self.path)) from None
        # Between the open and the flock, its holder may have released it: removed the file
        # (this descriptor's inode is gone) and another taker made a new one. Locking a
        # removed file holds nothing.
        try:
            same = os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            return False
        holder = _read_holder(self.path)
        pid, host = holder.get("pid"), holder.get("host")
        if isinstance(pid, int) and host == socket.gethostname():
            if pid != os.getpid() and _alive(pid):
                # an older version's lock (O_EXCL, no flock) whose run is still going
                raise self._locked(holder)
            logging.warning(
                "%s: taking over the lock of %s %s, which ended without releasing it",
                self.label,
                self.holder,
                pid,
            )
        owner = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": datetime.datetime.now(datetime.UTC).isoformat(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(owner).encode(), 0)
        self._fd = fd
        return True

    def _locked(self, holder: dict) -> OutputLocked:
        pid, host = holder.get("pid"), holder.get("host")
        return OutputLocked(
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
        fd, self._fd = self._fd, None
        if fd is None or self.path is None:
            return
        try:
            # Removed while still held, and only if the file is still this lock's own: one
            # that someone removed and another run made since is that run's.
            with contextlib.suppress(FileNotFoundError):
                if os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                    os.unlink(self.path)
        finally:
            os.close(fd)  # releases the flock
