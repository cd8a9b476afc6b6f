"""The Offload's API names, and the labels and annotations that tie its objects together.

Everything here is part of the wire contract between the node, the router, the controller, the CLI
and the manifests: renaming any of it is a breaking change for a running cluster.
"""

from __future__ import annotations

from vk_provider.kit.kube import resource_path

GROUP = "offload.vk-provider.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Offload"
PLURAL = "offloads"
KEPT_ROUTE_KIND = "KeptRoute"
"""A deleted Offload's route, kept by the controller for its home Service (`vk_provider.offload.retained`)."""
KEPT_ROUTES = "keptroutes"

CONTROLLER_LEASE = "vk-provider-controller"
"""The controller replicas' leader Lease (`vk-provider controller --leader-election-lease-name`)."""
CONTROLLER_NAMESPACE = "vk-provider-system"
"""Where the manifests and the chart run the controller, and its Lease's default namespace."""
VERSION_ANNOTATION = f"{GROUP}/version"
"""On the controller's leader Lease: the vk-provider version of the replica that last led. A Lease is
readable with ordinary rights, where the controller's /metrics may not be reachable from a laptop, so
`kubectl offload version` reads it here."""

OFFLOAD_LABEL = f"{GROUP}/offload"
"""On the away Deployment and its pods: the Offload they belong to (the router finds away pods by it)."""
SERVES_LABEL = f"{GROUP}/serves"
"""On both sides' pods of a spill-over Offload (the controller labels the home ones, the away template
carries it): the Offload they serve. `status.selector` selects by it, so an autoscaler counts both sides."""
PROMOTE_ANNOTATION = f"{GROUP}/promote"
"""On the Offload: a new value asks the controller to skip the remaining steps (`kubectl offload promote`)."""
FINALIZER = f"{GROUP}/migrate-home"
"""On the Offload, put there by the controller: a deleted Offload first moves its traffic home."""
RETRY_ANNOTATION = f"{GROUP}/retry"
"""On the Offload: a new value asks the controller to run the last migration again after it rolled back
or failed (`kubectl offload flip` toward the side it did not reach); `status.handledRetry` echoes it."""
FLIP_STRATEGY_ANNOTATION = f"{GROUP}/flip-strategy"
"""On the Offload: the steps and interval of one flip by a person, for the migration it starts alone
(`kubectl offload flip --steps/--interval` without `--save`; see `vk_provider.offload.oneoff`);
`status.handledFlipStrategy` echoes it."""
WARM_UNTIL_ANNOTATION = f"{GROUP}/warm-until"
"""On the Offload: an RFC 3339 UTC time until which the away side is kept warm while home serves
(a WARM-UP: the replicas a move away would run, traffic weight still 0), written by the OffloadPolicy
when training demand is foreseeable, or by a person. Unparseable: a Warning, treated as absent."""
WARMED_BY_ANNOTATION = f"{GROUP}/warmed-by"
"""On the Offload, beside `WARM_UNTIL_ANNOTATION`: who asked for the warm-up (`policy/<name>`, or a
person's tool), named in the controller's messages only."""
TEMPLATE_HASH_ANNOTATION = f"{GROUP}/template-hash"
"""On the away Deployment: the hash of the home template it was derived from."""

VIRTUAL_NODE_LABEL = "node-restriction.kubernetes.io/vk-provider"
VIRTUAL_NODE_LABEL_VALUE = "true"
"""The label on the Nodes our node daemon registers, and only on them: every virtual-kubelet (AKS's
virtual nodes too) carries `type=virtual-kubelet`, so that label cannot tell ours apart. NodeRestriction
forbids a kubelet to set a `node-restriction.kubernetes.io/` label on its own Node, so a compromised
ordinary kubelet cannot claim it; our daemon writes it as a ServiceAccount allowed to patch nodes. The
value is fixed (not the provider) so one `nodeSelector` entry selects all our nodes."""
VIRTUAL_NODE_SELECTOR = f"{VIRTUAL_NODE_LABEL}={VIRTUAL_NODE_LABEL_VALUE}"
"""`VIRTUAL_NODE_LABEL` as a label selector (the router's node watch, `kubectl offload uninstall`)."""
VIRTUAL_NODE_TAINT = "vk-provider.dev/virtual-node"
"""The key of the NoSchedule taint on our virtual nodes (its value is the provider), tolerated by the
away pods; unlike `virtual-kubelet.io/provider`, tolerating it lets a pod onto no other virtual node."""
GENERIC_VIRTUAL_NODE_LABEL = ("type", "virtual-kubelet")
"""What every virtual-kubelet's Node carries. Ours keep it (tools look for it), nothing selects by it."""
LEGACY_VIRTUAL_NODE_TAINT = "virtual-kubelet.io/provider"
"""The taint key our nodes carried before `VIRTUAL_NODE_TAINT`, shared with every virtual-kubelet: the
node daemon removes it from its Node, and an Offload's stored default that tolerates it is read as
today's default (see `vk_provider.offload.spec`)."""

