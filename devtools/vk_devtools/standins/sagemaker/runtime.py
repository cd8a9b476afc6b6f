"""InvokeEndpoint as SageMaker's runtime answers it, given what the endpoint's container answers.

SageMaker's runtime relays a container's 2xx answer as its own; any other answer, and no answer within
the invocation limit (60 s, `profile.INVOCATION_TIMEOUT_SECONDS`), becomes HTTP 424 `ModelError`, whose
`OriginalStatusCode` and `OriginalMessage` carry the container's status and body (botocore's
sagemaker-runtime service model: ModelError, httpStatusCode 424, members Message, OriginalStatusCode,
OriginalMessage, LogStreamArn). The messages are SageMaker's, as clients quote them:

- `Received client error (400) from primary with message "..."` for a container's 4xx, `server error`
  for its 5xx (aws/amazon-sagemaker-examples issue 235 and others);
- a timeout is a server error with status 0: `Received server error (0) from primary with message "Your
  invocation timed out while waiting for a response from container primary. Review the latency metrics
  for each container in Amazon CloudWatch, resolve the issue, and try again."`
  (aws/amazon-sagemaker-examples issues 799 and 1407, RamVegiraju/SageMaker-Deployment issue 3: a
  container made to sleep 70 s);
- an endpoint that does not exist is HTTP 400 `ValidationError`: `Endpoint NAME of account ACCOUNT not
  found.` (aws/amazon-sagemaker-examples issues 293 and 559). The stand-in answers the same for an
  endpoint that is not InService (Creating, Failed, Deleting): an assumption, as AWS documents no
  other answer and such an endpoint has no container to reach.

`invoke` decides; it does not wait. `Invocation.seconds` says how long the caller would have waited
(the container's time, or the limit), so a test on a manual clock can move it by that much.
"""

from __future__ import annotations

import dataclasses
import json

from vk_devtools.standins.sagemaker.profile import INVOCATION_TIMEOUT_SECONDS
from vk_devtools.standins.sagemaker.server import ACCOUNT_ID

CONTAINER_HOSTNAME = "primary"
"""How SageMaker names a single-container endpoint's container in its messages."""
TIMEOUT_MESSAGE = (
    f"Your invocation timed out while waiting for a response from container {CONTAINER_HOSTNAME}. Review "
    "the latency metrics for each container in Amazon CloudWatch, resolve the issue, and try again."
)


@dataclasses.dataclass(frozen=True, slots=True)
class ContainerAnswer:
    """What the container answers to `POST /invocations`, and after how long."""

    status: int = 200
    body: bytes = b'{"generated_text": "stand-in"}'
    content_type: str = "application/json"
    seconds: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class Invocation:
    """SageMaker runtime's HTTP answer to one InvokeEndpoint."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    seconds: float
    """How long the caller waits for this answer."""
    error_code: str | None = None
    error_fields: tuple[tuple[str, str | int], ...] = ()
    """The error's members besides its Message (ModelError's OriginalStatusCode, ...)."""

    @property
    def message(self) -> str | None:
        if self.error_code is None:
            return None
        return str(json.loads(self.body)["Message"])


def log_group(region: str, endpoint: str) -> str:
    return f"arn:aws:logs:{region}:{ACCOUNT_ID}:log-group:/aws/sagemaker/Endpoints/{endpoint}"


def invoke(
    endpoint: str,
    answer: ContainerAnswer | None,
    *,
    region: str,
    timeout_seconds: float = INVOCATION_TIMEOUT_SECONDS,
) -> Invocation:
    """The runtime's answer for `endpoint` when its container answers `answer` (None: the endpoint is
    missing or not InService)."""
    if answer is None:
        return _error(400, "ValidationError", f"Endpoint {endpoint} of account {ACCOUNT_ID} not found.", 0.0)
    if answer.seconds >= timeout_seconds:
        return _model_error(endpoint, region, 0, TIMEOUT_MESSAGE, timeout_seconds)
    if 200 <= answer.status < 300:
        headers = (
            ("Content-Type", answer.content_type),
            ("x-Amzn-Invoked-Production-Variant", "AllTraffic"),
        )
        return Invocation(answer.status, headers, answer.body, answer.seconds)
    return _model_error(
        endpoint, region, answer.status, answer.body.decode("utf-8", "replace"), answer.seconds
    )


def _model_error(endpoint: str, region: str, status: int, original: str, seconds: float) -> Invocation:
    side = "client" if 400 <= status < 500 else "server"
    console = (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}"
        f"#logEventViewer:group=/aws/sagemaker/Endpoints/{endpoint}"
    )
    message = (
        f'Received {side} error ({status}) from {CONTAINER_HOSTNAME} with message "{original}". '
        f"See {console} in account {ACCOUNT_ID} for more information."
    )
    fields: tuple[tuple[str, str | int], ...] = (
        ("OriginalStatusCode", status),
        ("OriginalMessage", original),
        ("LogStreamArn", log_group(region, endpoint)),
    )
    return _error(424, "ModelError", message, seconds, fields)


def _error(
    status: int, code: str, message: str, seconds: float, fields: tuple[tuple[str, str | int], ...] = ()
) -> Invocation:
    body = json.dumps({"ErrorCode": code, "Message": message, **dict(fields)}).encode()
    headers = (("Content-Type", "application/json"), ("x-amzn-ErrorType", code))
    return Invocation(status, headers, body, seconds, code, fields)
