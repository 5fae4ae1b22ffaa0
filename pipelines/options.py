"""Project flags (one PipelineOptions subclass) and the validated, immutable JobConfig."""

from __future__ import annotations

import dataclasses
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.sizes import byte_size_flag
from schemas.records import DOC_TYPES
from transforms.boilerplate import BoilerplateConfig
from transforms.chunking.routing import DEFAULT_STRATEGY_BY_TYPE, STRATEGIES, ChunkingConfig
from transforms.chunking.tokens import (
    TIKTOKEN_ENCODINGS,
    TOKEN_ENGINES,
    bpe_version,
    resolve_engine,
)
from transforms.context import ContextConfig
from transforms.cost_report import Pricing
from transforms.embedding.models import DEFAULT_MODEL, EmbeddingConfig
from transforms.embedding.onnx_model import BACKENDS, DEFAULT_BACKEND
from transforms.fingerprint import (
    CONFIG_VERSION,
    FINGERPRINT_KEYS,
    config_fingerprint,
)
from transforms.ingest.matching import has_wildcard, literal_folder
from transforms.ingest.read import ReadConfig
from transforms.token_budget import DEFAULT_CHUNK_SIZE, DEFAULT_MAX_OVERLAP, TokenBudget


class ChunkCorpusOptions(PipelineOptions):
    """Flags of the corpus-chunker job (Beam's own flags, e.g. --runner, also apply)."""

    @classmethod
    def _add_argparse_args(cls, parser: Any) -> None:
        g = parser.add_argument_group("corpus-chunker")
        g.add_argument(
            "--input",
            action="append",
            default=None,
            help="Required. "
            "File path or glob (local, gs://, s3://; ** matches across folders, and a "
            "local folder or a path ending in / means every file under it; wildcards skip "
            "hidden files unless the pattern names them); repeat for several. *.jsonl files "
            "are read as records of {id, text, title?, url?, doc_type?}.",
        )
        g.add_argument(
            "--output", default=None, help="Required. Output folder (local, gs://, s3://)."
        )
        g.add_argument(
            "--overwrite",
            action="store_true",
            default=False,
            help="Replace the tables of an earlier run in --output (default: refuse).",
        )
        g.add_argument(
            "--keep_runs",
            type=int,
            default=2,
            help="On a gs:// or s3:// --output, which keeps each run in a folder of its own "
            "(runs/<run_id>/, the current one named by its CURRENT object): how many runs to "
            "keep, the current one included; older ones are deleted only after CURRENT names "
            "the new run (default 2: a reader still on the previous run keeps it). A local "
            "--output holds one run.",
        )
        g.add_argument(
            "--previous_output",
            default=None,
            help="Output of an earlier complete run: documents whose text is unchanged keep "
            "their chunks and embeddings from it (incremental rebuild), chunks whose embedded "
            "text it holds take its vector, and changes/ lists what was added and removed "
            "since. It may be --output itself with --overwrite. A run of another config reuses "
            "no chunks, only vectors. Default: off (everything is built).",
        )
        g.add_argument(
            "--embedding_cache",
            default=None,
            help="Folder (local, gs://, s3://) of embeddings by model and exact embedded text: "
            "texts found there are not embedded again, and the run adds the vectors its model "
            "made. Default: none (the previous run's vectors are still reused).",
        )
        g.add_argument(
            "--chunk_size",
            type=int,
            default=DEFAULT_CHUNK_SIZE,
            help=f"Hard maximum tokens per chunk, context header included (default "
            f"{DEFAULT_CHUNK_SIZE}: "
            "with the default header room, chunks of the default model stay under its 256 "
            "word pieces; longer ones are split further, never truncated).",
        )
        g.add_argument(
            "--chunk_overlap",
            type=int,
            default=None,
            help=f"Tokens shared by neighbouring prose chunks (default: {DEFAULT_MAX_OVERLAP}, "
            "or a quarter of the room left after the context header when that is smaller).",
        )
        g.add_argument(
            "--tokenizer",
            default="cl100k_base",
            choices=list(TIKTOKEN_ENCODINGS),
            help="Tokenizer that --chunk_size counts in (default cl100k_base).",
        )
        g.add_argument(
            "--token_engine",
            default="auto",
            choices=list(TOKEN_ENGINES),
            help="What computes --tokenizer's tokens for chunking: bpe (package rs-bpe, built "
            "on GitHub's bpe crate: the same tokens as tiktoken, about 1.8x faster), tiktoken, "
            "or auto (bpe when installed and it agrees with tiktoken on a probe text; the "
            "default). Chunks are the same either way, so it is not part of the config "
            "fingerprint.",
        )
        for doc_type in DOC_TYPES:
            g.add_argument(
                f"--strategy_{doc_type}",
                default=DEFAULT_STRATEGY_BY_TYPE[doc_type],
                choices=sorted(STRATEGIES),
                help=f"Chunking strategy for {doc_type} documents "
                f"(default {DEFAULT_STRATEGY_BY_TYPE[doc_type]}).",
            )
        g.add_argument(
            "--parent_chunk_size",
            type=int,
            default=None,
            help="Also emit parent chunks of this many tokens; children point to them "
            "(small-to-big retrieval). Default: off.",
        )
        g.add_argument(
            "--context",
            default="path",
            choices=["none", "path", "llm"],
            help="Contextual header before each chunk: none, path (file name, title and "
            "section path, e.g. 'sql-vacuum.html > VACUUM > Description'; --header_folders "
            "adds folders; a chunk that starts with its page's title heading goes without "
            "one), or llm (one line written by a chat model). Default path.",
        )
        g.add_argument(
            "--context_max_tokens",
            type=int,
            default=32,
            help="Token room reserved for a path header (default 32 tokens).",
        )
        g.add_argument(
            "--header_folders",
            type=int,
            default=0,
            help="Folders above the file name kept in a path header (and an LLM line's "
            "fallback): 0 the file name alone, 1 its folder too "
            "('postgresql/sql-vacuum.html > VACUUM'), N the last N folders. Raise it where "
            "folder names say what the documents are about (default 0 folders).",
        )
        g.add_argument(
            "--llm_base_url",
            default=None,
            help="OpenAI-compatible endpoint base URL, for --context=llm (default: none).",
        )
        g.add_argument(
            "--llm_model", default=None, help="Chat model name for --context=llm (default: none)."
        )
        g.add_argument(
            "--llm_api_key_env",
            default="OPENAI_API_KEY",
            help="Name of the environment variable holding the LLM API key "
            "(default OPENAI_API_KEY).",
        )
        g.add_argument(
            "--llm_context_tokens",
            type=int,
            default=64,
            help="Cap (and reserved room) for the LLM context line (default 64 tokens).",
        )
        g.add_argument(
            "--llm_concurrency",
            type=int,
            default=4,
            help="LLM requests in flight at once, per worker (default 4 requests).",
        )
        g.add_argument(
            "--llm_timeout_s",
            type=float,
            default=30.0,
            help="Time limit of one LLM request, in seconds (default 30 s).",
        )
        g.add_argument(
            "--llm_max_retries",
            type=int,
            default=4,
            help="Retries of one LLM request after a 429 or 5xx answer (default 4 retries).",
        )
        g.add_argument(
            "--llm_cache_dir",
            default=None,
            help="Folder caching LLM context lines across runs (default: no cache).",
        )
        g.add_argument(
            "--llm_price_in",
            type=float,
            default=0.0,
            help="USD per million prompt tokens (default 0).",
        )
        g.add_argument(
            "--llm_price_out",
            type=float,
            default=0.0,
            help="USD per million completion tokens (default 0).",
        )
        g.add_argument(
            "--embedding_model",
            default=DEFAULT_MODEL,
            help="sentence-transformers folder; 'default' = bundled all-MiniLM-L6-v2; "
            "'none' skips embedding (default: default).",
        )
        g.add_argument(
            "--embedding_device",
            default="auto",
            choices=["auto", "cpu", "cuda"],
            help="Device for the embedding model (default auto: cuda when available). cuda "
            "without a GPU fails at start-up.",
        )
        g.add_argument(
            "--embedding_backend",
            default=DEFAULT_BACKEND,
            choices=list(BACKENDS),
            help="What runs the model: torch (sentence-transformers), onnx (ONNX Runtime, "
            "float32) or onnx-int8 (ONNX Runtime, dynamic int8 per channel: about 2.3x torch "
            f"on CPU, cosine 0.99 to float32). Default {DEFAULT_BACKEND}. The ONNX file is "
            "built offline from the model folder once and cached; its hash is part of the "
            "config fingerprint.",
        )
        g.add_argument(
            "--embedding_cache_dir",
            default=None,
            help="Where the ONNX models are built and found (default $CORPUS_CHUNKER_CACHE_DIR, "
            "else ~/.cache/corpus-chunker); give remote workers a shared folder or the worker "
            "image's.",
        )
        g.add_argument(
            "--embedding_batch_size",
            type=int,
            default=None,
            help="Sentences per model forward pass (default 32 on CPU, 128 on a GPU).",
        )
        g.add_argument(
            "--embedding_max_batch",
            type=int,
            default=None,
            help="Most chunks Beam hands the model at once; sorted by length inside "
            "(default 256; 1024 with --embedding_device=cuda).",
        )
        g.add_argument(
            "--price_per_million_tokens",
            type=float,
            default=0.02,
            help="Embedding price in USD per million tokens (default 0.02 USD).",
        )
        g.add_argument(
            "--pricing_tokenizer",
            default="cl100k_base",
            choices=list(TIKTOKEN_ENCODINGS),
            help="Tokenizer the price is counted in (default cl100k_base).",
        )
        g.add_argument(
            "--estimate",
            action="store_true",
            default=False,
            help="Read, extract and chunk only: write the cost report as a projection, with "
            "the embedding time projected from a short calibration of the model on this "
            "machine (default: off, a full run).",
        )
        g.add_argument(
            "--estimate_sample",
            type=float,
            default=1.0,
            help="With --estimate: fraction of the files to read (deterministic, by path); the "
            "report projects the whole corpus from the files and bytes matched, with a 95%% "
            "interval (default 1.0: every file).",
        )
        g.add_argument(
            "--extract_timeout_s",
            type=float,
            default=5.0,
            help="Time limit of one HTML, PDF, DOCX or PPTX extraction, in CPU seconds of the "
            "extraction process (so a busy machine rejects the same pages as an idle one); a "
            "PDF gets it once per 1,000 pages; 0 disables it (default 5 s).",
        )
        g.add_argument(
            "--chunk_timeout_s",
            type=float,
            default=60.0,
            help="Time limit of chunking one document, in seconds: a slower one is rejected as "
            "chunk_timeout; 0 disables it (default 60 s).",
        )
        g.add_argument(
            "--context_timeout_s",
            type=float,
            default=60.0,
            help="Time limit of one document's path headers, in seconds: the chunks of a slower "
            "one go without a header (counted as context_timeouts); 0 disables it (default 60 s).",
        )
        g.add_argument(
            "--max_file_bytes",
            type=byte_size_flag("--max_file_bytes"),
            default=20_000_000,
            help="Larger files, and longer JSONL record lines, are rejected as too_large; "
            "bytes, or a size such as 20MB or 512KiB (default 20MB = 20,000,000 bytes).",
        )
        g.add_argument(
            "--boilerplate",
            default="on",
            choices=["on", "off"],
            help="Remove lines repeated across many documents of a folder (default on).",
        )
        g.add_argument(
            "--boilerplate_min_docs",
            type=int,
            default=3,
            help="A repeated line must occur in at least this many documents (default 3 "
            "documents).",
        )
        g.add_argument(
            "--boilerplate_min_fraction",
            type=float,
            default=0.5,
            help="...and in at least this fraction of its folder's documents (default 0.5).",
        )
        g.add_argument(
            "--quiet",
            action="store_true",
            default=False,
            help="No progress lines on stderr while the job runs (default: a line every few "
            "seconds on the DirectRunner; other runners get a pointer to their UI).",
        )


