"""The output lock is taken atomically and released only by its owner (issue 22, N8).

Taking over a dead run's lock was read, unlink, create: two runs starting together could both
hold it. Releasing it deleted whatever file was at its path, another run's lock included."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import time

import pytest

from runs.output_lock import OutputLock, OutputLocked, lock_path

TAKERS = 4
TRIALS = 15


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _stale_lock(out: str) -> None:
    record = {"host": socket.gethostname(), "pid": _dead_pid(), "started_at": "earlier"}
    with open(lock_path(out), "w") as f:
        json.dump(record, f)


def _take(out: str, start, holding, most, taken) -> None:
    start.wait(10)
    try:
        with OutputLock(out):
            with holding.get_lock():
                holding.value += 1
                most.value = max(most.value, holding.value)
            with taken.get_lock():
                taken.value += 1
            time.sleep(0.05)
            with holding.get_lock():
                holding.value -= 1
    except OutputLocked:
        pass


def test_concurrent_takers_of_a_stale_lock_hold_it_one_at_a_time(tmp_path):
    ctx = multiprocessing.get_context("fork")
    out = str(tmp_path / "out")
    for _ in range(TRIALS):  # bounded: each trial ends when its takers have
        _stale_lock(out)
        start = ctx.Barrier(TAKERS)
        holding, most, taken = ctx.Value("i", 0), ctx.Value("i", 0), ctx.Value("i", 0)
        procs = [
            ctx.Process(target=_take, args=(out, start, holding, most, taken))
            for _ in range(TAKERS)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
            assert p.exitcode == 0
        assert most.value == 1, "two runs held the output lock at once"
        assert taken.value >= 1  # the dead run's lock was taken over
        assert not os.path.exists(lock_path(out))  # and released by its owner


def test_a_lock_is_released_only_by_its_owner(tmp_path):
    out = str(tmp_path / "out")
    first = OutputLock(out).__enter__()
    os.unlink(lock_path(out))  # someone removed it by hand, and another run then took it
    with OutputLock(out):
        first.__exit__(None, None, None)  # the first run ends
        assert os.path.exists(lock_path(out))  # the second run's lock is still there
        with pytest.raises(OutputLocked, match="in use by another run"):
            OutputLock(out).__enter__()
    assert not os.path.exists(lock_path(out))


def test_a_live_holders_lock_is_refused_and_a_killed_ones_taken(tmp_path):
    out = str(tmp_path / "out")
    ctx = multiprocessing.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()

    def hold() -> None:
        with OutputLock(out):
            ready.set()
            done.wait(30)

    proc = ctx.Process(target=hold)
    proc.start()
    try:
        assert ready.wait(30)
        with pytest.raises(OutputLocked, match=f"pid {proc.pid}"):
            OutputLock(out).__enter__()
    finally:
        proc.kill()
        proc.join()
    assert os.path.exists(lock_path(out))  # killed: its lock file is left behind
    with OutputLock(out):  # and taken over at once
        pass
