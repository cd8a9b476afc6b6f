"""Scraping a node-level exporter's pods: find them by labels, map each to its node by `spec.nodeName`,
GET each one's Prometheus text, all at once, and parse it line by line.

Shared by the two exporters the policy reads, dcgm-exporter (`dcgm`) and the interconnect exporter
(`interconnect`). An exporter's host label names the *pod's* host, not the node, so the node always
comes from the pod's `spec.nodeName`. A bad exporter never raises: it becomes an error entry for its
node, and the node is judged on what else is known of it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import aiohttp

from vk_provider.kit.exposition import parse_series_line
from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject, resource_path

T = TypeVar("T")
DEFAULT_PATH = "/metrics"
DEFAULT_TIMEOUT_SECONDS = 5.0
MAX_BODY_BYTES = 4 * 1024 * 1024
"""An exporter with 8 GPUs and every field serves well under 1 MiB; more is not an exporter."""


class MalformedExporterText(ValueError):
    """The text is not Prometheus exposition text (wrong port, an HTML page, a truncated body)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ExporterSettings:
    """Where an exporter's pods are (spec.health.dcgmExporter, spec.health.interconnect.exporter)."""

    namespace: str
    selector: Mapping[str, Any]
    """A label selector: {matchLabels: {...}, matchExpressions: [...]}."""
    port: int = 9400
    path: str = DEFAULT_PATH
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    name: str = "dcgm-exporter"
    """What the exporter is, for messages ("cannot list the dcgm-exporter pods")."""

    @classmethod
    def from_spec(
        cls,
        spec: Mapping[str, Any],
        *,
        where: str = "spec.health.dcgmExporter",
        default_port: int = 9400,
        name: str = "dcgm-exporter",
        example: str = "nvidia-dcgm-exporter",
    ) -> ExporterSettings:
        """From the policy's mapping; a wrong value raises ValueError naming the field."""
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where} must be a mapping, not {spec!r}")
        namespace = spec.get("namespace")
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"{where}.namespace must name the exporter pods' namespace, not {namespace!r}")
        selector = spec.get("selector")
        if not isinstance(selector, Mapping) or not (
            selector.get("matchLabels") or selector.get("matchExpressions")
        ):
            raise ValueError(
                f"{where}.selector must be a label selector like "
                f"{{matchLabels: {{app: {example}}}}}, not {selector!r}"
            )
        try:
            label_selector(selector)
        except ValueError as error:
            raise ValueError(f"{where}.selector: {error}") from None
        port = spec.get("port", default_port)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"{where}.port must be a port number (1-65535), not {port!r}")
        path = spec.get("path", DEFAULT_PATH)
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"{where}.path must be an absolute URL path like /metrics, not {path!r}")
        timeout = spec.get("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"{where}.timeoutSeconds must be a number of seconds > 0, not {timeout!r}")
        return cls(
            namespace=namespace,
            selector=selector,
            port=port,
            path=path,
            timeout_seconds=float(timeout),
            name=name,
        )


@dataclasses.dataclass(frozen=True)  # no slots: a generic alias sets __orig_class__ on what it builds
class Scrape(Generic[T]):
    """One scrape of every exporter pod."""

    samples: dict[str, T] = dataclasses.field(default_factory=dict)
    """Node name -> what its exporter served, parsed, for each node whose exporter answered."""
    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    """Node name (or `namespace/pod` for a pod on no node, or the namespace when listing failed) ->
    why there are no samples from it. A node with an answering exporter has no entry here."""


def exposition_samples(
    text: str, names: frozenset[str]
) -> Iterator[tuple[int, str, dict[str, str], float | None]]:
    """(line number, name, labels, value) of every series of `text` named in `names`; a NaN or blank
    value is None. Raises MalformedExporterText naming the first line that is not exposition text."""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, labels, value = _sample(stripped, number)
        if name in names:
            yield number, name, labels, value


def _sample(line: str, number: int) -> tuple[str, dict[str, str], float | None]:
    """One exposition line; MalformedExporterText naming the line when it is not one series."""
    try:
        return parse_series_line(line)
    except ValueError as error:
        raise MalformedExporterText(
            f"line {number} is not Prometheus text ({error}): {line[:200]!r}"
        ) from None


def label_selector(selector: Mapping[str, Any]) -> str:
    """A LabelSelector mapping as the `labelSelector` query string; ValueError when it is not one."""
    terms = []
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise ValueError(f"matchLabels must be a mapping, not {match_labels!r}")
    terms += [f"{key}={value}" for key, value in sorted(match_labels.items())]
    for expression in selector.get("matchExpressions") or ():
        if not isinstance(expression, Mapping) or not isinstance(expression.get("key"), str):
            raise ValueError(f"a matchExpression needs a key, not {expression!r}")
        key, operator = expression["key"], expression.get("operator")
        values = expression.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                raise ValueError(f"matchExpression {key} {operator} needs values")
            terms.append(f"{key} {operator.lower()} ({','.join(str(value) for value in values)})")
        elif operator == "Exists":
            terms.append(key)
        elif operator == "DoesNotExist":
            terms.append(f"!{key}")
        else:
            raise ValueError(
                f"matchExpression operator must be In, NotIn, Exists or DoesNotExist, not {operator!r}"
            )
    return ",".join(terms)


async def scrape_pods(
    api: KubeApi,
    settings: ExporterSettings,
    session: aiohttp.ClientSession,
    parse: Callable[[str], T],
) -> Scrape[T]:
    """Find the exporter pods and GET each one's metrics, all at once, each within the timeout, and
    `parse` each body (which raises MalformedExporterText for text it cannot read).

    Never raises for a bad exporter: a pod that is not running, does not answer, or answers with
    something else than exporter text becomes an `errors` entry for its node."""
    try:
        listing = await api.get(
            resource_path("v1", "pods", namespace=settings.namespace),
            query={"labelSelector": label_selector(settings.selector)},
        )
    except (KubeApiError, ValueError, aiohttp.ClientError, TimeoutError) as error:
        return Scrape(errors={settings.namespace: f"cannot list the {settings.name} pods: {error}"})
    pods = sorted(listing.get("items") or [], key=lambda pod: str(pod.get("metadata", {}).get("name")))
    results: list[tuple[str, T | _Failure]] = await asyncio.gather(
        *(_scrape_pod(pod, settings, session, parse) for pod in pods)
    )
    scrape: Scrape[T] = Scrape()
    for key, outcome in results:
        if isinstance(outcome, _Failure):
            scrape.errors.setdefault(key, str(outcome))
        else:
            scrape.samples.setdefault(key, outcome)
    for node in scrape.samples:  # another exporter pod on that node answered (a rolling update)
        scrape.errors.pop(node, None)
    return scrape


class _Failure(str):
    """Why an exporter pod gave no samples (a str, told apart from a parse result that may be one)."""

    __slots__ = ()


async def _scrape_pod(
    pod: RawObject,
    settings: ExporterSettings,
    session: aiohttp.ClientSession,
    parse: Callable[[str], T],
) -> tuple[str, T | _Failure]:
    """(node, what its exporter served) or (node or pod, why not)."""
    key, url, problem = _target(pod, settings)
    if url is None:
        return key, _Failure(problem)
    try:
        async with session.get(
            url, timeout=aiohttp.ClientTimeout(total=settings.timeout_seconds)
        ) as response:
            if response.status != 200:
                return key, _Failure(f"{problem} answered HTTP {response.status}")
            body = await response.content.read(MAX_BODY_BYTES + 1)
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        return key, _Failure(f"{problem} is unreachable: {error or type(error).__name__}")
    if len(body) > MAX_BODY_BYTES:
        return key, _Failure(f"{problem} sent more than {MAX_BODY_BYTES} bytes")
    try:
        return key, parse(body.decode("utf-8", errors="replace"))
    except MalformedExporterText as error:
        return key, _Failure(f"{problem} sent malformed metrics: {error}")


def _target(pod: RawObject, settings: ExporterSettings) -> tuple[str, str | None, str]:
    """(node or pod key, the metrics URL or None, the exporter's description or why it has no URL)."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    pod_key = f"{metadata.get('namespace', settings.namespace)}/{metadata.get('name', '?')}"
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:
        return pod_key, None, f"exporter pod {pod_key} is on no node yet"
    phase = status.get("phase")
    address = status.get("podIP")
    if metadata.get("deletionTimestamp"):
        return node, None, f"exporter pod {pod_key} is being deleted"
    if phase != "Running" or not address:
        return node, None, f"exporter pod {pod_key} is not running (phase {phase}, IP {address or 'none'})"
    host = f"[{address}]" if ":" in address else address
    url = f"http://{host}:{settings.port}{settings.path}"
    return node, url, f"exporter pod {pod_key} at {url}"
