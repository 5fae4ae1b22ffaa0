"""Fixtures of the runner tests: a local Beam job service with an EXTERNAL SDK worker pool.

The pool runs the way a cluster's workers do: from a folder outside the repo, in a Python
environment that has Beam and the third-party libraries but not this project (no repo on
sys.path, no editable install). Its workers get the project only from the `--setup_file`
sdist that the job stages, through a small boot program that follows Beam's SDK container
contract (see `_sdk_boot_main`).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

START_TIMEOUT_S = 180  # importing Beam on a busy 2-core machine can take a while


def _sdk_boot_main(argv: list[str]) -> None:
    """A minimal SDK container boot, as the worker pool's `--container_executable`.

    `worker_pool_main` on its own starts `python -c SdkHarness(...)`: that worker never
    fetches the staged artifacts, so `--setup_file` would be ignored and the worker would
    import whatever its environment happens to have. In Beam's SDK images the pool instead
    calls `/opt/apache/beam/boot` (Go), which asks the provision service for the job's
    options and dependencies, downloads them from the artifact service, pip installs the
    staged `workflow.tar.gz`, and runs `sdk_worker_main`. This does the same, minus the
    requirements file, extra packages and SDK reinstall that this job does not use. It is
    written to a file and run by the worker environment's Python, so it imports nothing of
    the project and only Beam, grpc and the standard library.
    """
    import argparse
    import os
    import subprocess
    import sys
    import tempfile

    import grpc
    from apache_beam.portability import common_urns
    from apache_beam.portability.api import (
        beam_artifact_api_pb2,
        beam_artifact_api_pb2_grpc,
        beam_provision_api_pb2,
        beam_provision_api_pb2_grpc,
        beam_runner_api_pb2,
        endpoints_pb2,
    )
    from google.protobuf import json_format

    parser = argparse.ArgumentParser()
    endpoints = ("logging_endpoint", "artifact_endpoint", "provision_endpoint", "control_endpoint")
    for name in ("id", *endpoints):
        parser.add_argument(f"--{name}", required=True)
    args = parser.parse_args(argv)

    os.makedirs("workers", exist_ok=True)
    work = os.path.abspath(tempfile.mkdtemp(prefix=f"{args.id}-", dir="workers"))
    staged, site = os.path.join(work, "staged"), os.path.join(work, "site")
    os.makedirs(staged)
    log = open(os.path.join(work, "boot.log"), "w")  # noqa: SIM115 - handed to the worker
    metadata = [("worker_id", args.id)]

    info = (
        beam_provision_api_pb2_grpc.ProvisionServiceStub(
            grpc.insecure_channel(args.provision_endpoint)
        )
        .GetProvisionInfo(beam_provision_api_pb2.GetProvisionInfoRequest(), metadata=metadata)
        .info
    )
    artifacts = beam_artifact_api_pb2_grpc.ArtifactRetrievalServiceStub(
        grpc.insecure_channel(args.artifact_endpoint)
    )
    for dependency in info.dependencies:
        if dependency.role_urn != common_urns.artifact_roles.STAGING_TO.urn:
            continue
        name = beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(
            dependency.role_payload
        ).staged_name
        with open(os.path.join(staged, name), "wb") as f:
            request = beam_artifact_api_pb2.GetArtifactRequest(artifact=dependency)
            for part in artifacts.GetArtifact(request, metadata=metadata):
                f.write(part.data)
        print(f"staged {name}", file=log, flush=True)

    workflow = os.path.join(staged, "workflow.tar.gz")
    if os.path.exists(workflow):
        # Beam's boot runs a plain `pip install workflow.tar.gz`, which may reach PyPI for the
        # build backend and any missing dependency. Here everything is already in the
        # environment (as in the project's worker image), and nothing may be downloaded.
        command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
        command += ["--disable-pip-version-check", "--target", site, workflow]
        subprocess.run(command, check=True, stdout=log, stderr=log)
        print(f"installed {workflow} into {site}", file=log, flush=True)

    env = dict(os.environ)
    env.update(
        PYTHONPATH=site,
        WORKER_ID=args.id,
        SEMI_PERSISTENT_DIRECTORY=work,
        PIPELINE_OPTIONS=json_format.MessageToJson(info.pipeline_options),
        RUNNER_CAPABILITIES=" ".join(info.runner_capabilities),
        CONTROL_API_SERVICE_DESCRIPTOR=str(
            endpoints_pb2.ApiServiceDescriptor(url=args.control_endpoint)
        ),
        LOGGING_API_SERVICE_DESCRIPTOR=str(
            endpoints_pb2.ApiServiceDescriptor(url=args.logging_endpoint)
        ),
    )
    # The pool reads nothing from the worker's stdout pipe: a full pipe would block it.
    os.dup2(log.fileno(), sys.stdout.fileno())
    harness = [sys.executable, "-m", "apache_beam.runners.worker.sdk_worker_main"]
    os.execve(sys.executable, harness, env)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log_tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


def _wait_until_listening(proc: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} before listening:\n{_log_tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"not listening on {port} after {START_TIMEOUT_S} s:\n{_log_tail(log)}")


def _stop_group(proc: subprocess.Popen) -> None:
    """Stop a service started in its own session, with every worker it started."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):  # a stuck leader, or workers it left behind
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _start(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _worker_environment(root: Path) -> Path:
    """A venv that sees this venv's site-packages but not the project; returns its python.

    The site-packages folder goes on sys.path through a plain `.pth` line, so the `.pth`
    files inside it (among them the editable install's import hook) are not run.
    """
    venv = root / "worker-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "runner-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@dataclass(frozen=True)
class PortableServices:
    job_endpoint: str
    worker_pool: str
    root: Path  # the service logs, and pool/workers/<id>-*/ with each worker's boot.log

    def worker_dirs(self) -> list[Path]:
        return sorted((self.root / "pool" / "workers").glob("*"))

    def log_tails(self) -> str:
        logs = [self.root / "job-service.log", self.root / "worker-pool.log"]
        logs += [d / "boot.log" for d in self.worker_dirs()]
        return "\n".join(f"--- {log}\n{_log_tail(log)}" for log in logs)


@pytest.fixture(scope="module")
def runner_portable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PortableServices]:
    """Beam's local job service and an EXTERNAL worker pool on 127.0.0.1, stopped at the end."""
    root = tmp_path_factory.mktemp("runner_portable")
    pool_dir, service_dir = root / "pool", root / "job-service"
    pool_dir.mkdir()
    service_dir.mkdir()
    python = _worker_environment(root)
    boot = root / "boot.py"
    boot.write_text(
        f"import sys\n\n\n{inspect.getsource(_sdk_boot_main)}\n_sdk_boot_main(sys.argv[1:])\n"
    )
    executable = root / "boot"
    executable.write_text(
        f'#!/bin/sh\nexec {shlex.quote(str(python))} {shlex.quote(str(boot))} "$@"\n'
    )
    executable.chmod(0o755)

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    job_port, pool_port = _free_port(), _free_port()
    pool_log, service_log = root / "worker-pool.log", root / "job-service.log"
    # The pool binds [::]:port (worker_pool_main has no flag for the address); it is only
    # ever reached at 127.0.0.1, and the job service binds localhost.
    pool_command = [str(python), "-m", "apache_beam.runners.worker.worker_pool_main"]
    pool_command += [f"--service_port={pool_port}", f"--container_executable={executable}"]
    pool = _start(pool_command, pool_dir, env, pool_log)
    service = None
    try:
        service_module = "apache_beam.runners.portability.local_job_service_main"
        service_command = [sys.executable, "-m", service_module, f"--port={job_port}"]
        service_command.append(f"--staging_dir={service_dir / 'staging'}")
        # Its own cwd too: `python -m` puts the cwd first on sys.path, and a stray file there
        # (say /tmp/proto.py) shadows a library module.
        service = _start(service_command, service_dir, env, service_log)
        _wait_until_listening(pool, pool_port, pool_log)
        _wait_until_listening(service, job_port, service_log)
        yield PortableServices(
            job_endpoint=f"127.0.0.1:{job_port}",
            worker_pool=f"127.0.0.1:{pool_port}",
            root=root,
        )
    finally:
        if service is not None:
            _stop_group(service)
        _stop_group(pool)


