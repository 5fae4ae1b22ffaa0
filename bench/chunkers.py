"""Chunker throughput and quality: ours against LangChain, chonkie and semchunk at 512 tokens.

Every chunker runs in this one process on the same real corpus (prose, Markdown and code found
on this machine), with raw tiktoken `encode_ordinary` of the same text as the ceiling. Ours runs
with each token engine: bpe (GitHub's bpe crate, package rs-bpe, the default) and tiktoken;
raw encoding with the bpe engine is timed too, and its tokens are checked against tiktoken's on
every document. For each
it reports MB/s (median of the repeats), chunks, the largest chunk's token count and how many
chunks are over the limit (every chunk encoded alone with cl100k_base), and, on prose, how
many chunk ends fall mid-sentence by blingfire.

    python -m bench.chunkers --mb 1.5 --repeats 5
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import gc
import glob
import hashlib
import importlib.util
import os
import platform
import re
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STDLIB = os.path.dirname(os.__file__)
SITE_PACKAGES = next(p for p in sys.path if p.endswith("site-packages"))
KINDS = ("prose", "markdown", "code")
PROSE_EXTENSIONS = (".rst", ".txt")
MARKDOWN_EXTENSIONS = (".md",)
# Peers raise on text that spells a special token; such documents are left out of the corpus.
SPECIAL_TOKENS = ("<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>")
_PARAGRAPH = re.compile(r"\n[ \t]*\n")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the corpus -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    kind: str  # prose, markdown or code
    source: str
    text: str
    language: str | None = None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return None


def looks_like_prose(text: str) -> bool:
    """Sentences of words, not a word list, a table of numbers or a certificate bundle."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(text) < 1000 or not lines:
        return False
    wordy = sum(len(line.split()) >= 4 for line in lines) / len(lines)
    visible = [c for c in text if not c.isspace()]
    letters = sum(c.isalpha() for c in visible) / max(len(visible), 1)
    sentences = text.count(". ") + text.count(".\n")
    return wordy >= 0.5 and letters >= 0.7 and sentences * 400 >= len(text)


def _files(paths: list[str], extensions: tuple[str, ...]) -> list[str]:
    out = []
    for path in paths:
        if os.path.isdir(path):
            for ext in extensions:
                out.extend(glob.glob(os.path.join(path, "**", f"*{ext}"), recursive=True))
        else:
            out.append(path)
    return sorted(set(out))


def _metadata_bodies(content_type: str) -> Iterator[tuple[str, str]]:
    """Long descriptions of the installed packages (their READMEs) of one content type."""
    for path in sorted(glob.glob(os.path.join(SITE_PACKAGES, "*.dist-info", "METADATA"))):
        text = _read(path)
        if not text or "\n\n" not in text:
            continue
        headers, body = text.split("\n\n", 1)
        if f"Description-Content-Type: {content_type}" in headers:
            yield path, body


def default_sources(kind: str) -> Iterator[tuple[str, str]]:
    """(source, text) of the default corpus of one kind, in a fixed order."""
    if kind == "prose":
        for path in _files([os.path.join(REPO, "samples", "text")], PROSE_EXTENSIONS):
            yield path, _read(path) or ""
        from pydoc_data.topics import topics  # Python's reference manual, as pydoc shows it

        for name in sorted(topics):
            yield f"pydoc_data/topics.py#{name}", topics[name]
        for path in _files([SITE_PACKAGES], PROSE_EXTENSIONS):
            if f"{os.sep}tests{os.sep}" not in path:
                text = _read(path) or ""
                if looks_like_prose(text):
                    yield path, text
        yield from _metadata_bodies("text/x-rst")
    elif kind == "markdown":
        for path in _files([os.path.join(REPO, "samples", "markdown")], MARKDOWN_EXTENSIONS):
            yield path, _read(path) or ""
        for path in _files([SITE_PACKAGES], MARKDOWN_EXTENSIONS):
            yield path, _read(path) or ""
        yield from _metadata_bodies("text/markdown")
    else:
        from transforms.ingest.detect import CODE_LANGUAGE_BY_EXTENSION

        samples = os.path.join(REPO, "samples", "code")
        for path in _files([samples], tuple(CODE_LANGUAGE_BY_EXTENSION)):
            yield path, _read(path) or ""
        for path in sorted(glob.glob(os.path.join(STDLIB, "*.py"))):
            yield path, _read(path) or ""


