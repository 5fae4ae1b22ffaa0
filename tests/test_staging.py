"""The local swap of runs/staging.py on its own: what the new run folder takes from the
one it replaces (its mode, its owner) and what it does not (the old run's report page)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runs.staging import staging_folder, swap_in


def _run_folder(folder: Path, fingerprint: str) -> None:
    (folder / "chunks").mkdir(parents=True)
    (folder / "chunks" / "part-00000-of-00001.parquet").write_bytes(b"shard")
    (folder / "run_manifest.json").write_text(json.dumps({"config_fingerprint": fingerprint}))


def _staged(output: Path) -> Path:
    staging = Path(staging_folder(str(output), "run2"))
    _run_folder(staging, "new")
    os.chmod(staging, 0o755)
    return staging


def test_the_new_run_takes_the_old_folders_mode(tmp_path: Path) -> None:
    output = tmp_path / "out"
    _run_folder(output, "old")
    os.chmod(output, 0o700)
    swap_in(str(_staged(output)), str(output))
    assert json.loads((output / "run_manifest.json").read_text())["config_fingerprint"] == "new"
    assert output.stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_as_root_the_new_run_takes_the_old_folders_owner(tmp_path: Path) -> None:
    output = tmp_path / "out"
    _run_folder(output, "old")
    os.chown(output, 65534, 65534)
    swap_in(str(_staged(output)), str(output))
    assert (output.stat().st_uid, output.stat().st_gid) == (65534, 65534)


def test_the_old_runs_report_page_is_not_carried_over(tmp_path: Path) -> None:
    output = tmp_path / "out"
    _run_folder(output, "old")
    (output / "report").mkdir()
    (output / "report" / "index.html").write_text("the old run's config")
    (output / "NOTES.txt").write_text("a note beside the run")
    swap_in(str(_staged(output)), str(output))
    assert not (output / "report").exists()
    assert (output / "NOTES.txt").read_text() == "a note beside the run"  # still carried over
