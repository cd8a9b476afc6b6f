"""What the serving-certificate tests read off a node: its ServingCertificate condition, its Events,
its pending CSR and the certificate its kubelet port presents; and a pod that logs."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from cryptography import x509
from kubernetes_asyncio import client

from tests.integration.waiting import wait_for
from vk_provider.kit.kube import KubeApi
from vk_provider.kubelet.certificates import CSR_PATH

TALKER_SCRIPT = 'for i in $(seq 1 5); do echo "line $i"; done; exec sleep 3600'


def talker_pod(node: str) -> dict[str, Any]:
    container = {"name": "c1", "image": "local", "command": ["sh", "-c", TALKER_SCRIPT]}
    return {"metadata": {"name": "talker"}, "spec": {"nodeName": node, "containers": [container]}}


async def run_talker(core: client.CoreV1Api, namespace: str, node: str) -> None:
    await core.create_namespaced_pod(namespace, talker_pod(node))

    async def running() -> bool:
        pod = await core.read_namespaced_pod("talker", namespace)
        return pod.status.phase == "Running"

    await wait_for(running, timeout_seconds=60, what="the talker to run")


async def certificate_condition(core: client.CoreV1Api, node: str) -> client.V1NodeCondition | None:
    status = (await core.read_node(node)).status
    return next((c for c in status.conditions or () if c.type == "ServingCertificate"), None)


async def wait_for_condition(
    core: client.CoreV1Api, node: str, reason: str, *, timeout_seconds: float = 60
) -> client.V1NodeCondition:
    async def reached() -> client.V1NodeCondition | None:
        condition = await certificate_condition(core, node)
        if condition is None or condition.reason != reason:
            raise AssertionError(f"the ServingCertificate condition is {condition}")
        return condition

    return await wait_for(reached, timeout_seconds=timeout_seconds, what=f"ServingCertificate {reason}")


async def wait_for_event(
    core: client.CoreV1Api, node: str, reason: str, *, timeout_seconds: float = 30
) -> client.CoreV1Event:
    async def found() -> client.CoreV1Event | None:
        selector = f"involvedObject.name={node},reason={reason}"
        listing = await core.list_event_for_all_namespaces(field_selector=selector)
        return listing.items[0] if listing.items else None

    return await wait_for(found, timeout_seconds=timeout_seconds, what=f"the node's {reason} Event")


async def csrs_of(admin: KubeApi, node: str) -> list[dict[str, Any]]:
    listing = await admin.get(CSR_PATH)
    return [item for item in listing["items"] if item["metadata"]["name"].startswith(f"{node}-serving-")]


async def delete_csrs_of(admin: KubeApi, node: str) -> None:
    for csr in await csrs_of(admin, node):
        await admin.delete(f"{CSR_PATH}/{csr['metadata']['name']}")


async def served_certificate(host: str, port: int) -> x509.Certificate:
    """The certificate the kubelet port presents, read without verifying it."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    _reader, writer = await asyncio.open_connection(host, port, ssl=context)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()
        await writer.wait_closed()
