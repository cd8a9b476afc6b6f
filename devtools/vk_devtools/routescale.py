"""A cluster's worth of route-table inputs, shaped as the apiserver returns them: for scale runs.

`route_inputs(offloads)` gives what the router's reflectors hold when `offloads` inference services
are offloaded: each an Offload (a host route, status with a weight), the EndpointSlice of its home
Service (two ready endpoints), two away pods on our virtual nodes (their traffic address published
and sealed as a node daemon does it), and the virtual nodes they run on. The objects carry the
metadata and status fields a real cluster's do (uid, resourceVersion, owner references, container
specs, conditions) less `metadata.managedFields`, which the reflectors drop, so that the memory a
mirror keeps per Offload is measured on what it really keeps, not on the fields `build_routes` reads.

`bench/scale_router.py` builds its tables from these; everything is deterministic (names and UIDs
are numbered), so two runs build the same objects.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Final

from vk_provider.kit.traffic_signature import TrafficKey, seal
from vk_provider.offload.homeslices import ENDPOINTSLICE_CONTROLLER, MANAGED_BY_LABEL
from vk_provider.offload.names import (
    API_VERSION,
    KIND,
    OFFLOAD_LABEL,
    TRAFFIC_ADDRESS_CONDITION,
    TRAFFIC_SIGNATURE_CONDITION,
    VIRTUAL_NODE_LABEL,
    VIRTUAL_NODE_LABEL_VALUE,
)
from vk_provider.routetable.building import SERVICE_NAME_LABEL

SCALE_KEY: Final = TrafficKey(b"the scale run's traffic key, 32b")
"""The key the away pods are sealed with; hand it to `build_routes` as `traffic_keys`."""
NAMESPACE: Final = "inference"
CREATED: Final = "2026-12-01T00:00:00Z"
HOME_ENDPOINTS: Final = 2
AWAY_PODS: Final = 2
PODS_PER_NODE: Final = 50
"""Away pods per virtual node: a thousand Offloads' pods spread over forty nodes."""


@dataclasses.dataclass(frozen=True)
class RouteInputs:
    """What `build_routes` takes, as the router's mirrors hold it."""

    offloads: list[dict[str, Any]]
    endpoint_slices: list[dict[str, Any]]
    away_pods: list[dict[str, Any]]
    virtual_nodes: list[dict[str, Any]]

    def host(self, index: int) -> str:
        """The Host header Offload number `index` routes."""
        return host_of(index)


def host_of(index: int) -> str:
    return f"model-{index:05d}.inference.example.com"


def route_inputs(offloads: int, *, away_weight: int = 50) -> RouteInputs:
    """`offloads` Offloads with their home slices, away pods and the virtual nodes those run on."""
    if offloads < 0:
        raise ValueError(f"offloads must be at least 0, not {offloads}")
    pods = [away_pod(index, replica) for index in range(offloads) for replica in range(AWAY_PODS)]
    nodes = max(1, -(-len(pods) // PODS_PER_NODE))
    return RouteInputs(
        offloads=[offload(index, away_weight=away_weight) for index in range(offloads)],
        endpoint_slices=[home_slice(index) for index in range(offloads)],
        away_pods=pods,
        virtual_nodes=[virtual_node(index) for index in range(nodes)],
    )


def _uid(kind: str, *parts: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{'/'.join(str(part) for part in parts)}"))


def _metadata(kind: str, name: str, *parts: object, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": NAMESPACE,
        "uid": _uid(kind, *parts),
        "resourceVersion": str(1000 + sum(len(str(part)) for part in parts)),
        "creationTimestamp": CREATED,
        **extra,
    }


def _service(index: int) -> str:
    return f"model-{index:05d}"


def offload(index: int, *, away_weight: int = 50) -> dict[str, Any]:
    name = _service(index)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": _metadata("offload", name, index, generation=2, labels={"app": name}),
        "spec": {
            "home": {"deployment": name, "service": name},
            "placement": "away",
            "route": {"hosts": [host_of(index)], "pathPrefix": "/"},
            "traffic": {"dataPlane": "router"},
        },
        "status": {
            "phase": "Shifting",
            "awayWeight": away_weight,
            "observedGeneration": 2,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Shifting",
                    "message": f"{away_weight}% of requests go away",
                    "lastTransitionTime": CREATED,
                    "observedGeneration": 2,
                }
            ],
        },
    }


def home_slice(index: int) -> dict[str, Any]:
    service = _service(index)
    name = f"{service}-x7k2p"
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": _metadata(
            "slice",
            name,
            index,
            generateName=f"{service}-",
            labels={
                SERVICE_NAME_LABEL: service,
                MANAGED_BY_LABEL: ENDPOINTSLICE_CONTROLLER,
                "app": service,
            },
            annotations={"endpoints.kubernetes.io/last-change-trigger-time": CREATED},
            ownerReferences=[
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": service,
                    "uid": _uid("service", index),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        ),
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [
            {
                "addresses": [_home_address(index, replica)],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "nodeName": f"gpu-{(index + replica) % 200:03d}",
                "targetRef": {
                    "kind": "Pod",
                    "name": f"{service}-6d9f8-{replica}",
                    "namespace": NAMESPACE,
                    "uid": _uid("home-pod", index, replica),
                },
                "zone": "zone-a",
            }
            for replica in range(HOME_ENDPOINTS)
        ],
    }


