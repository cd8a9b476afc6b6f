"""The SageMaker calls the provider makes, as blocking functions for the provider's thread pool.

Each function makes one boto3 call (or one paginated listing) and says what came of it in the
provider's terms: a missing resource is `None` or `False`, not an error; a create that finds the
resource already there has succeeded; everything else that fails is turned into what
`vk_provider.kit.resilience` understands, so the provider's `ResilientCaller` retries, counts and reports it
(see `translate_error`). Nothing here touches the event loop.

SageMaker's JSON API answers most refusals with HTTP 400 and a code. How each is taken (the status is
that of the `ApiStatusError` raised; the last column is what the node sees once retries are over):

| SageMaker's code                                   | status | retried | the node sees            |
|----------------------------------------------------|--------|---------|--------------------------|
| ThrottlingException and the other throttling codes | 429    | yes     | TemporaryProviderError   |
| InternalFailure, ServiceUnavailable, any HTTP 5xx  | 5xx    | yes     | TemporaryProviderError   |
| RequestTimeout                                     | 408    | yes     | TemporaryProviderError   |
| ResourceLimitExceeded (a quota/capacity refusal)   | 400    | no      | CapacityUnavailableError |
| ResourceLimitExceeded for a quota of 0 Instances   | 400    | no      | ProviderRefusesWorkError |
| InsufficientInstanceCapacity                       | 400    | no      | CapacityUnavailableError |
| ResourceInUse, ConflictException                   | 409    | no      | TemporaryProviderError   |
| AccessDenied, UnrecognizedClient, expired tokens   | 403    | no      | AccountError             |
| ResourceNotFound                                   | 404    | no      | NotFoundError            |
| ValidationException and any other 4xx              | 400    | no      | InvalidPodError          |

(The capacity rows are the provider's `_map_status`: a capacity refusal moves the pod to its next
instance type, a quota of 0 holds every create back; see `provider`.)

Connection failures and botocore's own timeouts become `ConnectionError` and `TimeoutError` (retried);
missing credentials an `AccountError`; a parameter botocore rejects before sending an `InvalidPodError`.

The status of the `ApiStatusError` is the class of the refusal, as an HTTP API would have answered;
its `reason` is SageMaker's code and its `detail` SageMaker's message (redacted).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import botocore.exceptions
from botocore.exceptions import BotoCoreError, ClientError

from vk_provider.errors import InvalidPodError, TemporaryProviderError
from vk_provider.kit.resilience import AccountError, ApiStatusError
from vk_providers.sagemaker.translate import VARIANT_NAME, Deployment, Endpoint
from vk_providers.sagemaker.versions import ConfigVersion, ModelVersion

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sagemaker.literals import ProductionVariantInstanceTypeType
    from mypy_boto3_sagemaker.type_defs import (
        ContainerDefinitionTypeDef,
        ProductionVariantTypeDef,
        TagTypeDef,
    )

T = TypeVar("T")

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
        "BandwidthLimitExceeded",
    }
)
SERVER_CODES = frozenset(
    {
        "InternalFailure",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
    }
)
TIMEOUT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException"})
ACCOUNT_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "NotAuthorized",
        "AuthFailure",
        "OptInRequired",
    }
)
NOT_FOUND_CODES = frozenset({"ResourceNotFound", "ResourceNotFoundException"})
CONFLICT_CODES = frozenset({"ResourceInUse", "ConflictException"})
CAPACITY_CODE = "ResourceLimitExceeded"
INSUFFICIENT_CAPACITY_CODE = "InsufficientInstanceCapacity"
"""AWS has no machines of the instance type free in the region (research notes, section 1)."""

_MISSING_PREFIX = "could not find"
"""How SageMaker says a model, endpoint configuration or endpoint does not exist (ValidationException)."""
_EXISTS_PREFIX = "cannot create already existing"
_IN_PROGRESS_PREFIX = "cannot update in-progress"


def _code_and_message(error: ClientError) -> tuple[str, str, int]:
    body = error.response.get("Error", {})
    code = str(body.get("Code") or "")
    message = str(body.get("Message") or "")
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    return code, message, status


def is_missing(error: ClientError) -> bool:
    code, message, _ = _code_and_message(error)
    return code in NOT_FOUND_CODES or (
        code == "ValidationException" and message.lower().startswith(_MISSING_PREFIX)
    )


def is_already_existing(error: ClientError) -> bool:
    code, message, _ = _code_and_message(error)
    return code in ("ValidationException", "ResourceInUse") and _EXISTS_PREFIX in message.lower()


def is_in_progress(error: ClientError) -> bool:
    code, message, _ = _code_and_message(error)
    return code == "ValidationException" and _IN_PROGRESS_PREFIX in message.lower()


_STATUS_OF_CODES: tuple[tuple[frozenset[str], int], ...] = (
    (THROTTLING_CODES, 429),
    (TIMEOUT_CODES, 408),
    (ACCOUNT_CODES, 403),
    (NOT_FOUND_CODES, 404),
    (CONFLICT_CODES, 409),
)


def _effective_status(code: str, http_status: int) -> int:
    """The HTTP status an API with honest statuses would have answered (see the module's table)."""
    if code in SERVER_CODES or http_status >= 500:
        return http_status if http_status >= 500 else (503 if "Unavailable" in code else 500)
    for codes, status in _STATUS_OF_CODES:
        if code in codes:
            return status
    return http_status if 400 <= http_status < 500 and http_status not in (408, 429) else 400


def translate_error(error: BaseException, redact: Callable[[str], str]) -> BaseException:  # noqa: PLR0911
    """What a failed boto3 call raises instead (see the module's table); messages are redacted."""
    if isinstance(error, ClientError):
        code, message, http_status = _code_and_message(error)
        return ApiStatusError(
            _effective_status(code, http_status),
            redact(message or f"HTTP {http_status}"),
            reason=code or "UnknownError",
        )
    if isinstance(error, botocore.exceptions.ReadTimeoutError | botocore.exceptions.ConnectTimeoutError):
        return TimeoutError(redact(str(error)))
    if isinstance(error, botocore.exceptions.ConnectionError | botocore.exceptions.HTTPClientError):
        # EndpointConnectionError, ConnectionClosedError, ProxyConnectionError and the like.
        return ConnectionError(redact(f"{type(error).__name__}: {error}"))
    if isinstance(
        error,
        botocore.exceptions.NoCredentialsError
        | botocore.exceptions.PartialCredentialsError
        | botocore.exceptions.CredentialRetrievalError,
    ):
        return AccountError(redact(f"SageMaker: no usable AWS credentials ({error})"))
    if isinstance(error, botocore.exceptions.ParamValidationError):
        return InvalidPodError(redact(f"SageMaker refuses the request before sending it: {error}"))
    if isinstance(error, BotoCoreError):
        return TemporaryProviderError(redact(f"SageMaker call failed: {type(error).__name__}: {error}"))
    return error


@dataclasses.dataclass(frozen=True, slots=True)
class Listed:
    """A model or endpoint configuration as a listing names it."""

    name: str
    arn: str


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteOutcome:
    deleted: bool
    """SageMaker accepted the deletion."""
    in_progress: bool = False
    """SageMaker refused it because the endpoint is Creating or Updating: try again later."""


class SageMakerApi:
    """Blocking calls on one SageMaker client, made on first use (credentials resolve then)."""

    def __init__(self, make_client: Callable[[], SageMakerClient], *, redact: Callable[[str], str]) -> None:
        self._make_client = make_client
        self._redact = redact
        self._client: SageMakerClient | None = None
        self._lock = threading.Lock()

    def client(self) -> SageMakerClient:
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _call(self, function: Callable[[SageMakerClient], T]) -> T:
        try:
            return function(self.client())
        except (ClientError, BotoCoreError) as error:
            failure = translate_error(error, self._redact)
        # Raised outside the handler, so the original (which may quote a credential) is not chained.
        raise failure

    def _call_tolerating(
        self, function: Callable[[SageMakerClient], Any], accept: Callable[[ClientError], bool]
    ) -> bool:
        """True if the call went through; False if it failed with an error `accept` takes as success."""
        try:
            function(self.client())
        except ClientError as error:
            if accept(error):
                return False
            failure = translate_error(error, self._redact)
        except BotoCoreError as error:
            failure = translate_error(error, self._redact)
        else:
            return True
        raise failure

    # -- reading ------------------------------------------------------------------------------

    def _get(self, function: Callable[[SageMakerClient], T]) -> T | None:
        """The call's result; None if the resource does not exist."""
        try:
            return function(self.client())
        except ClientError as error:
            if is_missing(error):
                return None
            failure = translate_error(error, self._redact)
        except BotoCoreError as error:
            failure = translate_error(error, self._redact)
        raise failure

    def describe_endpoint(self, name: str) -> Endpoint | None:
        answer = self._get(lambda client: client.describe_endpoint(EndpointName=name))
        if answer is None:
            return None
        return Endpoint(
            name=answer["EndpointName"],
            arn=answer["EndpointArn"],
            status=str(answer.get("EndpointStatus", "")),
            creation_time=answer.get("CreationTime"),
            last_modified_time=answer.get("LastModifiedTime"),
            failure_reason=answer.get("FailureReason") or None,
            config_name=answer.get("EndpointConfigName") or None,
        )

    def describe_endpoint_config(self, name: str) -> ConfigVersion | None:
        """The configuration and its first variant (the provider makes one); None if it is missing."""
        answer = self._get(lambda client: client.describe_endpoint_config(EndpointConfigName=name))
        if answer is None or not answer.get("ProductionVariants"):
            return None
        variant = answer["ProductionVariants"][0]
        return ConfigVersion(
            name=answer["EndpointConfigName"],
            model_name=variant.get("ModelName", ""),
            instance_type=str(variant.get("InstanceType", "")),
            instance_count=int(variant.get("InitialInstanceCount", 0)),
        )

    def describe_model(self, name: str) -> ModelVersion | None:
        answer = self._get(lambda client: client.describe_model(ModelName=name))
        if answer is None:
            return None
        container = answer.get("PrimaryContainer", {})
        return ModelVersion(
            name=answer["ModelName"],
            image=container.get("Image", ""),
            environment=dict(container.get("Environment", {})),
        )

    def model_exists(self, name: str) -> bool:
        return self._exists(lambda client: client.describe_model(ModelName=name))

    def endpoint_config_exists(self, name: str) -> bool:
        return self._exists(lambda client: client.describe_endpoint_config(EndpointConfigName=name))

    def _exists(self, describe: Callable[[SageMakerClient], Any]) -> bool:
        return self._call_tolerating(describe, is_missing)

    def list_endpoints(self, name_contains: str) -> list[Endpoint]:
        """Every endpoint whose name contains `name_contains`, all pages."""

        def pages(client: SageMakerClient) -> Iterator[Endpoint]:
            paginator = client.get_paginator("list_endpoints")
            for page in paginator.paginate(NameContains=name_contains, PaginationConfig={"PageSize": 100}):
                for summary in page.get("Endpoints", []):
                    yield Endpoint(
                        name=summary["EndpointName"],
                        arn=summary["EndpointArn"],
                        status=str(summary.get("EndpointStatus", "")),
                        creation_time=summary.get("CreationTime"),
                        last_modified_time=summary.get("LastModifiedTime"),
                    )

        return self._call(lambda client: list(pages(client)))

    def list_models(self, name_contains: str) -> list[Listed]:
        """Every model whose name contains `name_contains`, all pages."""

        def pages(client: SageMakerClient) -> Iterator[Listed]:
            paginator = client.get_paginator("list_models")
            for page in paginator.paginate(NameContains=name_contains, PaginationConfig={"PageSize": 100}):
                for summary in page.get("Models", []):
                    yield Listed(summary["ModelName"], summary["ModelArn"])

        return self._call(lambda client: list(pages(client)))

    def list_endpoint_configs(self, name_contains: str) -> list[Listed]:
        """Every endpoint configuration whose name contains `name_contains`, all pages."""

        def pages(client: SageMakerClient) -> Iterator[Listed]:
            paginator = client.get_paginator("list_endpoint_configs")
            for page in paginator.paginate(NameContains=name_contains, PaginationConfig={"PageSize": 100}):
                for summary in page.get("EndpointConfigs", []):
                    yield Listed(summary["EndpointConfigName"], summary["EndpointConfigArn"])

        return self._call(lambda client: list(pages(client)))

    def tags(self, arn: str) -> dict[str, str] | None:
        """The resource's tags, all pages; None if it no longer exists."""

        def read(client: SageMakerClient) -> dict[str, str]:
            tags: dict[str, str] = {}
            paginator = client.get_paginator("list_tags")
            for page in paginator.paginate(ResourceArn=arn):
                tags.update({tag["Key"]: tag["Value"] for tag in page.get("Tags", [])})
            return tags

        return self._get(read)

    def probe(self) -> None:
        """The cheapest call that proves the API answers and takes our credentials."""
        self._call(lambda client: client.list_endpoints(MaxResults=1))

    # -- creating: each returns False when the resource already existed --------------------------

    def create_model(self, deployment: Deployment, role_arn: str) -> bool:
        """The model `deployment.model_name`."""
        container: ContainerDefinitionTypeDef = {"Image": deployment.image}
        if deployment.environment:
            container["Environment"] = dict(deployment.environment)
        return self._call_tolerating(
            lambda client: client.create_model(
                ModelName=deployment.model_name,
                ExecutionRoleArn=role_arn,
                PrimaryContainer=container,
                Tags=_tags(deployment),
            ),
            is_already_existing,
        )

    def create_endpoint_config(self, deployment: Deployment) -> bool:
        """The configuration `deployment.config_name`, on the model `deployment.model_name`."""
        variant: ProductionVariantTypeDef = {
            "VariantName": VARIANT_NAME,
            "ModelName": deployment.model_name,
            "InstanceType": cast("ProductionVariantInstanceTypeType", deployment.instance_type),
            "InitialInstanceCount": deployment.instance_count,
            "InitialVariantWeight": 1.0,
        }
        if deployment.startup_timeout_seconds is not None:
            variant["ContainerStartupHealthCheckTimeoutInSeconds"] = deployment.startup_timeout_seconds
        return self._call_tolerating(
            lambda client: client.create_endpoint_config(
                EndpointConfigName=deployment.config_name,
                ProductionVariants=[variant],
                Tags=_tags(deployment),
            ),
            is_already_existing,
        )

    def create_endpoint(self, deployment: Deployment) -> bool:
        return self._call_tolerating(
            lambda client: client.create_endpoint(
                EndpointName=deployment.name,
                EndpointConfigName=deployment.config_name,
                Tags=_tags(deployment),
            ),
            is_already_existing,
        )

    # -- changing -------------------------------------------------------------------------------

    def update_endpoint(self, name: str, config_name: str) -> bool:
        """Start moving the endpoint onto `config_name`; False if SageMaker refused because it is busy
        (Creating, Updating: "Cannot update in-progress endpoint")."""
        return self._call_tolerating(
            lambda client: client.update_endpoint(EndpointName=name, EndpointConfigName=config_name),
            is_in_progress,
        )

    def tag(self, arn: str, tags: Sequence[tuple[str, str]]) -> None:
        """Add or overwrite tags of the resource."""
        pairs: list[TagTypeDef] = [{"Key": key, "Value": value} for key, value in tags]
        self._call(lambda client: client.add_tags(ResourceArn=arn, Tags=pairs))

    # -- deleting: each is fine with a resource that is already gone -----------------------------

    def delete_endpoint(self, name: str) -> DeleteOutcome:
        in_progress = False

        def accept(error: ClientError) -> bool:
            nonlocal in_progress
            in_progress = is_in_progress(error)
            return in_progress or is_missing(error)

        deleted = self._call_tolerating(lambda client: client.delete_endpoint(EndpointName=name), accept)
        return DeleteOutcome(deleted=deleted, in_progress=in_progress)

    def delete_endpoint_config(self, name: str) -> bool:
        return self._call_tolerating(
            lambda client: client.delete_endpoint_config(EndpointConfigName=name), is_missing
        )

    def delete_model(self, name: str) -> bool:
        return self._call_tolerating(lambda client: client.delete_model(ModelName=name), is_missing)


def _tags(deployment: Deployment) -> Sequence[TagTypeDef]:
    return [{"Key": key, "Value": value} for key, value in deployment.tags]
