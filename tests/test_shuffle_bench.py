"""The shuffle bench's measurement (bench/shuffle.py): every GroupByKey input, combine and side
input of a pipeline is found and its encoded bytes counted, without changing its output."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.coders import StrUtf8Coder, TupleCoder, VarIntCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.combiners import CountCombineFn

from bench.shuffle import change_corpus, generate_corpus, measure_shuffles, shuffled_bytes
from schemas.records import RawDocument
from tests.test_boilerplate import make_doc
from transforms.boilerplate import BoilerplateConfig, RemoveBoilerplate
from transforms.ingest.read import UniqueRecordIds

PAIRS = [("a", "x" * 100), ("b", "y" * 10), ("a", "z")]


def _run(build) -> tuple[list, dict[str, tuple[int, int]]]:
    p = beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"]))
    build(p)
    found = measure_shuffles(p)
    result = p.run()
    result.wait_until_finish()
    return found, shuffled_bytes(result)


def test_a_group_by_key_input_is_counted_with_its_coder() -> None:
    def build(p: beam.Pipeline) -> None:
        grouped = (
            p
            | "Pairs" >> beam.Create(PAIRS).with_output_types(tuple[str, str])
            | "Group them" >> beam.GroupByKey()
            | "Sizes" >> beam.MapTuple(lambda k, vs: (k, sorted(len(v) for v in vs)))
        )
        assert_that(grouped, equal_to([("a", [1, 100]), ("b", [10])]))  # output unchanged

    found, measured = _run(build)
    # Create and assert_that shuffle too (a Reshuffle, a GroupByKey): found beside it
    assert ("Group them", "group") in [(s.stage, s.kind) for s in found]
    coder = TupleCoder([StrUtf8Coder(), StrUtf8Coder()])
    assert measured["Group them"] == (sum(len(coder.encode(e)) for e in PAIRS), 3)


def test_a_combine_counts_what_it_shuffles_after_lifting_and_a_side_input_once() -> None:
    def build(p: beam.Pipeline) -> None:
        words = p | "Words" >> beam.Create(["to", "be", "or", "not", "to", "be"])
        counted = words | "Count words" >> beam.combiners.Count.PerElement()
        sizes = p | "Sizes" >> beam.Create([("to", 2)])
        looked_up = words | "Look up" >> beam.Map(
            lambda w, d: d.get(w, 0), beam.pvalue.AsDict(sizes)
        )
        assert_that(counted, equal_to([("to", 2), ("be", 2), ("or", 1), ("not", 1)]))
        assert_that(looked_up, equal_to([2, 0, 0, 0, 2, 0]), label="Check lookups")

    found, measured = _run(build)
    kinds = {s.stage: s.kind for s in found}
    assert kinds["Count words"] == "combine"
    assert kinds["Look up (side input)"] == "side input"
    # one bundle: each distinct word once, with its count (not each of the 6 words)
    coder = TupleCoder([StrUtf8Coder(), CountCombineFn().get_accumulator_coder()])
    distinct = [("to", 2), ("be", 2), ("or", 1), ("not", 1)]
    assert measured["Count words"] == (sum(len(coder.encode(e)) for e in distinct), 4)
    side = TupleCoder([StrUtf8Coder(), VarIntCoder()]).encode(("to", 2))  # Create's type
    assert measured["Look up (side input)"] == (len(side), 1)


def test_the_generated_corpus_and_its_change(tmp_path) -> None:
    corpus = generate_corpus(str(tmp_path / "c"), 200)
    assert len(corpus.documents) == 200 and len(corpus.records) == 40
    before = dict(corpus.texts)
    change = change_corpus(corpus, 200)
    assert change == {"edited": 2, "removed": 1, "added": 1}
    edited = [n for n in corpus.documents if n in before and corpus.texts[n] != before[n]]
    assert len(edited) == 2 and len(corpus.documents) == 200
    assert generate_corpus(str(tmp_path / "d"), 200).texts == before  # the same every run


# --- What the job's own shuffles carry: digests and ids, never the text ----------------------


def _boilerplate_counts(line: str) -> tuple[int, int]:
    """(bytes, elements) the boilerplate counts shuffle for 4 documents of one folder that share
    `line`; the removal is checked to take the line out of each."""

    def build(p: beam.Pipeline) -> None:
        own = [f"Document {n} says something of its own.\n" for n in range(4)]
        docs = [make_doc(f"/c/{n}.txt", f"{text}{line}\n") for n, text in enumerate(own)]
        cleaned = (
            p
            | "Documents" >> beam.Create(docs)
            | "Remove boilerplate" >> RemoveBoilerplate(BoilerplateConfig(min_docs=3))
            | "Texts" >> beam.Map(lambda d: d.text)
        )
        assert_that(cleaned, equal_to(own))

    _, measured = _run(build)
    return measured["Remove boilerplate/Boilerplate lines/Count/Count documents per line"]


def test_the_boilerplate_counts_shuffle_digests_whatever_the_line_length() -> None:
    short = _boilerplate_counts("Licensed under the MIT licence.")
    long = _boilerplate_counts("Licensed under the MIT licence. " * 60)
    assert short == long  # 2 KB lines or 30 characters, the same bytes
    # 5 distinct lines in the folder (4 documents' own, 1 shared), each a pair of digests
    assert short[1] == 5 and short[0] <= 5 * 40


def test_the_record_id_check_groups_sources_not_texts() -> None:
    def build_with(text: str):
        def build(p: beam.Pipeline) -> None:
            records = [
                RawDocument(f"/c/a.jsonl#L{n}", f"id{n % 3}", text=text) for n in range(1, 7)
            ]
            result = p | "Records" >> beam.Create(records) | "Unique" >> UniqueRecordIds()
            kept = result.documents | "Kept" >> beam.Map(lambda d: d.source)
            assert_that(kept, equal_to([f"/c/a.jsonl#L{n}" for n in (1, 2, 3)]))
            rejected = result.rejects | "Rejected" >> beam.Map(lambda r: (r.source, r.reason))
            expected = [(f"/c/a.jsonl#L{n}", "duplicate_id") for n in (4, 5, 6)]
            assert_that(rejected, equal_to(expected), label="Check rejects")

        return build

    _, small = _run(build_with("short"))
    _, large = _run(build_with("a long record text " * 500))
    assert small["Unique/Group by id"] == large["Unique/Group by id"]
    assert small["Unique/Group by id"][1] == 6


def test_no_boilerplate_step_gathers_a_group() -> None:
    """Every shuffle of the boilerplate pass is a combine or a side input: no GroupByKey gathers
    the lines of a folder, which for a flat folder of many documents would be one huge element.
    """
    p = beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"]))
    docs = p | "Documents" >> beam.Create([make_doc("/c/1.txt", "A line of the text.\n")])
    _ = docs | "Remove boilerplate" >> RemoveBoilerplate(BoilerplateConfig())
    found = [s for s in measure_shuffles(p) if s.stage.startswith("Remove boilerplate/")]
    assert found and {s.kind for s in found} == {"combine", "side input"}, found
