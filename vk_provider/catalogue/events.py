"""Every Kubernetes Event reason the project posts, and every condition it writes with its reasons.

tests/unit/docs/test_reference_events.py reads the code's Event and condition calls and fails on a
reason or condition type that is not here, and on an entry here that the code no longer spells.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class EventReason:
    reason: str
    """The reason; `<...>` marks a part the code fills in."""
    type: str
    """Normal, Warning, or both (the same reason in two situations)."""
    on: str
    """The kind of the object the Event is about."""
    posted_by: str
    meaning: str


@dataclasses.dataclass(frozen=True)
class ConditionReason:
    reason: str
    status: str
    meaning: str


@dataclasses.dataclass(frozen=True)
class Condition:
    type: str
    on: str
    written_by: str
    meaning: str
    reasons: tuple[ConditionReason, ...]


NODE = "the node daemon"
CONTROLLER = "the controller"
POLICY = "the OffloadPolicy (in the controller)"
ADMISSION = "the Kueue AdmissionCheck (in the controller)"
ROUTER = "the router and the xDS server"
PROVIDERS = "a provider, posted through the node daemon"

EVENTS: tuple[EventReason, ...] = (
    # The node daemon, about pods
    EventReason(
        "ProviderCreateSuccess", "Normal", "Pod", NODE, "The pod's workload was created at the provider."
    ),
    EventReason(
        "ProviderCreateFailed",
        "Warning",
        "Pod",
        NODE,
        "Creating the workload at the provider failed; the message is the provider's error. The pod is "
        "retried with a backoff, or Failed (reason ProviderFailed) when the provider refuses it for good or "
        "its restartPolicy is Never.",
    ),
    EventReason(
        "ProviderDeleteFailed",
        "Warning",
        "Pod",
        NODE,
        "Deleting a deleted pod's workload at the provider failed; it is retried.",
    ),
    EventReason(
        "Placed",
        "Normal",
        "Pod",
        NODE,
        "Where the provider placed the pod (provider, GPU type, region) and at what price per hour.",
    ),
    EventReason(
        "Killing", "Normal", "Pod", NODE, "Stopping a deleted pod's workload, with its grace period."
    ),
    EventReason(
        "OutOfBudget",
        "Warning",
        "Pod",
        NODE,
        "Refused before anything was created: one more pod or its price would take the node past "
        "`--max-provider-pods` or `--max-spend-per-hour` (or its price is unknown and unpriced pods are "
        "refused). The pod is Failed.",
    ),
    EventReason(
        "InvalidPlacement",
        "Warning",
        "Pod",
        NODE,
        "Refused: a placement annotation (or the pod's GPU resource) cannot be read. The pod is Failed.",
    ),
    EventReason(
        "OutOf<resource>",
        "Warning",
        "Pod",
        NODE,
        "Refused as the kubelet refuses: the pod's requests do not fit in what the node's other pods leave "
        "of its capacity (`OutOfcpu`, `OutOfmemory`, `OutOfpods`, `OutOfnvidia.com/gpu`). The pod is Failed.",
    ),
    EventReason(
        "FailedMount",
        "Warning",
        "Pod",
        NODE,
        "A ConfigMap or Secret (or one of its keys) that a volume names is missing and not optional: as "
        "with a kubelet, nothing is created until it exists.",
    ),
    EventReason(
        "InvalidEnvironmentVariableNames",
        "Warning",
        "Pod",
        NODE,
        "Keys of an `envFrom` ConfigMap or Secret that are not valid variable names were skipped (as the "
        "kubelet does).",
    ),
    *(
        EventReason(
            f"{necessity}{kind}{what}",
            "Warning",
            "Pod",
            NODE,
            f"An {'optional' if necessity == 'Optional' else 'mandatory'} environment reference names a "
            f"{kind}{' key' if what == 'KeyNotFound' else ''} that does not exist"
            + (
                ": the variable is left out and the pod runs."
                if necessity == "Optional"
                else ": nothing is created until it exists (as with a kubelet)."
            ),
        )
        for necessity in ("Optional", "Mandatory")
        for kind in ("ConfigMap", "Secret")
        for what in ("NotFound", "KeyNotFound")
    ),
    # The node daemon, about its Node
    EventReason(
        "ProviderUnavailable",
        "Warning",
        "Node",
        NODE,
        "The provider's health check failed; the Node gets ProviderAvailable=False and the "
        "`virtual-kubelet.io/provider-unavailable` taint.",
    ),
    EventReason("ProviderAvailable", "Normal", "Node", NODE, "The provider's health check passes again."),
    EventReason(
        "InsufficientBalance",
        "Warning",
        "Node",
        NODE,
        "The provider refuses all work until the account is paid (RunPod's 402): creates are held back, "
        "one let through as a test after 60 s, doubling to 15 min; ProviderAvailable=False with this reason.",
    ),
    EventReason(
        "QuotaExceeded",
        "Warning",
        "Node",
        NODE,
        "SageMaker has a service quota of 0 (ResourceLimitExceeded) for every instance type the node's "
        "pods asked for: creates of each type are held back, one let through as a test after 120 s, "
        "doubling to 15 min; ProviderAvailable=False with this reason (a type held while others have "
        "quota only moves pods to those).",
    ),
    EventReason(
        "NoCapacity",
        "Warning",
        "Pod",
        PROVIDERS,
        "RunPod or SageMaker had no capacity (or SageMaker no quota) for one of the pod's candidates (a GPU "
        "type of `runpod.vk-provider.dev/gpu-type`, an instance type of "
        "`sagemaker.vk-provider.dev/instance-type`, also when its endpoint failed later for "
        "InsufficientInstanceCapacity and is replaced); the message names it and the candidate tried next.",
    ),
    EventReason(
        "ProviderRefused",
        "Warning",
        "Pod",
        PROVIDERS,
        "A member of a chain refused the pod (no capacity for any of its candidates, or refusing all work); "
        "the message names the member, why, and the member tried next.",
    ),
    EventReason(
        "CredentialsMissing",
        "Warning",
        "Node",
        NODE,
        "The provider cannot be built because a credentials file or Secret cannot be read; the node "
        "retries with a backoff.",
    ),
    EventReason(
        "ProviderConfigError",
        "Warning",
        "Node",
        NODE,
        "The provider cannot be built from its settings; the node retries with a backoff.",
    ),
    EventReason(
        "TrafficKeyUnavailable",
        "Warning",
        "Node",
        NODE,
        "The node cannot read (or create) the traffic key Secret, so it cannot seal the traffic addresses "
        "it publishes.",
    ),
    *(
        EventReason(
            f"ServingCertificate{reason}",
            kind,
            "Node",
            NODE,
            f"The kubelet API's serving certificate changed state: {meaning} (the ServingCertificate "
            "condition's reason).",
        )
        for reason, kind, meaning in (
            ("Issued", "Normal", "serving one the cluster's signer issued"),
            ("FileLoaded", "Normal", "serving the operator's files"),
            ("SelfSigned", "Warning", "serving its own, which an apiserver that verifies kubelets refuses"),
            ("Requesting", "Normal", "creating a CSR"),
            ("Pending", "Normal", "a CSR waits for approval or the signer"),
            ("Denied", "Warning", "the last CSR was denied or failed"),
            ("RequestFailed", "Warning", "creating or watching the CSR failed, or it was not issued in time"),
            ("FileInvalid", "Warning", "the operator's files are missing, unreadable or do not match"),
            (
                "RejectedByClients",
                "Warning",
                "the apiserver (or a client) refuses the self-signed certificate",
            ),
            (
                "RejectedByOtherClients",
                "Warning",
                "the apiserver accepts it but another client (metrics-server, Prometheus) refuses it",
            ),
        )
    ),
    # The router and the xDS server
    EventReason(
        "UnverifiedTrafficAddress",
        "Warning",
        "Pod",
        ROUTER,
        "An away pod on one of our nodes publishes a traffic address without a seal the router verifies: "
        "it gets no traffic.",
    ),
    EventReason(
        "NotOnVkProviderNode",
        "Warning",
        "Pod",
        ROUTER,
        "An away pod with a traffic address is bound to a node without "
        "`node-restriction.kubernetes.io/vk-provider`: it gets no traffic.",
    ),
    EventReason(
        "TrafficAuthRefused",
        "Warning",
        "Pod",
        ROUTER,
        "The pod's traffic-auth marker is unknown or malformed, or asks to sign for a service or host the "
        "router will not sign for: it gets no traffic.",
    ),
    EventReason(
        "UntrustedTrafficAnnotation",
        "Warning",
        "Pod",
        ROUTER,
        "The pod carries the old `vk-provider.dev/traffic-address` or `traffic-auth` annotation, which the "
        "router never reads.",
    ),
    EventReason(
        "UntrustedEndpointSlice",
        "Warning",
        "EndpointSlice",
        ROUTER,
        "A slice of an Offload's home Service that no trusted manager wrote: its addresses get no traffic.",
    ),
    # The controller, about Offloads
    EventReason(
        "InvalidSpec",
        "Warning",
        "Offload, OffloadPolicy",
        f"{CONTROLLER}; {POLICY}",
        "The spec cannot be acted on as written; the message says why.",
    ),
    EventReason(
        "DataPlaneNotConfigured",
        "Warning",
        "Offload",
        CONTROLLER,
        "The Offload names a data plane the controller was not started for (e.g. envoy without "
        "`--envoy-xds-url`).",
    ),
    EventReason(
        "HomeDeploymentNotFound",
        "Warning",
        "Offload",
        CONTROLLER,
        "The home Deployment does not exist; nothing moves until it does.",
    ),
    EventReason(
        "HomeServiceNotFound",
        "Warning",
        "Offload",
        CONTROLLER,
        "The home Service does not exist; nothing moves until it does.",
    ),
    EventReason(
        "RouteConflict",
        "Warning",
        "Offload",
        CONTROLLER,
        "An older Offload already routes the same host and path: this one gets no migration and no traffic.",
    ),
    EventReason(
        "HTTPRouteNotFound",
        "Warning",
        "Offload",
        CONTROLLER,
        "Gateway API data plane: the HTTPRoute (or the Gateway API CRDs) does not exist.",
    ),
    EventReason(
        "HTTPRouteRuleNotFound",
        "Warning",
        "Offload",
        CONTROLLER,
        "Gateway API data plane: no rule of the HTTPRoute is the Offload's (none named, or several send to "
        "the home Service).",
    ),
    EventReason(
        "HTTPRouteRuleNotOwned",
        "Warning",
        "Offload",
        CONTROLLER,
        "Gateway API data plane: the rule sends to other Services than the home and away ones, or no longer "
        "to the home Service.",
    ),
    EventReason(
        "InferencePoolNotFound",
        "Warning",
        "Offload",
        CONTROLLER,
        "InferencePool data plane: the InferencePool the Offload names (or its CRD) does not exist.",
    ),
    EventReason(
        "InferencePoolInOtherNamespace",
        "Warning",
        "Offload",
        CONTROLLER,
        "InferencePool data plane: the Offload names an InferencePool outside its own namespace.",
    ),
    EventReason(
        "InferencePoolNotHomeService",
        "Warning",
        "Offload",
        CONTROLLER,
        "InferencePool data plane: the pool selects other pods than the home Service, or another port.",
    ),
    EventReason(
        "EndpointPickerRefMissing",
        "Warning",
        "Offload",
        CONTROLLER,
        "InferencePool data plane: the InferencePool names no endpoint picker (spec.endpointPickerRef).",
    ),
    EventReason(
        "MigrationStarted", "Normal", "Offload", CONTROLLER, "A migration toward `spec.placement` started."
    ),
    EventReason(
        "AwayDeploymentCreated",
        "Normal",
        "Offload",
        CONTROLLER,
        "The away Deployment was created from the home one.",
    ),
    EventReason(
        "StepApplied",
        "Normal",
        "Offload",
        CONTROLLER,
        "The gates passed and the next away weight was applied.",
    ),
    EventReason(
        "GateFailed",
        "Warning",
        "Offload",
        CONTROLLER,
        "A step's gates failed; the weight holds for another interval until the failures tolerated run out.",
    ),
    EventReason(
        "Paused", "Normal", "Offload", CONTROLLER, "The migration is paused (`kubectl offload pause`)."
    ),
    EventReason("Resumed", "Normal", "Offload", CONTROLLER, "The migration resumed."),
    EventReason(
        "Succeeded", "Normal", "Offload", CONTROLLER, "The last step is applied; the migration finalizes."
    ),
    EventReason(
        "GatesFailed",
        "Warning",
        "Offload",
        CONTROLLER,
        "The gates failed too often: the migration rolls back to the last good weight.",
    ),
    EventReason(
        "Aborted",
        "Warning",
        "Offload",
        CONTROLLER,
        "The migration was aborted (`kubectl offload abort`, or `spec.placement` set back): it goes back "
        "where it started.",
    ),
    EventReason(
        "SevereFailure",
        "Warning",
        "Offload",
        CONTROLLER,
        "The receiving side's error rate was severe: the migration rolls back at once.",
    ),
    EventReason(
        "ProgressDeadlineExceeded",
        "Warning",
        "Offload",
        CONTROLLER,
        "Nothing progressed within `progressDeadlineSeconds`: the migration fails, back to the last good "
        "weight.",
    ),
    EventReason(
        "EmergencyMigration",
        "Warning or Normal",
        "Offload",
        CONTROLLER,
        "Warning: the serving side lost its endpoints for the grace period, so an emergency migration to the "
        "other side starts. Normal: the other side is ready and all traffic moves there at once.",
    ),
    EventReason(
        "EmergencyOver", "Normal", "Offload", CONTROLLER, "The side lost in an emergency serves again."
    ),
    EventReason(
        "HomeScaledDown",
        "Normal",
        "Offload",
        CONTROLLER,
        "All traffic is away: the home Deployment was scaled to 0 and its GPUs are free.",
    ),
    EventReason(
        "AwayScaledDown",
        "Normal",
        "Offload",
        CONTROLLER,
        "All traffic is home: the away Deployment was scaled to 0 (or to the pilot light, "
        "`spec.away.warmReplicas`) and the other provider deployments are being deleted.",
    ),
    EventReason(
        "WarmUpStarted",
        "Normal",
        "Offload",
        CONTROLLER,
        "A warm-up began (`offload.vk-provider.dev/warm-until`): the away side is scaled to the replicas a "
        "move away would run, while home keeps all traffic.",
    ),
    EventReason(
        "AwayWarm",
        "Normal",
        "Offload",
        CONTROLLER,
        "The away replicas kept warm (pilot light or warm-up) are all ready: a flip away only shifts "
        "traffic.",
    ),
    EventReason(
        "WarmUpExpired",
        "Normal",
        "Offload",
        CONTROLLER,
        "A warm-up ended without a flip (its time passed, or the annotation went): the away side is scaled "
        "back to `spec.away.warmReplicas`.",
    ),
    EventReason(
        "InvalidWarmUntil",
        "Warning",
        "Offload",
        CONTROLLER,
        "The `offload.vk-provider.dev/warm-until` annotation is not an RFC 3339 time; it is ignored.",
    ),
    EventReason(
        "MigrationSucceeded", "Normal", "Offload", CONTROLLER, "The migration ended where it was going."
    ),
    EventReason(
        "MigrationRolledBack",
        "Warning",
        "Offload",
        CONTROLLER,
        "The migration ended rolled back (gates failed, aborted, severe failure).",
    ),
    EventReason(
        "MigrationFailed", "Warning", "Offload", CONTROLLER, "The migration ended failed (progress deadline)."
    ),
    EventReason(
        "UnhealthyHome",
        "Warning",
        "Offload",
        CONTROLLER,
        "Home pods run on nodes tainted unhealthy and cannot be replaced at home: the Offload moves away.",
    ),
    EventReason(
        "ReplacingUnhealthyHome",
        "Warning",
        "Offload",
        CONTROLLER,
        "Home pods on unhealthy nodes are being replaced by pods on healthy ones.",
    ),
    EventReason(
        "UnhealthyHomeReplaced",
        "Normal",
        "Offload",
        CONTROLLER,
        "Every home pod on an unhealthy node was replaced.",
    ),
    EventReason(
        "SplitChanged",
        "Normal",
        "Offload",
        CONTROLLER,
        "A spill-over Offload's split between home and away replicas changed.",
    ),
    EventReason(
        "Released",
        "Normal",
        "Offload",
        CONTROLLER,
        "A deleted Offload's traffic is home and nothing is left away: its finalizer is removed.",
    ),
    # The OffloadPolicy
    EventReason(
        "NoOffloadsSelected", "Warning", "OffloadPolicy", POLICY, "`spec.offloads` selects no Offload."
    ),
    EventReason(
        "NoHomeNodes", "Warning", "OffloadPolicy", POLICY, "No node matches `spec.homePool.nodeSelector`."
    ),
    EventReason(
        "UnknownResource",
        "Warning",
        "OffloadPolicy",
        POLICY,
        "No node of the home pool advertises the policy's GPU resource.",
    ),
    EventReason(
        "NoHomeGpus",
        "Warning",
        "OffloadPolicy",
        POLICY,
        "The home pool has none of the policy's GPU resource.",
    ),
    EventReason(
        "ExporterUnavailable",
        "Warning",
        "OffloadPolicy",
        POLICY,
        "A dcgm-exporter cannot be read: its nodes are judged on their own state alone.",
    ),
    EventReason(
        "PodGroupsUnavailable",
        "Normal",
        "OffloadPolicy",
        POLICY,
        "Native PodGroups cannot be read (a cluster older than the API): gangs are read from pods and Kueue "
        "Workloads.",
    ),
    EventReason(
        "TrainingDemandDetected", "Normal", "OffloadPolicy", POLICY, "Training gangs ask for home GPUs."
    ),
    EventReason(
        "WarmUpRequested",
        "Normal",
        "Offload, OffloadPolicy",
        POLICY,
        "The policy foresees training demand (a shortfall not yet due, a queued Kueue Workload, a gang "
        "not yet all created, a scheduled run) and asked for the Offload's away side to be kept warm "
        "(its warm-until annotation). Said when a warm-up starts, not when it is refreshed.",
    ),
    EventReason(
        "FlipOutStarted",
        "Normal",
        "Offload, OffloadPolicy",
        POLICY,
        "The policy set the Offload's placement to away, to free home GPUs.",
    ),
    EventReason(
        "FlipBackStarted",
        "Normal",
        "Offload, OffloadPolicy",
        POLICY,
        "The policy set the Offload's placement back home.",
    ),
    EventReason(
        "FlipOutSkipped",
        "Normal",
        "Offload, OffloadPolicy",
        POLICY,
        "The policy would move the Offload away but may not; the message gives the reason (ManualHold, "
        "AutoOff, Dwell, RateLimited, ...).",
    ),
    EventReason(
        "FlipBackDeferred",
        "Normal",
        "Offload, OffloadPolicy",
        POLICY,
        "The policy would bring the Offload home but waits; the message gives the reason.",
    ),
    EventReason(
        "NodesReserved",
        "Normal",
        "Node, OffloadPolicy",
        POLICY,
        "Home nodes were tainted for training (`gpu.vk-provider.dev/reserved`).",
    ),
    EventReason(
        "NodesReleased",
        "Normal",
        "Node, OffloadPolicy",
        POLICY,
        "The training reservation was removed from home nodes.",
    ),
    EventReason(
        "NodeUnhealthy",
        "Warning",
        "Node, OffloadPolicy",
        POLICY,
        "A home node was tainted unhealthy (`gpu.vk-provider.dev/unhealthy`, value: the reason).",
    ),
    EventReason(
        "NodeHealthy", "Normal", "Node, OffloadPolicy", POLICY, "A home node's unhealthy taint was removed."
    ),
    EventReason(
        "HealthCapReached",
        "Warning",
        "OffloadPolicy",
        POLICY,
        "A degrading signal would pull more nodes than `maxNonFatalShare` allows: the message names those "
        "left in service (posted again when that set changes).",
    ),
    # The Kueue AdmissionCheck
    EventReason(
        "AdmissionCheckReady",
        "Normal",
        "Workload",
        ADMISSION,
        "Our AdmissionCheck set the Workload Ready: the free home GPUs cover it (with the reservation "
        "taint's toleration added to its pods), or it needs none.",
    ),
    EventReason(
        "AdmissionCheckRetry",
        "Warning",
        "Workload",
        ADMISSION,
        "Our AdmissionCheck set the Workload Retry: even the whole usable pool is too small, or the GPUs "
        "were not freed in time; Kueue releases the quota and requeues it.",
    ),
    EventReason(
        "AdmissionCheckRejected",
        "Warning",
        "Workload",
        ADMISSION,
        "Our AdmissionCheck rejected the Workload for good: its pod sets cannot be read (never for a "
        "shortage).",
    ),
    EventReason(
        "InvalidPolicy",
        "Warning",
        "AdmissionCheck",
        ADMISSION,
        "The OffloadPolicy the AdmissionCheck resolves to is invalid.",
    ),
    EventReason(
        "InvalidParameters",
        "Warning",
        "AdmissionCheck",
        ADMISSION,
        "The AdmissionCheck's `spec.parameters` do not name an OffloadPolicy.",
    ),
    EventReason(
        "UnknownPolicy",
        "Warning",
        "AdmissionCheck",
        ADMISSION,
        "No OffloadPolicy has the name the AdmissionCheck gives (or lists it).",
    ),
    EventReason(
        "AmbiguousPolicy",
        "Warning",
        "AdmissionCheck",
        ADMISSION,
        "Several OffloadPolicies list the AdmissionCheck.",
    ),
)


def _reasons(status: str, *pairs: tuple[str, str]) -> tuple[ConditionReason, ...]:
    return tuple(ConditionReason(reason, status, meaning) for reason, meaning in pairs)


_OFFLOAD_READY_PROBLEMS = (
    ("InvalidSpec", "the spec cannot be acted on as written"),
    ("DataPlaneNotConfigured", "the controller was not started for the Offload's data plane"),
    ("HomeDeploymentNotFound", "the home Deployment does not exist"),
    ("HomeServiceNotFound", "the home Service does not exist"),
    ("RouteConflict", "an older Offload routes the same host and path"),
    ("HTTPRouteNotFound", "the HTTPRoute does not exist"),
    ("HTTPRouteRuleNotFound", "no rule of the HTTPRoute is the Offload's"),
    ("HTTPRouteRuleNotOwned", "the rule sends to other Services too"),
    ("InferencePoolNotFound", "the InferencePool does not exist"),
    ("InferencePoolInOtherNamespace", "the InferencePool is in another namespace"),
    ("EndpointPickerRefMissing", "the InferencePool names no endpoint picker"),
    ("InferencePoolNotHomeService", "the InferencePool's pods or port are not the home Service's"),
)
_OUTCOMES = (
    ("Succeeded", "the migration ended where it was going"),
    ("EmergencyMigration", "an emergency migration ended"),
    ("GatesFailed", "rolled back: the gates failed"),
    ("Aborted", "rolled back: aborted"),
    ("SevereFailure", "rolled back: a severe error rate"),
    ("ProgressDeadlineExceeded", "failed: no progress within the deadline"),
)

CONDITIONS: tuple[Condition, ...] = (
    Condition(
        "Ready",
        "Node (virtual)",
        NODE,
        "The node runs pods (the node-lifecycle controller reads it).",
        _reasons("True", ("KubeletReady", "the node daemon is ready"))
        + _reasons(
            "False", ("KubeletNotReady", "the node daemon or its provider is not ready; the message says why")
        ),
    ),
    Condition(
        "ProviderAvailable",
        "Node (virtual)",
        NODE,
        "The provider answers its health check.",
        _reasons("True", ("ProviderHealthy", "the provider answers its health check"))
        + _reasons(
            "False",
            ("ProviderUnavailable", "the health check fails"),
            (
                "CredentialsMissing",
                "the provider cannot be built: a credentials file or Secret cannot be read",
            ),
            ("ProviderConfigError", "the provider cannot be built from its settings"),
            ("InsufficientBalance", "the provider refuses all work until the account is paid (RunPod's 402)"),
            (
                "QuotaExceeded",
                "SageMaker has a service quota of 0 for every instance type the node's pods asked for",
            ),
        ),
    ),
    Condition(
        "NetworkUnavailable",
        "Node (virtual)",
        NODE,
        "Always False: the provider manages pod networking.",
        _reasons("False", ("RouteCreated", "the provider manages pod networking")),
    ),
    *(
        Condition(
            kind,
            "Node (virtual)",
            NODE,
            "Always False, as a healthy kubelet reports it: there is no host under a virtual node.",
            _reasons("False", (f"KubeletHasNo{kind}", f"no {kind}")),
        )
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ),
    Condition(
        "ServingCertificate",
        "Node (virtual)",
        NODE,
        "True while the kubelet API serves a certificate no client has refused.",
        _reasons(
            "True",
            ("Issued", "a certificate the cluster's kubelet-serving signer issued through a CSR"),
            ("FileLoaded", "the operator's certificate from files"),
            ("SelfSigned", "a certificate of its own (fine where the apiserver does not verify kubelets)"),
            ("RejectedByOtherClients", "self-signed: the apiserver accepts it, another client refuses it"),
        )
        + _reasons(
            "False",
            ("Requesting", "no certificate yet: a CSR is being created"),
            ("Pending", "no certificate yet: a CSR waits for approval or the signer"),
            ("Denied", "the last CSR was denied or failed; a new one follows after a backoff"),
            ("RequestFailed", "creating or watching the CSR failed, or it was not issued in time"),
            ("FileInvalid", "the operator's files are missing, unreadable or do not match"),
            ("RejectedByClients", "self-signed, and the apiserver (or a client) refuses it"),
        ),
    ),
    Condition(
        "Approved",
        "CertificateSigningRequest (the node's kubelet-serving CSR)",
        f"{NODE}, with `--kubelet-csr-self-approve`",
        "The node approved its own serving certificate request.",
        _reasons("True", ("VkProviderSelfApproved", "approved by the node daemon itself")),
    ),
    Condition(
        "PodScheduled", "Pod (of a virtual node)", NODE, "Always True: the pod is bound to the node.", ()
    ),
    Condition(
        "Initialized",
        "Pod (of a virtual node)",
        NODE,
        "Every init container ended with exit code 0.",
        _reasons("False", ("ContainersNotInitialized", "an init container has not succeeded yet")),
    ),
    Condition(
        "ContainersReady",
        "Pod (of a virtual node)",
        NODE,
        "Every container is ready.",
        _reasons(
            "False",
            ("ContainersNotReady", "a container is not ready"),
            ("PodCompleted", "the pod has finished"),
        ),
    ),
    Condition(
        "Ready",
        "Pod (of a virtual node)",
        NODE,
        "The pod is running, its containers ready and its readiness gates pass.",
        _reasons(
            "False",
            ("ContainersNotReady", "a container is not ready"),
            ("ReadinessGatesNotReady", "a readiness gate does not pass"),
            ("PodCompleted", "the pod has finished"),
        ),
    ),
    *(
        Condition(
            kind,
            "Pod (an away pod of a virtual node)",
            NODE,
            f"Its message is {what}; read by the router.",
            _reasons("True", ("Published", "the node publishes it")),
        )
        for kind, what in (
            ("vk-provider.dev/TrafficAddress", "the URL of the pod's traffic"),
            ("vk-provider.dev/TrafficAuth", "how the router must authenticate to that URL"),
            (
                "vk-provider.dev/TrafficSignature",
                "the node's seal over the pod's UID, address and auth marker",
            ),
        )
    ),
    Condition(
        "placement.vk-provider.dev/Chosen",
        "Pod (placed by price or provider list)",
        NODE,
        "Its message records where the provider placed the pod (JSON).",
        _reasons("True", ("Placed", "the placement is recorded")),
    ),
    Condition(
        "Ready",
        "Offload",
        CONTROLLER,
        "What the Offload names exists and its route is its own, so it can be acted on.",
        _reasons("True", ("Resolved", "the home Deployment and Service exist"))
        + _reasons("False", *_OFFLOAD_READY_PROBLEMS),
    ),
    Condition(
        "Progressing",
        "Offload",
        CONTROLLER,
        "True while a migration runs (its reason: what it does or waits for); False once it ended (its "
        "reason: how).",
        _reasons(
            "True",
            ("MigrationStarted", "a migration started"),
            ("StepInterval", "every router applies the step's weight; the receiving side is being judged"),
            ("StepApplied", "the gates passed and the next weight was applied"),
            ("Paused", "the migration is paused"),
            (
                "WaitingForReplicas",
                "the receiving side has fewer ready replicas than `readyThresholdPercent` asks",
            ),
            ("WaitingForRouters", "routers do not yet apply the weight or see enough endpoints"),
            (
                "WaitingForEndpointPicker",
                "the InferencePool's endpoint picker has no ready endpoint or does not answer",
            ),
            ("RouterUnreachable", "a data plane replica cannot be asked"),
            ("NotEnoughData", "too few requests to judge the gates"),
            ("ReplacingUnhealthyHome", "home pods on unhealthy nodes are being replaced"),
            ("UnhealthyHome", "home pods are on unhealthy nodes: moving away"),
            ("Finalizing", "the last weight is applied; scaling the drained side down"),
        )
        + _reasons("False", *_OUTCOMES),
    ),
    Condition(
        "GatesPassing",
        "Offload",
        CONTROLLER,
        "The health gates' verdict on the receiving side at the last judgement.",
        _reasons("True", ("Healthy", "the gates pass"))
        + _reasons("False", ("Unhealthy", "a gate fails"), ("Severe", "failing far beyond the gates"))
        + _reasons("Unknown", ("NotEnoughData", "too few requests to judge")),
    ),
    Condition(
        "AwayWarm",
        "Offload",
        CONTROLLER,
        "Whether the away replicas kept warm while home serves (`status.warm`) are ready.",
        _reasons(
            "True",
            ("PilotLight", "the `spec.away.warmReplicas` away replicas are ready"),
            ("WarmUp", "a warm-up's away replicas (`offload.vk-provider.dev/warm-until`) are ready"),
        )
        + _reasons(
            "False",
            ("Warming", "away replicas are kept warm but not all ready yet"),
            ("Cold", "no away replica is kept warm"),
            ("InvalidWarmUntil", "the warm-until annotation is not an RFC 3339 time, so it is ignored"),
            ("NotAtHome", "a migration runs or traffic is away: warmth applies only while home serves"),
        ),
    ),
    Condition(
        "Degraded",
        "Offload",
        CONTROLLER,
        "True while the serving side has lost its endpoints.",
        _reasons(
            "True",
            (
                "ServingSideLost",
                "the serving side has too few usable endpoints; an emergency migration starts if it lasts",
            ),
            ("EmergencyMigration", "an emergency migration to the other side runs"),
        )
        + _reasons(
            "False",
            ("Serving", "the serving side serves"),
            ("NotServingYet", "the side has never served yet (a new Offload), so losing it is no emergency"),
            ("Recovered", "the side lost serves again"),
            ("PlacementChanged", "after an emergency, `spec.placement` now names the side it moved to"),
        ),
    ),
    Condition(
        "HomeHealthy",
        "Offload",
        CONTROLLER,
        "Whether home pods run on nodes tainted unhealthy.",
        _reasons("True", ("Replaced", "the home pods on unhealthy nodes were replaced"))
        + _reasons("False", ("PodsOnUnhealthyNodes", "home pods run on unhealthy nodes; being replaced")),
    ),
    Condition(
        "SpillingOver",
        "Offload",
        CONTROLLER,
        "Whether a spill-over Offload splits its replicas between home and away.",
        _reasons("True", ("SpillingOver", "replicas spill over; the message gives the split"))
        + _reasons(
            "False",
            ("NotConfigured", "`spec.spillOver` is not set"),
            ("Migrating", "a migration moves the replicas"),
            ("MovedAway", "every replica runs away; spilling over resumes once it is home"),
        ),
    ),
    Condition(
        "Deleting",
        "Offload",
        CONTROLLER,
        "A deleted Offload waits for its traffic to come home before it goes.",
        _reasons(
            "True",
            ("MigratingHome", "moving traffic home first"),
            ("Blocked", "the migration home ended short of home: the away side keeps serving"),
            ("ReleasingAway", "traffic is home; the away side is being released"),
        ),
    ),
    Condition(
        "Ready",
        "OffloadPolicy",
        POLICY,
        "The policy can work as written.",
        _reasons("True", ("Ready", "watching the home pool"))
        + _reasons(
            "False",
            ("InvalidSpec", "the spec is invalid"),
            ("NoOffloadsSelected", "`spec.offloads` selects no Offload"),
            ("NoHomeNodes", "no node matches the home pool's selector"),
            ("UnknownResource", "no home node advertises the GPU resource"),
            ("NoHomeGpus", "the home pool has none of the GPU resource"),
        ),
    ),
    Condition(
        "TrainingDemand",
        "OffloadPolicy",
        POLICY,
        "Whether training gangs ask for home GPUs.",
        _reasons("True", ("GangsPresent", "gangs are present; the message counts their GPUs"))
        + _reasons("False", ("NoDemand", "no training gang")),
    ),
    Condition(
        "HomeCapacityHealthy",
        "OffloadPolicy",
        POLICY,
        "Whether every home node counts as healthy.",
        _reasons("True", ("AllHealthy", "every home node counts as healthy"))
        + _reasons(
            "False",
            ("Unhealthy", "a home node is unhealthy"),
            ("Settling", "a node is healthy again, but not yet for `healthyForSeconds`"),
        ),
    ),
    Condition(
        "GpuMetricsAvailable",
        "OffloadPolicy",
        POLICY,
        "Whether dcgm-exporter could be read.",
        _reasons(
            "True",
            ("NotConfigured", "no dcgm-exporter named: health from the nodes' own state"),
            ("Scraped", "every dcgm-exporter pod answered"),
        )
        + _reasons(
            "False",
            ("ExporterUnavailable", "an exporter cannot be read: its nodes are judged on their own state"),
        ),
    ),
    Condition(
        "HealthCapReached",
        "OffloadPolicy",
        POLICY,
        "Whether the cap on nodes tainted for non-fatal reasons (`spec.health.maxNonFatalShare`) holds back "
        "nodes a degrading signal would pull.",
        _reasons("True", ("CapReached", "it does: the message names them"))
        + _reasons("False", ("WithinCap", "every node due for a taint got one")),
    ),
    Condition(
        "PodGroupsReadable",
        "OffloadPolicy (that counts native PodGroups)",
        POLICY,
        "Whether unschedulable native PodGroups count as training demand.",
        _reasons("True", ("Read", "they do"))
        + _reasons("False", ("PodGroupsUnavailable", "the API is not there (a cluster older than it)")),
    ),
    Condition(
        "Active",
        "AdmissionCheck (ours)",
        ADMISSION,
        "Whether an OffloadPolicy serves the AdmissionCheck.",
        _reasons("True", ("Active", "an OffloadPolicy serves it"))
        + _reasons(
            "False",
            ("InvalidParameters", "`spec.parameters` do not name an OffloadPolicy"),
            ("UnknownPolicy", "no OffloadPolicy of that name (or that lists it)"),
            ("AmbiguousPolicy", "several OffloadPolicies list it"),
            ("InvalidPolicy", "the OffloadPolicy is invalid"),
        ),
    ),
)
