"""Context headers for chunks: a heading path, or one LLM sentence situating the chunk (cached).

`AddContext` (stage.py) consumes one `(document_text, [Chunk, ...])` element per document and
emits each chunk with `context` and `context_source` set, so that header + joiner + text stays
within the run's `TokenBudget`, in the chunk tokenizer and the model's word pieces. The cores
know nothing of Beam: `path_header`, `fit_header` and `HeaderFitter` (path.py),
`LLMContextClient` and its cache (llm.py); config.py holds `ContextConfig`.
"""

from schemas.records import CONTEXT_JOINER
from transforms.context.config import (
    ELLIPSIS,
    MODES,
    PATH_SEPARATOR,
    PROMPT_VERSION,
    ContextConfig,
    llm_cost_usd,
)
from transforms.context.llm import (
    LLMContextCache,
    LLMContextClient,
    LLMOutcome,
    backoff_delay,
    build_messages,
    cache_key,
    clean_llm_line,
    make_session,
    parse_retry_after,
    retry_policy,
)
from transforms.context.path import (
    FittedHeader,
    HeaderFitter,
    fit_header,
    path_header,
    path_parts,
    table_line,
    truncate_tokens,
    without_parameters,
)
from transforms.context.stage import AddContext

__all__ = [
    "CONTEXT_JOINER",
    "ELLIPSIS",
    "MODES",
    "PATH_SEPARATOR",
    "PROMPT_VERSION",
    "AddContext",
    "ContextConfig",
    "FittedHeader",
    "HeaderFitter",
    "LLMContextCache",
    "LLMContextClient",
    "LLMOutcome",
    "backoff_delay",
    "build_messages",
    "cache_key",
    "clean_llm_line",
    "fit_header",
    "llm_cost_usd",
    "make_session",
    "parse_retry_after",
    "path_header",
    "path_parts",
    "retry_policy",
    "table_line",
    "truncate_tokens",
    "without_parameters",
]
