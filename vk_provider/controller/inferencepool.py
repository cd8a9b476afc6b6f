"""The `inferencepool` data plane: Envoys driven by `vk-provider xds`, whose home side is an InferencePool.

Weights, "applied" and the gates are the `envoy` plane's (`EnvoyFleet`): the xDS server says which
weight every Envoy has ACKed, each Envoy's statistics count each side. What this plane adds:

- `check`: the InferencePool the Offload names exists, in the Offload's namespace, names its
  endpoint picker, and its pods and port are the home Service's (the Envoys' home endpoints are the
  Service's: a pick outside them would fall back, unsaid, to Envoy's own balancing); otherwise the
  Offload is not Ready (a condition and an Event) and nothing moves. Pools and Services are read
  from the controller's mirrors (`vk_provider.controller.reads`), not asked of the apiserver per pass;
- a step waits while the pool's picker does not answer: every home request asks it which pod to go
  to, so moving weight while it is stopped would move requests onto a side that waits (FailClose) or
  is placed without it (FailOpen). The picker's addresses are the ones the xDS server gave the Envoys
  (its `/-/status`); each is asked for a TLS handshake, which a live picker answers at once.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping
from typing import Any

from vk_provider.controller.dataplanes import EnvoyFleet, route_entry
from vk_provider.controller.httproutes import RouteProblem
from vk_provider.controller.routers import RouterDirectory, RouterUnreachable, RouteView
from vk_provider.kit.kube import KubeApi, KubeApiError, resource_path
from vk_provider.offload.inferencepools import inference_pool_path
from vk_provider.offload.spec import OffloadSpec, PoolRef


class PickerUnavailable(RouterUnreachable):
    """The pool's endpoint picker cannot place home requests now: the step waits, and says so."""

    waiting_reason = "WaitingForEndpointPicker"


PICKER_ANSWER_SECONDS = 3.0
"""How long a picker may take to answer a TLS handshake before it counts as not answering."""


class InferencePools(EnvoyFleet):
    name = "inferencepool"

    def __init__(
        self,
        api: KubeApi,
        xds_url: str,
        admins: RouterDirectory,
        *,
        expected_count: int | None = None,
        strays_seen: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(xds_url, admins, expected_count=expected_count, strays_seen=strays_seen)
        self._api = api

    async def check(self, spec: OffloadSpec) -> None:
        pool = _pool_of(spec)
        if pool.namespace != spec.namespace:
            raise RouteProblem(
                "InferencePoolInOtherNamespace",
                f'InferencePool "{pool.name}" is in namespace {pool.namespace}, not the Offload\'s '
                f"({spec.namespace}): a pool's pods are the home side of the Offload's Service, so they "
                "must be in its namespace; nothing is moved until spec.traffic.inferencePool names one there",
            )
        try:
            found = await self._api.get(inference_pool_path(pool.namespace, pool.name))
        except KubeApiError as error:
            if error.not_found:
                raise RouteProblem(
                    "InferencePoolNotFound",
                    f'InferencePool "{pool.name}" not found in {pool.namespace} (or the Gateway API '
                    "Inference Extension's CRDs are not installed); nothing is moved until it exists",
                ) from None
            raise RouterUnreachable(f'reading InferencePool "{pool.name}": {error}') from None
        reference = (found.get("spec") or {}).get("endpointPickerRef") or {}
        if not reference.get("name"):
            raise RouteProblem(
                "EndpointPickerRefMissing",
                f'InferencePool "{pool.name}" names no endpoint picker (spec.endpointPickerRef); '
                "nothing is moved until it does",
            )
        try:
            service = await self._api.get(
                resource_path("v1", "services", namespace=spec.namespace, name=spec.home_service)
            )
        except KubeApiError as error:
            raise RouterUnreachable(f'reading Service "{spec.home_service}": {error}') from None
        mismatch = pool_mismatch(found, service)
        if mismatch:
            raise RouteProblem(
                "InferencePoolNotHomeService",
                f'InferencePool "{pool.name}" {mismatch} (the Envoys send home requests to the Service\'s '
                "endpoints, so a pod the picker chose outside them would not be reached); nothing is moved "
                "until they agree",
            )

    async def views(self, spec: OffloadSpec) -> list[RouteView]:
        status = await self._status()
        views = await self._views_of(spec, status)
        await _picker_answers(_pool_of(spec), (route_entry(status, spec) or {}).get("picker"))
        return views


def pool_mismatch(pool: Mapping[str, Any], service: Mapping[str, Any]) -> str:
    """How the pool's pods or port differ from the home Service's ('' when they agree): the pool must
    select only pods the Service selects (its labels a superset of the Service's selector), and its
    target ports must include the port the Service sends to (when the Service names it by number)."""
    pool_spec = pool.get("spec") or {}
    service_spec = service.get("spec") or {}
    labels = (pool_spec.get("selector") or {}).get("matchLabels") or {}
    selector = service_spec.get("selector") or {}
    differing = sorted(key for key, value in selector.items() if labels.get(key) != value)
    if differing:
        wanted = ", ".join(f"{key}={selector[key]}" for key in differing)
        return f"selects pods the home Service does not (its selector lacks {wanted})"
    pool_ports = {port.get("number") for port in pool_spec.get("targetPorts") or ()}
    service_ports = [port.get("targetPort", port.get("port")) for port in service_spec.get("ports") or ()]
    numbered = [port for port in service_ports if isinstance(port, int)]
    if numbered and not pool_ports & set(numbered):
        return (
            f"targets port(s) {sorted(p for p in pool_ports if p is not None)}, not the home Service's "
            f"{sorted(numbered)}"
        )
    return ""


def _pool_of(spec: OffloadSpec) -> PoolRef:
    if spec.inference_pool is None:  # parse_offload sets it for every inferencepool Offload
        raise RouteProblem("InvalidSpec", "spec.traffic.inferencePool is missing")
    return spec.inference_pool


async def _picker_answers(pool: PoolRef, picker: Mapping[str, Any] | None) -> None:
    """PickerUnavailable, saying why, unless one of the pool's picker addresses answers."""
    named = f"InferencePool {pool.namespace}/{pool.name}"
    if not isinstance(picker, Mapping):
        raise PickerUnavailable(f"the xDS server gives the Envoys no endpoint picker for {named} yet")
    if picker.get("problem"):
        raise PickerUnavailable(f"the Envoys have no endpoint picker to ask: {picker['problem']}")
    addresses = [str(address) for address in picker.get("addresses") or ()]
    if not addresses:
        raise PickerUnavailable(
            f"the endpoint picker of {named} has no ready endpoint: home requests cannot be placed"
        )
    silences = await asyncio.gather(*(_silence(address) for address in addresses))
    if all(silences):
        said = "; ".join(
            f"{address}: {silence}" for address, silence in zip(addresses, silences, strict=True)
        )
        raise PickerUnavailable(
            f"the endpoint picker of {named} does not answer ({said}); every home request waits on it, "
            "so the step waits until it answers"
        )


async def _silence(address: str) -> str:
    """'' when the picker at `ip:port` answers a TLS handshake (or refuses it: that is an answer too),
    else what happened."""
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # it signs its own certificate; liveness is all we ask
    try:
        async with asyncio.timeout(PICKER_ANSWER_SECONDS):
            _, writer = await asyncio.open_connection(host.strip("[]"), int(port), ssl=context)
    except ssl.SSLError:
        return ""
    except TimeoutError:
        return f"no answer within {PICKER_ANSWER_SECONDS:g} s"
    except OSError as error:
        return error.strerror or type(error).__name__
    writer.close()
    return ""
