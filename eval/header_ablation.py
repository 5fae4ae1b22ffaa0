"""Header ablation: a finished run's chunks re-embedded with only some parts of their path header.

    python -m eval.header_ablation --run RUN --output OUT --keep folder file title sections

The path header (`transforms.context.path.path_header`) is made of parts: the folder and the
file of the source ("postgresql/sql-vacuum.html"; for code the last three path components, the
folder being the first two), the title, the section path's headings (for code the enclosing
class and function) and its definition terms (`transforms.ingest.definitions`: the entries at
its end that name a definition of the document, `accumulate(iterable[, func])`). This
rebuilds each chunk's header from the parts named in --keep, fits it to the run's budget as the
job does (`HeaderFitter.fit_path`, in the chunk tokenizer), embeds header + "\\n\\n" + text
with the run's own model and writes OUT as a run (chunks/ with the job's schema,
run_manifest.json, cost_report.json) that `corpus-chunker evaluate` scores like any other. The
chunks themselves, their ids and texts, stay those of RUN, so the only difference between two
such runs is the header.

With the parts the run's own header holds kept (`job_parts`: every part but the folder since
--header_folders and its default 0; every part for a run of an older config_version) the rebuilt
header must be the one the job wrote: the count of chunks where it is not is printed (and stored
in the manifest), a check that the parts are the job's.
A chunk whose text is unchanged keeps RUN's vector (the same model gives the same vector).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from typing import Any

PARTS = ("folder", "file", "title", "sections", "term")


def header_parts(
    source: str,
    doc_type: str,
    title: str | None,
    sections: list[str],
    terms: frozenset[str] = frozenset(),
) -> dict:
    """The parts of `path_header` for one chunk, each "" or a list where absent; `terms`, the
    document's definition terms, tell the section path's last entries that are terms."""
    from transforms.context.path import _clean_entry, _clean_heading, _same_heading, _source_tail

    n_terms = 0
    while n_terms < len(sections) and sections[len(sections) - 1 - n_terms] in terms:
        n_terms += 1
    clean = [", ".join(_clean_entry(s)) for s in sections]  # as path_header cleans them
    headings = [s for s in clean[: len(clean) - n_terms] if s]
    term = [s for s in clean[len(clean) - n_terms :] if s]
    tail = _source_tail(source, 3 if doc_type == "code" else 2).split("/")
    folder, file = "/".join(tail[:-1]), tail[-1]
    if doc_type == "code":
        return {"folder": folder, "file": file, "title": "", "sections": headings, "term": term}
    heading = _clean_heading(title or "")
    if headings and heading and _same_heading(headings[0], heading):
        headings = headings[1:]
    elif not headings and term and heading and _same_heading(term[0], heading):
        term = term[1:]
    return {"folder": folder, "file": file, "title": heading, "sections": headings, "term": term}


def job_parts(config: dict) -> set[str] | None:
    """The parts the run's own path header is made of: no folder at --header_folders=0 (the
    default since config_version 12), every part before the flag existed; None for other
    values (the folder part here is prose's one folder and code's two)."""
    if "header_folders" not in config:
        return set(PARTS)
    return set(PARTS) - {"folder"} if config["header_folders"] == 0 else None


def ablated_entries(parts: dict, keep: set[str]) -> list[str]:
    """The entries of the kept parts, in `path_header`'s order (an entry may hold " > ", as
    Doxygen's "Json::SecureAllocator< T >::rebind< U >" does: never split at it)."""
    from transforms.context.path import _same_heading

    place = "/".join(p for p in (parts["folder"] if "folder" in keep else "",
                                 parts["file"] if "file" in keep else "") if p)  # fmt: skip
    chain = [place, parts["title"] if "title" in keep else ""]
    chain += parts["sections"] if "sections" in keep else []
    chain += parts.get("term", []) if "term" in keep else []
    out: list[str] = []
    for part in chain:
        if part and not (out and _same_heading(out[-1], part)):
            out.append(part)
    return out


def ablated_header(parts: dict, keep: set[str]) -> str:
    """The header of the kept parts, joined as `path_header` joins them."""
    from transforms.context.config import PATH_SEPARATOR

    return PATH_SEPARATOR.join(ablated_entries(parts, keep))


def job_budget(config: dict) -> Any:
    """The `TokenBudget` a run's job fitted its headers to, from its manifest's config: the
    chunk size and tokenizer, the path header's room, and the embedding model's word pieces."""
    from transforms.embedding.models import read_model_info, resolve_model_path
    from transforms.token_budget import TokenBudget, header_reserve

    model = str(config["embedding_model"]).split("|", 1)[0]
    return TokenBudget.from_flags(
        chunk_size=config["chunk_size"],
        chunk_overlap=config["chunk_overlap"],
        tokenizer=config["tokenizer"],
        header_reserve=header_reserve("path", config["context_max_tokens"], 0),
        model_tokenizer=model,
        model_max_tokens=read_model_info(resolve_model_path(model)).max_seq_length,
    )


def _name_lines(rows: list[dict]) -> dict[str, str]:
    """chunk id -> the name line its header names in place of the title, as the job chose
    (`transforms.context.path.name_line_chunk`)."""
    from types import SimpleNamespace

    from transforms.context.path import name_line_chunk

    documents: dict[str, list[SimpleNamespace]] = {}
    for row in rows:
        documents.setdefault(row["doc_id"], []).append(SimpleNamespace(**row))
    named = (name_line_chunk(chunks) for chunks in documents.values())
    return dict(found for found in named if found is not None)


