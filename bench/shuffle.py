"""Shuffled bytes per stage: a build of N generated documents, then a rebuild after a 1% change.

Every PCollection the runner must move between workers is measured: the input of every
GroupByKey (those inside CoGroupByKey, Reshuffle and the combines included) and every side
input. The job is built as `corpus-chunker` builds it; before it runs, a pipeline visitor finds
those PCollections and hangs a measuring step on each (a branch: the job's own steps and output
are unchanged). The step encodes each element with the PCollection's coder and adds its size to
a Beam distribution named for the stage; the same method for the build and the rebuild, on any
runner. A side input is counted once, though a runner sends it to every
worker.
Combines are measured as they shuffle after combiner lifting: their elements combined per key
within each bundle (on this runner a bundle is a whole stage's input, so this is a lower bound
of what a runner with small bundles moves).

The corpus (`generate_corpus`): Markdown and text files in folders of 50, and JSONL files of
records, of prose made from a fixed word list, each folder's files with the same footer line
(boilerplate). The change: 1% of the documents edited (a sentence more), 0.5% removed, 0.5%
added, as bench/nightly.py does.

    python bench/shuffle.py --docs 500                   # default model: vectors are shuffled too
    python bench/shuffle.py --docs 20 --job_flag=--embedding_model=none
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field

import apache_beam as beam
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.pipeline import AppliedPTransform, PipelineVisitor

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMESPACE = "shuffle_bench"
FOLDER_SIZE = 50  # documents per folder (a boilerplate group)
RECORDS_PER_FILE = 100  # records per JSONL file
RECORD_SHARE = 0.2  # of the documents, JSONL records
EDIT = "Edited for tonight's rebuild: one sentence more."
# The corpus of issue 23: 100 M documents, about 1 TB of text
PROJECTED_DOCUMENTS = 100_000_000
PROJECTED_TEXT_BYTES = 1e12

_WORD_LIST = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when what "
    "if more will so no out up into them some could time two may then do first any my now "
    "such like our over man me even most made after also did many before must through back "
    "years where much your way well down should because each just those people how too little "
    "state good very make world still own see men work long get here between both life being "
    "under never day same another know while last might us great old year off come since "
    "against go came right used take three index table query server vector chunk document "
    "token embedding pipeline worker shuffle partition bucket manifest schema column row"
)
WORDS = _WORD_LIST.split()


# --- The corpus -----------------------------------------------------------------------------


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 24))]
    return " ".join(words).capitalize() + "."


def _prose(rng: random.Random, paragraphs: int) -> str:
    return "\n\n".join(
        " ".join(_sentence(rng) for _ in range(rng.randint(3, 7))) for _ in range(paragraphs)
    )


def document_text(n: int, markdown: bool) -> str:
    """The text of generated document `n` (the same on every run), 2-5 KB."""
    rng = random.Random(n)
    sections = []
    for s in range(rng.randint(2, 4)):
        body = _prose(rng, rng.randint(2, 4))
        sections.append(f"## Section {s + 1}\n\n{body}" if markdown else body)
    title = f"# Document {n}\n\n" if markdown else f"Document {n}\n\n"
    return title + "\n\n".join(sections) + "\n"


@dataclass
class Corpus:
    """A generated corpus on disk: which document lives where, so that a change can edit it."""

    root: str
    files: dict[int, str] = field(default_factory=dict)  # document -> its file
    records: dict[int, str] = field(default_factory=dict)  # document -> its JSONL file
    texts: dict[int, str] = field(default_factory=dict)

    def write(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        by_jsonl: dict[str, list[int]] = {}
        for n, jsonl in self.records.items():
            by_jsonl.setdefault(jsonl, []).append(n)
        for n, path in self.files.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(self.texts[n])
        for jsonl, docs in by_jsonl.items():
            os.makedirs(os.path.dirname(jsonl), exist_ok=True)
            with open(jsonl, "w", encoding="utf-8") as f:
                for n in sorted(docs):
                    f.write(json.dumps({"id": f"record-{n}", "text": self.texts[n]}) + "\n")

    @property
    def documents(self) -> list[int]:
        return sorted([*self.files, *self.records])

    def text_bytes(self) -> int:
        return sum(len(self.texts[n].encode()) for n in self.documents)


def _place(corpus: Corpus, n: int, record: bool) -> None:
    if record:
        corpus.records[n] = os.path.join(
            corpus.root, "records", f"part-{n // RECORDS_PER_FILE:04d}.jsonl"
        )
        corpus.texts[n] = document_text(n, markdown=False)
        return
    folder = os.path.join(corpus.root, f"folder-{n // FOLDER_SIZE:04d}")
    markdown = n % 2 == 0
    corpus.files[n] = os.path.join(folder, f"doc-{n:06d}.{'md' if markdown else 'txt'}")
    footer = f"Generated corpus, folder {n // FOLDER_SIZE}, for the shuffle bench."
    corpus.texts[n] = document_text(n, markdown) + f"\n{footer}\n"


def generate_corpus(root: str, docs: int) -> Corpus:
    """`docs` documents under `root`: every fifth document a JSONL record, the rest files."""
    corpus = Corpus(root)
    for n in range(docs):
        _place(corpus, n, record=n % round(1 / RECORD_SHARE) == 0)
    corpus.write()
    return corpus


def change_corpus(corpus: Corpus, docs: int) -> dict[str, int]:
    """A night's change: 1% of the documents edited, 0.5% removed, 0.5% added (new ones)."""
    present = corpus.documents
    edited_n = max(1, round(docs * 0.01))
    removed_n = added_n = max(1, round(docs * 0.005))
    edited = present[:: max(1, len(present) // edited_n)][:edited_n]
    others = [n for n in present if n not in set(edited)]
    removed = others[len(others) // (2 * removed_n) :: max(1, len(others) // removed_n)]
    removed = removed[:removed_n]
    for n in edited:
        corpus.texts[n] = corpus.texts[n].replace(".", f". {EDIT}", 1)
    for n in removed:
        corpus.files.pop(n, None)
        corpus.records.pop(n, None)
        del corpus.texts[n]
    for n in range(docs, docs + added_n):
        _place(corpus, n, record=n % round(1 / RECORD_SHARE) == 0)
    corpus.write()
    return {"edited": len(edited), "removed": len(removed), "added": added_n}


# --- Measuring what is shuffled -------------------------------------------------------------


class _EncodedBytes(beam.DoFn):
    """Adds each element's size, encoded with `coder`, to the distribution `stage`."""

    def __init__(self, stage: str, coder: beam.coders.Coder) -> None:
        self.stage = stage
        self.coder = coder

    def setup(self) -> None:
        self.bytes = Metrics.distribution(NAMESPACE, self.stage)

    def process(self, element: object) -> Iterator[None]:
        self.bytes.update(len(self.coder.encode(element)))
        return iter(())


class _PrecombinedBytes(beam.DoFn):
    """What a combine's lifted shuffle carries: its elements combined per key within each
    bundle (as a runner's combiner lifting does), each (key, accumulator) encoded and added to
    the distribution `stage` at the bundle's end."""

    def __init__(
        self, stage: str, fn: beam.CombineFn, key_coder: beam.coders.Coder, args: tuple
    ) -> None:
        self.stage = stage
        self.fn = fn
        self.args = args
        self.coder = beam.coders.TupleCoder([key_coder, fn.get_accumulator_coder()])

    def setup(self) -> None:
        self.bytes = Metrics.distribution(NAMESPACE, self.stage)
        self.fn.setup(*self.args)

    def start_bundle(self) -> None:
        self.accumulators: dict = {}

    def process(self, element: tuple) -> Iterator[None]:
        key, value = element
        accumulator = self.accumulators.get(key)
        if accumulator is None:
            accumulator = self.fn.create_accumulator(*self.args)
        self.accumulators[key] = self.fn.add_input(accumulator, value, *self.args)
        return iter(())

    def finish_bundle(self) -> None:
        for key, accumulator in self.accumulators.items():
            compacted = self.fn.compact(accumulator, *self.args)
            self.bytes.update(len(self.coder.encode((key, compacted))))
        self.accumulators = {}


def _ours(applied: AppliedPTransform | None) -> bool:
    """Whether a step is the job's own (a composite of this project) or the pipeline's root."""
    if applied is None or applied.transform is None:
        return True
    return not type(applied.transform).__module__.startswith("apache_beam")


def stage_of(applied: AppliedPTransform) -> str:
    """The stage a Beam step belongs to: the full label of the outermost Beam transform above
    it that the job applied itself ("Find unchanged documents/Split unchanged/Join on
    doc_id" for the GroupByKey inside that CoGroupByKey)."""
    node = applied
    while node.parent is not None and not _ours(node.parent):
        node = node.parent
    return node.full_label


@dataclass(frozen=True)
class Shuffle:
    stage: str  # stage_of the step that shuffles
    kind: str  # "group" (a GroupByKey's input), "combine" (a combine's) or "side input"
    pcollection: beam.PCollection
    combine: beam.CombinePerKey | None = None  # the combine whose GroupByKey this is


class _FindShuffles(PipelineVisitor):
    def __init__(self) -> None:
        self.found: list[Shuffle] = []
        self._seen: set[tuple[str, int]] = set()

    def _add(self, shuffle: Shuffle) -> None:
        if (shuffle.stage, id(shuffle.pcollection)) not in self._seen:
            self._seen.add((shuffle.stage, id(shuffle.pcollection)))
            self.found.append(shuffle)

    def visit_transform(self, applied: AppliedPTransform) -> None:
        if isinstance(applied.transform, beam.GroupByKey):
            (pcoll,) = applied.main_inputs.values()
            parent = applied.parent.transform if applied.parent is not None else None
            if isinstance(parent, beam.CombinePerKey) and not parent.side_inputs:
                self._add(Shuffle(stage_of(applied), "combine", pcoll, parent))
            else:
                self._add(Shuffle(stage_of(applied), "group", pcoll))
        for side in applied.side_inputs:
            self._add(Shuffle(f"{stage_of(applied)} (side input)", "side input", side.pvalue))


def measure_shuffles(pipeline: beam.Pipeline) -> list[Shuffle]:
    """Hang a measuring branch on every PCollection of `pipeline` that a runner shuffles (the
    input of each GroupByKey, each side input); what it found."""
    visitor = _FindShuffles()
    pipeline.visit(visitor)
    for i, shuffle in enumerate(visitor.found):
        coder = beam.coders.registry.get_coder(shuffle.pcollection.element_type)
        if shuffle.combine is None:
            measure = _EncodedBytes(shuffle.stage, coder)
        else:
            key_coder = (
                coder.coders()[0]
                if isinstance(coder, beam.coders.TupleCoder)
                else beam.coders.registry.get_coder(object)
            )
            fn = beam.CombineFn.maybe_from_callable(shuffle.combine.fn)
            measure = _PrecombinedBytes(shuffle.stage, fn, key_coder, tuple(shuffle.combine.args))
        _ = shuffle.pcollection | f"Shuffle bench {i}: {shuffle.stage}" >> beam.ParDo(measure)
    return visitor.found


def shuffled_bytes(result: beam.runners.runner.PipelineResult) -> dict[str, tuple[int, int]]:
    """stage -> (bytes, elements) that the measuring branches counted."""
    found: dict[str, tuple[int, int]] = {}
    query = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    for d in query["distributions"]:
        value = d.committed if d.committed is not None else d.attempted
        total, count = found.get(d.key.metric.name, (0, 0))
        found[d.key.metric.name] = (total + value.sum, count + value.count)
    return found


@contextmanager
def measured_job() -> Iterator[list[beam.Pipeline]]:
    """While open, every pipeline `pipelines.chunk_corpus.run` builds is measured before it
    runs (its build_pipeline is wrapped); yields the list of those pipelines."""
    from pipelines import chunk_corpus

    built: list[beam.Pipeline] = []
    original = chunk_corpus.build_pipeline

    def build_and_measure(p: beam.Pipeline, *args: object, **kwargs: object) -> object:
        outputs = original(p, *args, **kwargs)
        measure_shuffles(p)
        built.append(p)
        return outputs

    chunk_corpus.build_pipeline = build_and_measure
    try:
        yield built
    finally:
        chunk_corpus.build_pipeline = original


# --- The runs -------------------------------------------------------------------------------


@dataclass
class Night:
    name: str
    seconds: float
    report: dict
    bytes: dict[str, tuple[int, int]]

    @property
    def total(self) -> int:
        return sum(b for b, _ in self.bytes.values())


def night(name: str, corpus: str, output: str, previous: str | None, flags: Sequence[str]) -> Night:
    from pipelines.chunk_corpus import run

    argv = ["--input", os.path.join(corpus, "**"), "--output", output, "--quiet", *flags]
    if previous:
        argv += ["--previous_output", previous]
    started = time.perf_counter()
    with measured_job(), redirect_stdout(sys.stderr):  # the job's summary, off the table
        result = run(argv)
    seconds = time.perf_counter() - started
    with open(os.path.join(output, "cost_report.json")) as f:
        report = json.load(f)
    return Night(name, seconds, report, shuffled_bytes(result))


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "-C", REPO, "log", "-1", "--format=%h %cs"],
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def _mb(n: float) -> str:
    return f"{n / 1e6:,.3f}"


def print_table(build: Night, rebuild: Night, docs: int, text_bytes: int) -> None:
    stages = sorted(
        set(build.bytes) | set(rebuild.bytes),
        key=lambda s: -max(build.bytes.get(s, (0, 0))[0], rebuild.bytes.get(s, (0, 0))[0]),
    )
    print(
        "\n| stage | build MB | build elements | rebuild MB | rebuild elements | "
        "rebuild / build |\n|---|---:|---:|---:|---:|---:|"
    )
    for stage in [*stages, "total"]:
        if stage == "total":
            b, r = (build.total, 0), (rebuild.total, 0)
            be = re = ""
        else:
            b, r = build.bytes.get(stage, (0, 0)), rebuild.bytes.get(stage, (0, 0))
            be, re = f"{b[1]:,}", f"{r[1]:,}"
        ratio = f"{r[0] / b[0]:.3f}" if b[0] else "n/a"
        name = f"**{stage}**" if stage == "total" else stage
        print(f"| {name} | {_mb(b[0])} | {be} | {_mb(r[0])} | {re} | {ratio} |")
    print()
    for n in (build, rebuild):
        print(
            f"- {n.name}: {n.seconds:.1f} s, {n.total:,} bytes shuffled, "
            f"{n.total / docs:,.0f} bytes per document"
        )
    ratio = rebuild.total / build.total if build.total else float("nan")
    print(f"- rebuild / build, all stages: {ratio:.3f}")
    per_doc, per_text = PROJECTED_DOCUMENTS / docs, PROJECTED_TEXT_BYTES / text_bytes
    print(
        f"- projected to {PROJECTED_DOCUMENTS:,} documents: build "
        f"{build.total * per_doc / 1e12:,.2f} TB, rebuild {rebuild.total * per_doc / 1e12:,.2f} "
        f"TB (bytes per document); to 1 TB of text: build {build.total * per_text / 1e12:,.2f} "
        f"TB, rebuild {rebuild.total * per_text / 1e12:,.2f} TB (bytes per byte of text)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=500, help="documents in the build")
    parser.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--json_out", default=None)
    parser.add_argument(
        "--job_flag",
        action="append",
        default=[],
        help="a flag for both runs, e.g. --job_flag=--embedding_model=none",
    )
    args = parser.parse_args(argv)
    if args.docs < 10:
        parser.error("--docs must be at least 10")
    work = args.work or tempfile.mkdtemp(prefix="corpus-chunker-shuffle-")
    flags = ["--runner=FnApiRunner", *args.job_flag]
    corpus = generate_corpus(os.path.join(work, "corpus"), args.docs)
    text_bytes = corpus.text_bytes()
    print(
        f"corpus: {args.docs} documents ({len(corpus.records)} JSONL records), "
        f"{text_bytes / 1e6:.2f} MB of text; commit {_commit()}"
    )
    build = night("build", corpus.root, os.path.join(work, "night1"), None, flags)
    change = change_corpus(corpus, args.docs)
    print(
        f"change: {change['edited']} edited, {change['removed']} removed, {change['added']} added"
    )
    rebuild = night(
        "rebuild", corpus.root, os.path.join(work, "night2"), os.path.join(work, "night1"), flags
    )
    r = rebuild.report
    print(
        f"rebuild: documents_in {r['documents_in']}, unchanged {r['documents_unchanged']}, "
        f"chunked {r['documents_chunked']}, chunks_reused {r.get('chunks_reused', 0)}"
    )
    print_table(build, rebuild, args.docs, text_bytes)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(
                {
                    "docs": args.docs,
                    "text_bytes": text_bytes,
                    "change": change,
                    "job_flags": args.job_flag,
                    "commit": _commit(),
                    "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                    "nights": {
                        n.name: {"seconds": n.seconds, "bytes": n.bytes, "report": n.report}
                        for n in (build, rebuild)
                    },
                },
                f,
                indent=2,
            )
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
