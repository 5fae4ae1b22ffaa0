"""The config fingerprint: a hash of the settings that decide a run's output.

A run records its settings in run_manifest.json (`config`) beside the fingerprint; a later run
recomputes the fingerprint from those settings (`config_fingerprint`) instead of trusting the
recorded one, so a manifest whose fingerprint was copied from another run is caught.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from schemas.records import stable_hash

CONFIG_VERSION = 89  # bump when a code change alters output for the same flags

# The settings that change the output (not paths, runner, prices, the token engine).
FINGERPRINT_KEYS = (
    "config_version",
    "chunk_size",
    "chunk_overlap",
    "tokenizer",
    "strategies",
    "parent_chunk_size",
    "context",
    "context_max_tokens",
    "header_folders",
    "llm_model",
    "llm_context_tokens",
    "embedding_model",
    "embedding_dimension",
    "boilerplate",
)


def config_fingerprint(settings: Mapping[str, Any]) -> str:
    """The fingerprint of `settings` (a run's recorded config, or the one being built): its
    FINGERPRINT_KEYS only; KeyError when one is missing."""
    chosen = {key: settings[key] for key in FINGERPRINT_KEYS}
    return stable_hash(json.dumps(chosen, sort_keys=True), length=16)
