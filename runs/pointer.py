"""The commit of a run on an object store: run folders that never change, and a pointer.

An --output on gs:// or s3:// holds each run in a folder of its own, `OUTPUT/runs/<run_id>/`,
never changed after its manifest is written, and one small object, `OUTPUT/CURRENT`, that names
the current run:

    {"run_id": "...", "manifest_sha256": "...", "committed_at": "...", "kept": ["...", ...]}

A run is committed by one write of CURRENT, with a precondition on the version read when the
run started (S3: `If-Match: <ETag>`, or `If-None-Match: *` for the first run; GCS:
`if_generation_match=<generation>`, 0 for the first). Readers read CURRENT once, then only the
folder it names: the old run or the new one, never a mix. A run whose precondition fails lost a
race with another run: its folder is left for the next run's clean-up and it fails naming the
winner. Folders other than the current run and the `kept` ones (`--keep_runs`) are deleted only
after CURRENT has moved.

The lock of such an output is an object too, `OUTPUT/LOCK`, created only where none is
(`If-None-Match: *` / `if_generation_match=0`) and holding its run's id and lease; the run
renews the lease while it goes on, and removes the lock at the end on the same version it
wrote. An expired lease, or one whose process has ended on this host, is taken over with a
precondition on the version read, so by one run only.

Beam's FileSystems has no preconditions: the stores' own clients do the conditional writes
(boto3 for s3://, with Beam's --s3_* options; google-cloud-storage for gs://). A local --output
keeps its own layout and commit (two renames, runs/staging.py) and its flock (runs/output_lock.py).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from apache_beam.io.filesystems import FileSystems

from runs.manifest import MANIFEST
from runs.output_lock import OutputLocked

CURRENT = "CURRENT"
LOCK = "LOCK"
RUNS = "runs"
LEASE_S = 600.0  # a lock not renewed for this long may be taken over
MAX_TRIES = 10


class PreconditionFailed(Exception):
    """A conditional write or delete found another version than the one it named."""


@dataclass(frozen=True)
class Stored:
    """An object's bytes and its version (S3 ETag, GCS generation)."""

    data: bytes
    version: str


class PointerStore(Protocol):
    """Conditional reads and writes of one small object at a time (CURRENT, LOCK)."""

    def read(self, path: str) -> Stored | None:
        """The object and its version; None when there is none."""

    def create(self, path: str, data: bytes) -> str:
        """Write `path` only where there is no object; its new version, or PreconditionFailed."""

    def replace(self, path: str, data: bytes, version: str) -> str:
        """Write `path` only while it is at `version`; its new version, or PreconditionFailed."""

    def delete(self, path: str, version: str) -> None:
        """Delete `path` only while it is at `version` (PreconditionFailed); gone already: done."""


def is_object_store(path: str) -> bool:
    return "://" in path


def _bucket_key(path: str) -> tuple[str, str]:
    _, _, rest = path.partition("://")
    bucket, _, key = rest.partition("/")
    return bucket, key


class S3Store:
    """s3:// through boto3, with the endpoint, keys and region of Beam's --s3_* options (the
    ones FileSystems was given), so that it writes where the job's files go."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        return self._client if self._client is not None else _s3_client(*_s3_settings())

    def _error(self, e: Exception) -> Exception:
        code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
        if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
            return PreconditionFailed(str(e))
        return e

    def read(self, path: str) -> Stored | None:
        bucket, key = _bucket_key(path)
        try:
            got = self.client.get_object(Bucket=bucket, Key=key)
        except Exception as e:
            code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404"):
                return None
            raise
        return Stored(got["Body"].read(), got["ETag"])

    def _put(self, path: str, data: bytes, **condition: str) -> str:
        bucket, key = _bucket_key(path)
        try:
            return self.client.put_object(Bucket=bucket, Key=key, Body=data, **condition)["ETag"]
        except Exception as e:
            raise self._error(e) from e

    def create(self, path: str, data: bytes) -> str:
        return self._put(path, data, IfNoneMatch="*")

    def replace(self, path: str, data: bytes, version: str) -> str:
        return self._put(path, data, IfMatch=version)

    def delete(self, path: str, version: str) -> None:
        bucket, key = _bucket_key(path)
        try:
            self.client.delete_object(Bucket=bucket, Key=key, IfMatch=version)
        except Exception as e:
            code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404"):
                return
            raise self._error(e) from e


def _s3_settings() -> tuple[tuple[str, Any], ...]:
    """The client settings of Beam's --s3_* options, as FileSystems.set_options was given them
    (Beam keeps no public getter), so that the pointer goes where the job's files go."""
    from apache_beam.options.pipeline_options import PipelineOptions, S3Options

    options = getattr(FileSystems, "_pipeline_options", None) or PipelineOptions([])
    o = options.view_as(S3Options)
    settings = {
        "endpoint_url": o.s3_endpoint_url,
        "aws_access_key_id": o.s3_access_key_id,
        "aws_secret_access_key": o.s3_secret_access_key,
        "aws_session_token": o.s3_session_token,
        "region_name": o.s3_region_name,
        "api_version": o.s3_api_version,
        "verify": o.s3_verify,
        "use_ssl": False if o.s3_disable_ssl else None,
    }
    return tuple((k, v) for k, v in settings.items() if v is not None)


