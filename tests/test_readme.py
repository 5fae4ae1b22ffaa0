"""The README and docs/ say what the code does: the demo counts the README quotes are the ones
tests/data/golden/samples_default.json records for `make demo`'s run, the defaults of its flag
table are the option definitions', docs/flags.md is what the generator makes, and every
relative link leads somewhere."""

from __future__ import annotations

import glob
import itertools
import json
import os
import re

import pytest
from hypothesis import settings

from commands.run_stats import FRAGMENT_FRACTION
from pipelines import flags_doc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden", "samples_default.json")
DEMO_CHUNK_SIZE = 192  # make demo passes no flag: --chunk_size's default
MAX_README_LINES = 300


def _read(*path: str) -> str:
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _find(pattern: str, text: str) -> re.Match:
    match = re.search(pattern, text)
    assert match, f"README no longer says {pattern!r}"
    return match


@pytest.fixture(scope="module")
def readme() -> str:
    return _read("README.md")


@pytest.fixture(scope="module")
def golden() -> dict:
    with open(GOLDEN, encoding="utf-8") as f:
        return json.load(f)


def test_docs_flags_md_is_what_the_generator_makes():
    assert _read("docs", "flags.md") == flags_doc.render(), (
        "docs/flags.md differs from the option definitions: run python -m pipelines.flags_doc"
    )


def test_the_readme_is_short(readme):
    assert len(readme.splitlines()) <= MAX_README_LINES


def test_the_demo_summary_is_the_recorded_demo_run(readme, golden):
    report = golden["report"]
    m = _find(r"run: (\d+) documents in -> (\d+) chunked, (\d+) rejected, (\d+) unchanged", readme)
    assert [int(g) for g in m.groups()] == [
        report["documents_in"],
        report["documents_chunked"],
        report["documents_rejected"],
        report["documents_unchanged"],
    ]
    rejects = {
        f"{stage}:{reason}": int(n)
        for stage, listed in re.findall(r"rejected at (\w+): (.*)", readme)
        for reason, n in re.findall(r"(\w+) (\d+)", listed)
    }
    assert rejects == report["rejects"]
    m = _find(r"chunks: (\d+) \((\d+) rejected, (\d+) truncated by the model\)", readme)
    assert [int(g) for g in m.groups()] == [
        report["chunks"],
        report["chunks_rejected"],
        report["chunks_truncated"],
    ]
    assert report["chunks"] == len(golden["chunks"])
    m = _find(r"tokens: ([\d,]+) in documents, ([\d,]+) embedded \(inflation ([\d.]+)\)", readme)
    assert _number(m[1]) == report["document_tokens"]
    assert _number(m[2]) == report["embedded_tokens"]
    assert float(m[3]) == report["overlap_inflation"]
    m = _find(r"cost: \$([\d.]+) at \$([\d.]+)/M tokens", readme)
    assert m[1] == f"{report['cost_usd']:.6f}"
    assert float(m[2]) == report["price_per_million_tokens"]
    rejected = _find(r"The (\d+) rejects are the deliberately bad inputs", readme)
    assert int(rejected[1]) == report["documents_rejected"]


def test_the_demo_progress_line_counts_the_samples(readme, golden):
    report = golden["report"]
    files = [p for p in glob.glob(os.path.join(ROOT, "samples", "*", "*")) if os.path.isfile(p)]
    record_files = [p for p in files if p.endswith(".jsonl")]
    records = 0
    for path in record_files:
        with open(path, encoding="utf-8", errors="replace") as f:
            records += sum(1 for line in f if line.strip())
    m = _find(
        r"read (\d+) files \((\d+) records\), extracted (\d+), chunked (\d+) \((\d+) chunks\), "
        r"embedded (\d+)",
        readme,
    )
    read_files, read_records, extracted, chunked, chunks, embedded = (int(g) for g in m.groups())
    assert (read_files, read_records) == (len(files), records)
    assert len(files) - len(record_files) + records == report["documents_in"]
    early_rejects = sum(
        n for key, n in report["rejects"].items() if key.split(":")[0] in ("read", "extract")
    )
    assert extracted == report["documents_in"] - early_rejects
    assert chunked == report["documents_chunked"]
    assert chunks == embedded == report["chunks"] - report["chunks_rejected"]


def _pairs(golden: dict, strategy: str) -> tuple[int, int]:
    """(overlapping, all) neighbour pairs of the strategy's chunks, as `inspect` counts them."""
    by_source: dict[str, list[list]] = {}
    for row in golden["chunks"]:  # [chunk_id, source, index, start, end, ..., strategy]
        if row[-1] == strategy:
            by_source.setdefault(row[1], []).append(row)
    overlapping = total = 0
    for rows in by_source.values():
        rows.sort(key=lambda r: (r[3], r[4]))
        for a, b in itertools.pairwise(rows):
            total += 1
            overlapping += b[3] < a[4]
    return overlapping, total


def test_the_guarantees_quote_the_demo_run(readme, golden):
    m = _find(r"neighbouring code chunks overlap: (\d+) of (\d+)\s+pairs on `samples/`", readme)
    assert (int(m[1]), int(m[2])) == _pairs(golden, "code")
    m = _find(r"cut \((\d+) of (\d+) pairs on\s+`samples/`\)", readme)
    assert (int(m[1]), int(m[2])) == _pairs(golden, "markdown")
    m = _find(
        r"(\d+)\s+fragments? under 10% of `--chunk_size` among the (\d+) of `samples/`", readme
    )
    fragments = sum(row[8] < FRAGMENT_FRACTION * DEMO_CHUNK_SIZE for row in golden["chunks"])
    assert (int(m[1]), int(m[2])) == (fragments, len(golden["chunks"]))
    assert FRAGMENT_FRACTION == 0.1


def test_the_flag_table_quotes_the_option_defaults(readme):
    section = readme.split("### Common flags", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(--\w+)` \| ([^|]+?) \|", section, flags=re.MULTILINE)
    assert len(rows) >= 10
    defaults = {a.option_strings[0]: flags_doc.default_text(a) for a in flags_doc.flag_actions()}
    for flag, default in rows:
        assert flag in defaults, f"README's flag table names {flag}, which the job lacks"
        assert default == defaults[flag], (flag, default, defaults[flag])
    assert int(re.search(r"`--chunk_size` \| (\d+)", section)[1]) == DEMO_CHUNK_SIZE


def test_the_fuzz_target_says_how_many_examples(readme):
    m = _find(r"with ([\d,]+) examples each instead of\s+`make test`'s (\d+)", readme)
    assert _number(m[1]) == settings.get_profile("fuzz").max_examples
    assert int(m[2]) == settings.get_profile("test").max_examples


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"```.*?```", "", f.read(), flags=re.DOTALL)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def _broken_links(page: str) -> list[str]:
    path = os.path.join(ROOT, page)
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"```.*?```", "", f.read(), flags=re.DOTALL)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        missing = not os.path.exists(dest)
        if missing or (anchor and dest.endswith(".md") and anchor not in _anchors(dest)):
            broken.append(target)
    return broken


def test_every_relative_link_of_the_readme_leads_somewhere():
    assert _broken_links("README.md") == []


@pytest.mark.parametrize(
    "page", sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
)
def test_every_relative_link_of_docs_leads_somewhere(page):
    assert _broken_links(page) == []
