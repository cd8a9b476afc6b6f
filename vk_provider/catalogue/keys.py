"""Every label, annotation, taint, finalizer and status-condition key the project reads or writes.

tests/unit/docs/test_reference_labels.py scans the code for key-like strings and fails on one that is
neither here nor in `NOT_KEYS`, and on an entry here that the code no longer names.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Key:
    key: str
    """The key; `<...>` marks a part the code fills in."""
    kind: str
    """label, annotation, taint, finalizer, pod condition, extended resource or tag."""
    on: str
    """The objects that carry it."""
    written_by: str
    read_by: str
    meaning: str
    value: str = ""
    """Its value, when the project sets or expects a fixed form."""


_NODE = "the node daemon (`vk-provider node`)"
_CONTROLLER = "the controller"
_POLICY = "the OffloadPolicy (in the controller)"
_ROUTER = "the router and the xDS server"
_PERSON = "people (manifests, `kubectl`)"

KEYS: tuple[Key, ...] = (
    # The virtual Node
    Key(
        "node-restriction.kubernetes.io/vk-provider",
        "label",
        "the virtual Nodes",
        _NODE,
        f"{_ROUTER} (their node watch); `kubectl offload uninstall`; the away pods' default nodeSelector",
        "Marks the Nodes our node daemon registers, and only them: NodeRestriction forbids a kubelet to "
        "set a `node-restriction.kubernetes.io/` label on its own Node, so an ordinary kubelet cannot "
        "claim it. The router sends traffic only to away pods on such nodes.",
        "true",
    ),
    Key(
        "type",
        "label",
        "the virtual Nodes",
        _NODE,
        "tools that look for any virtual-kubelet; nothing of ours selects by it",
        "What every virtual-kubelet's Node carries (AKS's virtual nodes too), so it cannot tell ours apart.",
        "virtual-kubelet",
    ),
    Key("kubernetes.io/role", "label", "the virtual Nodes", _NODE, "people", "The node's role.", "agent"),
    Key("kubernetes.io/hostname", "label", "the virtual Nodes", _NODE, "the scheduler", "The Node's name."),
    Key(
        "kubernetes.io/os",
        "label",
        "the virtual Nodes",
        _NODE,
        "the scheduler",
        "The operating system the node's pods run on (`--operating-system`, default linux).",
    ),
    Key(
        "node.kubernetes.io/exclude-from-external-load-balancers",
        "label",
        "the virtual Nodes",
        _NODE,
        "the cloud's service controller",
        "Keeps the virtual node out of the backends of external load balancers.",
        "true",
    ),
    Key(
        "vk-provider.dev/virtual-node",
        "taint",
        "the virtual Nodes",
        f"{_NODE} (`--taint`, `--no-taint`)",
        "the scheduler; the away pods tolerate it (the Offload's default tolerations)",
        "Keeps every pod that does not tolerate it off the virtual node. Unlike "
        "`virtual-kubelet.io/provider`, tolerating it lets a pod onto no other virtual-kubelet.",
        "<provider>:NoSchedule",
    ),
    Key(
        "virtual-kubelet.io/provider",
        "taint",
        "the virtual Nodes (of older releases)",
        "older node daemons; today's node daemon removes it from its Node",
        "the Offload's stored defaults: one that tolerates it is read as today's default",
        "The taint key our nodes carried before `vk-provider.dev/virtual-node`, shared by every "
        "virtual-kubelet.",
    ),
    Key(
        "virtual-kubelet.io/provider-unavailable",
        "taint",
        "the virtual Nodes",
        _NODE,
        "the scheduler",
        "Set while the provider's health check fails (condition ProviderAvailable=False), so no new pod is "
        "scheduled to a node that cannot run it; removed once the provider answers again.",
        "<provider>:NoSchedule",
    ),
    Key(
        "gpu.vk-provider.dev/<gpu type>",
        "extended resource",
        "the virtual Nodes whose provider has a GPU catalog; pods' resource limits",
        f"{_NODE} (capacity)",
        "the scheduler; pods that ask for one GPU type",
        "One resource per GPU type (lower case, other characters as `-`): the largest pod of that type "
        "in stock at the node's providers, so a pod that asks for it is scheduled only where it is.",
    ),
    # The pods of a virtual node
    Key(
        "vk-provider.dev/TrafficAddress",
        "pod condition",
        "running pods of a virtual node that an Offload routes to",
        _NODE,
        _ROUTER,
        "Its `message` is the URL the router sends the pod's traffic to. In the status, which only the "
        "node the pod is bound to may write (NodeRestriction), not in an annotation any pod editor can set.",
    ),
    Key(
        "vk-provider.dev/TrafficAuth",
        "pod condition",
        "running pods of a virtual node that an Offload routes to",
        _NODE,
        _ROUTER,
        "Its `message` says how the router must authenticate requests to the traffic address (e.g. "
        "SigV4 for SageMaker).",
    ),
    Key(
        "vk-provider.dev/TrafficSignature",
        "pod condition",
        "running pods of a virtual node that an Offload routes to",
        _NODE,
        _ROUTER,
        "Its `message` is the node's seal over the pod's UID, traffic address and auth marker, made with "
        "the traffic key Secret: the router takes an address only with a seal it verifies.",
    ),
    Key(
        "placement.vk-provider.dev/Chosen",
        "pod condition",
        "pods a provider placed by price or by provider list",
        _NODE,
        "the node daemon and the chain provider (after a restart: which member holds the pod)",
        "Its `message` records where the pod was placed: provider, GPU type, region, price per hour (JSON).",
    ),
    Key(
        "vk-provider.dev/traffic-address",
        "annotation",
        "pods",
        "node daemons of older releases (or anyone: any pod editor can set it)",
        "the router, only to post a Warning Event (UntrustedTrafficAnnotation); never as an address",
        "Where older nodes published the traffic address. The node hides it from the workload.",
    ),
    Key(
        "vk-provider.dev/traffic-auth",
        "annotation",
        "pods",
        "node daemons of older releases (or anyone)",
        "the router, only to post a Warning Event (UntrustedTrafficAnnotation)",
        "Where older nodes published the traffic-auth marker; ignored like the address.",
    ),
    Key(
        "placement.vk-provider.dev/gpu-types",
        "annotation",
        "pods bound to a virtual node with a GPU catalog",
        _PERSON,
        "the node daemon's placement (any catalog provider, the chain)",
        "Accepted GPU types, most preferred first (comma-separated). Any catalog annotation turns on "
        "placement on the cheapest matching offer.",
    ),
    Key(
        "placement.vk-provider.dev/gpu-count",
        "annotation",
        "pods bound to a virtual node with a GPU catalog",
        _PERSON,
        "the node daemon's placement",
        "GPUs for the whole pod (default: the pod's nvidia.com/gpu limit).",
    ),
    Key(
        "placement.vk-provider.dev/max-price-per-hour",
        "annotation",
        "pods bound to a virtual node with a GPU catalog",
        _PERSON,
        "the node daemon's placement",
        "Most US dollars an hour the whole pod may cost at list price; no cheaper offer: the pod fails.",
    ),
    Key(
        "placement.vk-provider.dev/regions",
        "annotation",
        "pods bound to a virtual node with a GPU catalog",
        _PERSON,
        "the node daemon's placement",
        "Accepted locations (a provider's data center, region or zone ids), most preferred first.",
    ),
    Key(
        "placement.vk-provider.dev/providers",
        "annotation",
        "pods bound to a chain's virtual node",
        _PERSON,
        "the chain provider",
        "The chain's members that may be tried, in this order (default: all, in the node's order).",
    ),
    Key(
        "placement.vk-provider.dev/chosen",
        "annotation",
        "pods placed by node daemons of older releases",
        "node daemons of older releases",
        "the node daemon and the chain provider, for those pods only; never read as a request",
        "Where older nodes recorded the placement, now the `placement.vk-provider.dev/Chosen` condition.",
    ),
    Key(
        "runpod.vk-provider.dev/gpu-type",
        "annotation",
        "pods bound to a RunPod node",
        _PERSON,
        "the RunPod provider",
        "The RunPod GPU type ids to rent, most preferred first (comma-separated): when RunPod has no "
        "capacity for one, the next is tried, with the catalog read again (default: the provider's "
        "setting).",
    ),
    Key(
        "runpod.vk-provider.dev/cloud",
        "annotation",
        "pods bound to a RunPod node",
        _PERSON,
        "the RunPod provider",
        "RunPod's cloud for the pod: SECURE or COMMUNITY.",
    ),
    Key(
        "runpod.vk-provider.dev/data-centers",
        "annotation",
        "pods bound to a RunPod node",
        _PERSON,
        "the RunPod provider",
        "Comma-separated RunPod data center ids, in order of preference.",
    ),
    Key(
        "runpod.vk-provider.dev/max-price-per-hour",
        "annotation",
        "pods bound to a RunPod node",
        _PERSON,
        "the RunPod provider",
        "Most US dollars an hour the pod may cost at RunPod.",
    ),
    Key(
        "sagemaker.vk-provider.dev/instance-type",
        "annotation",
        "pods bound to a SageMaker node",
        _PERSON,
        "the SageMaker provider",
        "The endpoint's instance types, most preferred first (comma-separated): on "
        "InsufficientInstanceCapacity or a quota of 0 the next is tried (default: the provider's "
        "setting).",
    ),
    Key(
        "sagemaker.vk-provider.dev/instance-count",
        "annotation",
        "pods bound to a SageMaker node",
        _PERSON,
        "the SageMaker provider",
        "The endpoint's instance count (default: the provider's setting).",
    ),
    Key(
        "mock.vk-provider.dev/fail-create",
        "label",
        "pods bound to a mock node (tests)",
        "tests",
        "the mock provider",
        "The pod fails to create with the label's value as the message (for good when it starts with "
        "`invalid`); removing the label lets the next retry succeed.",
    ),
    # What providers leave at the provider
    Key(
        "vk-provider.dev/node",
        "label",
        "the objects the kubernetes provider creates in the remote cluster",
        "the kubernetes provider",
        "the kubernetes provider (the selector of its own objects)",
        "The virtual node the remote objects belong to.",
    ),
    Key(
        "vk-provider.dev/pod-uid",
        "label",
        "the objects the kubernetes provider creates in the remote cluster",
        "the kubernetes provider",
        "the kubernetes provider (its remote Service selects the pod by it)",
        "The UID of the home pod the remote objects stand for.",
    ),
    Key(
        "app.kubernetes.io/managed-by",
        "label",
        "the objects and namespaces the kubernetes provider creates in the remote cluster",
        "the kubernetes provider",
        "the kubernetes provider (with `vk-provider.dev/node`, the selector of its own objects)",
        "Says the remote object was made by vk-provider.",
        "vk-provider",
    ),
    Key(
        "vk-provider.dev/node-name",
        "annotation",
        "the remote pods of the kubernetes provider",
        "the kubernetes provider",
        "the kubernetes provider (it adopts only its own node's pods after a restart)",
        "The home virtual node's name, in full (a label value cannot hold every name).",
    ),
    Key(
        "vk-provider.dev/pod-namespace",
        "annotation",
        "the remote pods of the kubernetes provider",
        "the kubernetes provider",
        "the kubernetes provider (adopting its pods after a restart)",
        "The home pod's namespace.",
    ),
    Key(
        "vk-provider.dev/pod-name",
        "annotation",
        "the remote pods of the kubernetes provider",
        "the kubernetes provider",
        "the kubernetes provider (adopting its pods after a restart)",
        "The home pod's name.",
    ),
    Key(
        "vk-provider.dev/pod-uid",
        "annotation",
        "the remote pods of the kubernetes provider",
        "the kubernetes provider",
        "the kubernetes provider (adopting its pods after a restart)",
        "The home pod's UID, in full.",
    ),
    Key(
        "vk-provider.dev/pod-uid",
        "tag",
        "the SageMaker models, endpoint configurations and endpoints the provider creates",
        "the SageMaker provider",
        "the SageMaker provider (adopting and sweeping its endpoints)",
        "The UID of the pod the endpoint runs.",
    ),
    Key(
        "vk-provider.dev/node",
        "tag",
        "the SageMaker resources the provider creates",
        "the SageMaker provider",
        "the SageMaker provider (adopting its endpoints after a restart)",
        "The virtual node that created them.",
    ),
    Key(
        "vk-provider.dev/pod",
        "tag",
        "the SageMaker resources the provider creates",
        "the SageMaker provider",
        "the SageMaker provider (adopting its endpoints after a restart)",
        "The pod's namespace/name.",
    ),
    Key(
        "vk-provider.dev/container",
        "tag",
        "the SageMaker resources the provider creates",
        "the SageMaker provider",
        "the SageMaker provider (adopting its endpoints after a restart)",
        "The pod's container the endpoint runs.",
    ),
    Key(
        "vk-provider.dev/image",
        "tag",
        "the SageMaker resources the provider creates",
        "the SageMaker provider",
        "the SageMaker provider (adopting its endpoints after a restart)",
        "The container's image.",
    ),
    Key(
        "app.kubernetes.io/part-of",
        "label",
        "the traffic key Secret",
        "the node daemon (when it creates the Secret)",
        "people",
        "Says the Secret belongs to vk-provider.",
        "vk-provider",
    ),
    # The Offload and its objects
    Key(
        "offload.vk-provider.dev/offload",
        "label",
        "the away Deployment and its pods",
        f"{_CONTROLLER} (the away Deployment and its template)",
        f"{_ROUTER} (they find away pods by it); the node daemon (it publishes the traffic conditions only "
        "for such pods); `kubectl offload uninstall`",
        "The Offload they belong to.",
        "<Offload name>",
    ),
    Key(
        "offload.vk-provider.dev/serves",
        "label",
        "both sides' pods of a spill-over Offload",
        f"{_CONTROLLER} (on the home pods; the away template carries it)",
        "the Offload's `status.selector`, so an autoscaler counts both sides; the controller",
        "The spill-over Offload the pod serves.",
        "<Offload name>",
    ),
    Key(
        "offload.vk-provider.dev/template-hash",
        "annotation",
        "the away Deployment",
        _CONTROLLER,
        _CONTROLLER,
        "The hash of the home template the away Deployment was derived from: a new hash, a new away "
        "template.",
    ),
    Key(
        "offload.vk-provider.dev/migrate-home",
        "finalizer",
        "Offloads",
        _CONTROLLER,
        f"{_CONTROLLER}; `kubectl offload uninstall`",
        "A deleted Offload first brings its traffic home and releases its away side, then goes.",
    ),
    Key(
        "offload.vk-provider.dev/promote",
        "annotation",
        "Offloads",
        "`kubectl offload promote`",
        _CONTROLLER,
        "A new value asks the controller to skip the remaining steps of the migration under way.",
    ),
    Key(
        "offload.vk-provider.dev/retry",
        "annotation",
        "Offloads",
        "`kubectl offload flip` (toward the side the last migration did not reach)",
        f"{_CONTROLLER} (`status.handledRetry` echoes it)",
        "A new value asks the controller to run the last migration again after it rolled back or failed.",
    ),
    Key(
        "offload.vk-provider.dev/flip-strategy",
        "annotation",
        "Offloads",
        "`kubectl offload flip --steps/--interval` without `--save`",
        f"{_CONTROLLER} (`status.handledFlipStrategy` echoes it)",
        "The steps and interval of one flip by a person, for the migration it starts alone.",
    ),
    Key(
        "offload.vk-provider.dev/warm-until",
        "annotation",
        "Offloads",
        f"{_POLICY} (a warm-up for foreseen training demand); people",
        f"{_CONTROLLER} (`status.warm` reports it)",
        "While this time is ahead and the Offload serves at home, the away side runs the replicas a move "
        "away would (traffic weight still 0), so a flip only shifts traffic; once it passes, the away side "
        "goes back to `spec.away.warmReplicas`. An unparseable value is a Warning and is ignored.",
        "an RFC 3339 UTC time",
    ),
    Key(
        "offload.vk-provider.dev/warmed-by",
        "annotation",
        "Offloads",
        f"{_POLICY} (`policy/<name>`); people's tools",
        f"{_CONTROLLER} (in its messages only)",
        "Who asked for the warm-up of `offload.vk-provider.dev/warm-until`.",
    ),
    Key(
        "offload.vk-provider.dev/hold-until",
        "annotation",
        "Offloads",
        "`kubectl offload flip` (`--hold`)",
        _POLICY,
        "The policy leaves the Offload alone until this RFC 3339 time, or, with `next-flip`, until a "
        "person flips it again.",
    ),
    Key(
        "offload.vk-provider.dev/auto",
        "annotation",
        "Offloads",
        "`kubectl offload auto`",
        _POLICY,
        "`off` keeps every policy away from the Offload; absent or `on` lets a policy that selects it move "
        "it.",
        "on, off",
    ),
    Key(
        "offload.vk-provider.dev/flipped-by",
        "annotation",
        "Offloads",
        f"`kubectl offload flip` (`person`) and {_POLICY} (`policy/<name>`)",
        f"{_POLICY}; `kubectl offload`",
        "Who set `spec.placement` last.",
        "person, policy/<name>",
    ),
    Key(
        "offload.vk-provider.dev/flip-order",
        "annotation",
        "Offloads",
        _PERSON,
        _POLICY,
        "An integer: lower moves out first (default 0; ties by namespace/name).",
    ),
    Key(
        "offload.vk-provider.dev/policy-flips",
        "annotation",
        "Offloads",
        _POLICY,
        _POLICY,
        "The JSON list of the times a policy flipped the Offload within the last hour: what "
        "`maxFlipsPerHour` and the dwell times count from.",
    ),
    Key(
        "offload.vk-provider.dev/replicas-before-replacement",
        "annotation",
        "the home Deployment",
        _CONTROLLER,
        _CONTROLLER,
        "While pods stranded on unhealthy home nodes are replaced: the Deployment's replicas before the "
        "surge, restored after.",
    ),
    Key(
        "controller.kubernetes.io/pod-deletion-cost",
        "annotation",
        "home pods stranded on an unhealthy node",
        _CONTROLLER,
        "the ReplicaSet controller",
        "The lowest cost there is, so the ReplicaSet removes the stranded pods first when it scales down.",
        "-2147483648",
    ),
    Key(
        "offload.vk-provider.dev/weights",
        "annotation",
        "the HTTPRoute of an Offload on the Gateway API data plane",
        _CONTROLLER,
        _CONTROLLER,
        "The number and away weight of the weights written last (`<number>:<away weight>`); the rule "
        "sets the number in the `X-Vk-Offload-Weights` response header, which tells the controller that "
        "every gateway replica applies them.",
    ),
    Key(
        "offload.vk-provider.dev/version",
        "annotation",
        "the controller's leader Lease",
        _CONTROLLER,
        "`kubectl offload version`",
        "The vk-provider version of the replica that last led.",
    ),
    Key(
        "node.kubernetes.io/unreachable",
        "taint",
        "Nodes (Kubernetes' own taint); tolerated by the away pods",
        "the node-lifecycle controller; the controller writes the away pods' toleration",
        "the taint manager",
        "Away pods tolerate it with NoExecute forever: a node daemon that is down must not get healthy "
        "away workloads evicted (the router keeps serving them on its active checks).",
    ),
    Key(
        "node.kubernetes.io/not-ready",
        "taint",
        "Nodes (Kubernetes' own taint); tolerated by the away pods",
        "the node-lifecycle controller; the controller writes the away pods' toleration",
        "the taint manager",
        "As `node.kubernetes.io/unreachable`: tolerated forever by the away pods.",
    ),
    # The policy's home nodes
    Key(
        "gpu.vk-provider.dev/reserved",
        "taint",
        "home GPU Nodes reserved for training",
        f"{_POLICY} (the default of `spec.reservation`)",
        "the scheduler; training pods tolerate it",
        "Keeps inference off the home GPUs the policy freed for training gangs.",
        "training:<effect>",
    ),
    Key(
        "gpu.vk-provider.dev/unhealthy",
        "taint",
        "home GPU Nodes judged unhealthy",
        f"{_POLICY} (the default of `spec.health.taintKey`)",
        "the scheduler; the controller (home pods on such nodes are replaced)",
        "The node's GPUs are unhealthy; the value is the reason (Xid, Temperature, ...).",
        "<reason>",
    ),
    Key(
        "offload.vk-provider.dev/policy-taints",
        "annotation",
        "home GPU Nodes",
        _POLICY,
        _POLICY,
        "The JSON list of the taint keys the policy put on the node: it removes only those.",
    ),
    # Read from other components' objects
    Key(
        "app.kubernetes.io/name",
        "label",
        "the router pods and the Envoy pods (as the manifests and the chart label them)",
        _PERSON,
        f"{_CONTROLLER} (the defaults of `--router-selector` and `--envoy-selector`)",
        "How the controller finds the data plane replicas it asks whether a weight is applied.",
        "vk-provider-router, vk-provider-envoy",
    ),
    Key(
        "endpointslice.kubernetes.io/managed-by",
        "label",
        "EndpointSlices of an Offload's home Service",
        "Kubernetes' EndpointSlice controller (or another manager)",
        f"{_ROUTER} (home addresses are taken only from trusted managers)",
        "Who wrote the slice; a slice of an untrusted manager gets a Warning Event "
        "(UntrustedEndpointSlice) and no traffic.",
    ),
    Key(
        "kubernetes.io/service-name",
        "label",
        "EndpointSlices",
        "Kubernetes' EndpointSlice controller",
        f"{_ROUTER}; the controller (Gateway API data plane)",
        "The Service a slice belongs to.",
    ),
    Key(
        "batch.kubernetes.io/job-name",
        "label",
        "the pods of a Job",
        "the Job controller",
        f"{_POLICY} (a gang's pods; the Kueue AdmissionCheck)",
        "The Job the pod belongs to.",
    ),
)


NOT_KEYS: dict[str, str] = {
    "nvidia.com/gpu": "a resource name (the GPU resource pods request)",
    "kubernetes.io/kubelet-serving": "the signer name of the kubelet serving certificate's CSR",
    "offload.vk-provider.dev/gpu-pressure": "the Kueue AdmissionCheck's spec.controllerName",
    "type.googleapis.com/": "the prefix of protobuf type URLs (xDS)",
}
"""Strings shaped like keys that name something else (API versions are left out by their shape)."""