@functools.lru_cache(maxsize=8)
def _s3_client(*settings: tuple[str, Any]) -> Any:
    """One boto3 client per set of settings in this process."""
    try:
        import boto3
    except ImportError as e:
        raise ValueError(
            "an s3:// --output needs boto3 for its commit and lock: pip install "
            "'corpus-chunker[aws]'"
        ) from e
    return boto3.session.Session().client("s3", **dict(settings))


class GcsStore:
    """gs:// through google-cloud-storage: generation preconditions (0: no object yet)."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                from google.cloud import storage
            except ImportError as e:
                raise ValueError(
                    "a gs:// --output needs google-cloud-storage for its commit and lock: pip "
                    "install 'corpus-chunker[gcp]'"
                ) from e
            self._client = storage.Client()
        return self._client

    def _blob(self, path: str) -> Any:
        bucket, key = _bucket_key(path)
        return self.client.bucket(bucket).blob(key)

    @staticmethod
    def _call(call: Any, *args: Any, **kwargs: Any) -> Any:
        from google.api_core import exceptions

        try:
            return call(*args, **kwargs)
        except exceptions.PreconditionFailed as e:
            raise PreconditionFailed(str(e)) from e

    def read(self, path: str) -> Stored | None:
        from google.api_core import exceptions

        bucket, key = _bucket_key(path)
        blob = self.client.bucket(bucket).get_blob(key)
        if blob is None:
            return None
        try:  # the bytes of the generation just read, not of a newer one
            data = blob.download_as_bytes(if_generation_match=blob.generation)
        except (exceptions.PreconditionFailed, exceptions.NotFound):
            return self.read(path)  # replaced or deleted in between: read again
        return Stored(data, str(blob.generation))

    def _upload(self, path: str, data: bytes, generation: int) -> str:
        blob = self._blob(path)
        self._call(
            blob.upload_from_string,
            data,
            content_type="application/json",
            if_generation_match=generation,
        )
        return str(blob.generation)

    def create(self, path: str, data: bytes) -> str:
        return self._upload(path, data, 0)

    def replace(self, path: str, data: bytes, version: str) -> str:
        return self._upload(path, data, int(version))

    def delete(self, path: str, version: str) -> None:
        from google.api_core import exceptions

        try:
            self._call(self._blob(path).delete, if_generation_match=int(version))
        except exceptions.NotFound:
            return


_STORES: dict[str, PointerStore] = {}


def store_for(path: str) -> PointerStore:
    """The store of an object-store path (one per scheme in this process)."""
    scheme = path.partition("://")[0]
    if scheme not in _STORES:
        if scheme == "s3":
            _STORES[scheme] = S3Store()
        elif scheme == "gs":
            _STORES[scheme] = GcsStore()
        else:
            raise ValueError(
                f"--output {path}: {scheme}:// has no conditional write this job knows; use a "
                "local folder, gs:// or s3://"
            )
    return _STORES[scheme]


def use_store(scheme: str, store: PointerStore | None) -> None:
    """Make `store` the one of `scheme` (None: back to the default), e.g. with a client of
    one's own."""
    if store is None:
        _STORES.pop(scheme, None)
    else:
        _STORES[scheme] = store


# --- the pointer ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pointer:
    """What CURRENT holds, and the version it was read at (None: written by no one yet)."""

    run_id: str
    manifest_sha256: str
    committed_at: str
    kept: tuple[str, ...] = ()  # earlier runs kept by retention, newest first
    version: str | None = None

    def to_json(self) -> bytes:
        record = {
            "run_id": self.run_id,
            "manifest_sha256": self.manifest_sha256,
            "committed_at": self.committed_at,
            "kept": list(self.kept),
        }
        return json.dumps(record, indent=2, sort_keys=True).encode("utf-8")


def current_path(output: str) -> str:
    return FileSystems.join(output.rstrip("/"), CURRENT)


def run_path(output: str, run_id: str) -> str:
    """The folder of the run `run_id` in `output`."""
    return FileSystems.join(output.rstrip("/"), RUNS, run_id)


