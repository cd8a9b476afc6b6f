"""Our AdmissionChecks on the apiserver: which policy serves each, their `Active` condition, and the
Workloads' check states.

Once per policy pass, `refresh` lists the AdmissionChecks naming our controller and the Workloads,
works out which OffloadPolicy serves each check, and keeps each check's `Active` condition true, or
false with the reason (it names no policy, a policy that does not exist or cannot be read, or two).
A check names its policy through `spec.parameters` (`offload.vk-provider.dev`, `OffloadPolicy`, name)
or by being listed in exactly one policy's `spec.admissionChecks`.

`demand` gives the policy its Workload gangs, and `settle` writes the verdicts of
`verdict.judge`: our entry of `status.admissionChecks`, by server-side apply as our own field manager
(Kueue owns the other entries), plus an Event on the Workload. Everything is read back from the
cluster on every pass: a restarted controller continues where the last one stopped, and Kueue resetting
a check to Pending (after a Retry, an eviction, its own restart) is simply judged again.

A cluster without Kueue's API is no error: no checks, no demand, said once in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from vk_provider._kube.events import EventRecorder, EventType, InvolvedObject
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.kit.timestamps import format_timestamp
from vk_provider.offload.status import set_condition
from vk_provider.policy.admission.names import (
    CONTROLLER_NAME,
    FIELD_MANAGER,
    KUEUE_API_VERSION,
    PARAMETERS_API_GROUP,
    PARAMETERS_KIND,
    PENDING,
    READY,
    RETRY,
    admission_checks_path,
    queues_path,
    workloads_path,
)
from vk_provider.policy.admission.verdict import Verdict, demand_gangs, judge, queued_gangs
from vk_provider.policy.admission.workload import WorkloadView, read_workload
from vk_provider.policy.metrics import PolicyMetrics
from vk_provider.policy.model import Gang, Observed
from vk_provider.policy.pods import pod_gpus
from vk_provider.policy.signals import PodGroupSource
from vk_provider.policy.spec import InvalidPolicy, PolicySpec, parse_policy
from vk_provider.policy.waiting import Wait

logger = logging.getLogger(__name__)

APPLY_PATCH = "application/apply-patch+yaml"
EVENT_REASONS = {READY: "AdmissionCheckReady", RETRY: "AdmissionCheckRetry"}


def resolve(check: RawObject, policies: Mapping[str, RawObject]) -> tuple[str | None, str, str]:
    """The policy serving `check`, or None with the reason and message of `Active=False`."""
    name = str(check["metadata"].get("name", ""))
    parameters = (check.get("spec") or {}).get("parameters")
    if parameters:
        if not isinstance(parameters, Mapping) or (
            parameters.get("apiGroup"),
            parameters.get("kind"),
        ) != (PARAMETERS_API_GROUP, PARAMETERS_KIND):
            return (
                None,
                "InvalidParameters",
                f"spec.parameters must name an {PARAMETERS_API_GROUP} {PARAMETERS_KIND}, not {parameters!r}",
            )
        wanted = str(parameters.get("name", ""))
        if wanted not in policies:
            return None, "UnknownPolicy", f"no OffloadPolicy named {wanted!r}"
        return wanted, "", ""
    listing = sorted(
        policy_name
        for policy_name, raw in policies.items()
        if name in ((raw.get("spec") or {}).get("admissionChecks") or ())
    )
    if not listing:
        return (
            None,
            "UnknownPolicy",
            f"no OffloadPolicy lists {name!r} in spec.admissionChecks, and spec.parameters names none",
        )
    if len(listing) > 1:
        return None, "AmbiguousPolicy", f"several OffloadPolicies list {name!r}: {', '.join(listing)}"
    return listing[0], "", ""


class AdmissionChecks:
    def __init__(self, api: KubeApi, events: EventRecorder, *, metrics: PolicyMetrics | None = None) -> None:
        self._api = api
        self._events = events
        self._metrics = metrics
        self._served: dict[str, list[str]] = {}
        """Policy name -> the checks it serves (Active ones)."""
        self._workloads: list[RawObject] = []
        self._unavailable: str | None = None
        self._written: dict[str, Any] = {}
        """Check name -> the conditions we last wrote (no write when unchanged)."""
        self._queue_checks: dict[tuple[str, str], set[str]] = {}
        """(namespace, LocalQueue) -> the AdmissionChecks of its ClusterQueue."""
        self._queues_unreadable: str | None = None

    async def refresh(self, policies: Sequence[RawObject], now: datetime) -> None:
        try:
            listing = await self._api.get(admission_checks_path())
            workloads = await self._api.get(workloads_path()) if listing.get("items") else {}
        except KubeApiError as error:
            if not (error.not_found or error.status == 403):
                raise
            why = "not served" if error.not_found else "forbidden"
            reason = f"no Kueue admission checks: {KUEUE_API_VERSION} is {why}"
            if reason != self._unavailable:
                logger.info("%s", reason)
            self._unavailable = reason
            self._served, self._workloads = {}, []
            return
        self._unavailable = None
        by_name = {str(raw["metadata"]["name"]): raw for raw in policies}
        served: dict[str, list[str]] = {}
        for check in listing.get("items") or ():
            if (check.get("spec") or {}).get("controllerName") != CONTROLLER_NAME:
                continue
            policy_name, reason, message = resolve(check, by_name)
            if policy_name is not None:
                try:
                    parse_policy(by_name[policy_name])
                except InvalidPolicy as error:
                    reason, message = "InvalidPolicy", f"OffloadPolicy {policy_name} is invalid: {error}"
                else:
                    served.setdefault(policy_name, []).append(str(check["metadata"]["name"]))
                    if self._metrics is not None:
                        self._metrics.check_served(policy_name, str(check["metadata"]["name"]))
            await self._set_active(check, now, policy_name if not reason else None, reason, message)
        self._served = served
        self._workloads = list(workloads.get("items") or ())
        self._queue_checks = await self._read_queues() if served else {}

    async def _read_queues(self) -> dict[tuple[str, str], set[str]]:
        """Which AdmissionChecks each LocalQueue's ClusterQueue lists: how a Workload queued before its
        quota is known to be heading for one of our checks. Unreadable queues (an older RBAC): none,
        said once in the log; the Workloads still count once they reach the check."""
        try:
            cluster_queues = await self._api.get(queues_path("clusterqueues"))
            local_queues = await self._api.get(queues_path("localqueues"))
        except KubeApiError as error:
            if not (error.not_found or error.status == 403):
                raise
            reason = (
                f"Kueue's queues cannot be read ({error.message}): Workloads count once quota is reserved"
            )
            if reason != self._queues_unreadable:
                logger.info("%s", reason)
            self._queues_unreadable = reason
            return {}
        self._queues_unreadable = None
        checks_of_cluster = {
            str(queue["metadata"]["name"]): cluster_queue_checks(queue)
            for queue in cluster_queues.get("items") or ()
        }
        return {
            (
                str(queue["metadata"].get("namespace", "")),
                str(queue["metadata"]["name"]),
            ): checks_of_cluster.get(str((queue.get("spec") or {}).get("clusterQueue", "")), set())
            for queue in local_queues.get("items") or ()
        }

    async def _set_active(
        self, check: RawObject, now: datetime, policy: str | None, reason: str, message: str
    ) -> None:
        name = str(check["metadata"]["name"])
        generation = int(check["metadata"].get("generation") or 0)
        previous = self._written.get(name) or (check.get("status") or {}).get("conditions") or ()
        if policy is not None:
            conditions = set_condition(
                previous, "Active", "True", "Active", f"served by OffloadPolicy {policy}",
                now=now, generation=generation,
            )  # fmt: skip
        else:
            conditions = set_condition(
                previous, "Active", "False", reason, message, now=now, generation=generation
            )
        if conditions == list((check.get("status") or {}).get("conditions") or ()):
            self._written[name] = conditions
            return
        if conditions == self._written.get(name):
            return
        await self._api.request(
            "PATCH",
            admission_checks_path(name, status=True),
            query={"fieldManager": FIELD_MANAGER},
            body={"status": {"conditions": conditions}},
            content_type=MERGE_PATCH,
        )
        self._written[name] = conditions
        if policy is None:
            involved = InvolvedObject(
                "AdmissionCheck",
                name,
                "",
                str(check["metadata"].get("uid", "")),
                api_version=KUEUE_API_VERSION,
            )
            self._events.record(involved, "Warning", reason, message)

    def checks_of(self, policy: PolicySpec) -> list[str]:
        return list(self._served.get(policy.name, ()))

    def _views(self, policy: PolicySpec) -> list[WorkloadView]:
        return [read_workload(raw, policy.resource) for raw in self._workloads]

    async def demand(self, policy: PolicySpec) -> list[Gang]:
        checks = self.checks_of(policy)
        return demand_gangs(checks, self._views(policy)) if checks else []

    def queued(self, policy: PolicySpec) -> list[Gang]:
        """Workloads queued for one of the policy's checks, not yet given quota: foreseen demand."""
        checks = set(self.checks_of(policy))
        if not checks:
            return []
        queues = {queue for queue, listed in self._queue_checks.items() if listed & checks}
        return queued_gangs(self._views(policy), queues)

    async def settle(
        self,
        policy: PolicySpec,
        observed: Observed,
        now: datetime,
        *,
        waits: Mapping[str, Wait] | None = None,
    ) -> list[Verdict]:
        checks = self.checks_of(policy)
        if not checks:
            return []
        views = self._views(policy)
        promised = await self._promised(policy, checks, views)
        verdicts = judge(now, policy, checks, views, observed, promised=promised, waits=waits)
        for verdict in verdicts:
            written = await self._write(verdict, now)
            if written and self._metrics is not None and verdict.state != PENDING:
                self._metrics.verdict(policy.name, verdict.check, verdict.state)
        return verdicts

    async def _promised(self, policy: PolicySpec, checks: list[str], views: list[WorkloadView]) -> int:
        """GPUs of Workloads we let through whose pods do not hold them yet: between our Ready and the
        scheduler placing the pods, the free GPUs are already theirs. Counted for Workloads of batch
        Jobs (their pods are found by the Job's name); others are trusted to start at once."""
        promised = 0
        for view in views:
            if view.finished or view.job is None or view.gpus <= 0:
                continue
            if not any(view.state_of(check) == READY for check in checks):
                continue
            listing = await self._api.get(
                resource_path("v1", "pods", namespace=view.namespace),
                query={"labelSelector": f"batch.kubernetes.io/job-name={view.job}"},
            )
            held = sum(
                pod_gpus(pod, policy.resource)
                for pod in listing.get("items") or ()
                if (pod.get("spec") or {}).get("nodeName")
                or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            )
            promised += max(0, view.gpus - held)
        return promised

    async def _write(self, verdict: Verdict, now: datetime) -> bool:
        """Write the verdict on its Workload; False when the Workload is gone or was replaced."""
        workload = verdict.workload
        # A new message while still Pending is no transition: the time Kueue and `judge` count from stays.
        since = workload.checks[verdict.check].since if verdict.state == PENDING else None
        entry: dict[str, Any] = {
            "name": verdict.check,
            "state": verdict.state,
            "message": verdict.message,
            "lastTransitionTime": format_timestamp(since or now),
        }
        if verdict.pod_set_updates:
            entry["podSetUpdates"] = list(verdict.pod_set_updates)
        if verdict.requeue_after_seconds is not None:
            entry["requeueAfterSeconds"] = verdict.requeue_after_seconds
        body = {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "Workload",
            "metadata": {"name": workload.name, "namespace": workload.namespace, "uid": workload.uid},
            "status": {"admissionChecks": [entry]},
        }
        try:
            await self._api.request(
                "PATCH",
                workloads_path(workload.namespace, workload.name, status=True),
                query={"fieldManager": FIELD_MANAGER, "force": "true"},
                body=body,
                content_type=APPLY_PATCH,
            )
        except KubeApiError as error:
            if error.not_found or error.conflict:  # deleted, or replaced (uid): next pass reads it again
                return False
            raise
        if verdict.state == PENDING:
            return True  # the stage of a wait is in the message; an Event per stage would be noise
        involved = InvolvedObject(
            "Workload", workload.name, workload.namespace, workload.uid, api_version=KUEUE_API_VERSION
        )
        kind: EventType = "Normal" if verdict.state == READY else "Warning"
        reason = EVENT_REASONS.get(verdict.state, "AdmissionCheckRejected")
        self._events.record(involved, kind, reason, f"{verdict.check}: {verdict.message}")
        return True


def cluster_queue_checks(queue: RawObject) -> set[str]:
    """The AdmissionChecks a ClusterQueue lists (`spec.admissionChecks`, or its strategy's)."""
    spec = queue.get("spec") or {}
    names = {str(name) for name in spec.get("admissionChecks") or () if isinstance(name, str)}
    strategy = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or ()
    names |= {str(rule["name"]) for rule in strategy if isinstance(rule, Mapping) and rule.get("name")}
    return names


class WithWorkloads:
    """The policy's gang sources: native PodGroups, and Workloads our checks hold or let through."""

    def __init__(self, podgroups: PodGroupSource, checks: AdmissionChecks) -> None:
        self._podgroups = podgroups
        self._checks = checks

    async def demand(self, policy: PolicySpec) -> list[Gang]:
        return [*await self._podgroups.demand(policy), *await self._checks.demand(policy)]

    def unavailable(self) -> str | None:
        return self._podgroups.unavailable()
