"""The SageMaker stand-in: moto's SageMaker in server mode, and the layer of SageMaker's behaviour on top.

- `server`: `MotoSageMaker`, moto on 127.0.0.1 and a free port;
- `layer`: `SageMakerLayer`, installed on boto3 clients: SageMaker's states, refusals and faults, on a
  clock, with a `profile`;
- `profile`: `FAST` (the default: no time at all) and `REALISTIC` (SageMaker's times and words, each
  with its source);
- `startup`, `capacity`, `runtime`: how an endpoint's creation goes, quotas and capacity per instance
  type, InvokeEndpoint's answers (ModelError 424, the 60 s limit);
- `records`, `faultqueue`, `wire`: the layer's parts (moto's records, scripted faults, botocore answers).

The modules, each importing only those listed before it: profile, server, runtime, wire, faultqueue,
capacity, records, startup, layer.
"""

from vk_devtools.standins.sagemaker.capacity import MOTO_INSTANCE_TYPE
from vk_devtools.standins.sagemaker.faultqueue import HOLD_LIMIT_SECONDS, Fault
from vk_devtools.standins.sagemaker.layer import IN_PROGRESS, SERVING, EndpointUpdate, SageMakerLayer
from vk_devtools.standins.sagemaker.profile import (
    CAPACITY_FAILURE_REASON,
    FAST,
    PING_FAILURE_REASON,
    PROFILES,
    REALISTIC,
    REALISTIC_CACHED,
    Profile,
)
from vk_devtools.standins.sagemaker.records import TAGGING
from vk_devtools.standins.sagemaker.runtime import ContainerAnswer, Invocation
from vk_devtools.standins.sagemaker.server import ACCOUNT_ID, GPU_INSTANCE_TYPE, TEST_ROLE_ARN, MotoSageMaker
from vk_devtools.standins.sagemaker.startup import Container

__all__ = [
    "ACCOUNT_ID",
    "CAPACITY_FAILURE_REASON",
    "FAST",
    "GPU_INSTANCE_TYPE",
    "HOLD_LIMIT_SECONDS",
    "IN_PROGRESS",
    "MOTO_INSTANCE_TYPE",
    "PING_FAILURE_REASON",
    "PROFILES",
    "REALISTIC",
    "REALISTIC_CACHED",
    "SERVING",
    "TAGGING",
    "TEST_ROLE_ARN",
    "Container",
    "ContainerAnswer",
    "EndpointUpdate",
    "Fault",
    "Invocation",
    "MotoSageMaker",
    "Profile",
    "SageMakerLayer",
]
