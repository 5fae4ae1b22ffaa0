"""What the progress lines cost: the job on samples/ with progress on and with --quiet, interleaved.

    python -m bench.progress [--pairs 5] [--mode in_process|multi_processing] [--embed]
        [--input GLOB]
    python -m bench.progress --pairs 1 --input 'samples/text/*'   # a quick check

Each run is a fresh process (the console command's own start-up included); the pairs alternate
which goes first, so a machine whose load drifts affects both alike. Prints every run and the
median ratio of on to off.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_run(out: str, quiet: bool, mode: str, embed: bool, pattern: str = "samples/*/*") -> float:
    command = [sys.executable, "-m", "pipelines.chunk_corpus", "--input", pattern]
    command += ["--output", out, "--overwrite"]
    if not embed:
        command.append("--embedding_model=none")
    if mode == "multi_processing":
        command += ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    if quiet:
        command.append("--quiet")
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--mode", choices=["in_process", "multi_processing"], default="in_process")
    parser.add_argument("--embed", action="store_true", help="with the model (default: none)")
    parser.add_argument("--input", default="samples/*/*", help="the job's input (samples/*/*)")
    args = parser.parse_args()
    on, off = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            order = [False, True] if i % 2 == 0 else [True, False]
            for quiet in order:
                out = os.path.join(tmp, "out")
                seconds = one_run(out, quiet, args.mode, args.embed, args.input)
                (off if quiet else on).append(seconds)
                print(
                    f"pair {i + 1}: {'quiet' if quiet else 'progress'} {seconds:.2f} s", flush=True
                )
    ratios = [a / b for a, b in zip(on, off, strict=True)]
    print(
        f"{args.mode}, embed={args.embed}: progress median {statistics.median(on):.2f} s, "
        f"quiet median {statistics.median(off):.2f} s, "
        f"median ratio {statistics.median(ratios):.3f} "
        f"(per pair: {', '.join(f'{r:.3f}' for r in ratios)})"
    )


if __name__ == "__main__":
    main()
