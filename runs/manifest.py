"""A run folder's names and its manifest: `run_manifest.json` parsed and checked against the
format this version writes, the sha256 inventory of files, and the check that the shards a
manifest lists are the files that run wrote (any file system Beam knows)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from schemas.columns import CHUNKS, DOCUMENTS, REJECTS, TABLES

MANIFEST = "run_manifest.json"  # written last: a folder without it holds no complete run
COST_REPORT = "cost_report.json"
COST_REPORT_MD = "cost_report.md"
REPORT_FILES = (COST_REPORT, COST_REPORT_MD, MANIFEST)  # beside the table folders
# What `inspect` writes into a run folder: a page of that run, never carried over to the run
# that replaces it (it would show the old run's config and counts beside the new one).
REPORT_PAGE = "report"
# The oldest runs this version reads: from config_version 8 on, a run's manifest lists its files
# with their hashes and names its run_id, chunks/ has the page columns, changes/ has
# chunks_updated and the config records chunk_text_room. A change to the folder's layout bumps
# CONFIG_VERSION (transforms/fingerprint.py) and raises this to it.
OLDEST_CONFIG_VERSION = 8
MODES = ("run", "estimate")
MAX_MANIFEST_BYTES = 1 << 24  # a file list of some 100,000 shards


def _parse(path: str, limit: int | None = None) -> Any:
    """The JSON value in `path` (its first `limit` bytes); ValueError when it is not JSON."""
    with FileSystems.open(path) as f:
        return json.loads((f.read() if limit is None else f.read(limit)).decode("utf-8"))


def read_raw(folder: str) -> dict[str, Any] | None:
    """`folder`'s manifest as a JSON object; None when it is missing, unreadable or not one."""
    path = FileSystems.join(folder, MANIFEST)
    try:
        if not FileSystems.exists(path):
            return None
        manifest = _parse(path, MAX_MANIFEST_BYTES)
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def is_complete(folder: str) -> bool:
    """Whether `folder` holds a manifest of this job (a JSON object with a config fingerprint),
    of any version: what the staging swap may replace and finish."""
    manifest = read_raw(folder)
    return manifest is not None and "config_fingerprint" in manifest


def read_checked(folder: str, label: str, advice: str) -> dict[str, Any]:
    """`folder`'s manifest, checked to be of the format this version writes; ValueError naming
    the folder (`label`) and saying what to do (`advice`) when it is missing, not a JSON object,
    or of an older run."""
    path = FileSystems.join(folder, MANIFEST)
    if not FileSystems.exists(path):
        raise ValueError(f"{label} has no {MANIFEST}: not a complete corpus-chunker run")
    try:
        manifest = _parse(path)
    except ValueError as e:
        raise ValueError(f"{label}: its {MANIFEST} is not JSON ({e})") from e
    if not isinstance(manifest, dict):
        raise ValueError(f"{label}: its {MANIFEST} is not a JSON object")
    problems = format_problems(manifest)
    if problems:
        raise ValueError(
            f"{label}: its {MANIFEST} {' and '.join(problems)}: a run made by an older "
            f"corpus-chunker (before config_version {OLDEST_CONFIG_VERSION}), or an edited "
            f"manifest, which this version does not read; {advice}"
        )
    return manifest


def format_problems(manifest: dict[str, Any]) -> list[str]:
    """How `manifest` differs from the format this version writes (none: it is of it)."""
    problems = []
    if not isinstance(manifest.get("run_id"), str) or not manifest["run_id"]:
        problems.append("has no run_id")
    if not isinstance(manifest.get("files"), dict):
        problems.append("has no file list")
    if not isinstance(manifest.get("config_fingerprint"), str):
        problems.append("has no config_fingerprint")
    if manifest.get("mode") not in MODES:
        problems.append(f"has mode {manifest.get('mode')!r}, not one of {', '.join(MODES)}")
    config = manifest.get("config")
    if not isinstance(config, dict):
        problems.append("has no config")
    else:
        version = config.get("config_version")
        if not isinstance(version, int) or version < OLDEST_CONFIG_VERSION:
            problems.append(f"records config_version {version!r}")
    return problems


def write_atomically(path: str, text: str) -> None:
    """Write `path` so that a reader sees the old file, no file, or the whole new one: the text
    goes to a temporary name beside it, then is renamed over it."""
    tmp = f"{path}.tmp-{os.getpid()}-{time.time_ns()}"
    with FileSystems.create(tmp) as f:
        f.write(text.encode("utf-8"))
    if "://" not in path:
        os.replace(tmp, path)  # atomic on a local filesystem, over an existing file too
        return
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([tmp], [path])  # an object store shows the object whole, or not


def file_entry(path: str) -> dict[str, Any]:
    """{bytes, sha256} of one file, read back as written."""
    digest, size = hashlib.sha256(), 0
    with FileSystems.open(path) as f:
        while block := f.read(1 << 20):
            digest.update(block)
            size += len(block)
    return {"bytes": size, "sha256": digest.hexdigest()}


