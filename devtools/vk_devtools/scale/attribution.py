"""Whose requests the apiserver served: one identity per component, counted by API Priority and Fairness.

`apiserver_request_total` has no label that names the client. APF does: every request is classified
by the first FlowSchema (lowest matchingPrecedence) whose rules match its user, verb and resource, and
`apiserver_flowcontrol_dispatched_requests_total{flow_schema=...}` counts the requests each schema let
through. So each component runs with a client certificate of its own user (bound to cluster-admin:
what is measured is the traffic, not the RBAC), and this module gives each (user, verb) a FlowSchema
of its own at a precedence ahead of the built-in ones. Its counters then split the apiserver's work by
component and verb exactly, while everything runs at once; the built-in schemas see none of these
users' requests, and the priority level they are sent to is the built-in `workload-high`.

A WATCH is counted when it is dispatched (when it starts), unlike `apiserver_request_total`, which
counts it when it ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from vk_devtools.devcluster.kubeconfigs import write_kubeconfig
from vk_devtools.devcluster.pki import CertificateAuthority, ClientIdentity, KeyPair
from vk_provider.kit.exposition import parse_series_line
from vk_provider.kit.kube import KubeApi, KubeApiError

COMPONENTS = ("nodes", "router", "controller")
"""The components told apart: every node daemon of the rig (one user), the router, the controller with
its policy loop."""
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
USER_PREFIX = "vk-scale-"
FLOW_SCHEMA_PRECEDENCE = 90
"""Ahead of every built-in FlowSchema but `exempt` (1) and `probes` (2): system-leader-election is 100,
system-nodes 500, service-accounts 9000."""
PRIORITY_LEVEL = "workload-high"
DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
REQUESTS = "apiserver_request_total"


def user_of(component: str) -> str:
    return f"{USER_PREFIX}{component}"


def flow_schema_name(component: str, verb: str) -> str:
    return f"{USER_PREFIX}{component}-{verb}"


def write_identities(plane_pki: Path, server: str, folder: Path) -> dict[str, Path]:
    """A client certificate from the plane's CA and a kubeconfig for each of COMPONENTS; their paths."""
    ca_cert = x509.load_pem_x509_certificate((plane_pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((plane_pki / "ca.key").read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{plane_pki / 'ca.key'} is not the EC key vk_devtools.devcluster writes")
    authority = CertificateAuthority(ca_cert, ca_key, KeyPair(plane_pki / "ca.crt", plane_pki / "ca.key"))
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for component in COMPONENTS:
        user = user_of(component)
        pair = authority.issue_client(folder, ClientIdentity(user, user))
        paths[component] = write_kubeconfig(
            folder / f"{component}.kubeconfig",
            server=server,
            ca_cert=plane_pki / "ca.crt",
            client=pair,
            user=user,
        )
    return paths


def access_objects() -> list[dict[str, Any]]:
    """The ClusterRoleBinding of every component's user to cluster-admin, and the FlowSchemas."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{USER_PREFIX}components"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user_of(component)}
            for component in COMPONENTS
        ],
    }
    schemas = [
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": flow_schema_name(component, verb)},
            "spec": {
                "priorityLevelConfiguration": {"name": PRIORITY_LEVEL},
                "matchingPrecedence": FLOW_SCHEMA_PRECEDENCE,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": [{"kind": "User", "user": {"name": user_of(component)}}],
                        "resourceRules": [
                            {
                                "verbs": [verb],
                                "apiGroups": ["*"],
                                "resources": ["*"],
                                "namespaces": ["*"],
                                "clusterScope": True,
                            }
                        ],
                    }
                ],
            },
        }
        for component in COMPONENTS
        for verb in VERBS
    ]
    return [binding, *schemas]


async def grant_access(api: KubeApi) -> None:
    """Create `access_objects` (those that exist already are left as they are)."""
    paths = {
        "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "FlowSchema": "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
    }
    for item in access_objects():
        try:
            await api.create(paths[item["kind"]], item)
        except KubeApiError as error:
            if error.status != 409:
                raise


@dataclasses.dataclass(frozen=True, slots=True)
class Counters:
    """The apiserver's counters at one moment (the bench's monotonic clock)."""

    at: float
    dispatched: dict[tuple[str, str], float]
    """(component, verb) -> requests APF dispatched for that component's user."""
    requests: dict[tuple[str, str], float]
    """(VERB, resource[/subresource][.group]) -> apiserver_request_total, all clients."""

    def rates_since(self, earlier: Counters) -> Rates:
        seconds = self.at - earlier.at
        return Rates(
            seconds=seconds,
            dispatched=_per_second(self.dispatched, earlier.dispatched, seconds),
            requests=_per_second(self.requests, earlier.requests, seconds),
        )


def _per_second(
    now: Mapping[tuple[str, str], float], then: Mapping[tuple[str, str], float], seconds: float
) -> dict[tuple[str, str], float]:
    # A counter that shrank (an apiserver restart) counts nothing.
    return {key: max(0.0, value - then.get(key, 0.0)) / seconds for key, value in now.items()}


@dataclasses.dataclass(frozen=True, slots=True)
class Rates:
    seconds: float
    dispatched: dict[tuple[str, str], float]
    requests: dict[tuple[str, str], float]

    def component(self, component: str, *, watches: bool = False) -> float:
        """The component's requests per second, WATCH left out unless `watches`."""
        return sum(
            rate
            for (who, verb), rate in self.dispatched.items()
            if who == component and (watches or verb != "watch")
        )

    def by_verb(self, component: str) -> dict[str, float]:
        return {
            verb: rate for (who, verb), rate in sorted(self.dispatched.items()) if who == component and rate
        }

    def by_resource(self) -> dict[str, float]:
        """Every client's requests per second by "VERB resource", WATCH left out, largest first."""
        rows = {
            f"{verb} {resource}": rate for (verb, resource), rate in self.requests.items() if verb != "WATCH"
        }
        return dict(sorted(((key, rate) for key, rate in rows.items() if rate > 0), key=lambda kv: -kv[1]))

    def minus(self, background: Rates) -> dict[str, float]:
        """`by_resource` less the plane's own rate of the same row (never below zero)."""
        base = background.by_resource()
        rows = {key: max(0.0, rate - base.get(key, 0.0)) for key, rate in self.by_resource().items()}
        return {key: rate for key, rate in rows.items() if rate >= 0.005}


async def scrape(api: KubeApi, at: float) -> Counters:
    """GET /metrics from the apiserver (as the admin `api`) and keep the two counters."""
    response = await api.open_stream("/metrics")
    try:
        text = await response.text()
    finally:
        response.release()
    return parse(text, at)


def parse(text: str, at: float) -> Counters:
    users = {user_of(component): component for component in COMPONENTS}
    dispatched: dict[tuple[str, str], float] = {}
    requests: dict[tuple[str, str], float] = {}
    for name, labels, value in _series(text, (DISPATCHED, REQUESTS)):
        if name == DISPATCHED:
            schema = labels.get("flow_schema", "")
            component, _, verb = schema.removeprefix(USER_PREFIX).rpartition("-")
            if schema.startswith(USER_PREFIX) and user_of(component) in users:
                dispatched[(component, verb)] = dispatched.get((component, verb), 0.0) + value
        elif labels.get("resource"):
            resource = labels["resource"] + (f"/{labels['subresource']}" if labels.get("subresource") else "")
            resource += f".{labels['group']}" if labels.get("group") else ""
            row = (labels.get("verb", "?"), resource)
            requests[row] = requests.get(row, 0.0) + value
    return Counters(at=at, dispatched=dispatched, requests=requests)


def _series(text: str, names: Iterable[str]) -> Iterable[tuple[str, dict[str, str], float]]:
    prefixes = tuple(f"{name}{{" for name in names)
    for line in text.splitlines():
        if not line.startswith(prefixes):
            continue
        try:
            name, labels, value = parse_series_line(line)
        except ValueError:
            continue
        if value is not None:
            yield name, labels, value