def load_corpus(args: argparse.Namespace) -> dict[str, list[Doc]]:
    """Up to `--mb` MB of each kind, duplicates and special-token text left out."""
    from transforms.ingest.detect import CODE_LANGUAGE_BY_EXTENSION

    seen: set[str] = set()
    corpus: dict[str, list[Doc]] = {}
    for kind in KINDS:
        paths = getattr(args, kind)
        if paths:
            exts = {
                "prose": PROSE_EXTENSIONS,
                "markdown": MARKDOWN_EXTENSIONS,
                "code": tuple(CODE_LANGUAGE_BY_EXTENSION),
            }[kind]
            sources: Iterator[tuple[str, str]] = ((p, _read(p) or "") for p in _files(paths, exts))
        else:
            sources = default_sources(kind)
        docs, size, skipped = [], 0, 0
        for source, text in sources:
            if size >= args.mb * 1e6:
                break
            digest = hashlib.sha1(text.encode()).hexdigest()
            if not text.strip() or digest in seen:
                continue
            if any(t in text for t in SPECIAL_TOKENS):
                skipped += 1
                continue
            seen.add(digest)
            language = None
            if kind == "code":
                language = CODE_LANGUAGE_BY_EXTENSION.get(os.path.splitext(source)[1].lower())
            docs.append(Doc(kind, source, text, language))
            size += len(text.encode())
        if skipped:
            _log(f"{kind}: left out {skipped} documents that spell a special token")
        corpus[kind] = docs
    return corpus


# --- the chunkers ---------------------------------------------------------------------------

TIKTOKEN = "tiktoken encode_ordinary"
BPE = "bpe engine encode (rs-bpe)"
OURS_TIKTOKEN = "ours: RecursiveChunker, tiktoken engine"
CHONKIE_BPE = "chonkie RecursiveChunker, bpe engine (not a peer row)"

# A chunker is built fresh for every timed pass (no cache carries over from the last one) and
# maps (text, language) to its raw output; `spans` turns that into (start, end) offsets after
# the clock has stopped.
Factory = Callable[[], Callable[[str, str | None], object]]


@dataclass
class Contender:
    name: str
    kinds: tuple[str, ...]
    factory: Factory
    spans: Callable[[str, object], list[tuple[int, int]]] | None  # None: the tiktoken ceiling
    peer: bool = False
    requires: str | None = None  # the module it imports (a peer of the bench extra)

    @property
    def is_ceiling(self) -> bool:
        return self.spans is None


def _ours(strategy: str, tokenizer, size: int) -> Factory:
    from transforms.chunking.routing import strategy_class

    cls = strategy_class(strategy)

    def build():
        return cls(tokenizer, size, 0).chunk

    return build


def _ours_spans(text: str, out) -> list[tuple[int, int]]:
    return [(c.start, c.end) for c in out]


def _located(text: str, chunks: list[str]) -> list[tuple[int, int]]:
    """Offsets of non-overlapping chunk strings found in order (LangChain returns only text)."""
    out, cursor = [], 0
    for chunk in chunks:
        at = text.find(chunk, cursor)
        if at < 0:
            raise ValueError(f"chunk not found in its document: {chunk[:60]!r}")
        out.append((at, at + len(chunk)))
        cursor = at + len(chunk)
    return out