def ablate(run: str, output: str, keep: set[str]) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from runs.run_folder import RunFolder
    from schemas.records import CONTEXT_JOINER, stable_hash
    from transforms.chunking.markdown import definition_terms
    from transforms.chunking.routing import table_header
    from transforms.chunking.tokens import make_tokenizer
    from transforms.context.path import HeaderFitter, entry_items, text_opens_with_title
    from transforms.cost_report import report_of
    from transforms.embedding.onnx_model import load_encoder

    unknown = keep - set(PARTS)
    if unknown:
        raise SystemExit(f"eval.header_ablation: --keep {sorted(unknown)}: parts are {PARTS}")
    source = RunFolder(run)
    config = source.config
    if config.get("context") != "path":
        raise SystemExit(f"eval.header_ablation: {run} has --context={config.get('context')}")
    tokenizer = make_tokenizer(config["tokenizer"], "tiktoken")
    # the job's fitting: its budget, in the chunk tokenizer and the model's word pieces (a
    # header the model would read past its limit is shortened, as the job does)
    fitter = HeaderFitter.for_budget(job_budget(config))
    table = source.read_table("chunks")
    rows = table.to_pylist()
    documents = source.read_table("documents", ["doc_id", "text"]).to_pylist()
    terms = {d["doc_id"]: frozenset(definition_terms(d["text"] or "")) for d in documents}
    document_texts = {d["doc_id"]: d["text"] or "" for d in documents}
    checked = keep == job_parts(config)  # the run's own header rebuilt: it must be the job's
    opening = config.get("config_version", 0) >= 40  # as the job did
    # a reference page's name line in place of the title in one chunk's header (66)
    name_lines = _name_lines(rows) if config.get("config_version", 0) >= 66 else {}
    started = time.time()
    contexts, texts, mismatched = [], [], 0
    for row in rows:
        if row["embedding"] is None or row["is_parent"]:
            contexts.append(row["context"])
            texts.append(None)
            continue
        parts = header_parts(row["source"], row["doc_type"], row["title"], row["section_path"],
                             terms.get(row["doc_id"], frozenset()))  # fmt: skip
        if row["chunk_id"] in name_lines:
            parts["title"] = name_lines[row["chunk_id"]]
        entries = ablated_entries(parts, keep)
        # a piece of a split table: its column names on a line after the path, as the job
        columns = table_header(document_texts.get(row["doc_id"], ""), row["start_char"])
        tail = "\n" + columns if columns else ""
        if (
            opening
            and not tail
            and text_opens_with_title(
                row["text"], row["title"], row["doc_type"], row["section_path"] or ()
            )
        ):
            entries = []  # the page's opening goes without a header (config_version 40)
        fitted = fitter.fit_path(
            [tuple(entry_items(e)) for e in entries], tail, row["text"],
            row["token_count"], config["context_max_tokens"]
        ).context if entries else None  # fmt: skip
        if checked and fitted != row["context"]:
            mismatched += 1
        contexts.append(fitted)
        texts.append(f"{fitted}{CONTEXT_JOINER}{row['text']}" if fitted else row["text"])
    todo = [
        i for i, row in enumerate(rows) if texts[i] is not None and contexts[i] != row["context"]
    ]
    model = load_encoder(config["embedding_model"])
    vectors = model.encode([texts[i] for i in todo], batch_size=32, normalize_embeddings=True,
                           convert_to_numpy=True, show_progress_bar=False)  # fmt: skip
    for i, vector in zip(todo, np.asarray(vectors, dtype=np.float32), strict=True):
        rows[i]["embedding"] = vector.tolist()
    for i, row in enumerate(rows):
        row["context"] = contexts[i]
        row["context_source"] = "path" if contexts[i] else None
    os.makedirs(os.path.join(output, "chunks"), exist_ok=True)
    out = pa.Table.from_pylist(rows, schema=table.schema)
    shard = os.path.join(output, "chunks", "part-00000-of-00001.parquet")
    pq.write_table(out, shard)
    header_tokens = sum(tokenizer.count(c) for c in contexts if c)
    from_run = source.cost_report()
    # not re-priced: the ablation is about retrieval
    typed = report_of(
        chunks=len(rows), embedded_tokens=None, cost_usd=None, header_tokens=header_tokens
    )
    report_path = os.path.join(output, "cost_report.json")
    with open(report_path, "w", encoding="utf-8") as f:
        f.write(typed.to_json())
    report = {
        "chunks": len(rows),
        "header_tokens": header_tokens,
        "reembedded_chunks": len(todo),
        "seconds": time.time() - started,
        "from_run_embedded_tokens": from_run.embedded_tokens if from_run else None,
    }
    ablated = {**config, "header_parts": sorted(keep, key=PARTS.index)}
    manifest = {
        "run_id": uuid.uuid4().hex,
        "mode": "run",
        "config": ablated,
        "config_fingerprint": stable_hash(json.dumps(ablated, sort_keys=True), length=16),
        "headers_from": os.path.abspath(run),
        "ablation": report,  # what cost_report.json has no field for
        "full_header_mismatches": mismatched if checked else None,
    }
    RunFolder(output).write_manifest(manifest, [shard, report_path])
    return {**report, "full_header_mismatches": manifest["full_header_mismatches"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a finished run with --context=path")
    parser.add_argument("--output", required=True, help="folder of the ablated run")
    parser.add_argument("--keep", nargs="*", default=list(PARTS), help=f"parts kept, of {PARTS}")
    args = parser.parse_args()
    done = ablate(args.run, args.output, set(args.keep))
    print(
        f"header parts {args.keep or '(none)'}: {done['reembedded_chunks']} of {done['chunks']} "
        f"chunks re-embedded, {done['header_tokens']} header tokens, {done['seconds']:.0f} s"
        + (
            f", {done['full_header_mismatches']} rebuilt headers differ from the job's"
            if done["full_header_mismatches"] is not None
            else ""
        )
    )


if __name__ == "__main__":
    main()