TRAFFIC_ADDRESS_CONDITION = "vk-provider.dev/TrafficAddress"
"""A condition in the status of a running pod of a virtual node, its `message` the URL the router
sends that pod's traffic to. In the status, not in an annotation: NodeRestriction lets only the node
the pod is bound to write it, and a plain pod editor (`pods` patch without `pods/status`) cannot."""
TRAFFIC_AUTH_CONDITION = "vk-provider.dev/TrafficAuth"
"""A pod status condition beside `TRAFFIC_ADDRESS_CONDITION`, its `message` how the router must
authenticate requests to the traffic address (see `vk_provider.kit.signing`)."""
TRAFFIC_SIGNATURE_CONDITION = "vk-provider.dev/TrafficSignature"
"""A pod status condition beside `TRAFFIC_ADDRESS_CONDITION`, its `message` the node's seal over the
pod's UID, traffic address and auth marker (see `vk_provider.kit.traffic_signature`): the router takes
an address only with a seal it verifies, whoever else may write pod status."""
TRAFFIC_CONDITION_REASON = "Published"
"""The reason of the traffic conditions while the node publishes them."""

TRAFFIC_ADDRESS_ANNOTATION = "vk-provider.dev/traffic-address"
"""Where older nodes published the traffic address. Any pod editor can set it, so the router never
reads it: a pod carrying it gets a Warning Event instead (see `UNTRUSTED_TRAFFIC_ANNOTATION_REASON`)."""
TRAFFIC_AUTH_ANNOTATION = "vk-provider.dev/traffic-auth"
"""Where older nodes published the traffic-auth marker; ignored by the router like the address."""
UNTRUSTED_TRAFFIC_ANNOTATION_REASON = "UntrustedTrafficAnnotation"
"""The reason of the Warning Event the router posts once for a pod carrying either old annotation."""
FOREIGN_NODE_REASON = "NotOnVkProviderNode"
"""The reason of the Warning Event the router posts once for an away pod with a traffic address that is
bound to a node without `VIRTUAL_NODE_LABEL` (another virtual-kubelet's, or an ordinary kubelet's):
whoever wrote that address, it was not one of our node daemons, so the router sends it nothing."""
TRAFFIC_AUTH_REFUSED_REASON = "TrafficAuthRefused"
"""The reason of the Warning Event the router posts once for an away pod whose traffic-auth marker it
cannot act on (unknown, malformed) or will not (signing for a service other than SageMaker's runtime, or
at a host that is not SageMaker's and that `--sign-for-host` does not name): the pod gets no traffic."""
UNVERIFIED_TRAFFIC_ADDRESS_REASON = "UnverifiedTrafficAddress"
"""The reason of the Warning Event the router posts once for an away pod on one of our nodes whose
traffic address carries no seal the router verifies (none, one made with another key, one over other
values or another pod): whoever wrote that address, no node daemon of ours did, so it gets no traffic."""
UNTRUSTED_ENDPOINT_SLICE_REASON = "UntrustedEndpointSlice"
"""The reason of the Warning Event the router posts once for an EndpointSlice of an Offload's home
Service that no trusted manager wrote (see `vk_provider.offload.homeslices`): its addresses get nothing."""


def offloads_path(namespace: str | None = None) -> str:
    """The Offload collection: of one namespace, or of every namespace with None."""
    return resource_path(API_VERSION, PLURAL, namespace=namespace)


def offload_path(namespace: str, name: str, *, status: bool = False) -> str:
    """One Offload, or its status subresource."""
    return resource_path(
        API_VERSION, PLURAL, namespace=namespace, name=name, subresource="status" if status else None
    )


def kept_routes_path(namespace: str | None = None, name: str | None = None) -> str:
    """The KeptRoute collection (of one namespace, or of every one with None), or one KeptRoute."""
    return resource_path(API_VERSION, KEPT_ROUTES, namespace=namespace, name=name)


def envoy_cluster(namespace: str, name: str, side: str) -> str:
    """The Envoy cluster of one side of an Offload's route (`vk-provider xds` names them so).

    `/` cannot occur in a Kubernetes name, so the name says unambiguously which Offload and side it is.
    """
    return f"{namespace}/{name}/{side}"


def envoy_stat_name(cluster: str) -> str:
    """The name a cluster's statistics carry (`envoy_cluster_name` in Envoy's `/stats/prometheus`),
    which the migration gates read.

    Envoy's default tag extraction takes the cluster name up to the first `.`, so a dotted Offload
    name (Kubernetes names may have dots) would lose the rest of its name from `envoy_cluster_name`
    and spill it into the metric's name. `_` cannot occur in a Kubernetes name, so the swap is
    unambiguous.
    """
    return cluster.replace(".", "_")


KEPT_ROUTES_MISSING = (
    "deleted Offloads' routes cannot be kept (apply the KeptRoute CRD: manifests/crds, or the chart's crds/)"
)
"""What a cluster without the KeptRoute resource type loses; the routers and the controller say it."""

ROUTER_ADMIN_PORT = 9081
"""The router's admin port (`--admin-listen`): status, metrics and probes, which the controller reads
on every router pod (`--router-port`). Never the traffic port."""