@dataclass(frozen=True)
class JobConfig:
    """Everything the pipeline needs: one frozen config per stage, each validated when built
    (its errors name the flag), and the job's own settings; build_pipeline reads nothing else."""

    read: ReadConfig
    output: str
    chunking: ChunkingConfig  # with the run's TokenBudget (`budget`)
    context: ContextConfig
    embedding: EmbeddingConfig
    pricing: Pricing
    boilerplate: BoilerplateConfig
    extract_timeout_s: float = 5.0
    estimate: bool = False
    pricing_tokenizer: str = "cl100k_base"
    overwrite: bool = False
    keep_runs: int = 2  # runs kept in an object-store --output (runs/pointer.py)
    previous_output: str | None = None
    embedding_cache: str | None = None  # --embedding_cache folder
    settings: dict = field(default_factory=dict)  # the flags, for the manifest
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)  # names this run

    def __post_init__(self) -> None:
        if not self.output:
            raise ValueError("--output is required: the folder to write the tables to")
        if self.keep_runs < 1:
            raise ValueError(
                f"--keep_runs must be at least 1 (the current run), got {self.keep_runs}"
            )
        if self.read.sample < 1.0 and not self.estimate:
            raise ValueError("--estimate_sample is only meaningful with --estimate")
        if self.embedding_cache is not None:
            if has_wildcard(self.embedding_cache):
                raise ValueError(
                    f"--embedding_cache {self.embedding_cache} holds a wildcard (*, ? or [): "
                    "it is one folder, named as it is"
                )
            if self.embedding.path is None:
                raise ValueError(
                    "--embedding_cache needs an embedding model, not --embedding_model=none"
                )
        for pattern in self.read.patterns:
            folder = literal_folder(pattern)
            if folder and _holds(self.output, folder):
                raise ValueError(
                    f"--output {self.output} holds the input {pattern}: the job never reads its "
                    "own output, so it would read nothing; write the output elsewhere"
                )
        if self.extract_timeout_s < 0:
            raise ValueError(
                f"--extract_timeout_s must be >= 0 (0: no limit), got {self.extract_timeout_s}"
            )

    @property
    def budget(self) -> TokenBudget:
        """The run's token limits: the chunk, context and count stages all get this one."""
        return self.chunking.budget

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.read.patterns

    @property
    def fingerprint(self) -> str:
        return self.chunking.config_fingerprint

    @property
    def written_embedding_dim(self) -> int | None:
        """The fixed size of chunks/' embedding column, or None for a plain list: parents are
        not embedded, and pyarrow < 26 cannot read back a null in a fixed-size list column
        (apache/arrow#35692), so with parents the column is a plain list."""
        return None if self.chunking.emits_parents else self.embedding.dimension

    @property
    def embeds(self) -> bool:
        return self.embedding.path is not None and not self.estimate


