"""What the rig serves and schedules: N offloaded services, the filler pods, the policy, training.

Each service is the smallest the controller and router handle as they would a real one: a Deployment
of `replicas` pods (each requesting one GPU, on the pool's daemons), a Service, and an Offload routing
Host svc-<i>.<domain> to it, away on the away daemons, labelled so the rig's OffloadPolicy selects it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from vk_devtools.scale.fleet import GPU, RUNS_PODS_LABEL
from vk_provider.kit.kube import KubeApi, KubeApiError

API = "/apis/offload.vk-provider.dev/v1alpha1"
RUN_LABEL = "scale.vk-provider.dev/run"
PRIORITY_CLASS = "training"
IMAGE = "vk-provider/scale-backend"
"""What the mock provider is asked to run (it runs nothing: the shared backend answers)."""
STRATEGY: dict[str, Any] = {
    "toAwaySteps": [50, 100],
    "toHomeSteps": [100],
    "stepIntervalSeconds": 2,
    "gates": {"minRequestsPerInterval": 0},
    "progressDeadlineSeconds": 300,
}
"""Two steps away, 2 s each, judged on whatever traffic there is: short, so a wave is mostly the
control plane's own time."""
POLICY_TIMING = {
    "flipOutAfterSeconds": 0,
    "flipBackAfterSeconds": 3600,
    "minAwaySeconds": 5,
    "minHomeSeconds": 5,
    "maxFlipsPerHour": 4,
}
"""Flip out as soon as training waits (the decision time is then the policy's own), never back
during a run."""


def service_name(index: int) -> str:
    return f"svc-{index:04d}"


def host_of(index: int, domain: str) -> str:
    return f"{service_name(index)}.{domain}"


async def create_ignoring_conflict(api: KubeApi, path: str, body: Mapping[str, Any]) -> None:
    try:
        await api.create(path, body)
    except KubeApiError as error:
        if error.status != 409:
            raise


async def create_service(
    api: KubeApi,
    namespace: str,
    index: int,
    *,
    tag: str,
    domain: str,
    pool_label: Mapping[str, str],
    away_label: Mapping[str, str],
    backend_port: int,
    replicas: int,
) -> None:
    """Deployment, Service and Offload of service `index`."""
    name = service_name(index)
    labels = {"app": name}
    pod = {
        "metadata": {"labels": labels},
        "spec": {
            "nodeSelector": {**pool_label, RUNS_PODS_LABEL: "true"},
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "server",
                    "image": IMAGE,
                    "ports": [{"name": "http", "containerPort": backend_port}],
                    "resources": {"limits": {GPU: "1"}},
                }
            ],
        },
    }
    await create_ignoring_conflict(
        api,
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        {
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": pod},
        },
    )
    await create_ignoring_conflict(
        api,
        f"/api/v1/namespaces/{namespace}/services",
        {
            "metadata": {"name": name},
            # Headless: the dev plane's Service range is a /24, and nothing here routes cluster IPs
            # (the router reads EndpointSlices), so 1,000 Services need no 1,000 addresses.
            "spec": {
                "clusterIP": "None",
                "selector": labels,
                "ports": [{"name": "http", "port": 80, "targetPort": backend_port}],
            },
        },
    )
    await create_ignoring_conflict(
        api,
        f"{API}/namespaces/{namespace}/offloads",
        {
            "apiVersion": "offload.vk-provider.dev/v1alpha1",
            "kind": "Offload",
            "metadata": {"name": name, "labels": {RUN_LABEL: tag}},
            "spec": {
                "home": {"deployment": name, "service": name},
                "placement": "home",
                "route": {"hosts": [host_of(index, domain)]},
                "away": {"nodeSelector": dict(away_label)},
                "strategy": STRATEGY,
            },
        },
    )


ROLE_LABEL = "scale.vk-provider.dev/role"
"""On the rig's bound pods: `filler` (run by a filler daemon) or `training` (on a registered node)."""


def filler_pod(name: str, node: str, *, priority_class: str | None = None, gpus: int = 0) -> dict[str, Any]:
    """A pod bound to `node` by name (no scheduling): the cluster's other workloads; with a
    `priority_class`, a training pod."""
    container: dict[str, Any] = {"name": "main", "image": IMAGE}
    if gpus:
        container["resources"] = {"limits": {GPU: str(gpus)}}
    spec: dict[str, Any] = {
        "nodeName": node,
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "containers": [container],
        "tolerations": [{"operator": "Exists"}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    role = "training" if priority_class else "filler"
    return {"metadata": {"name": name, "labels": {ROLE_LABEL: role}}, "spec": spec}


async def ensure_namespace(api: KubeApi, name: str) -> None:
    await create_ignoring_conflict(api, "/api/v1/namespaces", {"metadata": {"name": name}})

    async def has_default_account() -> bool:
        with contextlib.suppress(KubeApiError):
            await api.get(f"/api/v1/namespaces/{name}/serviceaccounts/default")
            return True
        return False

    for _ in range(240):
        if await has_default_account():
            return
        await asyncio.sleep(0.25)  # polling for the account (noqa: sleep-ok)
    raise TimeoutError(f"namespace {name} has no default ServiceAccount after 60 s")


async def ensure_priority_class(api: KubeApi) -> None:
    await create_ignoring_conflict(
        api,
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": PRIORITY_CLASS},
            "value": 100000,
            "preemptionPolicy": "Never",
            "description": "training: ahead of inference, never preempting it (the policy moves it)",
        },
    )


def policy(name: str, tag: str, pool_label: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "offload.vk-provider.dev/v1alpha1",
        "kind": "OffloadPolicy",
        "metadata": {"name": name},
        "spec": {
            "offloads": {"selector": {"matchLabels": {RUN_LABEL: tag}}},
            "homePool": {"nodeSelector": {"matchLabels": dict(pool_label)}},
            "timing": POLICY_TIMING,
        },
    }


def training_job(name: str, pool_label: Mapping[str, str]) -> dict[str, Any]:
    """One pod of one GPU at the training priority, on the pool: with every GPU taken, it waits."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "priorityClassName": PRIORITY_CLASS,
                    "nodeSelector": dict(pool_label),
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "train", "image": IMAGE, "resources": {"limits": {GPU: "1"}}}],
                }
            },
        },
    }
