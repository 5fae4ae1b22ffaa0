"""Open one matched input file without the ways a corpus can stall or flood a worker.

A local file is opened without blocking (a FIFO would wait forever for a writer), must be a
regular file, and must be the file that was matched (same size and modification time); a
compressed file is decompressed in bounded steps, so a small `.gz` or `.zst` of gigabytes of
zeros costs no more memory than the limit it is read up to.
"""

from __future__ import annotations

import bz2
import contextlib
import errno
import fcntl
import gzip
import io
import lzma
import os
import stat
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

from apache_beam.io.filesystem import CompressionTypes, FileMetadata
from apache_beam.io.filesystems import FileSystems

STEP_BYTES = 1 << 20  # what one read asks for: decompressed output never runs ahead of it
# What a compressed file may decompress to, at most: this many times its size on disk (text
# and JSONL compress 3 to 20 times; a bomb, thousands of times), and never less than the
# --max_file_bytes a file may hold. A JSONL stream, whose limit is per line, stops there too.
MAX_COMPRESSION_RATIO = 100


def decompressed_budget(max_file_bytes: int, size_on_disk: int | None) -> int:
    """The decompressed bytes one compressed file may give (MAX_COMPRESSION_RATIO)."""
    return max(max_file_bytes, MAX_COMPRESSION_RATIO * (size_on_disk or 0))