def contenders(size: int, only: list[str] | None) -> list[Contender]:
    from transforms.chunking.tokens import (
        TiktokenTokenizer,
        get_bpe_encoder,
        get_tiktoken_encoding,
    )

    enc = get_tiktoken_encoding("cl100k_base")  # seeds TIKTOKEN_CACHE_DIR for the peers too
    # Built once, untimed (the vocabulary table): the default engine, and tiktoken's.
    tokenizer = TiktokenTokenizer("cl100k_base", "bpe")
    reference = TiktokenTokenizer("cl100k_base", "tiktoken")
    bpe = get_bpe_encoder("cl100k_base")

    def langchain():
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name="cl100k_base", chunk_size=size, chunk_overlap=0
        )
        return lambda text, language: splitter.split_text(text)

    def chonkie():
        from chonkie import RecursiveChunker

        # A tiktoken Encoding object is wrapped as it is; a name string would be looked up on
        # the Hugging Face hub first.
        chunker = RecursiveChunker(tokenizer=enc, chunk_size=size)
        return lambda text, language: chunker.chunk(text)

    def chonkie_bpe():
        from chonkie import RecursiveChunker
        from chonkie.tokenizer import AutoTokenizer

        class BpeTokenizer(AutoTokenizer):  # chonkie takes an AutoTokenizer as it is
            _backend = "rs-bpe"

            def count_tokens(self, text: str) -> int:
                return self.tokenizer.count(text)

            def count_tokens_batch(self, texts):
                return [self.tokenizer.count(t) for t in texts]

            def encode_batch(self, texts):
                return [self.tokenizer.encode(t) for t in texts]

            def decode_batch(self, token_sequences):
                return [self.tokenizer.decode(list(t)) for t in token_sequences]

        chunker = RecursiveChunker(tokenizer=BpeTokenizer(bpe), chunk_size=size)
        return lambda text, language: chunker.chunk(text)

    def semchunk():
        import semchunk as sc

        chunker = sc.chunkerify(enc, size)
        return lambda text, language: chunker(text, offsets=True)

    def chonkie_spans(text: str, out) -> list[tuple[int, int]]:
        return [(c.start_index, c.end_index) for c in out]

    every = [
        Contender(TIKTOKEN, KINDS, lambda: lambda text, language: enc.encode_ordinary(text), None),
        Contender(BPE, KINDS, lambda: lambda text, language: bpe.encode(text), None),
        Contender(
            "ours: RecursiveChunker", KINDS, _ours("recursive", tokenizer, size), _ours_spans
        ),
        Contender(OURS_TIKTOKEN, KINDS, _ours("recursive", reference, size), _ours_spans),
        Contender(
            "ours: MarkdownChunker", ("markdown",), _ours("markdown", tokenizer, size), _ours_spans
        ),
        Contender("ours: CodeChunker", ("code",), _ours("code", tokenizer, size), _ours_spans),
        Contender(
            "LangChain RecursiveCharacterTextSplitter",
            KINDS,
            langchain,
            _located,
            True,
            "langchain_text_splitters",
        ),
        Contender("chonkie RecursiveChunker", KINDS, chonkie, chonkie_spans, True, "chonkie"),
        Contender("semchunk", KINDS, semchunk, lambda text, out: list(out[1]), True, "semchunk"),
        # Not a peer as the benchmark defines them (each with tiktoken): chonkie given our
        # default engine, to show what the engine and what the chunker contributes.
        Contender(CHONKIE_BPE, KINDS, chonkie_bpe, chonkie_spans, requires="chonkie"),
    ]
    if only:
        every = [c for c in every if any(o.lower() in c.name.lower() for o in only)]
    return every


# --- measurements ---------------------------------------------------------------------------


def sentence_ends(text: str) -> list[int]:
    """Sorted offsets where a sentence ends: blingfire's, per blank-line paragraph.

    blingfire does not treat a blank line as a sentence break ("Heading\\n\\nText" is one
    sentence to it), so each paragraph is split on its own and a paragraph end is a sentence end.
    """
    import blingfire

    ends = []
    start = 0
    for m in [*_PARAGRAPH.finditer(text), None]:
        stop = m.start() if m else len(text)
        piece = text[start:stop]
        if piece.strip():
            _, offsets = blingfire.text_to_sentences_and_offsets(piece)
            ends.extend(start + e for _, e in offsets)
        if m:
            start = m.end()
    return sorted(set(ends))


@dataclass
class Result:
    cpu: list[float] = field(default_factory=list)  # process CPU seconds of each pass
    wall: list[float] = field(default_factory=list)  # wall-clock seconds of each pass
    chunks: int = 0
    max_tokens: int = 0
    over: int = 0
    mid_sentence: int = 0
    inner_ends: int = 0  # chunk ends other than the document's end (prose only)
    bad_offsets: int = 0  # chunks whose reported offsets do not slice their own text
    bad_counts: int = 0  # chunks whose reported token count is not their alone-encoding's
    digest: str = ""  # of every chunk's offsets and reported count, to compare two runs


def measure_output(
    contender: Contender, docs: list[Doc], outputs: list, size: int, enc, ends: list[list[int]]
) -> Result:
    result = Result()
    if contender.is_ceiling:
        return result
    texts, reported, all_spans = [], [], []
    for doc_index, (doc, out) in enumerate(zip(docs, outputs, strict=True)):
        spans = contender.spans(doc.text, out)
        all_spans.append(spans)
        chunk_texts = _chunk_texts(out)
        for i, (s, e) in enumerate(spans):
            piece = doc.text[s:e]
            if chunk_texts is not None and chunk_texts[i] != piece:
                result.bad_offsets += 1
            texts.append(chunk_texts[i] if chunk_texts is not None else piece)
            # ours (ChunkSpan) and chonkie (Chunk) report a token count per chunk
            reported.append(getattr(out[i], "token_count", None) if isinstance(out, list) else None)
        if doc.kind != "prose":
            continue
        doc_end = len(doc.text.rstrip())
        sentence_end = ends[doc_index]
        for s, e in spans:
            e = s + len(doc.text[s:e].rstrip())
            if e >= doc_end:
                continue
            result.inner_ends += 1
            k = bisect.bisect_left(sentence_end, e)
            if k == len(sentence_end) or sentence_end[k] != e:
                result.mid_sentence += 1
    result.digest = hashlib.sha1(repr((all_spans, reported)).encode()).hexdigest()
    counts = [len(t) for t in enc.encode_ordinary_batch(texts)] if texts else []
    result.chunks = len(counts)
    result.max_tokens = max(counts, default=0)
    result.over = sum(c > size for c in counts)
    result.bad_counts = sum(r is not None and r != c for r, c in zip(reported, counts, strict=True))
    return result


