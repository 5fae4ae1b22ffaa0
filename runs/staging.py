"""Replace a local run folder only once the new run is complete.

A run writes into a staging folder beside --output (`.NAME.staging-<run_id>`, hidden), and
only when its manifest is written there does it take the place of --output, by two renames
(the old folder out of the way, the new one in), after which files of the old folder that no
run writes (notes, a README) are moved into the new one and the old run is deleted. An object
store has no folder rename: there each run keeps its own folder and a pointer names the
current one (runs/pointer.py). A run that fails or is killed before that leaves --output as it
was, byte for byte. The next run (holding the output's lock) finishes a swap that was cut short
(`recover`) and deletes staging folders of runs that never completed, with Beam's `beam-temp-*`
folders inside them.
"""

from __future__ import annotations

import os
import shutil
import stat

from apache_beam.io.filesystems import FileSystems

from runs.manifest import REPORT_FILES, REPORT_PAGE, is_complete

STAGING = "staging"
REPLACED = "replaced"


def _split(output: str) -> tuple[str, str]:
    """(parent, name) of an output folder; refused for a bucket's root, which has no parent
    to stage beside."""
    path = output.rstrip("/")
    _, sep, rest = path.partition("://")
    if sep and "/" not in rest:
        raise ValueError(
            f"--output {output} is the root of a bucket: give a folder inside it (the run is "
            "staged beside the output folder)"
        )
    parent, _, name = path.rpartition("/")
    return parent or "/", name


def _local(path: str) -> bool:
    return "://" not in path


def resolved(output: str) -> str:
    """The folder the swap replaces: a local symlink's target, so that the link still names
    the run afterwards."""
    return os.path.realpath(output) if _local(output) else output.rstrip("/")


def beside(output: str, kind: str, run_id: str) -> str:
    parent, name = _split(resolved(output))
    return FileSystems.join(parent, f".{name}.{kind}-{run_id}")


def staging_folder(output: str, run_id: str) -> str:
    """Where the run `run_id` writes before it replaces `output`."""
    return beside(output, STAGING, run_id)


def _siblings(output: str, kind: str) -> list[str]:
    """The staging (or replaced) folders of `output`, oldest run ids first."""
    parent, name = _split(resolved(output))
    prefix = f".{name}.{kind}-"
    if _local(parent):
        if not os.path.isdir(parent):
            return []
        return sorted(
            os.path.join(parent, entry)
            for entry in os.listdir(parent)
            if entry.startswith(prefix) and os.path.isdir(os.path.join(parent, entry))
        )
    found = FileSystems.match([FileSystems.join(parent, prefix + "*")])[0].metadata_list
    return sorted({m.path.rstrip("/") for m in found})


def _files_under(folder: str) -> list[str]:
    if _local(folder):
        return [os.path.join(root, f) for root, _, files in os.walk(folder) for f in files]
    return [m.path for m in FileSystems.match([FileSystems.join(folder, "**")])[0].metadata_list]


def delete_folder(folder: str) -> None:
    if _local(folder):
        shutil.rmtree(folder, ignore_errors=True)
        return
    files = _files_under(folder)
    if files:
        FileSystems.delete(files)


def recover(output: str) -> list[str]:
    """Finish a swap that a crash cut short, and delete what runs that never completed left.
    Call it holding the output's lock. Returns what it did, one line each."""
    done = []
    target = resolved(output)
    if not is_complete(target):
        # A complete staging folder beside an incomplete output: the swap was under way.
        complete = [s for s in _siblings(output, STAGING) if is_complete(s)]
        if complete:
            swap_in(complete[-1], output)
            done.append(f"finished replacing {output} with the run staged in {complete[-1]}")
        elif _local(target) and not os.path.exists(target):
            replaced = [r for r in _siblings(output, REPLACED) if is_complete(r)]
            if replaced:  # killed between the two renames, with no staging left: put it back
                os.rename(replaced[-1], target)
                done.append(f"restored {output} from {replaced[-1]}")
    for kind in (STAGING, REPLACED):
        for folder in _siblings(output, kind):
            if kind == REPLACED and _local(target) and os.path.isdir(target):
                _carry_over(folder, target)
            delete_folder(folder)
            done.append(f"deleted {folder}, left by a run that did not complete")
    return done


def _carry_over(old: str, target: str, tables: tuple[str, ...] = ()) -> None:
    """Move what the replaced folder `old` holds that no run writes into `target`: files beside
    the tables (notes, a README), and files in a table folder other than its shards."""
    from schemas.columns import TABLES

    tables = tables or TABLES
    own = set(tables) | set(REPORT_FILES) | {REPORT_PAGE}
    for entry in os.listdir(old):
        if entry not in own and not os.path.exists(os.path.join(target, entry)):
            os.rename(os.path.join(old, entry), os.path.join(target, entry))
    for table in tables:
        folder = os.path.join(old, table)
        for entry in os.listdir(folder) if os.path.isdir(folder) else ():
            if entry.startswith(("part-", "beam-temp-")):
                continue
            destination = os.path.join(target, table, entry)
            if not os.path.exists(destination):
                os.makedirs(os.path.dirname(destination), exist_ok=True)
                os.rename(os.path.join(folder, entry), destination)


def swap_in(staging: str, output: str, tables: tuple[str, ...] = ()) -> None:
    """Put the complete run in `staging` in the place of `output` (see the module's doc)."""
    from schemas.columns import TABLES

    tables = tables or TABLES
    target = resolved(output)
    if not is_complete(staging):
        raise RuntimeError(f"{staging} holds no complete run; {output} was left as it was")
    if not _local(target):
        raise ValueError(
            f"{output}: an object store's run is committed by its CURRENT pointer "
            "(runs/pointer.py), not swapped in"
        )
    _swap_local(staging, target, tables)


def _swap_local(staging: str, target: str, tables: tuple[str, ...]) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if not os.path.exists(target):
        os.rename(staging, target)
        return
    take_mode_and_owner(staging, target)
    run_id = os.path.basename(staging).rsplit("-", 1)[-1]
    old = beside(target, REPLACED, run_id)
    os.rename(target, old)
    os.rename(staging, target)  # from here on --output is the new run
    _carry_over(old, target, tables)
    shutil.rmtree(old, ignore_errors=True)


def take_mode_and_owner(staging: str, target: str) -> None:
    """Give the staged folder the permission bits of the folder it replaces, and its owner and
    group when this runs as root: the swap replaces the folder itself, so a 0700 --output must
    not come back 0755 (nor owned by whoever ran the job)."""
    old = os.stat(target)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chown(staging, old.st_uid, old.st_gid)
    os.chmod(staging, stat.S_IMODE(old.st_mode))
