"""`make eval`: fetch the development corpora, run every configuration, score them side by side.

    python -m eval.run_eval [--cache .cache/eval] [--runs DIR] [--no_fetch] [--only NAME ...]
                            [--reuse]

Steps: eval.fetch (pinned Debian packages, sha256 checked), eval.verify_answers (every answer
is a passage of its document), the job once per configuration below, the LangChain baselines
over the default run's extracted documents, then `corpus-chunker evaluate` on all of them.
The table goes to stdout and CACHE/results.md, the numbers to CACHE/results.json; with
--runs DIR the runs, the table and the numbers go to DIR instead (worktrees sharing one fetched
corpus, with --no_fetch, keep their runs apart). After the halves, the default against each
other run question by question (commands.paired: paired bootstrap intervals, sign tests), in the
table and in results.json's "paired".
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import shlex
import subprocess
import sys
import time

from eval.fetch import LOCK, fetch, fetch_pairs
from eval.neutral import neutral_corpus, neutral_names, neutral_questions
from eval.verify_answers import check
from runs.run_folder import RunFolder

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = sorted(glob.glob(os.path.join(HERE, "questions", "*.jsonl")))
ALL_TYPES = ("html", "markdown", "code", "text")
# Slow extraction is not what is measured here: on a busy machine the 5 s default rejected pages.
COMMON = ["--runner=DirectRunner", "--extract_timeout_s=60", "--overwrite"]

# name -> flags of the job; "langchain" entries are (chunk_size, overlap) of the peer splitter
JOB_CONFIGS = {
    "default": [],
    "context-none": ["--context=none"],
    "fixed-512-15pct": [
        *(f"--strategy_{t}=fixed" for t in ALL_TYPES),
        "--chunk_size=512",
        "--chunk_overlap=76",
        "--context=none",
    ],
    "parent-768": ["--parent_chunk_size=768"],
    # prose only: a code unit is not made of sentences
    "sentence-window": [f"--strategy_{t}=sentence_window" for t in ("html", "markdown", "text")],
}
LANGCHAIN_CONFIGS = {"langchain-256": (256, 64), "langchain-512": (512, 128)}
# The same job on the corpus whose folders are renamed c1/, c2/... (eval.neutral), scored on
# the questions with their sources renamed alike.
NEUTRAL_CONFIGS = {"neutral-default": []}
# Header ablation (eval.header_ablation): neutral-default's chunks re-embedded with only these
# parts of the path header. "header-no-folder" rebuilds the job's own header (--header_folders=0,
# the default: a check that it is the job's, 0 chunks re-embedded), "header-all" adds the folder
# the job had before; each "header-no-X" leaves one part out of the job's header, so that its
# row against header-no-folder says what that part earns (until 2026-12-07 they left it out of
# header-all's, folder included: docs/evaluation.md's earlier tables).
HEADER_CONFIGS = {
    "header-all": ("folder", "file", "title", "sections", "term"),
    "header-no-folder": ("file", "title", "sections", "term"),
    "header-no-file": ("title", "sections", "term"),
    "header-no-title": ("file", "sections", "term"),
    "header-no-sections": ("file", "title", "term"),
    "header-no-term": ("file", "title", "sections"),
    "header-none": (),
}
# The manuals of corpora.json's "pdf_pairs" (eval.fetch.fetch_pairs: CACHE/pairs/pdf/ and
# CACHE/pairs/html/), each form in runs of its own (twins in one index would take each
# other's places in the top 10), scored on questions/pairs/{pdf,html}.jsonl: the same
# questions, with the PDF or the HTML page as the answer's source.
PAIR_CONFIGS = {
    "pdf-default": ("pdf", []),  # the job on the PDFs, defaults
    "pdf-html-twin": ("html", []),  # the job on the same manuals' HTML, defaults
}
# LangChain's recursive splitter at 256/64 on the PDFs: over pypdf's pages (PyPDFLoader, one
# document per page), and over the text pdf-default extracted
PAIR_LANGCHAIN = {"pdf-pypdf-langchain-256": True, "pdf-langchain-256": False}
PAIR_QUESTIONS = os.path.join(HERE, "questions", "pairs")
ORDER = ["default", "context-none", "fixed-512-15pct", "langchain-256", "langchain-512",
         "parent-768", "sentence-window", "neutral-default", *HEADER_CONFIGS,
         *PAIR_CONFIGS, *PAIR_LANGCHAIN]  # fmt: skip
# what `make eval` runs without --only: the ablation is run on demand
DEFAULT_ORDER = [*ORDER[: ORDER.index("neutral-default") + 1], *PAIR_CONFIGS, *PAIR_LANGCHAIN]


def _run(command: list[str], log: str) -> float:
    print("$ " + shlex.join(command), flush=True)
    started = time.time()
    with open(log, "w", encoding="utf-8") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        with open(log, encoding="utf-8") as f:
            tail = f.read()[-3000:]
        raise SystemExit(f"eval: failed ({done.returncode}), log {log}:\n{tail}")
    seconds = time.time() - started
    print(f"  done in {seconds:.0f} s (log {log})", flush=True)
    return seconds


def _reusable(run: str, command: list[str]) -> bool:
    stamp = os.path.join(run, "eval_command.json")
    if not os.path.exists(stamp):
        return False
    try:
        RunFolder(run).check()  # a complete run of this version's format
    except ValueError:
        return False
    with open(stamp, encoding="utf-8") as f:
        return json.load(f) == command


def _run_once(
    name: str, run: str, command: list[str], reuse: bool, seconds: dict[str, float]
) -> None:
    """Run `command` into the folder `run` (its log beside it) unless --reuse finds it done
    with the same command; the command is kept in the run, for --reuse to compare."""
    if reuse and _reusable(run, command):
        print(f"reusing {run}")
        return
    seconds[name] = _run(command, os.path.join(os.path.dirname(run), f"{name}.log"))
    with open(os.path.join(run, "eval_command.json"), "w", encoding="utf-8") as f:
        json.dump(command, f)


def halves_table(evaluation: dict, split: str) -> str:
    """One row per run: R@10 / MRR@10 on the `split` half of each corpus, then of all."""
    results = evaluation["results"]
    corpora = sorted(
        {
            name.split(" ")[0].removeprefix("corpus=")
            for r in results
            for name in r["sets"]
            if name.startswith("corpus=") and name.endswith(f" split={split}")
        }
    )
    header = ["run", *corpora, f"all {split}"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for result in results:
        cells = [result["label"]]
        keys = [f"corpus={c} split={split}" for c in corpora] + [f"split={split}"]
        for key in keys:
            row = result["sets"].get(key)
            cells.append(
                f"{row['recall@10']:.3f} / {row['mrr@10']:.3f} ({row['questions']})" if row else ""
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=".cache/eval", help="cache folder")
    parser.add_argument("--only", nargs="+", default=None, choices=ORDER, help="configurations")
    parser.add_argument("--reuse", action="store_true", help="keep finished runs of same flags")
    parser.add_argument("--runs", default=None, help="folder of the runs (default CACHE/runs)")
    parser.add_argument(
        "--no_fetch",
        action="store_true",
        help="use CACHE/corpus as fetched before (CACHE/SOURCES.json) instead of unpacking again",
    )
    args = parser.parse_args()
    cache = os.path.abspath(args.cache)
    names = args.only or DEFAULT_ORDER
    started = time.time()

    if args.no_fetch:
        with open(os.path.join(cache, "SOURCES.json"), encoding="utf-8") as f:
            sources = json.load(f)
    else:
        sources = fetch(cache)
    corpus = os.path.join(cache, "corpus")
    pair_names = [n for n in names if n in PAIR_CONFIGS or n in PAIR_LANGCHAIN]
    pairs = os.path.join(cache, "pairs")
    if pair_names and not args.no_fetch:
        fetch_pairs(cache)
    problems = check(QUESTIONS, corpus)
    if pair_names:
        if not os.path.isdir(pairs):
            raise SystemExit(f"eval: no {pairs}: run without --no_fetch once")
        for form in ("pdf", "html"):
            problems += check([os.path.join(PAIR_QUESTIONS, f"{form}.jsonl")],
                              os.path.join(pairs, form))  # fmt: skip
    if problems:
        raise SystemExit(
            "eval: answers that are not passages of their documents:\n" + "\n".join(problems)
        )
    runs_dir = os.path.abspath(args.runs) if args.runs else os.path.join(cache, "runs")
    out_dir = runs_dir if args.runs else cache  # results and the merged question file
    os.makedirs(runs_dir, exist_ok=True)
    questions = os.path.join(out_dir, "questions.jsonl")
    with open(questions, "w", encoding="utf-8") as out:
        for path in QUESTIONS:
            with open(path, encoding="utf-8") as f:
                out.write(f.read())

    python = sys.executable
    seconds: dict[str, float] = {}
    commands: dict[str, str] = {}

    def job(name: str, root: str, flags: list[str]) -> None:
        """One run of the job on a corpus folder, made once (--reuse) and timed."""
        run = os.path.join(runs_dir, name)
        command = [python, "-m", "pipelines.chunk_corpus", "--input", root + "/",
                   "--output", run, *COMMON, *flags]  # fmt: skip
        commands[name] = shlex.join(["corpus-chunker", *command[3:]])
        _run_once(name, run, command, args.reuse, seconds)

    neutral = [n for n in names if n in NEUTRAL_CONFIGS or n in HEADER_CONFIGS]
    if any(n in HEADER_CONFIGS for n in names) and "neutral-default" not in neutral:
        neutral.insert(0, "neutral-default")  # the ablation re-embeds its chunks
    neutral_q = os.path.join(out_dir, "questions-neutral.jsonl")
    if neutral:
        with open(LOCK, encoding="utf-8") as f:
            renamed = neutral_names([p["corpus"] for p in json.load(f)["packages"]])
        neutral_root = os.path.join(cache, "corpus-neutral")
        neutral_corpus(corpus, neutral_root, renamed)
        neutral_questions(questions, neutral_q, renamed)
        print("neutral folders: " + ", ".join(f"{a} -> {b}" for a, b in renamed.items()))
    for name in (n for n in neutral if n in NEUTRAL_CONFIGS):
        job(name, neutral_root, NEUTRAL_CONFIGS[name])
    for name in (n for n in neutral if n in HEADER_CONFIGS):
        run = os.path.join(runs_dir, name)
        command = [python, "-m", "eval.header_ablation", "--run",
                   os.path.join(runs_dir, "neutral-default"), "--output", run,
                   "--keep", *HEADER_CONFIGS[name]]  # fmt: skip
        commands[name] = shlex.join(["python", *command[1:]])
        _run_once(name, run, command, args.reuse, seconds)
    needed = [n for n in names if n in JOB_CONFIGS]
    if any(n in LANGCHAIN_CONFIGS for n in names) and "default" not in needed:
        needed.insert(0, "default")  # the baselines split the default run's documents
    for name in needed:
        job(name, corpus, JOB_CONFIGS[name])
    for name in (n for n in names if n in LANGCHAIN_CONFIGS):
        size, overlap = LANGCHAIN_CONFIGS[name]
        run = os.path.join(runs_dir, name)
        command = [python, "-m", "eval.langchain_run", "--documents",
                   os.path.join(runs_dir, "default"), "--output", run,
                   f"--chunk_size={size}", f"--chunk_overlap={overlap}"]  # fmt: skip
        commands[name] = shlex.join(["python", *command[1:]])
        _run_once(name, run, command, args.reuse, seconds)

    pair_runs = {"pdf": [], "html": []}
    if any(n in PAIR_LANGCHAIN for n in pair_names) and "pdf-default" not in pair_names:
        pair_names.insert(0, "pdf-default")  # the baselines take its model (and its text)
    for name in pair_names:
        if name in PAIR_CONFIGS:
            form, flags = PAIR_CONFIGS[name]
            job(name, os.path.join(pairs, form), flags)
            pair_runs[form].append(os.path.join(runs_dir, name))
    for name in (n for n in names if n in PAIR_LANGCHAIN):
        run = os.path.join(runs_dir, name)
        command = [python, "-m", "eval.langchain_run", "--documents",
                   os.path.join(runs_dir, "pdf-default"), "--output", run,
                   "--chunk_size=256", "--chunk_overlap=64"]  # fmt: skip
        if PAIR_LANGCHAIN[name]:
            command += ["--pypdf", os.path.join(pairs, "pdf")]
        commands[name] = shlex.join(["python", *command[1:]])
        _run_once(name, run, command, args.reuse, seconds)
        pair_runs["pdf"].append(run)

    from commands.evaluate import evaluate, load_questions, markdown_table
    from commands.paired import compare_runs, paired_report

    plain = [os.path.join(runs_dir, n) for n in names if n not in neutral and n not in pair_names
             and n not in PAIR_LANGCHAIN]  # fmt: skip
    evaluation = evaluate(plain, questions) if plain else None
    for form, form_runs in pair_runs.items():
        if form_runs:
            paired = evaluate(form_runs, os.path.join(PAIR_QUESTIONS, f"{form}.jsonl"))
            if evaluation is None:
                evaluation = paired
            else:
                evaluation["results"].extend(paired["results"])
    if neutral:  # the same questions, their sources under the neutral folders
        renamed_eval = evaluate([os.path.join(runs_dir, n) for n in names if n in neutral],
                                neutral_q)  # fmt: skip
        if evaluation is None:
            evaluation = renamed_eval
        else:
            evaluation["results"].extend(renamed_eval["results"])
    evaluation["packages"] = sources["packages"]
    evaluation["commands"] = commands
    evaluation["run_seconds"] = seconds
    evaluation["total_seconds"] = time.time() - started
    table = markdown_table(evaluation)
    halves = "\n\n".join(
        f"{split} half, R@10 / MRR@10:\n\n{halves_table(evaluation, split)}"
        for split in ("confirm", "tune")
    )
    # the default against each other run, question by question (commands.paired)
    evaluation["paired"] = compare_runs(evaluation, load_questions(questions))
    if evaluation["paired"]["comparisons"]:
        halves += "\n\n" + paired_report(
            evaluation["paired"], ("confirm", "tune"), called="the default"
        )
    date = datetime.date.today().isoformat()
    with open(os.path.join(out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(evaluation, f, indent=2)
    with open(os.path.join(out_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write(
            f"`make eval`, {date}, {evaluation['n_questions']} questions\n\n{halves}\n\n"
            f"Every set:\n\n{table}\n"
        )
    print(halves + "\n\n" + table)
    print(f"\nmake eval: {evaluation['total_seconds'] / 60:.1f} min; {out_dir}/results.md")


if __name__ == "__main__":
    main()
