"""How long SageMaker takes, and what it says when it fails: the stand-in's profiles and SageMaker's words.

`FAST` (the default) keeps every existing test as it was: an endpoint is InService at once. `REALISTIC`
follows SageMaker's documentation and AWS's published measurements, for tests and benchmarks that study
time. Each figure and each message below says where it comes from.

Where the time of an endpoint's creation goes (AWS Machine Learning blog, "Introducing container caching
in Amazon SageMaker AI for faster model scaling", 2026-06-16, aws.amazon.com/blogs/machine-learning/;
the breakdown as summaries of the post quote it: Qwen3-8B, LMI container of 17.7 GB, ml.g6.2xlarge):
end to end 525 s, of which the container image pull from ECR took 333 s, in parallel with
the model artifacts' download from S3 (168 s); with the image cached, the pull is gone, the download takes
77 s, and the end to end is 258 s. The container starts once its image and artifacts are on the instance,
and SageMaker's health check counts from the container's start, so the stand-in splits Creating into:

- `provisioning_seconds`: until the container starts (333 s; cached: 77 s);
- `loading_seconds`: from the container's start until it first answers `GET /ping` with 200 (the rest of
  the end to end: 525 - 333 = 192 s; cached: 258 - 77 = 181 s). The instance's launch is folded into
  it: the blog gives no figure of its own for it.
"""

from __future__ import annotations

import dataclasses

DEFAULT_HEALTH_CHECK_TIMEOUT_SECONDS = 240.0
"""An endpoint is Failed when its container has not answered `/ping` consistently within four minutes of
its start (AWS Knowledge Center, "Why did my SageMaker endpoint creation or update fail?",
sagemaker-endpoint-creation-fail). A production variant's `ContainerStartupHealthCheckTimeoutInSeconds`
(60 to 3600 in botocore's service model) replaces it."""
INVOCATION_TIMEOUT_SECONDS = 60.0
"""A real-time endpoint's container must answer `/invocations` within 60 s ("The timeout for the container
to respond to inference requests to /invocations is 1 minute", SageMaker developer guide, as quoted in
RamVegiraju/SageMaker-Deployment issue 3; research note adoption-and-realism section 1)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Profile:
    """The time SageMaker takes, in the layer's clock's seconds."""

    name: str
    provisioning_seconds: float = 0.0
    """CreateEndpoint accepted -> the container starts (instances, image pull, artifacts)."""
    loading_seconds: float = 0.0
    """The container's start -> its first healthy `/ping` (weights loaded), unless a script says."""
    updating_seconds: float = 0.0
    deleting_seconds: float = 0.0
    capacity_failure_seconds: float = 0.0
    """CreateEndpoint accepted -> Failed for InsufficientInstanceCapacity."""
    health_check_timeout_seconds: float | None = None
    """How long a container has to answer `/ping` after its start; None: SageMaker's (the variant's
    ContainerStartupHealthCheckTimeoutInSeconds, else `DEFAULT_HEALTH_CHECK_TIMEOUT_SECONDS`)."""
    invocation_timeout_seconds: float = INVOCATION_TIMEOUT_SECONDS

    @property
    def creating_seconds(self) -> float:
        """How long a healthy endpoint is Creating."""
        return self.provisioning_seconds + self.loading_seconds


FAST = Profile("fast")
"""Everything at once (moto's own pace): the default, for tests that do not study time. The limits stay
SageMaker's: a container scripted never to answer `/ping` fails its endpoint after the health-check
timeout of the layer's clock, an answer scripted to take 60 s or more is a timeout (`runtime`)."""

REALISTIC = Profile(
    "realistic",
    provisioning_seconds=333.0,
    loading_seconds=192.0,
    # An update deploys the new configuration "to a new fleet of instances", then shifts the traffic
    # and deletes the old instances (UpdateEndpoint's documentation in botocore's service model), so it
    # takes a creation's time.
    updating_seconds=525.0,
    # Assumed: AWS publishes no figure for a deletion; a minute keeps Deleting observable.
    deleting_seconds=60.0,
    # Assumed: AWS publishes no figure. Capacity is found short when the instances are launched, before
    # any image is pulled; reports show the endpoint Creating, then Failed (aws/deep-learning-containers
    # pull request 6673).
    capacity_failure_seconds=120.0,
)
"""An LLM endpoint whose image is not cached: Creating for 525 s (the blog's measurement above)."""

REALISTIC_CACHED = dataclasses.replace(
    REALISTIC,
    name="realistic-cached",
    provisioning_seconds=77.0,
    loading_seconds=181.0,
    updating_seconds=258.0,
)
"""The same with the container image cached on the instance: Creating for 258 s."""

PROFILES = {profile.name: profile for profile in (FAST, REALISTIC, REALISTIC_CACHED)}


# -- SageMaker's words ---------------------------------------------------------------------------

PING_FAILURE_REASON = (
    "The primary container for production variant {variant} did not pass the ping health check. "
    "Please check CloudWatch logs for this endpoint."
)
"""A Failed endpoint's FailureReason when its container never answered `/ping` in time (AWS Knowledge
Center, sagemaker-endpoint-creation-fail)."""

CAPACITY_FAILURE_REASON = (
    "Unable to provision requested ML compute capacity due to InsufficientInstanceCapacity error."
)
"""A Failed endpoint's FailureReason when AWS has no capacity for its instance type: SageMaker accepts
the CreateEndpoint and reports the shortage on the endpoint, not as an API error (AWS Knowledge Center,
sagemaker-endpoint-creation-fail; the same words in aws/deep-learning-containers pull request 6673)."""

QUOTA_MESSAGE = (
    "The account-level service limit '{instance_type} for endpoint usage' is {limit} Instances, with "
    "current utilization of {used} Instances and a request delta of {delta} Instances. Please contact AWS "
    "support to request an increase for this limit."
)
"""CreateEndpoint's HTTP 400 `ResourceLimitExceeded` when the account's quota for the instance type is
too small (0 by default for many GPU types): an API error, the endpoint never created (botocore's
service model lists ResourceLimitExceeded as CreateEndpoint's error; the message as SageMaker words it
in aws/amazon-sagemaker-examples issue 307)."""
