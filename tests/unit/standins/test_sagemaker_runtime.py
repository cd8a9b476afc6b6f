"""InvokeEndpoint through the SageMaker stand-in: the container's answer relayed, ModelError 424 with
OriginalStatusCode for anything else, the 60 s limit, and no answer from an endpoint not in service."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from vk_devtools.standins.sagemaker import (
    REALISTIC,
    Container,
    ContainerAnswer,
    MotoSageMaker,
    SageMakerLayer,
)

from .sagemaker_support import ManualClock
from .test_sagemaker_profile import IMAGE, create_endpoint, layered

LOG_GROUP = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/llm"


def runtime(layer: SageMakerLayer) -> BaseClient:
    client = layer.moto.runtime_client()
    layer.install_runtime(client)
    return client


def invoked(client: BaseClient, name: str = "llm") -> dict[str, Any]:
    answer: dict[str, Any] = client.invoke_endpoint(  # type: ignore[attr-defined]
        EndpointName=name, Body=b'{"inputs": "Hi"}', ContentType="application/json"
    )
    return answer


def refused(client: BaseClient, name: str = "llm") -> dict[str, Any]:
    with pytest.raises(ClientError) as raised:
        invoked(client, name)
    response: dict[str, Any] = dict(raised.value.response)
    return response


def scripted(moto: MotoSageMaker, clock: ManualClock, answer: ContainerAnswer) -> SageMakerLayer:
    layer = SageMakerLayer(moto, clock=clock)
    layer.script_container(IMAGE, Container(answer=answer))
    create_endpoint(layered(layer), "llm")
    return layer


def test_a_containers_answer_is_relayed(moto: MotoSageMaker, clock: ManualClock) -> None:
    body = b'{"generated_text": "Hello"}'
    layer = scripted(moto, clock, ContainerAnswer(body=body, seconds=59.9))
    answer = invoked(runtime(layer))
    assert answer["Body"].read() == body
    assert (answer["ContentType"], answer["InvokedProductionVariant"]) == ("application/json", "AllTraffic")
    assert layer.invoke("llm").seconds == 59.9  # how long the caller waits, for a manual clock to move


@pytest.mark.parametrize(
    ("status", "side"), [(400, "client"), (422, "client"), (500, "server"), (503, "server")]
)
def test_a_containers_error_is_a_model_error_424(
    moto: MotoSageMaker, clock: ManualClock, status: int, side: str
) -> None:
    body = b'{"error": "prompt too long"}'
    layer = scripted(moto, clock, ContainerAnswer(status=status, body=body))
    response = refused(runtime(layer))
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert response["Error"]["Code"] == "ModelError"
    assert response["OriginalStatusCode"] == status
    assert response["OriginalMessage"] == body.decode()
    assert response["LogStreamArn"] == LOG_GROUP
    assert response["Error"]["Message"].startswith(
        f'Received {side} error ({status}) from primary with message "{body.decode()}". See https://'
    )


def test_an_answer_beyond_sixty_seconds_is_sagemakers_timeout(
    moto: MotoSageMaker, clock: ManualClock
) -> None:
    layer = scripted(moto, clock, ContainerAnswer(seconds=75))
    response = refused(runtime(layer))
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert response["Error"]["Code"] == "ModelError"
    assert response["OriginalStatusCode"] == 0
    assert response["Error"]["Message"].startswith(
        'Received server error (0) from primary with message "Your invocation timed out while waiting for a '
        "response from container primary."
    )
    # The caller waited the limit, not the container's 75 s.
    assert layer.invoke("llm").seconds == 60


def test_the_http_answer_carries_the_error_type_and_members(moto: MotoSageMaker, clock: ManualClock) -> None:
    # What a stand-in serving the runtime over HTTP sends (the router's path to SageMaker).
    layer = scripted(moto, clock, ContainerAnswer(status=500, body=b"boom"))
    invocation = layer.invoke("llm")
    assert invocation.status == 424
    assert dict(invocation.headers)["x-amzn-ErrorType"] == "ModelError"
    document = json.loads(invocation.body)
    assert (document["OriginalStatusCode"], document["OriginalMessage"]) == (500, "boom")


def test_an_endpoint_not_in_service_has_no_container_to_answer(
    moto: MotoSageMaker, clock: ManualClock
) -> None:
    layer = SageMakerLayer(moto, profile=REALISTIC, clock=clock)
    client = runtime(layer)
    create_endpoint(layered(layer), "llm")
    for name in ("llm", "missing"):  # Creating, and never created
        response = refused(client, name)
        assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert response["Error"]["Code"] == "ValidationError"
        assert response["Error"]["Message"] == f"Endpoint {name} of account 123456789012 not found."
    clock.advance(REALISTIC.creating_seconds)
    assert invoked(client)["Body"].read() == ContainerAnswer().body
    assert layer.calls["InvokeEndpoint"] == 3
