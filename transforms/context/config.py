"""How chunks get their context header (`ContextConfig`); the room a header takes is the
run's `TokenBudget` (transforms/token_budget.py)."""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass

from transforms.token_budget import header_reserve

MODES = ("none", "path", "llm")
_LOOPBACK = ("localhost", "127.0.0.1", "::1")
PROMPT_VERSION = "situate-v1"  # part of the cache key: change it whenever the prompt changes

ELLIPSIS = "…"
PATH_SEPARATOR = " > "


@dataclass(frozen=True)
class ContextConfig:
    """How chunks get their context header; validated at construction."""

    mode: str = "none"
    max_header_tokens: int = 32  # cap of a path header alone, in the chunk tokenizer
    # Folders above the file name that a path header keeps (--header_folders): 0, the file
    # name alone; 1, "postgresql/sql-vacuum.html"; in the config fingerprint.
    header_folders: int = 0
    llm_base_url: str | None = None  # OpenAI-compatible, e.g. "http://localhost:8000/v1"
    llm_model: str | None = None
    llm_api_key_env: str | None = None  # name of the env var holding the key; None: no key
    llm_context_tokens: int = 64
    llm_timeout_s: float = 30.0
    llm_max_retries: int = 4
    llm_concurrency: int = 4
    llm_price_in: float = 0.0  # USD per million prompt tokens
    llm_price_out: float = 0.0  # USD per million completion tokens
    llm_cache_dir: str | None = None  # local folder; None: no cache
    llm_backoff_s: float = 0.5  # base of the exponential backoff
    llm_backoff_max_s: float = 60.0  # cap of one wait, Retry-After included
    llm_seed: int | None = None  # seeds the backoff jitter (tests); None: random
    prompt_version: str = PROMPT_VERSION
    # The time limit of one document's path headers (0: none). The chunks of a document over
    # it keep their text and go without a header (counted in context_timeouts); it changes no
    # chunk boundary, so it is not in the config fingerprint, as --chunk_timeout_s is not.
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"--context must be one of {MODES}, got {self.mode!r}")
        if self.max_header_tokens < 1:
            raise ValueError(f"--context_max_tokens must be positive, got {self.max_header_tokens}")
        if isinstance(self.header_folders, bool) or not isinstance(self.header_folders, int):
            raise ValueError(f"--header_folders must be an integer, got {self.header_folders!r}")
        if self.header_folders < 0:
            raise ValueError(
                f"--header_folders must be >= 0 (0: the file name alone), got {self.header_folders}"
            )
        if self.llm_context_tokens < 1:
            raise ValueError(
                f"--llm_context_tokens must be positive, got {self.llm_context_tokens}"
            )
        if self.timeout_s < 0:
            raise ValueError(
                f"--context_timeout_s must be >= 0 (0: no limit), got {self.timeout_s}"
            )
        if self.llm_timeout_s <= 0:
            raise ValueError(f"--llm_timeout_s must be positive, got {self.llm_timeout_s}")
        if self.llm_max_retries < 0:
            raise ValueError(f"--llm_max_retries must be >= 0, got {self.llm_max_retries}")
        if self.llm_concurrency < 1:
            raise ValueError(f"--llm_concurrency must be positive, got {self.llm_concurrency}")
        if self.llm_price_in < 0 or self.llm_price_out < 0:
            raise ValueError(
                f"--llm_price_in/--llm_price_out must be >= 0, got "
                f"{self.llm_price_in}/{self.llm_price_out}"
            )
        if self.llm_backoff_s < 0 or self.llm_backoff_max_s < 0:
            raise ValueError(
                f"llm_backoff_s/llm_backoff_max_s must be >= 0, got "
                f"{self.llm_backoff_s}/{self.llm_backoff_max_s}"
            )
        if self.llm_api_key_env == "":
            raise ValueError("--llm_api_key_env must be the name of an env var, got ''")
        if not self.prompt_version:
            raise ValueError(f"prompt_version must not be empty, got {self.prompt_version!r}")
        if self.mode == "llm":
            if not self.llm_base_url or not self.llm_base_url.startswith(("http://", "https://")):
                raise ValueError(
                    "--context=llm needs --llm_base_url as an http(s) URL, got "
                    f"{self.llm_base_url!r}"
                )
            url = urllib.parse.urlsplit(self.llm_base_url)
            if url.username or url.password:
                # requests would send them as Basic auth in place of the Bearer key
                raise ValueError(
                    "--llm_base_url must not hold credentials (user:password@); put the API key "
                    f"in the environment variable that --llm_api_key_env names ({url.hostname})"
                )
            if url.scheme == "http" and url.hostname not in _LOOPBACK:
                logging.getLogger(__name__).warning(
                    "--llm_base_url %s is plain http: the API key and every document go over "
                    "the network unencrypted",
                    self.llm_base_url,
                )
            if not self.llm_model:
                raise ValueError(f"--context=llm needs --llm_model, got {self.llm_model!r}")

    @property
    def header_reserve(self) -> int:
        """Tokens each chunk must leave free for this mode's header and the joiner (the
        run's TokenBudget holds them)."""
        return header_reserve(self.mode, self.max_header_tokens, self.llm_context_tokens)


def llm_cost_usd(prompt_tokens: int, completion_tokens: int, config: ContextConfig) -> float:
    """What the LLM calls cost at the configured per-million-token prices."""
    return (prompt_tokens * config.llm_price_in + completion_tokens * config.llm_price_out) / 1e6
