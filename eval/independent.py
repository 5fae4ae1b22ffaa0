"""The independent checks: retrieval on documentation kept out of everything built or tuned.

    python -m eval.independent [--cache .cache/independent] [--runs DIR] [--only python r]
                               [--reuse]

Python 3.11's library reference (Debian's `python3.11-doc`, the 317 pages of `library/`) and
R's seven manuals (`r-doc-pdf` and `r-doc-html`), pinned in eval/independent.json. Neither is
in the zoo or the development set, and no default is chosen on them: this command measures and
reports (docs/evaluation.md, "Independent checks"); a weakness it shows is reported, not tuned
away on the same pages.

- python: the development set's Sphinx rule (`eval.make_questions.sphinx`): every Python-domain
  definition with a description of 8 words or more, "What does accumulate() do?", "What is the
  Popen class for?", answered by its description's first paragraph. An answer that is no
  passage of its page's text (`eval.verify_answers`) is left out and counted. Rows: default,
  context-none and langchain-256 (LangChain's recursive splitter over the default run's
  documents, as `make eval` runs it).
- r: each manual as a PDF/HTML pair, the pairs' rule (`eval.make_questions.pdf_pair`: "What does
  the manual say about Large matrices?", headings that name R or CRAN left out). Rows:
  pdf-default (the job on the PDFs), pdf-html-twin (the job on the HTML, scored with the HTML
  as the answers' source), pdf-pypdf-langchain-256 and pdf-langchain-256.

CACHE holds the packages (debs/, unpacked/), the corpora (python/, r/pdf/, r/html/) and the
questions; RUNS (default CACHE/runs) the runs, and results.md and results.json of the checks
run (in RUNS/, and each check's last in RUNS/<check>/). About 30 minutes
on 2 cores, most of it the Python rows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import sys
import time
from typing import Any

from eval.fetch import select, unpack
from eval.run_eval import COMMON, JOB_CONFIGS, LANGCHAIN_CONFIGS, PAIR_CONFIGS, _run_once

HERE = os.path.dirname(os.path.abspath(__file__))
LOCK = os.path.join(HERE, "independent.json")
CHECKS = ("python", "r")


def _debs(cache: str) -> str:
    debs = os.path.join(cache, "debs")
    os.makedirs(debs, exist_ok=True)
    return debs


def _lock() -> dict[str, Any]:
    with open(LOCK, encoding="utf-8") as f:
        return json.load(f)


def fetch_python(cache: str, spec: dict[str, Any]) -> str:
    """CACHE/python/<corpus>/: the pinned package's library pages; returns CACHE/python."""
    (package,) = spec["packages"]
    _, unpacked = unpack(cache, _debs(cache), package)
    files = select(unpacked, spec["files"])
    if not files:
        raise SystemExit(f"eval.independent: no file of {package['name']} matches {spec['files']}")
    root = os.path.join(cache, "python")
    shutil.rmtree(root, ignore_errors=True)
    target = os.path.join(root, spec["corpus"])
    os.makedirs(target)
    for rel in files:
        shutil.copyfile(os.path.join(unpacked, rel), os.path.join(target, os.path.basename(rel)))
    print(f"{package['name']} {package['version']}: {len(files)} pages -> {target}")
    return root


def fetch_r(cache: str, spec: dict[str, Any]) -> str:
    """CACHE/r/{pdf,html}/<manual>/: each manual's PDF and its HTML page, the layout of
    `eval.make_questions.pair_questions`; returns CACHE/r."""
    unpacked = [unpack(cache, _debs(cache), p)[1] for p in spec["packages"]]
    root = os.path.join(cache, "r")
    shutil.rmtree(root, ignore_errors=True)
    for manual in spec["manuals"]:
        for form in ("pdf", "html"):
            rel = spec[form].format(manual=manual)
            found = [os.path.join(u, rel) for u in unpacked if os.path.isfile(os.path.join(u, rel))]
            if not found:
                names = [p["name"] for p in spec["packages"]]
                raise SystemExit(f"eval.independent: no {rel} in {names}")
            target = os.path.join(root, form, manual.lower())
            os.makedirs(target, exist_ok=True)
            shutil.copyfile(found[0], os.path.join(target, os.path.basename(rel)))
    names = ", ".join(f"{p['name']} {p['version']}" for p in spec["packages"])
    print(f"{names}: {len(spec['manuals'])} manuals as PDF and HTML -> {root}")
    return root


