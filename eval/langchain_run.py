"""A peer baseline as a run folder: LangChain's RecursiveCharacterTextSplitter over the SAME
extracted documents as a corpus-chunker run, embedded with the same model.

    python -m eval.langchain_run --documents RUN --output OUT --chunk_size 256 --chunk_overlap 64

Reads RUN/documents/ (the text the job extracted), splits each document with the real
`langchain-text-splitters` (`RecursiveCharacterTextSplitter.from_tiktoken_encoder`, cl100k_base
lengths, its default separators), embeds every chunk with sentence-transformers (the model RUN's
manifest names; chunks over its 256 word pieces are truncated by the model, as a LangChain user
gets them), and writes OUT/chunks/ with the job's own Arrow schema, a cost_report.json and a
run_manifest.json, so `corpus-chunker evaluate` scores it like any run. No context header.

    python -m eval.langchain_run --documents RUN --pypdf FOLDER --output OUT ...

With --pypdf, the documents are the PDFs under FOLDER as LangChain's `PyPDFLoader` reads them:
pypdf's `extract_text()`, one document per page (its default mode), each split alone; RUN
only names the model. The chunks carry their page.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import hashlib
import json
import os
import time
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from runs.run_folder import RunFolder
from schemas.arrow import CHUNK_COLUMNS, chunk_schema
from schemas.records import stable_hash
from transforms.cost_report import report_of
from transforms.fingerprint import CONFIG_VERSION

PRICE_PER_MILLION = 0.02  # the job's default --price_per_million_tokens, cl100k tokens


def load_documents(run: str) -> list[dict[str, Any]]:
    table = RunFolder(run).read_table("documents")
    if table is None:
        raise SystemExit(f"eval.langchain_run: {run} has no documents/ table")
    rows = table.to_pylist()
    return sorted(rows, key=lambda r: r["doc_id"])


def pypdf_documents(folder: str) -> list[dict[str, Any]]:
    """One document per page of every PDF under `folder`, as PyPDFLoader makes them."""
    try:
        import pypdf
    except ImportError as e:
        raise SystemExit("eval.langchain_run --pypdf needs `pip install pypdf`") from e
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.pdf"), recursive=True)):
        source = os.path.abspath(path)
        doc_id = hashlib.sha256(source.encode()).hexdigest()[:32]
        for number, page in enumerate(pypdf.PdfReader(path).pages, start=1):
            text = page.extract_text() or ""
            out.append(
                {
                    "doc_id": doc_id,
                    "source": source,
                    "doc_type": "pdf",
                    "language": None,
                    "title": None,
                    "text": text,
                    "content_hash": hashlib.sha256(text.encode()).hexdigest(),
                    "page": number,
                }
            )
    return out


def split_documents(
    documents: list[dict[str, Any]], chunk_size: int, chunk_overlap: int
) -> list[dict[str, Any]]:
    try:
        from langchain_text_splitters import RecursiveCharacterTextSplitter
    except ImportError as e:
        raise SystemExit(
            "eval.langchain_run needs `pip install -c constraints.txt -e .[eval]`"
        ) from e
    import tiktoken

    splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name="cl100k_base",
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        add_start_index=True,  # LangChain's own offsets (found with str.find)
    )
    encoding = tiktoken.get_encoding("cl100k_base")
    fingerprint = f"langchain-recursive-{chunk_size}-{chunk_overlap}"
    out: list[dict[str, Any]] = []
    indexes: dict[str, int] = {}
    for doc in documents:
        for piece in splitter.create_documents([doc["text"]]):
            index = indexes[doc["doc_id"]] = indexes.get(doc["doc_id"], -1) + 1
            start = int(piece.metadata["start_index"])
            text = piece.page_content
            tokens = len(encoding.encode(text, disallowed_special=()))
            key = f"{doc['content_hash']}:{start}:{len(text)}:{fingerprint}"
            out.append(
                {
                    "chunk_id": hashlib.sha256(key.encode()).hexdigest()[:32],
                    "doc_id": doc["doc_id"],
                    "source": doc["source"],
                    "doc_type": doc["doc_type"],
                    "language": doc["language"],
                    "title": doc["title"],
                    "chunk_index": index,
                    "text": text,
                    "context": None,
                    "context_source": None,
                    "start_char": start,
                    "end_char": start + len(text),
                    # a page of PyPDFLoader's (--pypdf); offsets are then into the page
                    "page_start": doc.get("page"),
                    "page_end": doc.get("page"),
                    "page_label": None,
                    "token_count": tokens,
                    "embed_tokens": tokens,
                    "section_path": [],
                    "parent_id": None,
                    "is_parent": False,
                    "strategy": fingerprint,
                    "config_fingerprint": fingerprint,
                    "content_hash": doc["content_hash"],
                }
            )
    return out


def embed(rows: list[dict[str, Any]], model_name: str) -> float:
    from transforms.embedding.onnx_model import load_encoder

    # The default run's own model and backend, so the baseline differs only in its chunks.
    model = load_encoder(model_name)
    texts = [r["text"] for r in rows]
    started = time.perf_counter()
    vectors = model.encode(
        texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True
    ).astype("float32")
    seconds = time.perf_counter() - started
    lengths = model.tokenizer(texts, add_special_tokens=True)["input_ids"]
    for row, vector, ids in zip(rows, vectors, lengths, strict=True):
        row["embedding"] = vector.tolist()
        row["embedding_model"] = model_name
        row["model_tokens"] = len(ids)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", required=True, help="a finished corpus-chunker run")
    parser.add_argument("--output", required=True, help="the baseline's run folder")
    parser.add_argument("--chunk_size", type=int, required=True, help="tokens (cl100k_base)")
    parser.add_argument("--chunk_overlap", type=int, required=True, help="tokens")
    parser.add_argument("--pypdf", default=None, help="split these PDFs' pypdf pages instead")
    args = parser.parse_args()
    model_name = RunFolder(args.documents).config["embedding_model"]
    started = time.time()
    documents = pypdf_documents(args.pypdf) if args.pypdf else load_documents(args.documents)
    rows = split_documents(documents, args.chunk_size, args.chunk_overlap)
    seconds = embed(rows, model_name)
    os.makedirs(os.path.join(args.output, "chunks"), exist_ok=True)
    schema = chunk_schema(len(rows[0]["embedding"]))
    table = pa.Table.from_pylist([{c: r[c] for c in CHUNK_COLUMNS} for r in rows], schema=schema)
    shard = os.path.join(args.output, "chunks", "part-00000-of-00001.parquet")
    pq.write_table(table, shard)
    embedded = sum(r["embed_tokens"] for r in rows)
    report = report_of(
        price_per_million_tokens=PRICE_PER_MILLION,
        chunks=len(rows),
        embedded_tokens=embedded,
        cost_usd=embedded * PRICE_PER_MILLION / 1e6,
        chunks_truncated=sum(r["model_tokens"] > 256 for r in rows),
        embedding_seconds=seconds,
    )
    report_path = os.path.join(args.output, "cost_report.json")
    with open(report_path, "w", encoding="utf-8") as f:
        f.write(report.to_json())
    config = {
        "config_version": CONFIG_VERSION,  # a run folder of this version's format
        "embedding_model": model_name,
        "splitter": "langchain_text_splitters.RecursiveCharacterTextSplitter",
        "length_function": "tiktoken cl100k_base",
        "chunk_size": args.chunk_size,
        "chunk_overlap": args.chunk_overlap,
        "context": "none",
    }
    manifest = {
        "run_id": uuid.uuid4().hex,
        "mode": "run",
        "config": config,
        "config_fingerprint": stable_hash(json.dumps(config, sort_keys=True), length=16),
        "documents_from": os.path.abspath(args.pypdf or args.documents),
        "loader": "pypdf, one document per page (PyPDFLoader)" if args.pypdf else "the run's",
        "finished_at": datetime.datetime.now(datetime.UTC).isoformat(),
    }
    RunFolder(args.output).write_manifest(manifest, [shard, report_path])
    print(
        f"langchain recursive {args.chunk_size}/{args.chunk_overlap}: {len(rows)} chunks, "
        f"{report.chunks_truncated} truncated by the model, {time.time() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
