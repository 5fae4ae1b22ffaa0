"""Which files a run reads: the --input patterns matched, hidden files, special files, symlinks
out of the inputs and earlier runs' output folders skipped (each skip counted), and the
checks of the patterns before anything runs."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.filesystems import FileSystems

from schemas.records import stable_hash
from transforms.ingest.files import is_local, special_file
from transforms.stage_base import Counts


def relative_source(path: str, root: str) -> str:
    """`path` relative to the input root, so ids survive moving the corpus (checkout, bucket)."""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if root and path.startswith(prefix) else path


def literal_folder(pattern: str) -> str:
    """The folder above a pattern's first wildcard ('' when there is none)."""
    literal = re.split(r"[*?\[{]", pattern, maxsplit=1)[0]
    return literal.rsplit("/", 1)[0] if "/" in literal else ""


def has_wildcard(pattern: str) -> bool:
    """Whether a pattern holds a wildcard of Beam's (*, ?, [...])."""
    return re.search(r"[*?\[]", pattern) is not None


def _has_hidden_name(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/"))


def hidden_below(path: str, folders: Sequence[str]) -> bool:
    """Whether `path` lies in a hidden file or folder (a name starting with ".") below the
    deepest of `folders` that holds it: what a wildcard matches there, as a shell's would not."""
    base = max((f for f in folders if path.startswith(f.rstrip("/") + "/")), key=len, default=None)
    return base is not None and _has_hidden_name(path[len(base.rstrip("/")) + 1 :])


def names_hidden(pattern: str) -> bool:
    """Whether a pattern spells a hidden name past its literal folder (`docs/.*`, `**/.ci/*`)."""
    return _has_hidden_name(pattern[len(literal_folder(pattern)) :])


def input_root(patterns: Sequence[str]) -> str:
    """The deepest folder above every pattern's first wildcard ('' when they share none)."""
    folders = [literal_folder(pattern) for pattern in patterns]
    # character-wise on purpose: commonpath would fold the "//" of gs:// and s3:// URIs
    common = os.path.commonprefix(folders)  # noqa: RUF071
    if all(f == common or f.startswith(common + "/") for f in folders):
        return common
    return common.rsplit("/", 1)[0] if "/" in common else ""


def in_sample(path: str, fraction: float, root: str = "") -> bool:
    """Deterministic file sample for --estimate_sample: the same files on every run."""
    if fraction >= 1.0:
        return True
    key = stable_hash("sample", relative_source(path, root), length=8)
    return int(key, 16) / 0xFFFFFFFF < fraction


class SymlinkPolicy:
    """Which local symlinks the job reads: one an --input names itself, or one whose real path
    lies inside the literal folder of a wildcard pattern. `SkipFn` skips the others as they are
    matched; the read applies it again as it opens a file (O_NOFOLLOW), for a file that became a
    symlink in between."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.literals = {p for p in patterns if not has_wildcard(p)}
        folders = [literal_folder(p) for p in patterns if has_wildcard(p)]
        self.roots = [os.path.realpath(f or ".") for f in folders if is_local(f)]

    def allows(self, path: str) -> bool:
        """Whether the symlink `path` may be read (through to its real path)."""
        if path in self.literals:
            return True
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root.rstrip("/") + "/") for root in self.roots)


def printable_path(path: str) -> str:
    """`path` as UTF-8 can hold it: bytes of a non-UTF-8 file name (which Python keeps as lone
    surrogates) written as backslash escapes."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# The lock older runs took inside their --output; a run now takes `lock_beside(output)`.
OUTPUT_LOCK_NAME = ".corpus-chunker.lock"


def lock_beside(folder: str) -> str:
    """The lock file a run holds on its output `folder`: `.NAME.lock` beside it (defined here,
    where the read stage skips it, and used by pipelines.output_lock)."""
    parent, _, name = folder.rstrip("/").rpartition("/")
    return f"{parent}/.{name}.lock"


BAD_NAMES = "bad_names"
# why a matched file is not read: "hidden" or "output_folder" (by rule), or for a local path
# "fifo", "socket", "device", "dangling_symlink", "symlink_loop" or "outside_input_root" (a
# symlink whose real path lies outside every input folder)
SKIPPED = "skipped"
RUN_MARKERS = frozenset({"run_manifest.json", "cost_report.json"})  # what every run writes


def broken_links(pattern: str) -> Iterator[str]:
    """The symlinks a local wildcard pattern matches whose target is missing or loops back.

    Beam's local match lists a folder and drops every file it cannot stat, silently; these are
    what it drops, found with the same listing (symlinked folders are not followed either).
    """
    if not is_local(pattern) or not has_wildcard(pattern):
        return
    from apache_beam.io.filesystem import FileSystem

    if pattern.endswith("/"):
        pattern += "*"
    prefix = re.match(r"^[^[*?]*", pattern).group(0)
    match = re.compile(FileSystem.translate_pattern(pattern)).match
    folders = [os.path.dirname(prefix) or "."]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                listed = list(entries)
        except OSError:  # a folder that vanished or cannot be listed: Beam's match saw the same
            continue
        for entry in listed:
            try:
                is_dir = entry.is_dir()  # follows a link, as os.walk does, then does not enter it
            except OSError:  # a symlink loop
                is_dir = False
            if is_dir:
                if not entry.is_symlink():
                    folders.append(entry.path)
            elif entry.is_symlink() and match(entry.path) and not os.path.exists(entry.path):
                yield entry.path


class MatchFn(beam.DoFn):
    """A pattern's matched files (FileMetadata), and its broken symlinks (size 0)."""

    def process(self, pattern: str) -> Iterator[FileMetadata]:
        yield from FileSystems.match([pattern])[0].metadata_list
        for path in broken_links(pattern):
            yield FileMetadata(path, 0, 0.0)  # what cannot be stat-ed; skipped before the read


def utf8_path(metadata: FileMetadata) -> Iterator:
    """(a matched file's path, its metadata); a name that is not UTF-8 (which nothing
    downstream, Beam's coders included, can carry as text) goes to BAD_NAMES with its bytes
    written as escapes, and no metadata."""
    path = metadata.path
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        yield beam.pvalue.TaggedOutput(BAD_NAMES, (printable_path(path), None))
        return
    yield path, metadata


def first_of(items: Iterable):
    """Any one of `items` (they are the same file's metadata, matched by several patterns)."""
    return next(iter(items))


class SkipFn(Counts, beam.DoFn):
    """Drops what the job must not read: files of its own output folders; hidden files (a name
    starting with "." below a pattern's literal folder) that a wildcard matched, unless that
    pattern spells a hidden name or another pattern names the file; and, on a local disk, what
    is not a regular file (a FIFO, whose open would wait forever, a socket, a device, a broken
    symlink) and symlinks that a wildcard matched whose real path lies outside every input
    folder (a file the corpus only points to; name it in an --input to read it).

    Elements are (path, FileMetadata or None); each skip goes to SKIPPED with its reason."""

    def __init__(self, patterns: Sequence[str], exclude: Sequence[str] = ()) -> None:
        self.patterns = list(patterns)
        self.exclude = tuple(e.rstrip("/") + "/" for e in exclude)
        # the locks runs take beside these folders (pipelines/output_lock.py): no corpus files
        self.locks = {lock_beside(e) for e in exclude}

    def setup(self) -> None:
        from apache_beam.io.filesystem import FileSystem

        self.literals = {p for p in self.patterns if not has_wildcard(p)}
        self.wild = [
            (re.compile(FileSystem.translate_pattern(p)), names_hidden(p), literal_folder(p))
            for p in self.patterns
            if has_wildcard(p)
        ]
        # where a symlink may lead: into the real folder of any wildcard pattern
        self.symlinks = SymlinkPolicy(self.patterns)

    def _outside_roots(self, path: str) -> bool:
        return os.path.islink(path) and not self.symlinks.allows(path)

    def process(self, element: tuple, runs: Sequence[str] = ()) -> Iterator[tuple]:
        """`runs`: the folders of earlier runs among the matched files (earlier_runs)."""
        path, metadata = element
        if path in self.locks or (
            # the lock a run holds beside its folder: no corpus file, and no skip
            runs and path.endswith(".lock") and any(path == lock_beside(r) for r in runs)
        ):
            return
        if path.startswith(self.exclude) or (runs and under_earlier_run(path, runs)):
            if path.rsplit("/", 1)[-1] == OUTPUT_LOCK_NAME:
                # this run's own lock on its output: no file of the corpus, and no skip
                return
            self.stat("output_files_skipped")
            yield beam.pvalue.TaggedOutput(SKIPPED, "output_folder")
            return
        if path not in self.literals:
            matched = [(spells, folder) for rx, spells, folder in self.wild if rx.match(path)]
            if (
                matched
                and not any(spells for spells, _ in matched)
                and hidden_below(path, [folder for _, folder in matched])
            ):
                self.stat(
                    "hidden_files_skipped"
                )  # .git/, .venv/, .DS_Store: name them in a pattern to read them
                yield beam.pvalue.TaggedOutput(SKIPPED, "hidden")
                return
        if metadata is not None and is_local(path):
            why = special_file(path) or (
                "outside_input_root" if self._outside_roots(path) else None
            )
            if why is not None:
                self.stat("special_files_skipped")
                yield beam.pvalue.TaggedOutput(SKIPPED, why)
                return
        yield element


def sampled(element: tuple, fraction: float, root: str) -> bool:
    return in_sample(element[0], fraction, root)


def check_patterns(patterns: Sequence[str]) -> None:
    """Fail fast, naming the pattern, when an --input pattern matches nothing. The launcher
    lists each pattern only up to its first file: the job lists them whole (MatchFn)."""
    for pattern in patterns:
        if not FileSystems.match([pattern], limits=[1])[0].metadata_list:
            why = special_file(pattern) if is_local(pattern) and not has_wildcard(pattern) else None
            detail = f" (it is a {why.replace('_', ' ')})" if why else ""
            raise ValueError(f"--input pattern {pattern!r} matches no file{detail}")


def run_marker(element: tuple) -> Iterator[tuple[str, str]]:
    """(folder, name) of a matched (path, metadata) that every run writes (RUN_MARKERS)."""
    folder, _, name = element[0].rpartition("/")
    if name in RUN_MARKERS:
        yield folder, name


def earlier_runs(markers: Iterable[tuple[str, str]]) -> list[str]:
    """The folders of earlier runs of this job among (folder, marker name) pairs: a folder
    holding every file a run writes (run_manifest.json and cost_report.json). Their files are
    output, not input."""
    names: dict[str, set[str]] = {}
    for folder, name in markers:
        names.setdefault(folder, set()).add(name)
    return sorted(folder for folder, found in names.items() if found == RUN_MARKERS)


def under_earlier_run(path: str, runs: Sequence[str]) -> bool:
    return any(path.startswith(folder.rstrip("/") + "/") for folder in runs)