def _chunk_texts(out) -> list[str] | None:
    """The chunk strings a chunker returned, when it returns them beside offsets."""
    if isinstance(out, tuple):  # semchunk: (chunks, offsets)
        return list(out[0])
    if out and hasattr(out[0], "start_index"):  # chonkie Chunk
        return [c.text for c in out]
    return None


def run_pass(contender: Contender, docs: list[Doc]) -> tuple[float, float, list]:
    """(CPU seconds, wall seconds, outputs) of one chunker over all of `docs`."""
    chunk = contender.factory()
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    outputs = [chunk(d.text, d.language) for d in docs]
    return time.process_time() - cpu, time.perf_counter() - wall, outputs


def benchmark(
    args: argparse.Namespace, corpus: dict[str, list[Doc]], every: list[Contender]
) -> dict[tuple[str, str], Result]:
    """{(kind, chunker name): Result}, each chunker timed `args.repeats` times on each kind."""
    from transforms.chunking.tokens import get_tiktoken_encoding

    enc = get_tiktoken_encoding("cl100k_base")
    results: dict[tuple[str, str], Result] = {}
    for kind in KINDS:
        docs = corpus[kind]
        if not docs:
            continue
        ends = [sentence_ends(d.text) if kind == "prose" else [] for d in docs]
        here = [c for c in every if kind in c.kinds]
        mb = _mb(docs)
        _log(f"{kind}: {len(docs)} documents, {mb:.2f} MB")
        for c in here:  # warm-up: imports, lazily loaded parsers and libraries
            run_pass(c, docs[:20])
        for repeat in range(args.repeats):
            for c in here:  # round robin, so drift in the machine's load hits all alike
                cpu, wall, outputs = run_pass(c, docs)
                key = (kind, c.name)
                if key not in results:
                    results[key] = measure_output(c, docs, outputs, args.chunk_size, enc, ends)
                del outputs  # not held in memory through the next chunker's pass
                results[key].cpu.append(cpu)
                results[key].wall.append(wall)
                _log(f"  {repeat + 1}/{args.repeats} {c.name}: {mb / cpu:.2f} MB/s CPU")
    return results


# --- report ---------------------------------------------------------------------------------

BY_TYPE = "ours: by type (Recursive / Markdown / Code)"
_BY_TYPE_PARTS = {
    "prose": "ours: RecursiveChunker",
    "markdown": "ours: MarkdownChunker",
    "code": "ours: CodeChunker",
}


def _mb(docs: list[Doc]) -> float:
    return sum(len(d.text.encode()) for d in docs) / 1e6