def _home_address(index: int, replica: int) -> str:
    number = index * HOME_ENDPOINTS + replica
    return f"10.{64 + number // 65536}.{number // 256 % 256}.{number % 256}"


def away_address(index: int, replica: int) -> str:
    return f"https://{_service(index)}-{replica}.proxy.provider.example:443"


def away_pod(index: int, replica: int) -> dict[str, Any]:
    service = _service(index)
    name = f"{service}-away-{replica}"
    uid = _uid("away-pod", index, replica)
    address = away_address(index, replica)
    node = virtual_node_name((index * AWAY_PODS + replica) // PODS_PER_NODE)
    condition_times = {"lastProbeTime": None, "lastTransitionTime": CREATED}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **_metadata(
                "away-pod",
                name,
                index,
                replica,
                generateName=f"{service}-away-",
                labels={OFFLOAD_LABEL: service, "app": service, "pod-template-hash": "6d9f8"},
                annotations={"offload.vk-provider.dev/placement": "away"},
                ownerReferences=[
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": f"{service}-away-6d9f8",
                        "uid": _uid("replicaset", index),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            ),
            "uid": uid,
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "server",
                    "image": "vllm/vllm-openai:v0.6.3",
                    "args": ["--model", f"org/{service}", "--port", "8080"],
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "resources": {
                        "limits": {"nvidia.com/gpu": "1", "memory": "32Gi"},
                        "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"},
                    },
                    "readinessProbe": {
                        "httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"},
                        "periodSeconds": 5,
                        "timeoutSeconds": 1,
                        "successThreshold": 1,
                        "failureThreshold": 3,
                    },
                    "env": [
                        {"name": "HF_HOME", "value": "/models/cache"},
                        {"name": "VLLM_PORT", "value": "8080"},
                        {"name": "MODEL_NAME", "value": f"org/{service}"},
                    ],
                    "volumeMounts": [
                        {
                            "name": "kube-api-access-x7k2p",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "volumes": [
                {
                    "name": "kube-api-access-x7k2p",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                        }
                                    ]
                                }
                            },
                        ],
                    },
                }
            ],
            "securityContext": {},
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "enableServiceLinks": True,
        },
        "status": {
            "phase": "Running",
            "hostIP": "10.250.0.1",
            "podIP": "10.250.1.1",
            "podIPs": [{"ip": "10.250.1.1"}],
            "hostIPs": [{"ip": "10.250.0.1"}],
            "startTime": CREATED,
            "qosClass": "Burstable",
            "conditions": [
                {"type": "PodScheduled", "status": "True", **condition_times},
                {"type": "Initialized", "status": "True", **condition_times},
                {"type": "ContainersReady", "status": "True", **condition_times},
                {"type": "Ready", "status": "True", **condition_times},
                {
                    "type": TRAFFIC_ADDRESS_CONDITION,
                    "status": "True",
                    "reason": "Published",
                    "message": address,
                    **condition_times,
                },
                {
                    "type": TRAFFIC_SIGNATURE_CONDITION,
                    "status": "True",
                    "reason": "Published",
                    "message": seal(SCALE_KEY, uid=uid, address=address, marker=""),
                    **condition_times,
                },
            ],
            "containerStatuses": [
                {
                    "name": "server",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "image": "vllm/vllm-openai:v0.6.3",
                    "imageID": "",
                    "containerID": f"vk-provider://{uid}/server",
                    "lastState": {},
                    "state": {"running": {"startedAt": CREATED}},
                }
            ],
        },
    }


def virtual_node_name(index: int) -> str:
    return f"vk-away-{index:03d}"


def virtual_node(index: int) -> dict[str, Any]:
    name = virtual_node_name(index)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid("node", index),
            "resourceVersion": str(500 + index),
            "creationTimestamp": CREATED,
            "labels": {
                "type": "virtual-kubelet",
                "kubernetes.io/role": "agent",
                "kubernetes.io/hostname": name,
                VIRTUAL_NODE_LABEL: VIRTUAL_NODE_LABEL_VALUE,
            },
        },
        "spec": {"taints": [{"key": "virtual-kubelet.io/provider", "value": "mock", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "1000", "memory": "4Ti", "pods": "1000", "nvidia.com/gpu": "64"},
            "allocatable": {"cpu": "1000", "memory": "4Ti", "pods": "1000", "nvidia.com/gpu": "64"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "the provider answers",
                    "lastHeartbeatTime": CREATED,
                    "lastTransitionTime": CREATED,
                }
            ],
            "nodeInfo": {"kubeletVersion": "v1.35.0-vk-provider", "operatingSystem": "linux"},
        },
    }
