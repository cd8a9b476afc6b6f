"""The layer a provider's tests need on top of moto's SageMaker: SageMaker's states, refusals and faults.

moto's SageMaker stores models, endpoint configurations, endpoints and their tags, and validates
much (a missing model or configuration, instance types), but (research note C.10, checked against
moto 5.2.5):

- an endpoint is `InService` the moment it is created, and gone the moment it is deleted;
- it never reports `Failed` (nor any status other than InService, and Updating inside one call);
- it has no UpdateEndpoint (moto answers 500: "not implemented"), and lists every model whatever
  ListModels' NameContains;
- creating a model, configuration or endpoint whose name exists silently replaces it, where SageMaker
  answers `ValidationException: Cannot create already existing ...`;
- deleting an endpoint that is Creating or Updating succeeds, where SageMaker answers
  `ValidationException: Cannot update in-progress endpoint ...`;
- it never throttles, fails or loses an answer, knows no quota or capacity, and runs no container;
- ListTags, AddTags and DeleteTags on a resource it does not have (an endpoint just deleted) answer
  HTTP 500 (an AttributeError inside moto), where SageMaker answers
  `ValidationException: Could not find ...`: the resource is gone.

`SageMakerLayer` adds these, at the boto3 client level: installed on a client (the sagemaker
provider's `client_hook`), it registers botocore `before-call` and `after-call` handlers that answer
for moto (an error, a refusal moto does not make, a deletion that takes time) or rewrite its answers
(EndpointStatus, EndpointConfigName and FailureReason in DescribeEndpoint and ListEndpoints). It answers
the tagging calls on models, endpoint configurations and endpoints itself, under its lock (so that a
deletion it carries out cannot come between finding the resource and reading its tags).

Its statuses follow its clock and its `profile` (`profile.FAST` by default: no time at all;
`profile.REALISTIC`: SageMaker's, with sources). An endpoint is Creating for `provisioning_seconds` and
then its container's `loading_seconds` (`creating_seconds` is their sum), then InService; or Failed, with
SageMaker's FailureReason, when its container never answers `/ping` within the health-check timeout, or
when AWS is short of capacity for its instance type. It is Updating for `updating_seconds` after an
UpdateEndpoint was accepted (the layer answers UpdateEndpoint itself, with SageMaker's refusals), and
Deleting for `deleting_seconds` after its deletion was accepted (then it is deleted in moto); `force`
pins a status (Failed with a reason, Updating, ...). An update ends on its new configuration, or, after
`fail_next_update`, back InService on the old one with a FailureReason, as SageMaker rolls back a failed
update. Faults (`fail`, `lose_answer`, `start_outage`) are served in the order they were added. `calls`
counts the operations the layer saw, by name.

Scripting, all deterministic: `set_quota(instance_type, n)` (CreateEndpoint and UpdateEndpoint refused
with ResourceLimitExceeded beyond it), `set_capacity(instance_type, n)` (the endpoint Failed for
InsufficientInstanceCapacity beyond it; an update rolled back, InService on its old configuration with
that FailureReason), both counting the instances the layer's endpoints hold (an update's new fleet on
top of the old, as SageMaker's blue/green update provisions it before it lets the old one go), and
`script_container(image, Container(...))` (how long the image's server loads, whether it ever answers
`/ping`, what it answers to invocations). `install_runtime` serves
InvokeEndpoint on a sagemaker-runtime client (`runtime`: ModelError 424, the 60 s limit); `invoke` gives
the same answer to anyone serving it over HTTP.

Instance types moto 5.2.5 does not know (ml.g5, ml.g6, ml.p4d, ml.p5) are accepted: see `capacity`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from botocore import xform_name
from botocore.awsrequest import AWSResponse
from botocore.client import BaseClient
from botocore.exceptions import ClientError, ReadTimeoutError

from vk_devtools.standins.sagemaker import wire
from vk_devtools.standins.sagemaker.capacity import Fleet, InstanceLimits
from vk_devtools.standins.sagemaker.faultqueue import HOLD_LIMIT_SECONDS, Fault, FaultQueue
from vk_devtools.standins.sagemaker.profile import CAPACITY_FAILURE_REASON, FAST, Profile
from vk_devtools.standins.sagemaker.records import TAGGING, Records
from vk_devtools.standins.sagemaker.runtime import ContainerAnswer, Invocation, invoke
from vk_devtools.standins.sagemaker.server import ACCOUNT_ID, MotoSageMaker
from vk_devtools.standins.sagemaker.startup import Container, Startup, plan_startup

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

IN_PROGRESS = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
SERVING = frozenset({"InService", "Updating", "SystemUpdating", "RollingBack", "UpdateRollbackFailed"})
"""The statuses in which an endpoint's containers answer invocations."""


