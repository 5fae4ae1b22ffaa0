"""Ctrl-C prints one line saying what the interrupted run left, not Beam's tracebacks."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runs.output_lock import lock_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.slow


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_prints_one_line(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(1500):
        (corpus / f"doc{i}.md").write_text(f"# Doc {i}\n\n" + "Some prose to chunk. " * 400)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipelines.chunk_corpus",
            "--input",
            str(corpus),
            "--output",
            str(out),
            "--embedding_model=none",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A terminal's Ctrl-C reaches a job whose SIGINT is not ignored; a shell's background
        # job (`make test &`, CI behind nohup) starts with SIGINT ignored, which the child
        # would inherit and the test would then not be testing.
        preexec_fn=_sigint_default,
    )
    lock = Path(lock_path(str(out)))
    deadline = time.monotonic() + 90
    while not lock.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)  # until the run holds its output: the pipeline is about to run
    assert lock.exists(), "the job never started"
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
    # at most the progress lines printed before it, and the one line
    assert len([line for line in stderr.splitlines() if "progress" not in line]) == 1, stderr
    assert f"corpus-chunker: interrupted: {out} holds no complete run" in stderr
