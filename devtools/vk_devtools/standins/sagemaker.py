"""moto's SageMaker in server mode, plus the thin layer a provider's tests need on top of it.

`MotoSageMaker` runs `moto.server.ThreadedMotoServer` on a free port of 127.0.0.1 (start it once per
test module; `reset()` empties it between tests); boto3 reaches it through `endpoint_url`, with any
credentials (moto puts everything in account 123456789012).

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
- it never throttles, fails or loses an answer;
- ListTags, AddTags and DeleteTags on a resource it does not have (an endpoint just deleted) answer
  HTTP 500 (an AttributeError inside moto), where SageMaker answers
  `ValidationException: Could not find ...`: the resource is gone.

`SageMakerLayer` adds these, at the boto3 client level: installed on a client (the sagemaker
provider's `client_hook`), it registers botocore `before-call` and `after-call` handlers that answer
for moto (an error, a refusal moto does not make, a deletion that takes time) or rewrite its answers
(EndpointStatus, EndpointConfigName and FailureReason in DescribeEndpoint and ListEndpoints). It answers
the tagging calls on models, endpoint configurations and endpoints itself, under its lock (so that a
deletion it carries out cannot come between finding the resource and reading its tags). Its
statuses follow its clock: an endpoint is Creating for `creating_seconds` after it was created, Updating
for `updating_seconds` after an UpdateEndpoint was accepted (the layer answers UpdateEndpoint itself, with
SageMaker's refusals), and Deleting for `deleting_seconds` after its deletion was accepted (then it is
deleted in moto); `force` pins a status (Failed with a reason, Updating, ...). An update ends on its
new configuration, or, after `fail_next_update`, back InService on the old one with a FailureReason,
as SageMaker rolls back a failed update. Faults (`fail`, `lose_answer`, `start_outage`) are served in the
order they were added. `calls` counts the operations the layer saw, by name.

The endpoint's instance-type list of moto 5.2.5 is old (no ml.g5, ml.g6, ml.p4d, ml.p5): tests use
ml.g4dn.xlarge. Nothing here runs containers: InvokeEndpoint is out of scope.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import http.client
import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore import xform_name
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ClientError, ReadTimeoutError
from moto.server import ThreadedMotoServer

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

ACCOUNT_ID = "123456789012"
"""moto's default account, where every request lands."""
TEST_ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/vk-provider-sagemaker"
GPU_INSTANCE_TYPE = "ml.g4dn.xlarge"
"""A GPU instance type both SageMaker and moto 5.2.5 accept."""
IN_PROGRESS = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
TAGGING = frozenset({"ListTags", "AddTags", "DeleteTags"})
_TAGGED_KINDS = {"model": "model", "endpoint-config": "endpoint configuration", "endpoint": "endpoint"}
"""The kinds of resource (as ARNs name them) whose tagging calls the layer answers, in SageMaker's words."""
HOLD_LIMIT_SECONDS = 60.0

_Response = tuple[AWSResponse, dict[str, Any]]


class MotoSageMaker:
    """moto in server mode on 127.0.0.1 and a free port."""

    def __init__(self, *, region: str = "us-east-1") -> None:
        self.region = region
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._address: tuple[str, int] | None = None

    def start(self) -> MotoSageMaker:
        self._server.start()
        self._address = self._server.get_host_and_port()
        return self

    def stop(self) -> None:
        if self._address is not None:
            self._server.stop()
            self._address = None

    def __enter__(self) -> MotoSageMaker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def endpoint_url(self) -> str:
        if self._address is None:
            raise RuntimeError("the moto server is not running")
        host, port = self._address
        return f"http://{host}:{port}"

    def reset(self) -> None:
        """Forget every resource of every service (moto's /moto-api/reset)."""
        if self._address is None:
            raise RuntimeError("the moto server is not running")
        connection = http.client.HTTPConnection(*self._address, timeout=10)
        try:
            connection.request("POST", "/moto-api/reset")
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"moto's reset answered {response.status}")
        finally:
            connection.close()

    def client(self) -> SageMakerClient:
        """A plain client on the server, for tests to look and to set things up behind a provider's back."""
        return boto3.client(
            "sagemaker",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id="moto-testing",
            aws_secret_access_key="moto-testing",  # noqa: S106 - moto takes any key
        )


@dataclasses.dataclass(frozen=True, slots=True)
class EndpointUpdate:
    """An UpdateEndpoint the layer accepted: the endpoint is Updating until `until` (the layer's clock)."""

    config_name: str
    until: float
    failure: str | None = None
    """Roll back with this FailureReason instead of moving onto `config_name`."""


@dataclasses.dataclass(slots=True)
class Fault:
    """An answer the layer gives instead of moto's, `times` times (None: until cleared)."""

    operation: str | None
    """The operation (e.g. "CreateEndpoint"); None for every one."""
    code: str = "ServiceUnavailable"
    message: str = "Service Unavailable"
    status: int = 503
    times: int | None = 1
    lose_answer: bool = False
    """Carry the request out in moto, then fail as if the answer had been lost (a read timeout)."""
    hold: threading.Event | None = None
    """Keep the call waiting until this is set (or `HOLD_LIMIT_SECONDS` pass), then answer normally."""