def parse_pointer(output: str, data: bytes, version: str | None = None) -> Pointer:
    """CURRENT's bytes as a Pointer; ValueError naming it when they are not one."""
    try:
        record = json.loads(data.decode("utf-8"))
        run_id, digest = record["run_id"], record["manifest_sha256"]
        kept = tuple(record.get("kept", ()))
        ok = (
            isinstance(run_id, str)
            and run_id
            and "/" not in run_id
            and isinstance(digest, str)
            and all(isinstance(k, str) and k and "/" not in k for k in kept)
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise ValueError(
            f"{current_path(output)} is not a pointer this job wrote (a JSON object with run_id "
            "and manifest_sha256): repair it to name a folder under runs/, or remove it"
        )
    return Pointer(run_id, digest, str(record.get("committed_at", "")), kept, version)


def read_pointer(output: str, store: PointerStore | None = None) -> Pointer | None:
    """CURRENT of `output`, with its version (None: no run committed yet). Without a store,
    read through Beam's FileSystems (a reader, which needs no version)."""
    path = current_path(output)
    if store is not None:
        found = store.read(path)
        return None if found is None else parse_pointer(output, found.data, found.version)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path, mime_type="application/json") as f:
        return parse_pointer(output, f.read(1 << 20))


def manifest_sha256(folder: str) -> str:
    with FileSystems.open(FileSystems.join(folder, MANIFEST)) as f:
        return hashlib.sha256(f.read()).hexdigest()


def current_run_folder(output: str) -> str | None:
    """The folder CURRENT names, its manifest checked against the pointer's hash (ValueError
    naming both when it differs or is missing); None when `output` has no CURRENT."""
    pointer = read_pointer(output)
    if pointer is None:
        return None
    folder = run_path(output, pointer.run_id)
    try:
        digest = manifest_sha256(folder)
    except (OSError, FileNotFoundError) as e:
        digest = f"unreadable ({e})"
    if digest != pointer.manifest_sha256:
        raise ValueError(
            f"{current_path(output)} names the run {pointer.run_id}, but "
            f"{FileSystems.join(folder, MANIFEST)} is not the manifest it committed (sha256 "
            f"{digest}, not {pointer.manifest_sha256}): the run folder was changed or removed"
        )
    return folder


