"""Authenticate and authorize every kubelet API request the way the kubelet does in webhook mode.

Authentication: a client certificate the TLS layer verified against the cluster CA (CN is the user, O
entries are the groups), or else a bearer token checked with a TokenReview. Nothing at all: 401.

Authorization: a SubjectAccessReview for `nodes/<subresource>` of this node, the verb taken from the
HTTP method. The subresource follows the path: /stats -> stats, /metrics -> metrics, /containerLogs
and /logs -> log, anything else -> proxy. Like the kubelet's fine-grained authorization for its newer
subresources, a request denied on its specific subresource is allowed if `nodes/proxy` is (so the
apiserver's kubelet client, which holds nodes/proxy, reaches everything). Denied: 403.

Answers are cached briefly (the kubelet's defaults: tokens 2 min, allowed 5 min, denied 30 s), keyed by
everything that went into the question, so the apiserver is not asked on every log line request.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from vk_provider.kit.kube import KubeApi, KubeApiError, resource_path

logger = logging.getLogger(__name__)

TOKEN_CACHE_SECONDS = 120.0
ALLOWED_CACHE_SECONDS = 300.0
DENIED_CACHE_SECONDS = 30.0
CACHE_LIMIT = 10_000

VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclasses.dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


def subresource_for(path: str) -> str:
    def under(prefix: str) -> bool:
        return path == prefix or path.startswith(prefix + "/")

    if under("/stats"):
        return "stats"
    if under("/metrics"):
        return "metrics"
    if under("/containerLogs") or under("/logs"):
        return "log"
    return "proxy"


def user_from_certificate(peer: Mapping[str, Any] | None) -> User | None:
    """The identity in a certificate the TLS layer has already verified (ssl's getpeercert() dict)."""
    if not peer:
        return None
    names: list[str] = []
    groups: list[str] = []
    for rdn in peer.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                names.append(value)
            elif key == "organizationName":
                groups.append(value)
    return User(name=names[0], groups=tuple(groups)) if names else None


class _TtlCache:
    def __init__(self) -> None:
        self._entries: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any) -> Any | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] < time.monotonic():
            del self._entries[key]
            return None
        return entry[1]

    def put(self, key: Any, value: Any, ttl_seconds: float) -> None:
        if len(self._entries) >= CACHE_LIMIT:
            self._entries.clear()  # rare; simpler than LRU and never wrong, only slower
        self._entries[key] = (time.monotonic() + ttl_seconds, value)


class WebhookAuth:
    """TokenReview and SubjectAccessReview against the apiserver, with short caches."""

    def __init__(self, api: KubeApi, *, node_name: str) -> None:
        self._api = api
        self._node_name = node_name
        self._tokens = _TtlCache()
        self._decisions = _TtlCache()

    async def user_for_token(self, token: str) -> User | None:
        # Cache by digest: a token must not sit in memory longer than it has to, even as a key.
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._tokens.get(key)
        if cached is not None:
            return cached if isinstance(cached, User) else None
        review = await self._api.create(
            resource_path("authentication.k8s.io/v1", "tokenreviews"),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
        )
        status = review.get("status", {})
        user: User | None = None
        if status.get("authenticated"):
            info = status.get("user", {})
            extra = tuple(sorted((k, tuple(v)) for k, v in (info.get("extra") or {}).items()))
            user = User(info.get("username", ""), tuple(info.get("groups") or ()), info.get("uid", ""), extra)
        self._tokens.put(key, user if user is not None else False, TOKEN_CACHE_SECONDS)
        return user

    async def allowed(self, user: User, verb: str, subresource: str) -> bool:
        key = (user, verb, subresource)
        cached = self._decisions.get(key)
        if cached is not None:
            return bool(cached)
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "resourceAttributes": {
                "verb": verb,
                "resource": "nodes",
                "subresource": subresource,
                "name": self._node_name,
                "group": "",
                "version": "v1",
            },
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = await self._api.create(
            resource_path("authorization.k8s.io/v1", "subjectaccessreviews"),
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        allowed = bool(review.get("status", {}).get("allowed"))
        self._decisions.put(key, allowed, ALLOWED_CACHE_SECONDS if allowed else DENIED_CACHE_SECONDS)
        return allowed


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def auth_middleware(auth: WebhookAuth) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        user = await _authenticate(request, auth)
        if user is None:
            return web.Response(status=401, text="Unauthorized\n")
        verb = VERBS.get(request.method, request.method.lower())
        subresource = subresource_for(request.path)
        try:
            allowed = await auth.allowed(user, verb, subresource)
            if not allowed and subresource != "proxy":
                allowed = await auth.allowed(user, verb, "proxy")
        except (KubeApiError, OSError, TimeoutError) as error:
            logger.warning(
                "authorization check failed (%s); refusing %s %s", error, request.method, request.path
            )
            return web.Response(status=503, text="authorization is unavailable; try again\n")
        if not allowed:
            logger.info("forbidden: %s may not %s nodes/%s (%s)", user.name, verb, subresource, request.path)
            return web.Response(
                status=403,
                text=f"Forbidden (user={user.name}, verb={verb}, resource=nodes, "
                f"subresource={subresource})\n",
            )
        return await handler(request)

    return middleware


async def _authenticate(request: web.Request, auth: WebhookAuth) -> User | None:
    if request.transport is not None:
        ssl_object = request.transport.get_extra_info("ssl_object")
        peer = ssl_object.getpeercert() if ssl_object is not None else None
        user = user_from_certificate(peer)
        if user is not None:
            return user
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    try:
        return await auth.user_for_token(token.strip())
    except (KubeApiError, OSError, TimeoutError) as error:
        logger.warning("token review failed (%s); treating the request as unauthenticated", error)
        return None
