"""The `sagemaker` provider: each pod of the node runs as an Amazon SageMaker real-time endpoint.

A pod becomes a model (its container's image and environment, run with the IAM role `role_arn`), an
endpoint configuration (one variant, `AllTraffic`, on the instance type and count chosen below) and
an endpoint, all three named `<name_prefix>-<pod UID>` and tagged `vk-provider.dev/pod-uid`,
`vk-provider.dev/node` and `vk-provider.dev/pod` (`<namespace>/<name>`). The pod must have one
container, no init containers, and no `command`, `args` or `workingDir`: SageMaker starts the image as
`<entrypoint> serve`, and the image must answer `GET /ping` and `POST /invocations` on port 8080 (the
SageMaker hosting contract); the pod's declared ports are not used. Its `nvidia.com/gpu` requests are
not used either: the instance type decides the hardware.

The pod's traffic address is the endpoint's invocation URL,
`https://runtime.sagemaker.<region>.amazonaws.com/endpoints/<name>/invocations`; requests to it must be
signed with SigV4 (service `sagemaker`) with the provider's credentials: see `vk_provider.kit.signing` and
`SageMakerProvider.request_signer`. EndpointStatus maps to pod states as `translate` tabulates: Creating
is Pending, InService (and Updating, which keeps serving) Running and ready, Failed is Failed with
SageMaker's FailureReason as the message, Deleting is a stopping pod.

A changed pod is applied in place when its image, environment, instance type or instance count changed
(the node hands over changes of labels, annotations and images; labels and other annotations do not
matter to SageMaker and cost no call): a new model (for a new image or environment) and a new endpoint
configuration, named `<name_prefix>-<pod UID>-<digest of their content>` and tagged like the first ones,
then UpdateEndpoint. The endpoint keeps serving its old version while Updating; once it is InService on
the new one, the pod's superseded models and configurations are removed. A failed update is rolled back
by SageMaker: the pod stays Running on the old version, its message gives SageMaker's FailureReason, and
the change is tried again when the pod changes again. A change while the endpoint is Creating or Updating
is refused as temporary (the node retries it). Deleting the pod removes every version. See `versions`.

Placement annotations on the pod:
- `sagemaker.vk-provider.dev/instance-type`: e.g. `ml.g5.xlarge` (else the `instance_type` setting),
  or several, comma-separated, in order of preference: when SageMaker has no capacity
  (InsufficientInstanceCapacity, as a refused create or, as it usually comes, an endpoint Failed minutes
  later: that endpoint is replaced, `shortages`) or quota (ResourceLimitExceeded) for one, the next is
  tried, each move a NoCapacity pod Event; the pod's price is its dearest type's. A quota of 0 holds
  creates of that type back (`capacity_retry_seconds`, then doubling: `quota_holds`); the health check
  reports QuotaExceeded only when every type asked for is held;
- `sagemaker.vk-provider.dev/instance-count`: instances behind the endpoint (else `instance_count`).

Settings (the provider's section of the node configuration; see `config.SageMakerSettings`):
- `role_arn` (required): the model's execution role;
- `region` (else the boto3 chain's), `endpoint_url` (the SageMaker API, for moto or a VPC endpoint),
  `runtime_url` (where invocations go, if not AWS's own; the router signs for its host only when its
  `--sign-for-host` names it);
- credentials: boto3's standard chain (environment, IRSA web identity, shared files, container and
  instance metadata), with an optional `profile`; or `credentials_file`, a mounted AWS credentials
  file (a Secret) read with `profile`'s section and re-read when it changes. Credential values are
  never logged: botocore's loggers get a filter that scrubs them (and models' environments);
- `instance_type`, `instance_count`, `container_startup_timeout_seconds`: placement defaults;
- `instance_prices`: USD per instance-hour by instance type, e.g. `{ml.g5.xlarge: 1.408}`, over the
  built-in table of us-east-1 on-demand prices (`prices`), which serves only in us-east-1: in any other
  region only these prices count. A pod costs its instance type's price times its instance count;
  one whose type has no price is of unknown price (refused under the node's spend ceiling unless the
  node allows unpriced pods);
- `call_timeout_seconds`, `connect_timeout_seconds`, `max_attempts`, `backoff_initial_seconds`,
  `backoff_max_seconds`, `max_retry_after_seconds`, `breaker_failure_threshold`,
  `breaker_open_seconds`, `health_timeout_seconds`: resilience; `max_concurrent_calls`: the size of the
  thread pool boto3 calls run on; `capacity_retry_seconds`: the wait after a quota refusal
  (ResourceLimitExceeded); `deletion_poll_seconds`: how often deferred deletions (see `provider`) and
  updates in progress are checked;
- `capacity`: what the node advertises; `name_prefix`.

IAM: the credentials need sagemaker:CreateModel, CreateEndpointConfig, CreateEndpoint, UpdateEndpoint,
AddTags, DescribeModel, DescribeEndpointConfig, DescribeEndpoint, ListEndpoints, ListEndpointConfigs,
ListModels, ListTags, DeleteModel, DeleteEndpointConfig, DeleteEndpoint and InvokeEndpoint (for the
router), and iam:PassRole on `role_arn`.

Capabilities: node capacity, pod prices (for the node's spend ceiling and cost metric). No status push
(the node polls), no pod IP, no logs (they are in CloudWatch Logs), no usage, no GPU catalog.
"""

from __future__ import annotations

from vk_provider.kit.signing import RequestSigner, sign_request
from vk_provider.provider import ProviderContext
from vk_providers.sagemaker.config import SageMakerSettings, parse_settings
from vk_providers.sagemaker.provider import SageMakerProvider


def create_provider(context: ProviderContext) -> SageMakerProvider:
    return SageMakerProvider(context)


__all__ = [
    "RequestSigner",
    "SageMakerProvider",
    "SageMakerSettings",
    "create_provider",
    "parse_settings",
    "sign_request",
]
