"""Vector stores that `corpus-chunker load` fills: one module per backend, one interface."""

from __future__ import annotations

from dataclasses import dataclass

from transforms.redaction import safe_uri
from transforms.stores.base import DEFAULT_TABLE, VectorStore, check_table_name

SCHEMES = ("postgresql://", "postgres://", "lancedb://")


@dataclass(frozen=True)
class StoreSpec:
    """Where to load (--to) and which table (--table): small and picklable, so each Beam
    worker opens its own connection from it (DoFn.setup)."""

    uri: str
    table: str = DEFAULT_TABLE

    def __post_init__(self) -> None:
        if not self.uri.startswith(SCHEMES):
            raise ValueError(
                f"--to={safe_uri(self.uri)!r}: expected postgresql://user@host:port/db or "
                "lancedb:///path/to/db"
            )
        if self.uri.startswith("lancedb://") and not self.uri[len("lancedb://") :]:
            raise ValueError(
                f"--to={safe_uri(self.uri)!r}: lancedb:// needs a folder (lancedb:///path)"
            )
        check_table_name(self.table)

    @property
    def printable(self) -> str:
        """The URI as it may be printed: without its password (`safe_uri`)."""
        return safe_uri(self.uri)

    @property
    def kind(self) -> str:
        return "lancedb" if self.uri.startswith("lancedb://") else "postgresql"

    def open(self) -> VectorStore:
        if self.kind == "lancedb":
            from transforms.stores.lance import LanceStore

            return LanceStore(self.uri[len("lancedb://") :], self.table)
        from transforms.stores.postgres import PostgresStore

        return PostgresStore(self.uri, self.table)