def inventory_of(folder: str, entries: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """{path relative to `folder`: entry} of (path, file_entry) pairs, sorted by path."""
    root = folder.rstrip("/") + "/"
    return {
        (path[len(root) :] if path.startswith(root) else path): entry
        for path, entry in sorted(dict(entries).items())
    }


def file_inventory(folder: str, paths: Iterable[str]) -> dict[str, dict[str, Any]]:
    """{path relative to `folder`: {bytes, sha256}} of each file, read back as written."""
    return inventory_of(folder, ((path, file_entry(path)) for path in set(paths)))


# What a run's manifest may list: the shards of its tables, and its cost report.
_SHARD = re.compile(r"(?P<table>[a-z]+)/part-\d+-of-\d+\.parquet")
_TOP_LEVEL_FILES = frozenset({COST_REPORT, COST_REPORT_MD})


def _check_listed(name: object, entry: object, label: str) -> None:
    """A manifest's file entry: a shard `TABLE/part-N-of-M.parquet` of one of the run's tables
    or a top-level report file, with its size and hash; anything else (`..`, an absolute path,
    another folder) is refused: the run's files are read only inside its folder."""
    shard = _SHARD.fullmatch(name) if isinstance(name, str) else None
    allowed = (shard is not None and shard["table"] in TABLES) or name in _TOP_LEVEL_FILES
    if not allowed:
        raise ValueError(
            f"{label}: its manifest lists {name!r}, which is not a file a run writes "
            "(TABLE/part-N-of-M.parquet or a cost report inside the run folder)"
        )
    if not isinstance(entry, dict):
        raise ValueError(f"{label}: its manifest's entry for {name} is not an object")


def verified_shards(
    folder: str, files: dict[str, Any], label: str, advice: str, read_files: bool = True
) -> dict[str, tuple[str, ...]]:
    """The table shards `files` (a manifest's file list) names, each checked to be the file
    that run wrote (size and sha256; with `read_files` False, the size from a listing only,
    and the sha256 is left to `CheckShards` where the job runs); a shard added since is
    ignored, with a warning. Every name must be a shard of the run's tables or a report file
    inside `folder`. `label` names the run folder in messages and `advice` says what to do
    about a changed shard."""
    for name, entry in files.items():
        _check_listed(name, entry, label)
    listed = {name: entry for name, entry in files.items() if name.endswith(".parquet")}
    # one listing of each table folder: the sizes, and the files the run did not write
    sizes = _listed_sizes(folder, {name.split("/", 1)[0] for name in listed} | _CHECKED_TABLES)
    if read_files:
        found = file_inventory(folder, [FileSystems.join(folder, name) for name in listed])
        changed = [name for name, entry in listed.items() if found[name] != expected_entry(entry)]
    else:
        changed = [name for name, entry in listed.items() if sizes.get(name) != entry.get("bytes")]
    if changed:
        raise ValueError(changed_shard(label, changed[0], advice))
    shards: dict[str, list[str]] = {}
    for name in sorted(listed):
        shards.setdefault(name.split("/", 1)[0], []).append(FileSystems.join(folder, name))
    for table in sorted(_CHECKED_TABLES):
        extra = [
            FileSystems.join(folder, name)
            for name in sorted(sizes)
            if name.split("/", 1)[0] == table and name not in listed
        ]
        if extra:
            logging.warning(
                "%s: %d files in %s/ that the run did not write are ignored (%s)",
                label,
                len(extra),
                table,
                extra[0],
            )
    return {table: tuple(paths) for table, paths in shards.items()}


# the tables whose folders are searched for files that the run did not write
_CHECKED_TABLES = frozenset({CHUNKS, DOCUMENTS, REJECTS})


def expected_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """What a file must be to be the one a manifest entry lists: {bytes, sha256}."""
    return {"bytes": entry.get("bytes"), "sha256": entry.get("sha256")}


def changed_shard(label: str, name: str, advice: str) -> str:
    """The error of a shard that is not the one its run's manifest lists."""
    return (
        f"{label}: {name} is not the file that run wrote (its size or sha256 differs from "
        f"the manifest's); {advice}"
    )


def _listed_sizes(folder: str, tables: Iterable[str]) -> dict[str, int]:
    """{TABLE/part-...parquet: bytes} of the shards in `tables`' folders, from one listing
    each: no file is read."""
    sizes = {}
    for table in tables:
        pattern = FileSystems.join(folder, table, "*.parquet")
        for m in FileSystems.match([pattern])[0].metadata_list:
            sizes[f"{table}/{m.path.rsplit('/', 1)[-1]}"] = m.size_in_bytes
    return sizes


def check_shard(path: str, expected: dict[str, Any], message: str) -> str:
    """`path` itself when its size and sha256 are `expected`'s, else ValueError(`message`):
    a shard read where the job runs (the launcher lists, never reads)."""
    if file_entry(path) != expected_entry(expected):
        raise ValueError(message)
    return path


class CheckShards(beam.PTransform):
    """PBegin -> the paths of a run's shards `paths`, each once found to be the file its
    manifest lists (`checks`: RunFolder.shard_checks; size and sha256, each shard read once,
    spread over the workers), before anything reads it. A changed shard fails the job, naming
    it; a path without a check is refused when the job is built (read only what was
    checked: never nothing, silently)."""

    def __init__(self, checks: Iterable[tuple[str, dict, str]], paths: Iterable[str]) -> None:
        super().__init__()
        by_path = {check[0]: check for check in checks}
        wanted = sorted(set(paths))
        unchecked = [path for path in wanted if path not in by_path]
        if unchecked:
            raise ValueError(f"shards without a check: {unchecked[:3]}")
        self.checks = [by_path[path] for path in wanted]

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            | "Shards" >> beam.Create(self.checks)
            | "Spread" >> beam.Reshuffle()
            | "Hash and compare" >> beam.MapTuple(check_shard)
        )