def _absolute(pattern: str) -> str:
    return pattern if "://" in pattern else os.path.abspath(pattern)


def _input_pattern(pattern: str) -> str:
    """An --input made absolute; a folder (a local one, or any path ending in "/") stands for
    every file under it."""
    if pattern.endswith("/"):
        return _absolute(pattern.rstrip("/")) + "/**"
    path = _absolute(pattern)
    return path + "/**" if "://" not in path and os.path.isdir(path) else path


def _holds(folder: str, path: str) -> bool:
    """Whether `path` is `folder` or lies under it."""
    folder = folder.rstrip("/")
    return path == folder or path.startswith(folder + "/")


def config_from_options(options: PipelineOptions) -> JobConfig:
    """Turn the flags into the stages' configs, each of which validates itself once."""
    o = options.view_as(ChunkCorpusOptions)
    read = ReadConfig(
        patterns=tuple(_input_pattern(p) for p in o.input or ()),
        max_file_bytes=o.max_file_bytes,
        sample=o.estimate_sample,
    )
    embedding = EmbeddingConfig.from_flag(
        o.embedding_model,
        device=o.embedding_device,
        batch_size=o.embedding_batch_size,
        max_batch=o.embedding_max_batch,
        backend=o.embedding_backend,
        cache_dir=o.embedding_cache_dir,
    )
    context = ContextConfig(
        mode=o.context,
        max_header_tokens=o.context_max_tokens,
        header_folders=o.header_folders,
        llm_base_url=o.llm_base_url,
        llm_model=o.llm_model,
        llm_api_key_env=o.llm_api_key_env,
        llm_context_tokens=o.llm_context_tokens,
        llm_timeout_s=o.llm_timeout_s,
        llm_max_retries=o.llm_max_retries,
        llm_concurrency=o.llm_concurrency,
        llm_price_in=o.llm_price_in,
        llm_price_out=o.llm_price_out,
        llm_cache_dir=o.llm_cache_dir,
        timeout_s=o.context_timeout_s,
    )
    # Every token limit, checked here, before the model is built or loaded below.
    budget = TokenBudget.from_flags(
        chunk_size=o.chunk_size,
        chunk_overlap=o.chunk_overlap,
        tokenizer=o.tokenizer,
        header_reserve=context.header_reserve,
        model_tokenizer=embedding.model if embedding.path else None,
        model_max_tokens=embedding.max_seq_length if embedding.path else None,
    )
    boilerplate = BoilerplateConfig(
        enabled=o.boilerplate == "on",
        min_docs=o.boilerplate_min_docs,
        min_fraction=o.boilerplate_min_fraction,
        tokenizer=o.pricing_tokenizer,
    )
    strategies = {t: getattr(o, f"strategy_{t}") for t in DOC_TYPES}
    # Checked before the model too; the fingerprint, which needs the model's id, comes after.
    chunking = ChunkingConfig(
        budget=budget,
        strategies=strategies,
        parent_chunk_size=o.parent_chunk_size,
        token_engine=o.token_engine,
        timeout_s=o.chunk_timeout_s,
    )
    if embedding.path is not None:
        # Last of the checks: it may build the ONNX model (once), whose hash the id carries.
        from apache_beam.options.pipeline_options import StandardOptions

        from transforms.embedding.embed_setup import check_device, prepare_model, runs_here

        if not o.estimate and runs_here(options.view_as(StandardOptions).runner):
            check_device(embedding.device, embedding.backend)
        prepared = prepare_model(
            embedding.model, embedding.path, embedding.backend, embedding.cache_dir, not o.estimate
        )
        embedding = dataclasses.replace(
            embedding, model_id=prepared.model_id, onnx_sha256=prepared.onnx_sha256
        )
        if not o.estimate:
            from transforms.embedding.embedding_cache import cache_key

            embedding = dataclasses.replace(embedding, cache_key=cache_key(embedding))
    # Everything that changes the output goes into the fingerprint (not paths, runner, price).
    settings = {
        "config_version": CONFIG_VERSION,
        "chunk_size": budget.chunk_size,
        "chunk_overlap": budget.chunk_overlap,
        "tokenizer": o.tokenizer,
        "strategies": strategies,
        "parent_chunk_size": o.parent_chunk_size,
        "context": o.context,
        "context_max_tokens": o.context_max_tokens,
        "header_folders": o.header_folders if o.context != "none" else None,
        "llm_model": o.llm_model if o.context == "llm" else None,
        "llm_context_tokens": o.llm_context_tokens if o.context == "llm" else None,
        # The backend, its settings and the ONNX file's hash are part of it (torch: the name).
        "embedding_model": embedding.model_id or embedding.model,
        "embedding_dimension": embedding.dimension,
        "boilerplate": _boilerplate_settings(boilerplate),
    }
    assert tuple(settings) == FINGERPRINT_KEYS, "the fingerprint's keys are FINGERPRINT_KEYS"
    fingerprint = config_fingerprint(settings)
    token_engine = resolve_engine(o.token_engine, o.tokenizer)
    if token_engine == "bpe":
        token_engine = f"bpe (rs-bpe {bpe_version()})"
    chunking = dataclasses.replace(chunking, config_fingerprint=fingerprint)
    return JobConfig(
        read=read,
        output=_absolute(o.output) if o.output else "",
        chunking=chunking,
        context=context,
        embedding=embedding,
        pricing=Pricing(
            price_per_million_tokens=o.price_per_million_tokens,
            llm_price_in=o.llm_price_in,
            llm_price_out=o.llm_price_out,
            sample_fraction=o.estimate_sample,
        ),
        boilerplate=boilerplate,
        extract_timeout_s=o.extract_timeout_s,
        estimate=o.estimate,
        pricing_tokenizer=o.pricing_tokenizer,
        overwrite=o.overwrite,
        keep_runs=o.keep_runs,
        previous_output=_absolute(o.previous_output) if o.previous_output else None,
        embedding_cache=_absolute(o.embedding_cache) if o.embedding_cache else None,
        settings={
            **settings,
            "config_fingerprint": fingerprint,
            "token_engine": o.token_engine,
            # Tokens a chunk's text may have once the header's room is taken (`inspect` reads it)
            "chunk_text_room": budget.body_size,
            # What the flag means on the launcher (workers resolve it the same way, and fall
            # back to tiktoken, with a warning, only where rs-bpe is missing or disagrees).
            "token_engine_on_launcher": token_engine,
        },
    )


def _boilerplate_settings(config: BoilerplateConfig) -> dict:
    """The boilerplate settings of the fingerprint: what decides which lines are removed (the
    tokenizer only counts them)."""
    settings = dataclasses.asdict(config)
    del settings["tokenizer"]
    return settings
