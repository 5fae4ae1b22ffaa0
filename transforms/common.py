"""What every stage shares: the Beam metrics namespace and the dead-letter output's tag."""

from __future__ import annotations

NAMESPACE = "corpus_chunker"  # of every Beam counter and distribution the job reports
REJECTS = "rejects"  # the tag of a stage's dead-letter output (schemas.records.Reject)