@dataclasses.dataclass(frozen=True, slots=True)
class EndpointUpdate:
    """An UpdateEndpoint the layer accepted: the endpoint is Updating until `until` (the layer's clock)."""

    config_name: str
    until: float
    failure: str | None = None
    """Roll back with this FailureReason instead of moving onto `config_name`."""


class SageMakerLayer:
    """What moto's SageMaker lacks, added to the boto3 clients it is installed on (see the module)."""

    def __init__(
        self,
        moto: MotoSageMaker,
        *,
        profile: Profile = FAST,
        creating_seconds: float | None = None,
        deleting_seconds: float | None = None,
        updating_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`profile` sets the times; `creating_seconds` and the others, when given, replace its own."""
        self.moto = moto
        self.profile = profile
        self.provisioning_seconds = profile.provisioning_seconds
        self.loading_seconds = profile.loading_seconds
        if creating_seconds is not None:
            self.creating_seconds = creating_seconds
        self.deleting_seconds = profile.deleting_seconds if deleting_seconds is None else deleting_seconds
        self.updating_seconds = profile.updating_seconds if updating_seconds is None else updating_seconds
        self.limits = InstanceLimits()
        self._clock = clock
        self._raw = moto.client()
        self._lock = threading.RLock()
        self._startups: dict[str, Startup] = {}
        self._creating: dict[str, str] = {}
        """Endpoint -> the configuration of the CreateEndpoint on its way to moto."""
        self._created_with: dict[str, str] = {}
        """Endpoint -> the configuration it was created with (its instances count against the limits)."""
        self._records = Records(self._raw)
        self._containers: dict[str, Container] = {}
        self._deleting_until: dict[str, float] = {}
        self._forced: dict[str, tuple[str, str | None]] = {}
        self._updating: dict[str, EndpointUpdate] = {}
        self._configs: dict[str, str] = {}
        """Endpoint -> the configuration it serves after an update (moto's record keeps the first)."""
        self._update_failures: dict[str, str] = {}
        """Endpoint -> the FailureReason of its last update, which was rolled back."""
        self._next_update_failure: str | None = None
        self._faults = FaultQueue()
        self.calls: collections.Counter[str] = collections.Counter()

    @property
    def creating_seconds(self) -> float:
        """How long a healthy endpoint is Creating (provisioning, then its container's loading)."""
        return self.provisioning_seconds + self.loading_seconds

    @creating_seconds.setter
    def creating_seconds(self, seconds: float) -> None:
        """All of it before the container starts, so no health-check timeout cuts it short."""
        self.provisioning_seconds = seconds
        self.loading_seconds = 0.0

    # -- installing ----------------------------------------------------------------------------

    def install(self, client: SageMakerClient) -> None:
        """Serve `client`'s calls through the layer (use as the provider's `client_hook`)."""
        # A before-call handler may answer for the service; botocore's stubs type handlers as returning None.
        before = cast("Callable[..., None]", self._before_call)
        client.meta.events.register("before-call.sagemaker", before, unique_id=f"layer-{id(self)}-b")
        client.meta.events.register("after-call.sagemaker", self._after_call, unique_id=f"layer-{id(self)}-a")

    def install_runtime(self, client: BaseClient) -> None:
        """Answer `client`'s InvokeEndpoint (a sagemaker-runtime client, e.g. `MotoSageMaker.runtime_client`)
        as SageMaker's runtime would, from the endpoint's status and its container's script."""
        before = cast("Callable[..., None]", self._before_runtime_call)
        client.meta.events.register("before-call.sagemaker-runtime", before, unique_id=f"layer-{id(self)}-r")

    # -- controls ------------------------------------------------------------------------------

    def force(self, name: str, status: str, reason: str | None = None) -> None:
        """Report the endpoint `name` as `status` (with FailureReason `reason`) until `release`."""
        with self._lock:
            self._forced[name] = (status, reason)

    def release(self, name: str) -> None:
        with self._lock:
            self._forced.pop(name, None)

    def finish_creating(self, name: str) -> None:
        """End the endpoint's Creating now (InService, or Failed if that is how it was to end)."""
        with self._lock:
            startup = self._startups.get(name)
            if startup is not None:
                self._startups[name] = dataclasses.replace(startup, seconds=self._clock() - startup.started)

    def set_quota(self, instance_type: str, instances: int | None) -> None:
        """The account's quota of `instance_type` for endpoints (None: no limit). CreateEndpoint asking for
        more than is left is refused: HTTP 400 ResourceLimitExceeded."""
        with self._lock:
            _set_limit(self.limits.quotas, instance_type, instances)

    def set_capacity(self, instance_type: str, instances: int | None) -> None:
        """How many `instance_type` instances AWS can give the account's endpoints (None: no limit). An
        endpoint that needs more is accepted, then Failed for InsufficientInstanceCapacity."""
        with self._lock:
            _set_limit(self.limits.capacity, instance_type, instances)

    def script_container(self, image: str, container: Container) -> None:
        """How the server in `image` behaves in the endpoints created from now on."""
        with self._lock:
            self._containers[image] = container

    def invoke(self, name: str) -> Invocation:
        """What SageMaker's runtime answers to an InvokeEndpoint on the endpoint `name` now."""
        with self._lock:
            self.advance()
            return invoke(
                name,
                self._container_answer(name),
                region=self.moto.region,
                timeout_seconds=self.profile.invocation_timeout_seconds,
            )

    def finish_updating(self, name: str) -> None:
        """End the endpoint's Updating now (as the update's outcome says)."""
        with self._lock:
            update = self._updating.get(name)
            if update is not None:
                self._updating[name] = dataclasses.replace(update, until=self._clock())
            self.advance()

    def fail_next_update(self, reason: str) -> None:
        """The next UpdateEndpoint accepted fails: once Updating ends, the endpoint is InService on its
        old configuration with FailureReason `reason`."""
        with self._lock:
            self._next_update_failure = reason

    def serving_config(self, name: str) -> str | None:
        """The configuration the endpoint serves, as DescribeEndpoint says; None if it does not exist."""
        with self._lock:
            self.advance()
            try:
                recorded = self._raw.describe_endpoint(EndpointName=name)["EndpointConfigName"]
            except ClientError:
                return None
            return self._configs.get(name, recorded)

    def fail(
        self,
        operation: str | None,
        *,
        code: str,
        message: str,
        status: int = 400,
        times: int | None = 1,
    ) -> None:
        with self._lock:
            self._faults.add(Fault(operation, code, message, status, times))

    def lose_answer(self, operation: str, *, times: int = 1) -> None:
        with self._lock:
            self._faults.add(Fault(operation, times=times, lose_answer=True))

    def hang(self, operation: str | None, *, times: int | None = 1) -> None:
        """Keep matching calls waiting (a service that does not answer) until `clear_faults`."""
        with self._lock:
            self._faults.add(Fault(operation, times=times, hold=threading.Event()))

    def start_outage(self) -> None:
        """Every call answers 503 ServiceUnavailable until `clear_faults`."""
        self.fail(None, code="ServiceUnavailable", message="Service Unavailable", status=503, times=None)

    def clear_faults(self) -> None:
        """Drop every fault, and let the calls kept waiting go on."""
        with self._lock:
            self._faults.clear()

    def status(self, name: str) -> str | None:
        """The endpoint's status as the layer reports it; None if moto's own stands."""
        with self._lock:
            if name in self._deleting_until:
                return "Deleting"
            if name in self._forced:
                return self._forced[name][0]
            # Updating until `advance` ends the update (before the next call), not by the clock alone:
            # a clock moved on during a call would otherwise report InService on the old configuration,
            # which reads as a rollback (seen once on a loaded machine).
            if name in self._updating:
                return "Updating"
            startup = self._startups.get(name)
            return None if startup is None else startup.status(self._clock())

    def vanish(self, name: str) -> None:
        """Lose the endpoint, its configuration and its model without a trace."""
        with self._lock:
            with contextlib.suppress(ClientError):
                self._raw.delete_endpoint(EndpointName=name)
            with contextlib.suppress(ClientError):
                self._raw.delete_endpoint_config(EndpointConfigName=name)
            with contextlib.suppress(ClientError):
                self._raw.delete_model(ModelName=name)
            self._forget(name)

    def advance(self) -> None:
        """Carry out the deletions and end the updates whose time has come (done before every call)."""
        with self._lock:
            now = self._clock()
            for name, until in list(self._deleting_until.items()):
                if now >= until:
                    with contextlib.suppress(ClientError):
                        self._raw.delete_endpoint(EndpointName=name)
                    self._forget(name)
            for name, update in list(self._updating.items()):
                if now >= update.until:
                    del self._updating[name]
                    if update.failure is None:
                        self._configs[name] = update.config_name
                        self._update_failures.pop(name, None)
                    else:
                        self._update_failures[name] = update.failure

    def _forget(self, name: str) -> None:
        self._startups.pop(name, None)
        self._creating.pop(name, None)
        self._created_with.pop(name, None)
        self._deleting_until.pop(name, None)
        self._forced.pop(name, None)
        self._updating.pop(name, None)
        self._configs.pop(name, None)
        self._update_failures.pop(name, None)

    # -- the handlers --------------------------------------------------------------------------

    def _before_call(self, model: Any, params: dict[str, Any], **_: Any) -> wire.Response | None:
        operation = str(model.name)
        with self._lock:
            self.calls[operation] += 1
            self.advance()
            fault = self._faults.take(operation)
        if fault is not None and fault.hold is not None:
            fault.hold.wait(HOLD_LIMIT_SECONDS)  # outside the lock: other calls go on meanwhile
            fault = None
        with self._lock:
            if fault is not None and fault.lose_answer:
                self._forward(operation, params)
                raise ReadTimeoutError(endpoint_url=str(params.get("url", self.moto.endpoint_url)))
            if fault is not None:
                return wire.error(fault.code, fault.message, fault.status)
            answer = self._emulate(operation, wire.arguments(params))
            if answer is None and operation == "CreateEndpointConfig":
                document = wire.arguments(params)
                if self._records.tell_moto_known_types(document):
                    params["body"] = json.dumps(document).encode()
            return answer

    def _before_runtime_call(self, model: Any, params: dict[str, Any], **_: Any) -> wire.Response | None:
        operation = str(model.name)
        with self._lock:
            self.calls[operation] += 1
        if operation != "InvokeEndpoint":
            return None  # moto's answer
        # The runtime's API puts the endpoint's name in the path: /endpoints/NAME/invocations.
        name = urllib.parse.unquote(str(params.get("url_path", "")).split("/")[2])
        return wire.invocation_answer(self.invoke(name))

    def _forward(self, operation: str, params: dict[str, Any]) -> None:
        with contextlib.suppress(ClientError):  # the answer is lost either way
            getattr(self._raw, xform_name(operation))(**wire.arguments(params))

    def _existing(self, operation: str, arguments: dict[str, Any]) -> tuple[str, str] | None:
        """For a create: (what kind, its ARN) if moto already has the resource, else None."""
        try:
            if operation == "CreateModel":
                return "model", self._raw.describe_model(ModelName=arguments["ModelName"])["ModelArn"]
            if operation == "CreateEndpointConfig":
                config = self._raw.describe_endpoint_config(
                    EndpointConfigName=arguments["EndpointConfigName"]
                )
                return "endpoint configuration", config["EndpointConfigArn"]
            if operation == "CreateEndpoint":
                endpoint = self._raw.describe_endpoint(EndpointName=arguments["EndpointName"])
                return "endpoint", endpoint["EndpointArn"]
        except ClientError:
            return None
        return None

    def _emulate(self, operation: str, arguments: dict[str, Any]) -> wire.Response | None:
        """SageMaker's answers where moto's differ."""
        existing = self._existing(operation, arguments)
        if existing is not None:
            kind, arn = existing
            return wire.error("ValidationException", f'Cannot create already existing {kind} "{arn}".')
        if operation == "UpdateEndpoint":
            return self._update(arguments["EndpointName"], arguments["EndpointConfigName"])
        if operation in TAGGING:
            return self._records.tagging(operation, arguments)
        if operation == "DeleteEndpoint":
            return self._delete_endpoint(arguments["EndpointName"])
        if operation == "CreateEndpoint":
            self._creating[arguments["EndpointName"]] = arguments["EndpointConfigName"]
            return self._refuse_over_quota(arguments["EndpointConfigName"])
        return None

    def _refuse_over_quota(self, config_name: str) -> wire.Response | None:
        """CreateEndpoint's ResourceLimitExceeded; None: within the quotas (or no such configuration,
        which moto refuses)."""
        if not self.limits.quotas:
            return None  # nothing to read
        wanted = self._records.fleet(config_name)
        refusal = None if wanted is None else self.limits.quota_refusal(wanted, self._held_fleets())
        return None if refusal is None else wire.error("ResourceLimitExceeded", refusal)

    def _short_of_capacity(self, config_name: str) -> bool:
        """Whether AWS lacks the instances `config_name` asks for, besides those held already."""
        if not self.limits.capacity:
            return False  # nothing to read
        wanted = self._records.fleet(config_name) or Fleet(())
        return self.limits.short_of_capacity(wanted, self._held_fleets())

    def _held_fleets(self) -> list[Fleet]:
        """The instances of every endpoint created through the layer that is not Failed (read when a limit
        is checked, so nothing is read while no limit is set)."""
        held = [
            self._records.fleet(self._configs.get(name, config_name)) or Fleet(())
            for name, config_name in self._created_with.items()
            if self.status(name) != "Failed"
        ]
        updating = [update.config_name for update in self._updating.values() if update.failure is None]
        return held + [self._records.fleet(config_name) or Fleet(()) for config_name in updating]

    def _container(self, config_name: str) -> Container:
        return self._containers.get(self._records.image(config_name) or "", Container())

    def _container_answer(self, name: str) -> ContainerAnswer | None:
        """What the endpoint's container answers to an invocation; None: no endpoint, or not serving."""
        try:
            recorded = self._raw.describe_endpoint(EndpointName=name)["EndpointConfigName"]
        except ClientError:
            return None
        status = self.status(name)
        if status is not None and status not in SERVING:
            return None
        return self._container(self._configs.get(name, recorded)).answer

    def _start(self, name: str, config_name: str) -> None:
        """Plan the course of the endpoint `name`, whose CreateEndpoint moto just accepted. moto is asked
        only what the plan needs: with no script and no limit, nothing."""
        container = self._container(config_name) if self._containers else Container()
        loading = self.loading_seconds if container.loading_seconds is None else container.loading_seconds
        short = self._short_of_capacity(config_name)
        may_fail = short or not container.answers_ping or loading > 0
        first = self._records.variants(config_name)[:1] if may_fail else []
        variant = first[0] if first else {}
        timeout = self.profile.health_check_timeout_seconds
        if timeout is None and "ContainerStartupHealthCheckTimeoutInSeconds" in variant:
            timeout = float(variant["ContainerStartupHealthCheckTimeoutInSeconds"])
        startup = plan_startup(
            self._clock(),
            variant=str(variant.get("VariantName", "AllTraffic")),
            provisioning_seconds=self.provisioning_seconds,
            loading_seconds=loading,
            health_check_timeout_seconds=timeout,
            short_of_capacity=short,
            capacity_failure_seconds=self.profile.capacity_failure_seconds,
            answers_ping=container.answers_ping,
        )
        self._created_with[name] = config_name
        if startup.seconds > 0 or startup.failure is not None:
            self._startups[name] = startup

    def _delete_endpoint(self, name: str) -> wire.Response | None:
        """DeleteEndpoint with SageMaker's refusal and its Deleting time; None: moto's answer."""
        try:
            arn = self._raw.describe_endpoint(EndpointName=name)["EndpointArn"]
        except ClientError:
            return None  # moto says it is missing, as SageMaker would
        status = self.status(name)
        if status in IN_PROGRESS or status == "Deleting":
            return wire.error("ValidationException", f'Cannot update in-progress endpoint "{arn}".')
        if self.deleting_seconds > 0:
            self._forced.pop(name, None)
            self._deleting_until[name] = self._clock() + self.deleting_seconds
            return wire.answer({})
        self._forget(name)  # moto deletes it now
        return None

    def _update(self, name: str, config_name: str) -> wire.Response:
        """UpdateEndpoint, which moto lacks, with SageMaker's refusals."""
        try:
            arn = self._raw.describe_endpoint(EndpointName=name)["EndpointArn"]
        except ClientError:
            missing = self._arn("endpoint", name)
            return wire.error("ValidationException", f"Could not find endpoint '{missing}'.")
        status = self.status(name)
        if status in IN_PROGRESS or status == "Deleting":
            return wire.error("ValidationException", f'Cannot update in-progress endpoint "{arn}".')
        if status == "Failed":
            return wire.error("ValidationException", f'Cannot update failed endpoint "{arn}".')
        try:
            self._raw.describe_endpoint_config(EndpointConfigName=config_name)
        except ClientError:
            missing = self._arn("endpoint-config", config_name)
            return wire.error("ValidationException", f"Could not find endpoint configuration '{missing}'.")
        refusal = self._refuse_over_quota(config_name)  # blue/green: the new fleet on top of the old
        if refusal is not None:
            return refusal
        failure, seconds = self._next_update_failure, self.updating_seconds
        if failure is None and self._short_of_capacity(config_name):
            failure, seconds = CAPACITY_FAILURE_REASON, self.profile.capacity_failure_seconds
        self._updating[name] = EndpointUpdate(config_name, self._clock() + seconds, failure)
        self._next_update_failure = None
        self.advance()  # with no updating_seconds, the update is done at once
        return wire.answer({"EndpointArn": arn})

    def _arn(self, kind: str, name: str) -> str:
        return f"arn:aws:sagemaker:{self.moto.region}:{ACCOUNT_ID}:{kind}/{name}"

    def _after_call(self, http_response: AWSResponse, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if http_response.status_code >= 300:
            return
        operation = str(model.name)
        with self._lock:
            if operation == "CreateEndpoint":
                name = str(parsed.get("EndpointArn", "")).rsplit("/", 1)[-1]
                config_name = self._creating.pop(name, None)
                if config_name is None:  # not seen on its way (another layer's client): ask moto
                    config_name = self._raw.describe_endpoint(EndpointName=name)["EndpointConfigName"]
                self._forget(name)
                self._start(name, config_name)
            elif operation == "DescribeEndpointConfig":
                config_name = str(parsed.get("EndpointConfigName", ""))
                self._records.restore_instance_types(config_name, parsed.get("ProductionVariants", []))
            elif operation == "DescribeEndpoint":
                self._rewrite(parsed, with_reason=True)
            elif operation == "ListEndpoints":
                for summary in parsed.get("Endpoints", []):
                    self._rewrite(summary, with_reason=False)  # summaries have no FailureReason

    def _rewrite(self, endpoint: dict[str, Any], *, with_reason: bool) -> None:
        name = str(endpoint.get("EndpointName", ""))
        status = self.status(name)
        if status is not None:
            endpoint["EndpointStatus"] = status
        if name in self._configs and "EndpointConfigName" in endpoint:
            endpoint["EndpointConfigName"] = self._configs[name]
        forced = self._forced.get(name)
        startup = self._startups.get(name)
        if with_reason and forced is not None and forced[1] is not None and status == forced[0]:
            endpoint["FailureReason"] = forced[1]
        elif with_reason and status == "Failed" and startup is not None and startup.failure is not None:
            endpoint["FailureReason"] = startup.failure
        elif with_reason and status is None and name in self._update_failures:
            endpoint["FailureReason"] = self._update_failures[name]  # InService again, rolled back


def _set_limit(limits: dict[str, int], instance_type: str, instances: int | None) -> None:
    if instances is None:
        limits.pop(instance_type, None)
    elif instances < 0:
        raise ValueError(f"a limit of {instances} instances of {instance_type}")
    else:
        limits[instance_type] = instances
