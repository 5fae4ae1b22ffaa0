"""Fetch the development corpora: apt-get download the pinned Debian packages, check their
sha256, unpack them with dpkg -x, and copy the selected files into one corpus folder.

    python -m eval.fetch [--cache .cache/eval]

Writes CACHE/corpus/<corpus>/... and CACHE/SOURCES.json (package, version, sha256 and
the files taken). A package already in CACHE/debs with the right sha256 is not downloaded
again. A version that the mirror no longer carries, or a different sha256, stops with an error.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

LOCK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpora.json")


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def deb_path(debs: str, package: dict[str, Any]) -> str:
    # apt-get download names the file NAME_VERSION_ARCH.deb with the epoch's ':' as %3a
    version = package["version"].replace(":", "%3a")
    return os.path.join(debs, f"{package['name']}_{version}_all.deb")


_UPDATED: list[bool] = []  # apt-get update has run in this process


def _apt_update() -> bool:
    """Refresh the package lists once (a fresh machine or container has none, so every
    version is "not found"); as root, else through sudo where there is one."""
    if _UPDATED:
        return False
    _UPDATED.append(True)
    command = ["apt-get", "update", "-qq"]
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            return False
        command = ["sudo", "-n", *command]
    print("eval.fetch: apt-get update (the package lists may be missing or stale)", flush=True)
    return subprocess.run(command, capture_output=True, text=True).returncode == 0


def download(debs: str, package: dict[str, Any]) -> str:
    path = deb_path(debs, package)
    if not (os.path.exists(path) and sha256(path) == package["sha256"]):
        spec = f"{package['name']}={package['version']}"

        def attempt() -> subprocess.CompletedProcess:
            return subprocess.run(
                ["apt-get", "download", spec], cwd=debs, capture_output=True, text=True
            )

        done = attempt()
        if done.returncode != 0 and _apt_update():
            done = attempt()
        if done.returncode != 0:
            raise SystemExit(
                f"eval.fetch: apt-get download {spec} failed (after apt-get update where it "
                f"could run; a superseded version leaves the mirror, then pin the new one in "
                f"{LOCK} and rerun eval.make_questions):\n{done.stderr.strip()}"
            )
    actual = sha256(path)
    if actual != package["sha256"]:
        raise SystemExit(f"eval.fetch: {path} has sha256 {actual}, {LOCK} pins {package['sha256']}")
    return path


def select(unpacked: str, patterns: list[str], exclude: Sequence[str] = ()) -> list[str]:
    """Files under `unpacked` (relative paths, sorted) that a glob of `patterns` matches and
    no glob of `exclude` does (shell globs: `*` stays within one folder)."""

    def matching(globs: Sequence[str]) -> set[str]:
        return {
            os.path.relpath(path, unpacked)
            for pattern in globs
            for path in glob.glob(os.path.join(unpacked, pattern))
            if os.path.isfile(path)
        }

    return sorted(matching(patterns) - matching(exclude))


def unpack(cache: str, debs: str, package: dict[str, Any]) -> tuple[str, str]:
    """(the .deb, the folder it is unpacked into, afresh): CACHE/unpacked/<package>."""
    deb = download(debs, package)
    unpacked = os.path.join(cache, "unpacked", package["name"])
    shutil.rmtree(unpacked, ignore_errors=True)
    os.makedirs(unpacked)
    subprocess.run(["dpkg", "-x", deb, unpacked], check=True)
    return deb, unpacked


def fetch(cache: str) -> dict[str, Any]:
    with open(LOCK, encoding="utf-8") as f:
        lock = json.load(f)
    debs = os.path.join(cache, "debs")
    corpus = os.path.join(cache, "corpus")
    os.makedirs(debs, exist_ok=True)
    shutil.rmtree(corpus, ignore_errors=True)
    sources = []
    for package in lock["packages"]:
        deb, unpacked = unpack(cache, debs, package)
        files = select(unpacked, package["files"], package.get("exclude", []))
        if not files:
            raise SystemExit(f"eval.fetch: no file of {package['name']} matches {package['files']}")
        target = os.path.join(corpus, package["corpus"])
        os.makedirs(target, exist_ok=True)
        names = [os.path.basename(rel).removesuffix(".gz") for rel in files]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:  # the corpus folder is flat: two files of one name would overwrite
            raise SystemExit(f"eval.fetch: {package['name']}: {twice} taken from two folders")
        for rel in files:
            name = os.path.basename(rel)
            if name.endswith(".gz"):
                with (
                    gzip.open(os.path.join(unpacked, rel)) as src,
                    open(os.path.join(target, name[:-3]), "wb") as dst,
                ):
                    shutil.copyfileobj(src, dst)
            else:
                shutil.copyfile(os.path.join(unpacked, rel), os.path.join(target, name))
        sources.append({**package, "deb": os.path.basename(deb), "files_taken": len(files)})
        print(f"{package['name']} {package['version']}: {len(files)} files -> {target}")
    manifest = {"lock": LOCK, "packages": sources}
    # beside the corpus, not in it: the job reads every file of the corpus folder
    with open(os.path.join(cache, "SOURCES.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    return manifest


def fetch_pairs(cache: str) -> dict[str, Any]:
    """The manuals of corpora.json's "pdf_pairs", each as CACHE/pairs/pdf/<corpus>/<its PDF>
    and CACHE/pairs/html/<corpus>/<its HTML pages>: the same manual in two forms, for runs of
    the job on each alone. Touches nothing else of CACHE but debs/ and unpacked/."""
    with open(LOCK, encoding="utf-8") as f:
        pairs = json.load(f)["pdf_pairs"]
    debs = os.path.join(cache, "debs")
    os.makedirs(debs, exist_ok=True)
    root = os.path.join(cache, "pairs")
    shutil.rmtree(root, ignore_errors=True)
    sources = []
    for package in pairs:
        deb, unpacked = unpack(cache, debs, package)
        html = select(unpacked, package["html"], package.get("exclude", []))
        if not html or not os.path.isfile(os.path.join(unpacked, package["pdf"])):
            raise SystemExit(f"eval.fetch: {package['name']}: no PDF or no HTML page")
        for form, files in (("pdf", [package["pdf"]]), ("html", html)):
            target = os.path.join(root, form, package["corpus"])
            os.makedirs(target, exist_ok=True)
            for rel in files:
                shutil.copyfile(
                    os.path.join(unpacked, rel), os.path.join(target, os.path.basename(rel))
                )
        sources.append({**package, "deb": os.path.basename(deb), "files_taken": len(html) + 1})
        print(f"{package['name']} {package['version']}: 1 PDF, {len(html)} HTML pages -> {root}")
    manifest = {"lock": LOCK, "packages": sources}
    with open(os.path.join(root, "SOURCES.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=".cache/eval", help="cache folder")
    args = parser.parse_args()
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        sys.exit("eval.fetch: needs apt-get and dpkg (a Debian or Ubuntu machine)")
    fetch(args.cache)


if __name__ == "__main__":
    main()
