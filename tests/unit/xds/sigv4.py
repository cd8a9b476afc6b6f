"""Checks a SigV4 signature from the request as received, whatever headers the signer chose to sign.

botocore's own signer never signs User-Agent (and so recomputes a different signature when another
signer, such as Envoy's, did): this follows the specification with exactly the headers the
Authorization header lists.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from urllib.parse import parse_qsl, quote, urlsplit

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)"
    r"/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def signature_problem(
    method: str, path_qs: str, headers: dict[str, str], body: bytes, *, access_key: str, secret_key: str
) -> str | None:
    """Why the signature of a request (headers with lower-case names) is wrong, or None when it is right."""
    found = _AUTHORIZATION.fullmatch(headers.get("authorization", ""))
    if found is None:
        return "no SigV4 Authorization header"
    if found["key"] != access_key:
        return f"signed with {found['key']}"
    signed = found["signed"].split(";")
    if not {"host", "x-amz-date"} <= set(signed):
        return f"host and x-amz-date must be signed, not only {signed}"
    if hashlib.sha256(body).hexdigest() != headers.get(
        "x-amz-content-sha256", hashlib.sha256(body).hexdigest()
    ):
        return "x-amz-content-sha256 is not the body's"
    parts = urlsplit(path_qs)
    query = "&".join(
        f"{quote(name, safe='-_.~')}={quote(value, safe='-_.~')}"
        for name, value in sorted(parse_qsl(parts.query, keep_blank_values=True))
    )
    canonical = "\n".join(
        [
            method,
            quote(parts.path or "/", safe="/-_.~"),
            query,
            "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed),
            ";".join(signed),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    stamp = headers["x-amz-date"]
    scope = f"{found['date']}/{found['region']}/{found['service']}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{secret_key}".encode()
    for part in (found["date"], found["region"], found["service"], "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(expected, found["signature"]) else "signature mismatch"
