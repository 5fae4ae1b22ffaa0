"""RunFolder: one run's output folder, the one way every command and stage reads or replaces it.

    folder = RunFolder("out/night2", advice="rebuild it before loading it")
    folder.manifest           # run_manifest.json, read and checked once (ValueError naming it)
    folder.shards             # the table shards it lists, each checked against its sha256
    folder.listed_shards      # the same, their sizes checked by a listing (the launcher's)
    folder.read_table("chunks", ["chunk_id", "text"])
    with folder.lock(): ...   # one run at a time (runs/output_lock.py)
    folder.swap_in(staged)    # the staged run takes its place (runs/staging.py)

Any file system Beam knows (local, gs://, s3://). On gs:// and s3:// the folder named is the
output, and the run read is the one its CURRENT pointer names, `OUTPUT/runs/<run_id>/`, read
once (runs/pointer.py); an output without CURRENT is read as the folder itself (a run of an
older version). A local output is the run folder itself, replaced by renames.
A run older than the manifest format of this version is refused with an error that names the
folder and says to rebuild it (runs/manifest.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from runs import manifest as manifests
from runs import pointer as pointers
from runs import staging
from runs.output_lock import OutputLock
from transforms.cost_report import CostReport
from transforms.fingerprint import CONFIG_VERSION, config_fingerprint


class RunFolder:
    """A run's output folder. `label` is how messages name it (default: its path), and `advice`
    what they tell the user to do when the run cannot be read."""

    def __init__(self, path: str, label: str | None = None, advice: str = "rebuild it") -> None:
        self.output = path  # the folder named; `path` is where its current run lies
        self.label = label or path
        self.advice = advice
        self._start: pointers.Pointer | None = None  # CURRENT as this run found it

    def __repr__(self) -> str:
        return f"RunFolder({self.output!r})"

    @property
    def on_object_store(self) -> bool:
        return pointers.is_object_store(self.output)

    @functools.cached_property
    def path(self) -> str:
        """The folder of the current run: the output itself on a local disk (or an object
        store without CURRENT); on an object store, the run folder CURRENT names, read once
        (ValueError naming CURRENT when its manifest is not the one it committed)."""
        if not self.on_object_store:
            return self.output
        return pointers.current_run_folder(self.output) or self.output.rstrip("/")

    def join(self, *parts: str) -> str:
        return FileSystems.join(self.path, *parts)

    # --- the manifest --------------------------------------------------------------------

    def has_manifest(self) -> bool:
        """Whether a manifest is there (written last: the run completed), unread."""
        return FileSystems.exists(self.join(manifests.MANIFEST))

    def is_complete(self) -> bool:
        """Whether the folder holds a manifest of this job, of any version (read again on every
        call: what the staging swap may replace)."""
        return manifests.is_complete(self.path)

    @functools.cached_property
    def manifest(self) -> dict[str, Any]:
        """run_manifest.json, checked to be of this version's format (read once)."""
        return manifests.read_checked(self.path, self.label, self.advice)

    def check(self) -> RunFolder:
        """Read and check the manifest now (ValueError naming the folder); the folder."""
        _ = self.manifest
        return self

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    @property
    def previous_run_id(self) -> str | None:
        return self.manifest.get("previous_run_id")

    @property
    def previous_output(self) -> str | None:
        return self.manifest.get("previous_output")

    @property
    def mode(self) -> str:
        return self.manifest["mode"]

    @property
    def config(self) -> dict[str, Any]:
        return self.manifest["config"]

    @property
    def embedding_cache_key(self) -> str | None:
        return self.manifest.get("embedding_cache_key")

    def require_chunks(self, purpose: str = "") -> None:
        """ValueError unless the run made chunks (an --estimate run made none)."""
        if self.mode != "run":
            raise ValueError(f"{self.label} is an --estimate run: it has no chunks{purpose}")

    @functools.cached_property
    def fingerprint(self) -> str:
        """The fingerprint of the config the manifest records, recomputed, not read: "" (matching
        no run) when the config lacks a setting. A recorded fingerprint that differs while the
        config is of this version's kind is an edited manifest, refused."""
        config = self.config
        try:
            fingerprint = config_fingerprint(config)
        except (KeyError, TypeError):
            fingerprint = ""
        recorded = self.manifest["config_fingerprint"]
        if config.get("config_version") == CONFIG_VERSION and fingerprint != recorded:
            raise ValueError(
                f"{self.label}: its manifest records the config fingerprint {recorded!r}, but "
                f"its config gives {fingerprint or 'none'}: the manifest was edited; "
                f"{self.advice}"
            )
        return fingerprint

    @functools.cached_property
    def shards(self) -> dict[str, tuple[str, ...]]:
        """The shards of each table that the manifest lists, each checked to be the file the run
        wrote (size and sha256; every byte is read once); files added since are ignored."""
        return manifests.verified_shards(self.path, self.manifest["files"], self.label, self.advice)

    @functools.cached_property
    def listed_shards(self) -> dict[str, tuple[str, ...]]:
        """The shards of each table that the manifest lists, their sizes checked from a
        listing (no file is read); `shard_checks` checks their sha256 where the job runs."""
        return manifests.verified_shards(
            self.path, self.manifest["files"], self.label, self.advice, read_files=False
        )

    def shard_checks(self) -> tuple[tuple[str, dict[str, Any], str], ...]:
        """(path, its manifest entry, the error if it is not that file) of every shard the
        manifest lists, for manifests.CheckShards."""
        return tuple(
            (
                self.join(name),
                manifests.expected_entry(entry),
                manifests.changed_shard(self.label, name, self.advice),
            )
            for name, entry in sorted(self.manifest["files"].items())
            if name.endswith(".parquet")
        )

    def inventory(self, paths: Iterable[str]) -> dict[str, dict[str, Any]]:
        """{path relative to the folder: {bytes, sha256}} of each of `paths`."""
        return manifests.file_inventory(self.path, paths)

    def write_manifest(self, manifest: dict[str, Any], files: Iterable[str]) -> str:
        """Write the manifest of a run folder made outside the job (the eval baselines):
        `manifest` with the inventory of `files` (paths inside the folder), checked to be of
        this version's format first, written whole (a temporary name, then renamed). Returns
        its path."""
        manifest = {**manifest, "files": self.inventory(files)}
        problems = manifests.format_problems(manifest)
        if problems:
            raise ValueError(f"{self.label}: the manifest to write {' and '.join(problems)}")
        path = self.join(manifests.MANIFEST)
        manifests.write_atomically(path, json.dumps(manifest, indent=2, sort_keys=True))
        self.__dict__.pop("manifest", None)  # read again from the file on the next use
        return path

    # --- the tables and reports ----------------------------------------------------------

    def table_files(self, table: str) -> list[Any]:
        """The shards in one table's folder (Beam's FileMetadata: path and size), by path."""
        found = FileSystems.match([self.join(table, "*.parquet")])[0].metadata_list
        return sorted(found, key=lambda m: m.path)

    def read_table(self, table: str, columns: list[str] | None = None) -> pa.Table | None:
        """All shards of the table as one Arrow table; None when the run wrote none."""
        parts = []
        for meta in self.table_files(table):
            with FileSystems.open(meta.path, mime_type="application/octet-stream") as f:
                parts.append(pq.read_table(f, columns=columns))
        if not parts:
            return None
        return pa.concat_tables(parts, promote_options="permissive")

    def cost_report(self) -> CostReport | None:
        """cost_report.json, typed (a missing or unknown key is refused); None when it is not
        there."""
        path = self.join(manifests.COST_REPORT)
        if not FileSystems.exists(path):
            return None
        with FileSystems.open(path, mime_type="application/json") as f:
            return CostReport.from_json(f.read())

    def output_bytes(self) -> dict[str, int]:
        """Bytes of the folder's files: per table folder, the report files together under
        "reports"."""
        sizes: dict[str, int] = {}
        root = self.path.rstrip("/") + "/"
        for meta in FileSystems.match([self.join("**")])[0].metadata_list:
            rel = meta.path[len(root) :] if meta.path.startswith(root) else meta.path
            part = rel.split("/", 1)[0] if "/" in rel else "reports"
            sizes[part] = sizes.get(part, 0) + meta.size_in_bytes
        return sizes

    # --- replacing it --------------------------------------------------------------------

    def lock(
        self, label: str | None = None, holder: str = "run", run_id: str = ""
    ) -> OutputLock | pointers.ObjectLock:
        """`with folder.lock():` holds the folder against a second run (a "run", a "load"):
        a flock-ed file beside a local folder, a LOCK object with a lease on an object store."""
        if self.on_object_store:
            return pointers.ObjectLock(self.output, run_id, label or "", holder)
        return OutputLock(self.output, label, holder)

    def staging_folder(self, run_id: str) -> str:
        """Where the run `run_id` writes before it replaces this folder: beside a local folder,
        its own folder `runs/<run_id>/` on an object store (CURRENT is read now, the version
        the commit's precondition names)."""
        if self.on_object_store:
            self._start = pointers.read_pointer(self.output, pointers.store_for(self.output))
            return pointers.run_path(self.output, run_id)
        return staging.staging_folder(self.output, run_id)

    def recover(self) -> list[str]:
        """Finish a swap a crash cut short, delete what runs that never completed left; call it
        holding the lock. One line per thing done."""
        if self.on_object_store:
            store = pointers.store_for(self.output)
            return pointers.remove_unkept(self.output, pointers.read_pointer(self.output, store))
        return staging.recover(self.output)

    def swap_in(self, staged: str, keep_runs: int = 2) -> list[str]:
        """Put the complete run in the folder `staged` in this folder's place: renames on a
        local disk; on an object store one conditional write of CURRENT, then the deletion of
        the runs it does not keep (`keep_runs`: the current one included). Returns what the
        retention did, one line each."""
        self.__dict__.pop("path", None)  # the current run is read again on the next use
        if not self.on_object_store:
            staging.swap_in(staged, self.output)
            return []
        run_id = staged.rstrip("/").rsplit("/", 1)[-1]
        if staged.rstrip("/") != pointers.run_path(self.output, run_id):
            raise ValueError(f"{staged} is not a run folder of {self.output} (runs/<run_id>)")
        if not manifests.is_complete(staged):
            raise RuntimeError(f"{staged} holds no complete run; {self.output} was left as it was")
        store = pointers.store_for(self.output)
        committed = pointers.commit(self.output, run_id, self._start, keep_runs, store)
        self._start = committed
        return [*pointers.remove_unkept(self.output, committed), *self._remove_flat_run()]

    @property
    def start(self) -> pointers.Pointer | None:
        """CURRENT as `staging_folder` read it (object stores; None elsewhere or before)."""
        return self._start

    def commit(self, staged: str, keep_runs: int, start: pointers.Pointer | None) -> list[str]:
        """`swap_in` as the job's last step does it (transforms/commit.py), with `start`, CURRENT
        as the launcher read it at the run's start. A retry of that step after the commit went
        through commits nothing again: on a local disk --output's manifest is already this
        run's (a staged folder left beside it is deleted); on an object store CURRENT already
        names this run (the retention is done again, which is safe to repeat). Returns what the
        retention did."""
        run_id = staged.rstrip("/").rsplit("/", 1)[-1].rsplit("-", 1)[-1]
        if self.on_object_store:
            store = pointers.store_for(self.output)
            now = pointers.read_pointer(self.output, store)
            if now is not None and now.run_id == run_id:
                return [*pointers.remove_unkept(self.output, now), *self._remove_flat_run()]
            self._start = start
        elif self.has_manifest() and self.manifest.get("run_id") == run_id:
            self.__dict__.pop("manifest", None)
            if FileSystems.exists(staged):
                staging.delete_folder(staged)
            return []
        return self.swap_in(staged, keep_runs)

    def _remove_flat_run(self) -> list[str]:
        """An older version's run, written flat into the output folder: deleted once CURRENT
        names a run (readers then never read it)."""
        from schemas.columns import TABLES

        root = self.output.rstrip("/")
        found = [
            m.path
            for pattern in [
                *(FileSystems.join(root, t, "*") for t in TABLES),
                *(FileSystems.join(root, n) for n in manifests.REPORT_FILES),
            ]
            for m in FileSystems.match([pattern])[0].metadata_list
        ]
        if not found:
            return []
        manifest = FileSystems.join(root, manifests.MANIFEST)
        found.sort(key=lambda p: p != manifest)  # the manifest first
        FileSystems.delete(found)
        return [f"deleted the {len(found)} files of the run an older version wrote in {root}"]

    def discard(self, staged: str) -> None:
        """Delete a staged run that will not replace this folder; on an object store not the
        run CURRENT names (a job that failed after its commit step went through)."""
        if self.on_object_store:
            now = pointers.read_pointer(self.output, pointers.store_for(self.output))
            if now is not None and staged.rstrip("/") == pointers.run_path(self.output, now.run_id):
                return
        staging.delete_folder(staged)


def previous_output_folder(path: str) -> RunFolder:
    """The folder --previous_output names: messages name the flag and say to rebuild without."""
    return RunFolder(path, f"--previous_output {path}", "rebuild without --previous_output")