def report(
    results: dict[tuple[str, str], Result],
    corpus: dict[str, list[Doc]],
    every: list[Contender],
    args: argparse.Namespace,
) -> str:
    """A Markdown table: one row per (corpus part, chunker), rates from median pass times."""
    size = args.chunk_size
    kinds_present = [k for k in KINDS if corpus.get(k)]
    rows = []
    for label, kinds in [*((k, [k]) for k in kinds_present), ("all", kinds_present)]:
        mb = sum(_mb(corpus[k]) for k in kinds)
        # (name, is peer, is ceiling, the Result of each part)
        entries = [
            (c.name, c.peer, c.is_ceiling, [results[(k, c.name)] for k in kinds])
            for c in every
            if all((k, c.name) in results for k in kinds)
        ]
        if label == "all" and all((k, n) in results for k, n in _BY_TYPE_PARTS.items()):
            parts = [results[(k, n)] for k, n in _BY_TYPE_PARTS.items()]
            entries.append((BY_TYPE, False, False, parts))

        def rate(parts: list[Result], clock: str, mb: float = mb) -> float:
            return mb / sum(statistics.median(getattr(p, clock)) for p in parts)

        peers = [rate(parts, "cpu") for _, peer, _, parts in entries if peer]
        ceiling = next((rate(parts, "cpu") for n, _, _, parts in entries if n == TIKTOKEN), None)
        for name, _, is_ceiling, parts in entries:
            cpu_rate = rate(parts, "cpu")
            inner = sum(p.inner_ends for p in parts)
            mid = sum(p.mid_sentence for p in parts)
            row = [f"{label} ({mb:.2f} MB)", name, f"{cpu_rate:.2f}", f"{rate(parts, 'wall'):.2f}"]
            if is_ceiling:
                rows.append([*row, *[""] * 6])
                continue
            rows.append(
                [
                    *row,
                    f"{cpu_rate / max(peers):.2f}x" if peers else "",
                    f"{100 * cpu_rate / ceiling:.0f}%" if ceiling else "",
                    str(sum(p.chunks for p in parts)),
                    str(max(p.max_tokens for p in parts)),
                    str(sum(p.over for p in parts)),
                    f"{mid} / {inner}" if inner else "",
                ]
            )
    header = [
        "corpus",
        "chunker",
        "MB/s (CPU)",
        "MB/s (wall)",
        "vs fastest peer",
        "vs tiktoken",
        "chunks",
        "max tokens",
        f"over {size}",
        "mid-sentence ends (prose)",
    ]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(" --- " for _ in header) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]
    bad = [(k, n, r.bad_offsets) for (k, n), r in results.items() if r.bad_offsets]
    notes = [f"- {n} on {k}: offsets of {b} chunks do not slice their text" for k, n, b in bad]
    notes += [
        f"- {n} on {k}: the token count it reports differs from the chunk's alone-encoding "
        f"for {r.bad_counts} of its chunks"
        for (k, n), r in results.items()
        if r.bad_counts
    ]
    for kind in kinds_present:
        ours = [results.get((kind, n)) for n in ("ours: RecursiveChunker", OURS_TIKTOKEN)]
        if all(ours):
            same = ours[0].digest == ours[1].digest
            notes.append(
                f"- ours on {kind}: the two token engines give "
                + ("the same chunks and counts" if same else "DIFFERENT chunks or counts")
            )
    notes += engine_check(corpus)
    if notes:
        notes.insert(0, "")
    command = shlex.join(["python", "-m", "bench.chunkers", *args.argv])
    head = [
        f"- Date: {datetime.date.today().isoformat()}. Machine: {_cpu_name()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}.",
        f"- Command: `{command}`. Chunk size {size} cl100k_base tokens, overlap 0.",
        f"- Corpus: {sum(len(v) for v in corpus.values())} documents, "
        + ", ".join(f"{k} {_mb(corpus[k]):.2f} MB" for k in kinds_present)
        + " (MB = 10^6 bytes of UTF-8).",
        f"- MB/s: corpus size over the median of {args.repeats} passes, in process CPU time and "
        "in wall-clock time; ratios use CPU time.",
        "",
    ]
    return "\n".join([*head, *lines, *notes])


def engine_check(corpus: dict[str, list[Doc]]) -> list[str]:
    """Whether the bpe engine's tokens equal tiktoken's on every document (both encodings)."""
    from transforms.chunking.tokens import get_bpe_encoder, get_tiktoken_encoding

    docs = [d for k in KINDS for d in corpus.get(k, [])]
    notes = []
    for name in ("cl100k_base", "o200k_base"):
        bpe, enc = get_bpe_encoder(name), get_tiktoken_encoding(name)
        differ = [d.source for d in docs if bpe.encode(d.text) != enc.encode_ordinary(d.text)]
        notes.append(
            f"- bpe engine vs tiktoken, {name}: the same tokens on "
            f"{len(docs) - len(differ)} of {len(docs)} documents"
            + (f"; they differ on {', '.join(differ[:5])}" if differ else "")
        )
    return notes


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=1.5, help="MB of each kind (at most)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per chunker")
    parser.add_argument("--chunk-size", type=int, default=512, help="cl100k tokens per chunk")
    for kind in KINDS:
        parser.add_argument(
            f"--{kind}",
            nargs="+",
            metavar="PATH",
            help=f"{kind} files or folders to use instead of the default {kind} corpus",
        )
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help="run only the chunkers whose name has NAME"
    )
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.repeats < 1 or args.mb <= 0:
        parser.error("--repeats must be at least 1 and --mb positive")
    every = contenders(args.chunk_size, args.only)
    missing = sorted(
        {c.requires for c in every if c.requires and importlib.util.find_spec(c.requires) is None}
    )
    if missing:
        # Before the corpus is read: otherwise the run stops at the first peer's warm-up.
        parser.error(
            f"not installed: {', '.join(missing)} (pip install -e '.[bench]'; or leave the "
            "peers out, e.g. --only ours encode)"
        )
    corpus = load_corpus(args)
    print(report(benchmark(args, corpus, every), corpus, every, args))


if __name__ == "__main__":
    main()
