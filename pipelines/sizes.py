"""Byte sizes as people write them on a command line (20MB, 512KiB, 1.5GB, 20000000) and back."""

from __future__ import annotations

import argparse
import re

# Decimal units as disk and network sizes use them (20 MB = 20,000,000 bytes), binary with "i".
UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_byte_size(text: str | int, flag: str = "size") -> int:
    """Bytes in `text`; ValueError naming `flag` when it is not a size."""
    if isinstance(text, int):
        return text
    m = _SIZE.fullmatch(text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in UNITS:
        raise ValueError(
            f"{flag}={text!r} is not a size: write bytes (20000000) or a number with a unit "
            "(20MB, 512KB, 1.5GB; KiB, MiB, GiB are powers of 1024)"
        )
    return int(float(m.group(1)) * UNITS[unit])


def byte_size_flag(flag: str):  # -> Callable[[str], int], for argparse's type=
    """An argparse `type=` that reads a byte size; its error names `flag`."""

    def parse(text: str) -> int:
        try:
            return parse_byte_size(text, flag)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = "byte size"  # argparse names the type in some of its messages
    return parse


def human_bytes(n: float) -> str:
    """1.2 MB, 340 KB, 17 B (decimal units, as the flags read them)."""
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"
