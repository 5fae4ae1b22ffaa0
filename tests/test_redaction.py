"""No password or API key reaches a message the job prints (issue 22, N2 and N9): store URIs
through one helper (`safe_uri`), secrets in every form through another (`redact`)."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from transforms.redaction import redact, safe_uri, uri_password

PW = "S3cretPW"
KEY = "sk-live/ab+cd=ef_0123456789"


@pytest.mark.parametrize(
    "uri",
    [
        f"postgresql://u:{PW}@/rag?host=/tmp/sock",
        f"postgres://u:{PW}@db.example:5432/rag",
        f"postgresql://u@/rag?password={PW}&host=/tmp",
        f"host=/tmp dbname=rag password={PW}",
        f"postgresq://u:{PW}@/rag",  # a mistyped scheme
        f"postgresql://u:{quote('p@ss/wd', safe='')}@h/rag",
    ],
)
def test_a_uri_is_printed_without_its_password(uri):
    printed = safe_uri(uri)
    assert PW not in printed and "p%40ss" not in printed
    assert "***" in printed
    assert printed.split("?")[0].rsplit("/", 1)[-1].startswith("rag") or "dbname=rag" in printed


def test_the_password_of_a_uri_is_found_to_be_redacted():
    assert uri_password(f"postgresql://u:{PW}@h/rag") == PW
    assert uri_password(f"postgresql://u@h/rag?password={PW}") == PW
    assert uri_password("postgresql://u@h/rag") is None


@pytest.mark.parametrize(
    "echo",
    [
        KEY,
        quote(KEY, safe=""),
        quote(KEY, safe="").lower(),
        "".join(f"%{b:02x}" for b in KEY.encode()),
        base64.b64encode(KEY.encode()).decode(),
        base64.b64encode(f"user:{KEY}".encode()).decode(),  # Basic credentials
        base64.b64encode(f"xy:{KEY}".encode()).decode(),
        base64.urlsafe_b64encode(f"z{KEY}".encode()).decode(),
    ],
)
def test_a_secret_is_redacted_in_every_form(echo):
    message = f"unauthorized: token {echo} refused"
    out = redact(message, [KEY])
    assert KEY not in out and echo not in out
    assert KEY[:10] not in out
    assert out.startswith("unauthorized: token ") and out.endswith(" refused")


def test_a_secret_cut_at_the_end_of_a_message_is_redacted():
    for k in (6, 10, len(KEY) - 1):
        out = redact("x" * 50 + " key=" + KEY[:k], [KEY])
        assert KEY[:6] not in out, k
    assert redact("a word: sk-", [KEY]) == "a word: sk-"  # too short to tell from text


def test_a_store_error_prints_no_password(monkeypatch):
    from pipelines import load
    from transforms.stores import StoreSpec

    with pytest.raises(ValueError) as e:
        StoreSpec(f"postgresq://u:{PW}@/rag")
    assert PW not in str(e.value)

    class Held:
        def try_lock(self) -> bool:
            return False

        def close(self) -> None:
            pass

    monkeypatch.setattr(StoreSpec, "open", lambda self: Held())
    spec = StoreSpec(f"postgresql://u:{PW}@/rag?host=/tmp")
    with pytest.raises(ValueError, match="in use by another load") as e, load.load_lock(spec):
        pass
    assert PW not in str(e.value)


def test_a_connection_error_prints_no_password():
    pytest.importorskip("psycopg")
    from transforms.stores.postgres import PostgresStore

    for uri in (f"postgresql://u:{PW}@/rag?bogus=1", f"host=x password={PW} bogus"):
        with pytest.raises(ValueError, match="cannot connect") as e:
            PostgresStore(uri, "chunks")
        assert PW not in str(e.value) and e.value.__cause__ is None