# --- Whole-job runs that several tests read ------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLES = str(ROOT / "samples" / "*" / "*")
# The parents configuration that tests/data/golden/samples_parents.json records: parent chunks,
# no header, no model.
PARENT_FLAGS = [
    "--embedding_model=none",
    "--parent_chunk_size=512",
    "--context=none",
    "--chunk_size=128",
    "--chunk_overlap=16",
]
# Each distinct configuration of the job on samples/ that tests read, by name: built once per
# test session (under xdist, once per worker that runs a test reading it).
RUNS: dict[str, list[str]] = {
    # what `make demo` makes (tests/data/golden/samples_default.json)
    "samples": ["--input", SAMPLES],
    "samples_no_model": ["--input", SAMPLES, "--embedding_model=none"],
    "samples_parents": ["--input", SAMPLES, *PARENT_FLAGS],
}


@dataclass(frozen=True)
class JobRun:
    output: str
    stderr: str  # what the run printed there: its progress lines


class JobRuns:
    """Builds each configuration of RUNS on first use, once per test session.

    Under xdist every worker is a process of its own: the first worker that asks for a run
    builds it under a file lock in the folder the workers share, and the others read it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[str, JobRun] = {}

    def __call__(self, name: str) -> JobRun:
        if name not in self.done:
            from filelock import FileLock

            output = self.root / name
            printed = self.root / f"{name}.stderr"
            with FileLock(str(self.root / f"{name}.lock")):
                if not printed.exists():  # written last: the run is complete
                    shutil.rmtree(output, ignore_errors=True)  # what a failed build left
                    self._build(name, str(output), printed)
            self.done[name] = JobRun(str(output), printed.read_text())
        return self.done[name]

    @staticmethod
    def _build(name: str, output: str, printed: Path) -> None:
        import io

        from pipelines import live_progress as progress
        from pipelines.chunk_corpus import run

        err = io.StringIO()
        # progress lines four times a second, to see counts move during a short run
        interval, progress.LOG_INTERVAL_S = progress.LOG_INTERVAL_S, 0.25
        try:
            with contextlib.redirect_stderr(err):
                run([*RUNS[name], "--output", output])
        finally:
            progress.LOG_INTERVAL_S = interval
        printed.write_text(err.getvalue())


@pytest.fixture(scope="session")
def job_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> JobRuns:
    """`job_run(name)`: the output of the job run with RUNS[name], built once per session."""
    base = tmp_path_factory.getbasetemp()
    # xdist gives each worker its own basetemp (popen-gwN) inside the session's folder
    root = base if worker_id == "master" else base.parent
    folder = root / "job_runs"
    folder.mkdir(exist_ok=True)
    return JobRuns(folder)