class SageMakerLayer:
    """What moto's SageMaker lacks, added to the boto3 clients it is installed on (see the module)."""

    def __init__(
        self,
        moto: MotoSageMaker,
        *,
        creating_seconds: float = 0.0,
        deleting_seconds: float = 0.0,
        updating_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.moto = moto
        self.creating_seconds = creating_seconds
        self.deleting_seconds = deleting_seconds
        self.updating_seconds = updating_seconds
        self._clock = clock
        self._raw = moto.client()
        self._lock = threading.RLock()
        self._created_at: dict[str, float] = {}
        self._deleting_until: dict[str, float] = {}
        self._forced: dict[str, tuple[str, str | None]] = {}
        self._updating: dict[str, EndpointUpdate] = {}
        self._configs: dict[str, str] = {}
        """Endpoint -> the configuration it serves after an update (moto's record keeps the first)."""
        self._update_failures: dict[str, str] = {}
        """Endpoint -> the FailureReason of its last update, which was rolled back."""
        self._next_update_failure: str | None = None
        self._faults: list[Fault] = []
        self._holding: list[threading.Event] = []
        self.calls: collections.Counter[str] = collections.Counter()

    # -- installing ----------------------------------------------------------------------------

    def install(self, client: SageMakerClient) -> None:
        """Serve `client`'s calls through the layer (use as the provider's `client_hook`)."""
        # A before-call handler may answer for the service; botocore's stubs type handlers as returning None.
        before = cast("Callable[..., None]", self._before_call)
        client.meta.events.register("before-call.sagemaker", before, unique_id=f"layer-{id(self)}-b")
        client.meta.events.register("after-call.sagemaker", self._after_call, unique_id=f"layer-{id(self)}-a")

    # -- controls ------------------------------------------------------------------------------

    def force(self, name: str, status: str, reason: str | None = None) -> None:
        """Report the endpoint `name` as `status` (with FailureReason `reason`) until `release`."""
        with self._lock:
            self._forced[name] = (status, reason)

    def release(self, name: str) -> None:
        with self._lock:
            self._forced.pop(name, None)

    def finish_creating(self, name: str) -> None:
        """End the endpoint's Creating now."""
        with self._lock:
            self._created_at.pop(name, None)

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
            self._faults.append(Fault(operation, code, message, status, times))

    def lose_answer(self, operation: str, *, times: int = 1) -> None:
        with self._lock:
            self._faults.append(Fault(operation, times=times, lose_answer=True))

    def hang(self, operation: str | None, *, times: int | None = 1) -> None:
        """Keep matching calls waiting (a service that does not answer) until `clear_faults`."""
        with self._lock:
            self._faults.append(Fault(operation, times=times, hold=threading.Event()))

    def start_outage(self) -> None:
        """Every call answers 503 ServiceUnavailable until `clear_faults`."""
        self.fail(None, code="ServiceUnavailable", message="Service Unavailable", status=503, times=None)

    def clear_faults(self) -> None:
        """Drop every fault, and let the calls kept waiting go on."""
        with self._lock:
            holds = [fault.hold for fault in self._faults if fault.hold is not None] + self._holding
            for hold in holds:
                hold.set()
            self._faults.clear()
            self._holding.clear()

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
            created = self._created_at.get(name)
            if created is not None and self._clock() < created + self.creating_seconds:
                return "Creating"
            return None

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
        self._created_at.pop(name, None)
        self._deleting_until.pop(name, None)
        self._forced.pop(name, None)
        self._updating.pop(name, None)
        self._configs.pop(name, None)
        self._update_failures.pop(name, None)

    # -- the handlers --------------------------------------------------------------------------

    def _before_call(self, model: Any, params: dict[str, Any], **_: Any) -> _Response | None:
        operation = str(model.name)
        with self._lock:
            self.calls[operation] += 1
            self.advance()
            fault = self._take_fault(operation)
            if fault is not None and fault.hold is not None:
                self._holding.append(fault.hold)
        if fault is not None and fault.hold is not None:
            fault.hold.wait(HOLD_LIMIT_SECONDS)  # outside the lock: other calls go on meanwhile
            fault = None
        with self._lock:
            if fault is not None and fault.lose_answer:
                self._forward(operation, params)
                raise ReadTimeoutError(endpoint_url=str(params.get("url", self.moto.endpoint_url)))
            if fault is not None:
                return _error(fault.code, fault.message, fault.status)
            return self._emulate(operation, _arguments(params))

    def _take_fault(self, operation: str) -> Fault | None:
        for fault in self._faults:
            if fault.operation in (None, operation):
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                return fault
        return None

    def _forward(self, operation: str, params: dict[str, Any]) -> None:
        with contextlib.suppress(ClientError):  # the answer is lost either way
            getattr(self._raw, xform_name(operation))(**_arguments(params))

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

    def _emulate(self, operation: str, arguments: dict[str, Any]) -> _Response | None:
        """SageMaker's answers where moto's differ."""
        existing = self._existing(operation, arguments)
        if existing is not None:
            kind, arn = existing
            return _error("ValidationException", f'Cannot create already existing {kind} "{arn}".')
        if operation == "UpdateEndpoint":
            return self._update(arguments["EndpointName"], arguments["EndpointConfigName"])
        if operation in TAGGING:
            return self._tagging(operation, arguments)
        if operation == "DeleteEndpoint":
            return self._delete_endpoint(arguments["EndpointName"])
        return None

    def _delete_endpoint(self, name: str) -> _Response | None:
        """DeleteEndpoint with SageMaker's refusal and its Deleting time; None: moto's answer."""
        try:
            arn = self._raw.describe_endpoint(EndpointName=name)["EndpointArn"]
        except ClientError:
            return None  # moto says it is missing, as SageMaker would
        status = self.status(name)
        if status in IN_PROGRESS or status == "Deleting":
            return _error("ValidationException", f'Cannot update in-progress endpoint "{arn}".')
        if self.deleting_seconds > 0:
            self._forced.pop(name, None)
            self._deleting_until[name] = self._clock() + self.deleting_seconds
            return _answer({})
        self._forget(name)  # moto deletes it now
        return None

    def _update(self, name: str, config_name: str) -> _Response:
        """UpdateEndpoint, which moto lacks, with SageMaker's refusals."""
        try:
            arn = self._raw.describe_endpoint(EndpointName=name)["EndpointArn"]
        except ClientError:
            return _error("ValidationException", f"Could not find endpoint '{self._arn('endpoint', name)}'.")
        status = self.status(name)
        if status in IN_PROGRESS or status == "Deleting":
            return _error("ValidationException", f'Cannot update in-progress endpoint "{arn}".')
        if status == "Failed":
            return _error("ValidationException", f'Cannot update failed endpoint "{arn}".')
        try:
            self._raw.describe_endpoint_config(EndpointConfigName=config_name)
        except ClientError:
            missing = self._arn("endpoint-config", config_name)
            return _error("ValidationException", f"Could not find endpoint configuration '{missing}'.")
        self._updating[name] = EndpointUpdate(
            config_name, self._clock() + self.updating_seconds, self._next_update_failure
        )
        self._next_update_failure = None
        self.advance()  # with no updating_seconds, the update is done at once
        return _answer({"EndpointArn": arn})

    def _tagging(self, operation: str, arguments: dict[str, Any]) -> _Response | None:
        """ListTags, AddTags or DeleteTags on a model, configuration or endpoint, carried out in moto under
        the layer's lock; on one moto does not have, SageMaker's ValidationException (moto's own answer is
        a 500). Other kinds of resource: moto's answer."""
        arn = str(arguments.get("ResourceArn", ""))
        kind, _, name = arn.rsplit(":", 1)[-1].partition("/")
        if kind not in _TAGGED_KINDS:
            return None
        if not self._holds(kind, name):
            return _error("ValidationException", f'Could not find {_TAGGED_KINDS[kind]} "{arn}".')
        answer = dict(getattr(self._raw, xform_name(operation))(**arguments))
        answer.pop("ResponseMetadata", None)
        return _answer(answer)

    def _holds(self, kind: str, name: str) -> bool:
        """Whether moto has the model, endpoint configuration or endpoint `name`."""
        try:
            if kind == "model":
                self._raw.describe_model(ModelName=name)
            elif kind == "endpoint-config":
                self._raw.describe_endpoint_config(EndpointConfigName=name)
            else:
                self._raw.describe_endpoint(EndpointName=name)
        except ClientError:
            return False
        return True

    def _arn(self, kind: str, name: str) -> str:
        return f"arn:aws:sagemaker:{self.moto.region}:{ACCOUNT_ID}:{kind}/{name}"

    def _after_call(self, http_response: AWSResponse, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if http_response.status_code >= 300:
            return
        operation = str(model.name)
        with self._lock:
            if operation == "CreateEndpoint":
                name = str(parsed.get("EndpointArn", "")).rsplit("/", 1)[-1]
                self._forget(name)
                if self.creating_seconds > 0:
                    self._created_at[name] = self._clock()
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
        if with_reason and forced is not None and forced[1] is not None and status == forced[0]:
            endpoint["FailureReason"] = forced[1]
        elif with_reason and status is None and name in self._update_failures:
            endpoint["FailureReason"] = self._update_failures[name]  # InService again, rolled back


def _arguments(params: dict[str, Any]) -> dict[str, Any]:
    """The API parameters of a JSON-protocol request, as botocore serialised them."""
    body = params.get("body") or b"{}"
    document = json.loads(body.decode() if isinstance(body, bytes) else body)
    return document if isinstance(document, dict) else {}


def _answer(parsed: dict[str, Any], status: int = 200) -> _Response:
    parsed = {**parsed, "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0}}
    return AWSResponse("", status, HTTPHeaders(), None), parsed


def _error(code: str, message: str, status: int = 400) -> _Response:
    return _answer({"Error": {"Code": code, "Message": message}}, status)