class ReadError(Exception):
    """A file that cannot be read; `reason` is the machine-readable cause."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):  # picklable, for runners that move exceptions between processes
        return type(self), (self.reason, str(self))


def is_local(path: str) -> bool:
    """Whether `path` is on the local file system (Beam's default for a path with no scheme)."""
    return "://" not in path


def file_kind(mode: int) -> str:
    """What a stat mode says a path is: regular, directory, fifo, socket or device."""
    if stat.S_ISREG(mode):
        return "regular"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


def special_file(path: str) -> str | None:
    """Why a local path that was matched is not a file to read, or None when it is one.

    One of "dangling_symlink", "symlink_loop" (a link whose target is missing, or leads back to
    itself) or the kind of a path that is not a regular file ("fifo", "socket", "device",
    "directory"). A path that is gone now is left to the read, which rejects it.
    """
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            return "dangling_symlink"
        except OSError as e:
            return "symlink_loop" if e.errno == errno.ELOOP else None
    kind = file_kind(mode)
    return None if kind == "regular" else kind


def _same_file(st: os.stat_result, matched: FileMetadata | None) -> bool:
    if matched is None or matched.size_in_bytes is None or matched.size_in_bytes < 0:
        return True
    if st.st_size != matched.size_in_bytes:
        return False
    mtime = matched.last_updated_in_seconds
    return not mtime or st.st_mtime == mtime


def _open_fd(path: str, follow: Callable[[str], bool] | None) -> int:
    """A descriptor of `path` opened for reading. With `follow`, the last component is never
    followed as it is opened (O_NOFOLLOW): a path that is a symlink now, whatever it was when
    it was matched, is opened by its real path when `follow(path)` allows it, and refused
    (`outside_input_root`) when not."""
    # O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, forever
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if follow is None:
        return os.open(path, flags)
    try:
        return os.open(path, flags | os.O_NOFOLLOW)
    except OSError as e:
        if e.errno != errno.ELOOP or not os.path.islink(path):
            raise
    if not follow(path):
        raise ReadError(
            "outside_input_root",
            "the file is a symlink that leads out of the input folders (it was not one, or "
            "led elsewhere, when it was matched)",
        )
    return os.open(os.path.realpath(path), flags | os.O_NOFOLLOW)


def _open_local(
    path: str, matched: FileMetadata | None, follow: Callable[[str], bool] | None = None
) -> tuple[BinaryIO, os.stat_result]:
    try:
        fd = _open_fd(path, follow)
    except FileNotFoundError:
        raise ReadError("disappeared", "the file was matched but is gone") from None
    except PermissionError as e:
        raise ReadError("permission_denied", f"cannot open the file: {e.strerror}") from None
    except ReadError:
        raise
    except OSError as e:
        raise ReadError("unreadable", f"cannot open the file: {e!r}") from None
    try:
        st = os.fstat(fd)
        kind = file_kind(st.st_mode)
        if kind != "regular":
            raise ReadError("not_a_regular_file", f"the path is a {kind}, not a regular file")
        if not _same_file(st, matched):
            raise ReadError(
                "changed_since_match",
                f"the file changed between matching and reading (matched "
                f"{matched.size_in_bytes} bytes, now {st.st_size})",
            )
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


class _ZlibReader(io.RawIOBase):
    """Beam's DEFLATE (zlib-wrapped) stream, decompressed at most `size` bytes at a time."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._decompressor = zlib.decompressobj()
        self._pending = b""
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._eof:
            if not self._pending and not self._decompressor.unconsumed_tail:
                if self._decompressor.eof and self._decompressor.unused_data:
                    self._pending = self._decompressor.unused_data  # a concatenated stream
                    self._decompressor = zlib.decompressobj()
                else:
                    self._pending = self._raw.read(STEP_BYTES)
                    if not self._pending:
                        if not self._decompressor.eof:
                            raise EOFError("compressed stream ended before its end marker")
                        self._eof = True
                        break
            data = self._pending or self._decompressor.unconsumed_tail
            self._pending = b""
            out = self._decompressor.decompress(data, len(buffer))
            if out:
                buffer[: len(out)] = out
                return len(out)
        return 0


class _Budgeted(io.RawIOBase):
    """A decompressed reader that raises ReadError("too_large") once it has given `budget`
    bytes and more is left: a bomb stops there, in bounded time."""

    def __init__(self, inner: BinaryIO, budget: int, size_on_disk: int | None) -> None:
        self._inner = inner
        self._budget = budget
        self._size = size_on_disk
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        room = self._budget - self.given
        data = self._inner.read(min(len(buffer), max(room, 1)))
        if data and room <= 0:
            raise ReadError(
                "too_large",
                f"decompressed past {self._budget} bytes ({MAX_COMPRESSION_RATIO} times its "
                f"{self._size} bytes on disk, or --max_file_bytes)",
            )
        buffer[: len(data)] = data
        self.given += len(data)
        return len(data)


def decompressed(raw: BinaryIO, compression: str) -> BinaryIO:
    """A reader of `raw` decompressed as `compression` (a Beam CompressionTypes value) whose
    `read(n)` never decompresses much more than `n` bytes."""
    if compression == CompressionTypes.UNCOMPRESSED:
        return raw
    if compression == CompressionTypes.GZIP:
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == CompressionTypes.BZIP2:
        return bz2.BZ2File(raw, "rb")
    if compression == CompressionTypes.LZMA:
        return lzma.LZMAFile(raw, "rb")
    if compression == CompressionTypes.DEFLATE:
        return io.BufferedReader(_ZlibReader(raw), STEP_BYTES)
    if compression == CompressionTypes.ZSTD:
        import zstandard

        # zstd's default window limit (128 MiB) rather than Beam's 2 GiB: a frame header
        # alone cannot make the decompressor allocate gigabytes
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    raise ValueError(f"unknown compression {compression!r}")


def _corrupt(e: BaseException) -> bool:
    """Whether an error raised while decompressing says the data is bad (not the disk)."""
    if isinstance(e, zlib.error | lzma.LZMAError | EOFError | gzip.BadGzipFile):
        return True
    if type(e).__name__ == "ZstdError":
        return True
    return isinstance(e, OSError) and e.errno is None  # bz2's "Invalid data stream"


def read_up_to(f: BinaryIO, limit: int) -> bytes:
    """Up to `limit` bytes of `f`, in steps of at most STEP_BYTES."""
    parts, size = [], 0
    while size < limit:
        part = f.read(min(STEP_BYTES, limit - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


@contextlib.contextmanager
def open_matched(
    path: str,
    matched: FileMetadata | None = None,
    check_after: bool = True,
    follow: Callable[[str], bool] | None = None,
    budget: int | None = None,
) -> Iterator[tuple[BinaryIO, str, int | None]]:
    """(a reader of the file's decompressed contents, its compression, its size on disk when
    known), as a context.

    Errors are ReadError: `disappeared`, `permission_denied`, `not_a_regular_file`,
    `changed_since_match`, `corrupt_compressed` (raised while reading too) or `unreadable`.
    With `check_after`, a local file that changed while it was read is `changed_since_match`
    when the context ends. `follow`: which local symlinks may be read (`_open_fd`); None
    follows every one. `budget`: the decompressed bytes a compressed file may give before
    reading it is `too_large` (`decompressed_budget`); None: no limit.
    """
    compression = CompressionTypes.detect_compression_type(path)
    with contextlib.ExitStack() as stack:
        if is_local(path):
            raw, st = _open_local(path, matched, follow)
            size = st.st_size
        else:
            st = None
            size = matched.size_in_bytes if matched is not None else None
            try:
                raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
            except FileNotFoundError:
                raise ReadError("disappeared", "the file was matched but is gone") from None
        stack.callback(raw.close)
        reader = decompressed(raw, compression)
        if reader is not raw:
            stack.callback(reader.close)
            if budget is not None:
                reader = io.BufferedReader(_Budgeted(reader, budget, size), STEP_BYTES)
        try:
            yield reader, compression, size
        except ReadError:
            raise
        except Exception as e:
            if compression != CompressionTypes.UNCOMPRESSED and _corrupt(e):
                raise ReadError("corrupt_compressed", f"not valid {compression}: {e}") from None
            raise
        if st is not None and check_after:
            now = os.fstat(raw.fileno())
            if (now.st_size, now.st_mtime) != (st.st_size, st.st_mtime):
                raise ReadError(
                    "changed_since_match",
                    f"the file changed while it was read ({st.st_size} bytes, then {now.st_size})",
                )