def _write_verified(path: str, records: list[dict], root: str) -> int:
    """Write to `path` the records whose answers are passages of their documents under `root`
    (`eval.verify_answers.answer_problems`); the number left out."""
    from eval.make_questions import _write
    from eval.verify_answers import answer_problems

    kept = [r for r in records if not answer_problems(r, root)]
    _write(path, kept)  # each with the half its id hashes to
    return len(records) - len(kept)


def python_questions(root: str, spec: dict[str, Any], out: str) -> str:
    from eval.make_questions import sphinx

    records = sphinx(root, spec["corpus"])
    path = os.path.join(out, "questions.jsonl")
    left = _write_verified(path, records, root)
    print(f"python: {len(records) - left} questions ({left} left out: not a passage)")
    return path


def r_questions(root: str, spec: dict[str, Any], out: str) -> tuple[str, str]:
    from eval.make_questions import pair_questions

    pair_questions(root, out, re.compile(spec["product"]))
    paths = []
    for form in ("pdf", "html"):
        path = os.path.join(out, f"{form}.jsonl")
        with open(path, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
        left = _write_verified(path, records, os.path.join(root, form))
        print(f"r ({form}): {len(records) - left} questions ({left} left out)")
        paths.append(path)
    return paths[0], paths[1]


def _job(runs: str, name: str, root: str, reuse: bool, seconds: dict[str, float]) -> str:
    """The job on `root` with `make eval`'s flags for the row `name` (`JOB_CONFIGS`, or the
    form's `PAIR_CONFIGS`)."""
    flags = JOB_CONFIGS[name] if name in JOB_CONFIGS else PAIR_CONFIGS[name][1]
    run = os.path.join(runs, name)
    command = [sys.executable, "-m", "pipelines.chunk_corpus", "--input", root + "/",
               "--output", run, *COMMON, *flags]  # fmt: skip
    _run_once(name, run, command, reuse, seconds)
    return run


def _langchain(
    runs: str, name: str, documents: str, pypdf: str | None, reuse: bool, seconds: dict
) -> str:
    size, overlap = LANGCHAIN_CONFIGS["langchain-256"]
    run = os.path.join(runs, name)
    command = [sys.executable, "-m", "eval.langchain_run", "--documents", documents,
               "--output", run, f"--chunk_size={size}", f"--chunk_overlap={overlap}"]  # fmt: skip
    if pypdf:
        command += ["--pypdf", pypdf]
    _run_once(name, run, command, reuse, seconds)
    return run


def _report(title: str, evaluations: list[dict], baseline: str) -> str:
    """The table of `evaluations` together, then the first one's `baseline` against its other
    runs question by question (`commands.paired`, stored in that evaluation)."""
    from commands.evaluate import load_questions, markdown_table
    from commands.paired import compare_runs, paired_report

    merged = {**evaluations[0], "results": [r for e in evaluations for r in e["results"]]}
    evaluation = evaluations[0]
    paired = compare_runs(evaluation, load_questions(evaluation["questions"]), baseline)
    evaluation["paired"] = paired
    return f"### {title}\n\n{markdown_table(merged)}\n\n" + paired_report(
        paired, ("confirm", "tune")
    )


# The Sphinx rule's three templates (`eval.make_questions._definition_question`)
KINDS = (("callable", "What does "), ("class", " class for?"), ("value", "What is "))


def kind_of(question: str) -> str:
    """Which template asked `question`: "callable", "class" or "value"."""
    return next(k for k, mark in KINDS if mark in question)


def by_kind(evaluation: dict[str, Any]) -> str:
    """Recall@10 / MRR@10 of each run on each template's questions, from the ranks
    `commands.evaluate` recorded: a definition's kind shows what a header does for it."""
    from commands.evaluate import load_questions

    questions = load_questions(evaluation["questions"])
    kinds = {k: [q.id for q in questions if kind_of(q.question) == k] for k, _ in KINDS}
    labels = [r["label"] for r in evaluation["results"]]
    lines = ["| questions | n | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for kind, ids in kinds.items():
        cells = []
        for result in evaluation["results"]:
            ranks = [result["first_relevant_rank"].get(i) for i in ids]
            hits = [r for r in ranks if r is not None and r <= 10]
            n = max(len(ids), 1)
            cells.append(f"{len(hits) / n:.3f} / {sum(1 / r for r in hits) / n:.3f}")
        lines.append(f"| {kind} | {len(ids)} | " + " | ".join(cells) + " |")
    return "Recall@10 / MRR@10 by the question's template:\n\n" + "\n".join(lines)


def _write_results(
    folder: str, date: str, lock: dict, results: dict, seconds: dict, text: str
) -> str:
    """FOLDER/results.json (the evaluations, the pins, the runs' seconds) and FOLDER/results.md
    (`text` under a line with the date); the report."""
    with open(os.path.join(folder, "results.json"), "w", encoding="utf-8") as f:
        record = {"date": date, "lock": lock, "checks": results, "run_seconds": seconds}
        json.dump(record, f, indent=2)
    report = f"eval.independent, {date}\n\n{text}\n"
    with open(os.path.join(folder, "results.md"), "w", encoding="utf-8") as f:
        f.write(report)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=".cache/independent", help="cache folder")
    parser.add_argument("--runs", default=None, help="folder of the runs (default CACHE/runs)")
    parser.add_argument("--only", nargs="+", default=list(CHECKS), choices=CHECKS)
    parser.add_argument("--reuse", action="store_true", help="keep finished runs of same flags")
    args = parser.parse_args()
    from commands.evaluate import evaluate

    lock = _lock()
    cache = os.path.abspath(args.cache)
    runs = os.path.abspath(args.runs) if args.runs else os.path.join(cache, "runs")
    started, seconds, sections, results = time.time(), {}, {}, {}
    if "python" in args.only:
        spec = lock["python"]
        root = fetch_python(cache, spec)
        out = os.path.join(runs, "python")
        os.makedirs(out, exist_ok=True)
        questions = python_questions(root, spec, out)
        default = _job(out, "default", root, args.reuse, seconds)
        rows = [
            default,
            _job(out, "context-none", root, args.reuse, seconds),
            _langchain(out, "langchain-256", default, None, args.reuse, seconds),
        ]
        evaluation = evaluate(rows, questions)
        title = "python: Python 3.11's library reference"
        report = _report(title, [evaluation], "default")
        sections["python"] = report + "\n\n" + by_kind(evaluation)
        results["python"] = evaluation
    if "r" in args.only:
        spec = lock["r"]
        root = fetch_r(cache, spec)
        out = os.path.join(runs, "r")
        os.makedirs(out, exist_ok=True)
        pdf_q, html_q = r_questions(root, spec, out)
        pdf_default = _job(out, "pdf-default", os.path.join(root, "pdf"), args.reuse, seconds)
        twin = _job(out, "pdf-html-twin", os.path.join(root, "html"), args.reuse, seconds)
        pdf_rows = [
            pdf_default,
            _langchain(
                out,
                "pdf-pypdf-langchain-256",
                pdf_default,
                os.path.join(root, "pdf"),
                args.reuse,
                seconds,
            ),
            _langchain(out, "pdf-langchain-256", pdf_default, None, args.reuse, seconds),
        ]
        pdf_eval, html_eval = evaluate(pdf_rows, pdf_q), evaluate([twin], html_q)
        title = "r: R's manuals, PDF and HTML"
        sections["r"] = _report(title, [pdf_eval, html_eval], "pdf-default")
        results["r"] = {"pdf": pdf_eval, "html": html_eval}
    minutes = (time.time() - started) / 60
    date = datetime.date.today().isoformat()
    # this invocation's checks in RUNS/, each check's last also in RUNS/<check>/
    for check in sections:
        _write_results(os.path.join(runs, check), date, lock, {check: results[check]},
                       seconds, sections[check])  # fmt: skip
    report = _write_results(runs, date, lock, results, seconds, "\n\n".join(sections.values()))
    print(report)
    print(f"eval.independent: {minutes:.1f} min; {os.path.join(runs, 'results.md')}")


if __name__ == "__main__":
    main()