class CommitLost(ValueError):
    """Another run moved CURRENT since this run read it (a ValueError, as OutputLocked is:
    the command prints its message, not a traceback)."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def commit(
    output: str, run_id: str, start: Pointer | None, keep_runs: int, store: PointerStore
) -> Pointer:
    """Make the run `run_id` (complete in its folder) the current one of `output`, if CURRENT
    is still what this run read at its start (`start`; None: there was none). Returns the
    pointer written; CommitLost, naming the winner, when another run moved it."""
    if keep_runs < 1:
        raise ValueError(f"--keep_runs must be at least 1 (the current run), got {keep_runs}")
    earlier = () if start is None else (start.run_id, *start.kept)
    kept = tuple(r for r in earlier if r != run_id)[: keep_runs - 1]
    pointer = Pointer(run_id, manifest_sha256(run_path(output, run_id)), _now(), kept)
    path = current_path(output)
    try:
        if start is None or start.version is None:
            version = store.create(path, pointer.to_json())
        else:
            version = store.replace(path, pointer.to_json(), start.version)
    except PreconditionFailed:
        now = read_pointer(output, store)
        winner = f"the run {now.run_id} (committed {now.committed_at})" if now else "no run"
        raise CommitLost(
            f"--output {output}: {CURRENT} moved while this run went on: it now names "
            f"{winner}, not the run this one started from "
            f"({start.run_id if start else 'none'}); this run ({run_id}) was not committed, "
            f"and its folder {run_path(output, run_id)} is left for the next run to delete"
        ) from None
    return Pointer(pointer.run_id, pointer.manifest_sha256, pointer.committed_at, kept, version)


def run_folders(output: str) -> list[str]:
    """The run ids that have a folder (any file) under OUTPUT/runs/."""
    root = FileSystems.join(output.rstrip("/"), RUNS) + "/"
    found = FileSystems.match([root + "**"])[0].metadata_list
    return sorted({m.path[len(root) :].split("/", 1)[0] for m in found if m.path.startswith(root)})


def remove_unkept(output: str, pointer: Pointer | None) -> list[str]:
    """Delete the run folders of `output` that CURRENT (`pointer`) neither names nor keeps:
    older runs beyond --keep_runs, and runs that never committed (killed, or that lost a
    race). Call it holding the lock, after CURRENT moved. Returns what it did, one line each."""
    if pointer is None:
        return []  # nothing committed yet: a folder under runs/ may be a run's that goes on
    keep = {pointer.run_id, *pointer.kept}
    done = []
    for run_id in run_folders(output):
        if run_id in keep:
            continue
        folder = run_path(output, run_id)
        paths = [m.path for m in FileSystems.match([folder + "/**"])[0].metadata_list]
        manifest = FileSystems.join(folder, MANIFEST)
        # the manifest first: a folder half deleted is then no complete run to anyone
        for batch in ([p for p in paths if p == manifest], [p for p in paths if p != manifest]):
            if batch:
                _delete(batch)
        done.append(f"deleted {folder}, a run that is neither current nor kept")
    return done


def _delete(paths: list[str]) -> None:
    FileSystems.delete(paths)


# --- the lock -------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class ObjectLock:
    """`with ObjectLock(output, run_id):` holds OUTPUT/LOCK for the block (see the module)."""

    output: str
    run_id: str = ""
    label: str = ""
    holder: str = "run"
    lease_s: float = LEASE_S
    store: PointerStore | None = None
    _version: str | None = field(default=None, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _renewer: threading.Thread | None = field(default=None, init=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self.label = self.label or f"--output {self.output}"
        self.path = FileSystems.join(self.output.rstrip("/"), LOCK)
        self.store = self.store or store_for(self.output)
        self.started_at = _now()

    def _record(self) -> bytes:
        record = {
            "run_id": self.run_id,
            "holder": self.holder,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": self.started_at,
            "lease_until": time.time() + self.lease_s,
            "renewed_at": _now(),  # also makes each write's bytes (and S3 ETag) new
        }
        return json.dumps(record, sort_keys=True).encode("utf-8")

    def __enter__(self) -> ObjectLock:
        assert self.store is not None
        for _ in range(MAX_TRIES):
            try:
                self._version = self.store.create(self.path, self._record())
                break
            except PreconditionFailed:
                pass
            found = self.store.read(self.path)
            if found is None:
                continue  # released in between: try again
            holder = _parse_holder(found.data)
            if not _takeable(holder):
                raise self._locked(holder)
            try:
                self._version = self.store.replace(self.path, self._record(), found.version)
            except PreconditionFailed:
                continue  # another taker, or its owner renewed it: look again
            logging.warning(
                "%s: taking over the lock of %s %s (pid %s on %s), %s",
                self.label,
                holder.get("holder", "run"),
                holder.get("run_id"),
                holder.get("pid"),
                holder.get("host"),
                "whose lease ran out" if _expired(holder) else "whose process has ended",
            )
            break
        else:
            raise OutputLocked(f"{self.label}: could not take the lock {self.path}")
        self._renewer = threading.Thread(target=self._renew, name="lock-renewer", daemon=True)
        self._renewer.start()
        return self

    def _renew(self) -> None:
        assert self.store is not None
        while not self._stop.wait(self.lease_s / 3):
            with self._guard:
                if self._version is None:
                    return
                try:
                    self._version = self.store.replace(self.path, self._record(), self._version)
                except PreconditionFailed:
                    logging.error(
                        "%s: the lock %s was taken over by another run; this run's commit "
                        "will fail if that run commits first",
                        self.label,
                        self.path,
                    )
                    self._version = None
                    return
                except Exception as e:  # a network error: try again at the next turn
                    logging.warning("%s: could not renew the lock %s: %s", self.label, self.path, e)

    def _locked(self, holder: dict[str, Any]) -> OutputLocked:
        until = holder.get("lease_until")
        ends = (
            datetime.datetime.fromtimestamp(until, datetime.UTC).isoformat()
            if isinstance(until, (int, float))
            else "unknown"
        )
        return OutputLocked(
            f"{self.label} is in use by another {holder.get('holder', 'run')} (run "
            f"{holder.get('run_id') or 'unknown'}, pid {holder.get('pid')} on "
            f"{holder.get('host')}, since {holder.get('started_at')}; its lease ends at {ends}); "
            f"wait for it, or delete {self.path} if that run is gone"
        )

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with self._guard:
            version, self._version = self._version, None
        if version is None or self.store is None:
            return
        try:
            self.store.delete(self.path, version)  # only while it is still this run's
        except PreconditionFailed:
            logging.warning("%s: the lock %s is another run's now: left", self.label, self.path)


def _parse_holder(data: bytes) -> dict[str, Any]:
    try:
        holder = json.loads(data.decode("utf-8"))
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _expired(holder: dict[str, Any]) -> bool:
    until = holder.get("lease_until")
    return not isinstance(until, (int, float)) or until < time.time()


def _takeable(holder: dict[str, Any]) -> bool:
    """An expired lease (or an unreadable lock), or one whose process ended on this host."""
    if _expired(holder):
        return True
    pid = holder.get("pid")
    return holder.get("host") == socket.gethostname() and isinstance(pid, int) and not _alive(pid)
