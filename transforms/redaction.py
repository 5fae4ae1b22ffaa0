"""What the job prints of a URI or an error that may hold a secret: one helper for each.

`safe_uri` prints a store URI (`--to`) without its password, wherever it is printed;
`redact` takes a secret (an API key, a password) out of a message in the forms a server or a
library may echo it in: as it is, percent-encoded, base64-encoded (alone or inside a longer
encoded string, as in `Basic` credentials), and cut off at the end of a message that was cut
to a length.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

MASK = "***"
# A secret's start left at the end of a cut message is masked from this many characters on:
# shorter, it tells little of the secret and may as well be a word.
MIN_CUT_PREFIX = 6
# Inner base64 runs shorter than this are not searched for (they would match chance text).
MIN_ENCODED = 8

# password=... in a URI's query or a libpq keyword/value string (sslpassword too)
_PASSWORD_PARAM = re.compile(r"(?i)\b((?:ssl)?password\s*=\s*)('[^']*'|[^\s&;]*)")
_USERINFO = re.compile(r"(//[^/@:\s]*:)[^@/\s]*@")
_BEARER = re.compile(r"(?i)((?:bearer|basic)\s+)[^\s\"',;]+")


def safe_uri(uri: str) -> str:
    """`uri` as it may be printed: its password (user:PASSWORD@ or password=) masked."""
    try:
        parts = urlsplit(uri)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            user, colon, _ = userinfo.partition(":")
            netloc = f"{user}:{MASK}@{host}" if colon else f"{user}@{host}"
        masked = urlunsplit(
            (parts.scheme, netloc, parts.path, _mask_params(parts.query), parts.fragment)
        )
    except ValueError:  # not a URI urllib can split: mask by pattern alone
        masked = _USERINFO.sub(rf"\1{MASK}@", uri)
    return _mask_params(masked)


def _mask_params(text: str) -> str:
    return _PASSWORD_PARAM.sub(rf"\1{MASK}", text)


def uri_password(uri: str) -> str | None:
    """The password a URI holds (user:PASSWORD@ or password=), decoded; None when none."""
    try:
        password = urlsplit(uri).password
    except ValueError:
        password = None
    if password:
        return unquote(password)
    m = _PASSWORD_PARAM.search(uri)
    return unquote(m.group(2).strip("'")) if m and m.group(2).strip("'") else None


def _base64_cores(secret: bytes) -> set[str]:
    """The base64 characters that `secret` alone decides wherever it lies in an encoded
    string: one run for each of the three alignments, in both alphabets."""
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + secret).decode("ascii").rstrip("=")
        first = -(-offset * 4 // 3)  # chars that hold a bit of the prefix are left out
        last = (offset + len(secret)) * 4 // 3  # and the last, which the padding shares
        core = encoded[first:last]
        if len(core) >= MIN_ENCODED:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))
    return cores


def secret_forms(secret: str) -> list[str]:
    """The forms `secret` may be echoed in, longest first."""
    raw = secret.encode("utf-8", "surrogatepass")
    forms = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
    forms.add("".join(f"%{b:02X}" for b in raw))  # every byte escaped
    forms |= {f.lower() for f in forms if "%" in f} | {f.upper() for f in forms if "%" in f}
    forms |= _base64_cores(raw)
    return sorted((f for f in forms if f), key=len, reverse=True)


def redact(message: str, secrets: Iterable[str | None] = ()) -> str:
    """`message` without any of `secrets` in any of its forms (`secret_forms`), without the
    value of a `Bearer`/`Basic` header, a URI's password or a `password=` parameter; a
    secret's start (MIN_CUT_PREFIX characters or more) at the end of a cut message is masked
    too."""
    for secret in secrets:
        if not secret:
            continue
        forms = secret_forms(secret)
        for form in forms:
            message = message.replace(form, MASK)
        for form in forms:
            for k in range(len(form) - 1, MIN_CUT_PREFIX - 1, -1):
                if message.endswith(form[:k]):
                    message = message[:-k] + MASK
                    break
    message = _BEARER.sub(rf"\1{MASK}", message)
    message = _USERINFO.sub(rf"\1{MASK}@", message)
    return _mask_params(message)
