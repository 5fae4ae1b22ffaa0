"""Fetch the generator zoo of the structural invariant: real HTML pages of pinned Debian
documentation packages, one folder per generator (eval/zoo.json, docs/structure.md).

    python -m eval.zoo [--cache .cache/zoo]
    corpus-chunker structure --by_folder .cache/zoo/pages     # the table per generator

Writes CACHE/pages/<generator>/<path under the package's root> and CACHE/SOURCES.json. The
download and the sha256 check are eval.fetch's: a package already in CACHE/debs with the
right sha256 is not downloaded again, a version gone from the mirror or a different sha256
stops with an error.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
from typing import Any

from eval.fetch import download

LOCK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo.json")


def spread(files: list[str], take: int) -> list[str]:
    """`take` of the sorted `files`, evenly spaced from the first (all when there are fewer)."""
    if take <= 0 or len(files) <= take:
        return list(files)
    step = len(files) / take
    return [files[int(i * step)] for i in range(take)]


def matching(unpacked: str, patterns: list[str], exclude: list[str] = ()) -> list[str]:
    """Files under `unpacked` (relative paths, sorted) that a pattern matches and no exclude
    does, as zoo.json says: fnmatch on the relative path, where `*` crosses folders (so
    `html/*.html` reaches `html/user-guide/index.html`). Not eval.fetch.select: its shell globs
    keep `*` within one folder, which left mkdocs 2 pages of 22, and Flask's and Sphinx's
    sub-folders out."""
    found = []
    for folder, _, files in os.walk(unpacked):
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), unpacked)
            if any(fnmatch.fnmatchcase(rel, p) for p in patterns) and not any(
                fnmatch.fnmatchcase(rel, p) for p in exclude
            ):
                found.append(rel)
    return sorted(found)


def only_redirects(path: str) -> bool:
    """Whether the page at `path` only sends its reader elsewhere (the job rejects it as
    `redirect`: transforms/ingest/html.py, `redirect_target`). 144 of zsh-doc's 186 pages are
    such stubs, one for each node's old file name: 29 of the 40 texi2any pages taken before."""
    with open(path, "rb") as f:
        data = f.read()
    if b"refresh" not in data.lower():
        return False
    from transforms.ingest.html import html_to_markdown

    return html_to_markdown(data, path).redirect is not None


def chosen_files(unpacked: str, entry: dict[str, Any]) -> list[str]:
    """The files of one generator: its globs, less its excludes and the pages that only
    redirect, spread to `take`."""
    files = matching(unpacked, entry["files"], entry.get("exclude", []))
    files = [f for f in files if not only_redirects(os.path.join(unpacked, f))]
    return spread(files, int(entry.get("take", 0)))


def fetch(cache: str, lock_path: str = LOCK) -> dict[str, Any]:
    with open(lock_path, encoding="utf-8") as f:
        lock = json.load(f)
    debs = os.path.join(cache, "debs")
    pages = os.path.join(cache, "pages")
    os.makedirs(debs, exist_ok=True)
    shutil.rmtree(pages, ignore_errors=True)
    unpacked_of: dict[str, str] = {}
    sources = []
    for entry in lock["generators"]:
        name = entry["name"]
        if name not in unpacked_of:
            deb = download(debs, entry)
            unpacked = os.path.join(cache, "unpacked", name)
            shutil.rmtree(unpacked, ignore_errors=True)
            os.makedirs(unpacked)
            subprocess.run(["dpkg", "-x", deb, unpacked], check=True)
            unpacked_of[name] = unpacked
        unpacked = unpacked_of[name]
        files = chosen_files(unpacked, entry)
        if not files:
            raise SystemExit(f"eval.zoo: no file of {name} matches {entry['files']}")
        target = os.path.join(pages, entry["generator"])
        for rel in files:
            inside = os.path.relpath(rel, entry["root"])
            os.makedirs(os.path.dirname(os.path.join(target, inside)), exist_ok=True)
            shutil.copyfile(os.path.join(unpacked, rel), os.path.join(target, inside))
        sources.append({**entry, "files_taken": len(files)})
        print(f"{entry['generator']}: {name} {entry['version']}: {len(files)} pages -> {target}")
    manifest = {"lock": lock_path, "generators": sources}
    with open(os.path.join(cache, "SOURCES.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=".cache/zoo", help="cache folder")
    args = parser.parse_args(argv)
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        sys.exit("eval.zoo: needs apt-get and dpkg (a Debian or Ubuntu machine)")
    fetch(args.cache)


if __name__ == "__main__":
    main()
