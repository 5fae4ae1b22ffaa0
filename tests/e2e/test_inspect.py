"""`corpus-chunker inspect` on real runs (an incremental one too), and its page in a real browser.

The browser is Debian's chromium, driven by the playwright package; nothing is downloaded.
Without chromium the page test skips, except in CI (CI=true, as .ci/run sets), where it fails.
"""

import os
import shutil
from collections import Counter

import pytest

from commands.inspect import main
from pipelines.chunk_corpus import main as cli_main
from tests.jobs import run
from tests.tables import rows

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
FILES = [
    "markdown/node-path.md",
    "markdown/qs-README.md",
    "code/bisect.py",
    "code/stack.go",
    "html/whentouse.html",
    "text/sphinx-rst-primer.rst.txt",
    "bad/empty.txt",
    "jsonl/records.jsonl",
]
FLAGS = ["--embedding_model=none", "--quiet"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A run, then a rerun with --previous_output after one edit, one removal, one addition."""
    base = tmp_path_factory.mktemp("inspect")
    corpus = base / "corpus"
    for name in FILES:
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(SAMPLES, name), corpus / name)
    first, second = str(base / "first"), str(base / "second")
    run(["--input", f"{corpus}/", "--output", first, *FLAGS])
    (corpus / "code" / "stack.go").unlink()
    with open(corpus / "markdown" / "node-path.md", "a") as f:
        f.write("\n\n## An added section\n\nA paragraph that was not there in the first run.\n")
    shutil.copy(os.path.join(SAMPLES, "code", "textwrap.py"), corpus / "code" / "textwrap.py")
    run(["--input", f"{corpus}/", "--output", second, "--previous_output", first, *FLAGS])
    return first, second


def test_summary_per_type_and_strategy(runs, capsys):
    _, second = runs
    assert main([second, "--no_page"]) == 0
    out = capsys.readouterr().out
    chunks = [c for c in rows(second, "chunks") if not c["is_parent"]]
    per_group = Counter((c["doc_type"], c["strategy"]) for c in chunks)
    table = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) > 4 and (cells[0], cells[1]) in per_group:
            table[(cells[0], cells[1])] = cells
    assert set(table) == set(per_group)
    for key, cells in table.items():
        assert int(cells[3]) == per_group[key], key  # the chunks column
        biggest = max(c["token_count"] for c in chunks if (c["doc_type"], c["strategy"]) == key)
        assert int(cells[7]) == biggest, key  # the max column
    assert "extract  empty" in out  # rejects by stage and reason
    assert "documents 1 added, 1 changed, 1 removed" in out
    assert not os.path.exists(os.path.join(second, "report"))


def test_page_and_histogram_are_written(runs, capsys):
    _, second = runs
    assert main([second]) == 0
    assert f"page: {second}/report/index.html" in capsys.readouterr().out
    with open(os.path.join(second, "report", "chunk_sizes.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(os.path.join(second, "report", "index.html"), encoding="utf-8") as f:
        html = f.read()
    fetched = _fetched(html)  # the page loads nothing but its image: no script, no network
    assert fetched == [("img", "src", "chunk_sizes.png")]
    assert 'id="changes"' in html and "textwrap.py" in html and "stack.go" in html


def test_show_prints_one_document_with_its_boundaries(runs, capsys):
    _, second = runs
    assert main([second, "--show", "bisect.py"]) == 0
    out = capsys.readouterr().out
    chunks = [c for c in rows(second, "chunks") if c["source"].endswith("bisect.py")]
    assert out.count("── chunk ") == len(chunks) > 1
    assert "def insort_right" in out
    # the subcommand through the main entry point, and an ambiguous key
    with pytest.raises(SystemExit) as done:
        cli_main(["inspect", second, "--show", ".md"])
    assert done.value.code == 2
    assert "matches 2 documents" in capsys.readouterr().err


def test_inspect_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no run_manifest.json" in capsys.readouterr().err


def _fetched(html: str) -> list[tuple[str, str, str]]:
    """(tag, attribute, value) of everything the page would load or run."""
    from html.parser import HTMLParser

    found = []

    class Finder(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag in ("script", "link", "iframe", "object", "embed"):
                found.append((tag, "", ""))
            found.extend((tag, k, v) for k, v in attrs if k in ("src", "srcset", "data"))

    Finder().feed(html)
    return found


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path = None
    if path is None:
        why = "needs Debian's chromium (apt-get install chromium) and playwright (.[dev])"
        if os.environ.get("CI"):
            pytest.fail(f"the page test {why}; .ci/run installs chromium")
        pytest.skip(f"the page test {why}")
    return path


def test_page_renders_in_a_real_browser(runs, tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = _chromium()
    _, second = runs
    assert main([second]) == 0
    page_path = os.path.join(second, "report", "index.html")
    problems = []
    with sync_playwright() as p:
        # launch() starts the browser headless with a fresh temporary profile of its own
        browser = p.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on(
                "console",
                lambda m: (
                    problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"failed to load {r.url}"))
            # CI's 2 shared cores with other tests beside: a full-page screenshot of the whole
            # report once took over 30 s to paint; the first screen shows that it renders
            page.set_default_timeout(120_000)
            page.goto(f"file://{page_path}", wait_until="load")
            shot = tmp_path / "page.png"
            page.screenshot(path=str(shot), animations="disabled")
            dom = page.content()
            stats_rows = page.locator("#stats-table tr").count()
            image = page.evaluate(
                "() => { const i = document.getElementById('histogram');"
                " return [i.complete, i.naturalWidth, i.naturalHeight,"
                " i.getBoundingClientRect().height]; }"
            )
            cuts = page.locator(".boundaries .cut")
            first_cut = cuts.first.inner_text()
            cut_height = cuts.first.bounding_box()["height"]
            n_cuts = cuts.count()
            overlap = page.locator(".boundaries .ov").count()
        finally:
            browser.close()
    assert problems == []
    assert shot.stat().st_size > 10_000
    chunks = [c for c in rows(second, "chunks") if not c["is_parent"]]
    groups = {(c["doc_type"], c["strategy"]) for c in chunks}
    assert stats_rows == 1 + len(groups) + 1  # the header, one row per group, the total
    complete, width, height, shown_height = image
    assert complete and width > 300 and height > 200 and shown_height > 100
    assert n_cuts > 5 and cut_height > 10
    assert first_cut.startswith("chunk 0 · ") and "tokens" in first_cut
    assert overlap > 0  # code and prose chunks overlap their neighbours
    assert "Sample documents with their chunk boundaries" in dom
    assert "Changes since" in dom and "Rejects" in dom
