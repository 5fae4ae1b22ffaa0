"""Peak memory of the job: 1x and 10x the same corpus, and one large single-line document.

    python -m bench.memory [--copies 10] [--big-mb 60] [--embed] [--samples GLOB]
    python -m bench.memory --copies 2 --big-mb 0.5 --samples 'samples/text/*'   # a quick check

Each run is a fresh process of the console command (DirectRunner, in-process); its peak RSS
is the kernel's (os.wait4: the process and the children it waited for, the HTML extraction
child included). The corpus is samples/ copied into `--copies` folders of distinct files (each
copy's files end with a line naming the copy, so no two are the same document). Without
--embed the runs use --embedding_model=none: the corpus-scaling question is whether the job
holds the corpus, and the model's own memory (a fixed few hundred MB) would only add a constant.
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SAMPLES = "samples/*/*"
WORDS = [
    "river",
    "stone",
    "market",
    "window",
    "garden",
    "letter",
    "morning",
    "silver",
    "buffer",
    "parser",
    "socket",
    "thread",
    "kernel",
    "module",
    "vector",
    "schema",
    "the",
    "of",
    "and",
    "to",
    "in",
]


def peak_rss_mib(argv: list[str]) -> float:
    """Run `python -m pipelines.chunk_corpus argv` and return its peak RSS in MiB."""
    command = [sys.executable, "-m", "pipelines.chunk_corpus", *argv, "--quiet"]
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    stderr = proc.stderr.read() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{stderr[-2000:]}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def replicate_samples(folder: str, copies: int, pattern: str = DEFAULT_SAMPLES) -> int:
    """The files of `pattern` (relative to the repo; each in a folder of its kind, as
    samples/*/*) in `copies` folders; returns the bytes written."""
    size = 0
    sources = sorted(p for p in glob.glob(os.path.join(ROOT, pattern)) if os.path.isfile(p))
    if not sources:
        raise SystemExit(f"no files match {pattern} under {ROOT}")
    for k in range(copies):
        for src in sources:
            kind = os.path.basename(os.path.dirname(src))
            dst = os.path.join(folder, f"copy{k:02d}", kind, os.path.basename(src))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
            if not src.endswith((".jsonl", ".bin", ".png")) and kind != "bad":
                with open(dst, "a", encoding="utf-8") as f:
                    f.write(f"\n\nThis is copy {k} of the file.\n")
            size += os.path.getsize(dst)
    return size


def big_line(path: str, mb: float, seed: int = 3) -> None:
    """One line of `mb` million bytes of words and spaces, no newline."""
    rng = random.Random(seed)
    target, written = int(mb * 1_000_000), 0
    with open(path, "w", encoding="ascii") as f:
        while written < target:
            block = " ".join(rng.choice(WORDS) for _ in range(10_000)) + " "
            f.write(block)
            written += len(block)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--big-mb", type=float, default=60.0)
    parser.add_argument("--embed", action="store_true", help="embed with the default model")
    parser.add_argument(
        "--samples",
        default=DEFAULT_SAMPLES,
        help=f"the corpus copied, a glob under the repo ({DEFAULT_SAMPLES})",
    )
    args = parser.parse_args()
    flags = [] if args.embed else ["--embedding_model=none"]
    with tempfile.TemporaryDirectory(prefix="corpus-chunker-memory-") as tmp:
        rows = []
        tiny = os.path.join(tmp, "tiny")
        os.makedirs(tiny)
        with open(os.path.join(tiny, "a.txt"), "w") as f:
            f.write("One short sentence, to measure the interpreter and Beam.\n")
        base = peak_rss_mib(["--input", f"{tiny}/*", "--output", f"{tmp}/out-tiny", *flags])
        rows.append(("one 60-byte file (the interpreter, Beam)", 0, base))
        for copies in sorted({1, args.copies}):  # --copies 1: the corpus once
            folder = os.path.join(tmp, f"corpus{copies}")
            size = replicate_samples(folder, copies, args.samples)
            pattern = f"{folder}/*/*/*"
            out = f"{tmp}/out-{copies}"
            rows.append(
                (
                    f"{'samples/' if args.samples == DEFAULT_SAMPLES else args.samples} x{copies}",
                    size,
                    peak_rss_mib(["--input", pattern, "--output", out, *flags]),
                )
            )
        big = os.path.join(tmp, "big")
        os.makedirs(big)
        big_line(os.path.join(big, "one.txt"), args.big_mb)
        limit = f"--max_file_bytes={int(args.big_mb * 1_000_000) + 1_000_000}"
        argv = ["--input", f"{big}/*", "--output", f"{tmp}/out-big", limit, *flags]
        rows.append((f"one {args.big_mb:g} MB single-line text file", 0, peak_rss_mib(argv)))
        rows[-1] = (rows[-1][0], os.path.getsize(os.path.join(big, "one.txt")), rows[-1][2])
    print("| run | input bytes | peak RSS MiB |")
    print("|---|---:|---:|")
    for name, size, rss in rows:
        print(f"| {name} | {size:,} | {rss:,.0f} |")
    if args.copies > 1:
        one, many = rows[1][2], rows[2][2]
        print(f"\n{args.copies}x the corpus / 1x: {many / one:.2f} of the peak RSS")
    big_size, big_rss = rows[-1][1], rows[-1][2]
    print(
        f"one document: {(big_rss - base) * 2**20 / big_size:.1f}x its size above the "
        f"interpreter ({big_rss - base:,.0f} MiB for {big_size / 1e6:.3g} MB)"
    )


if __name__ == "__main__":
    main()
