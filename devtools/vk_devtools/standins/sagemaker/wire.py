"""Answers the layer gives botocore for the service: parsed responses, as botocore's parser would make."""

from __future__ import annotations

import io
import json
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.response import StreamingBody

from vk_devtools.standins.sagemaker.runtime import Invocation

Response = tuple[AWSResponse, dict[str, Any]]


def arguments(params: dict[str, Any]) -> dict[str, Any]:
    """The API parameters of a JSON-protocol request, as botocore serialised them."""
    body = params.get("body") or b"{}"
    document = json.loads(body.decode() if isinstance(body, bytes) else body)
    return document if isinstance(document, dict) else {}


def answer(parsed: dict[str, Any], status: int = 200) -> Response:
    parsed = {**parsed, "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0}}
    return AWSResponse("", status, HTTPHeaders(), None), parsed


def error(code: str, message: str, status: int = 400) -> Response:
    return answer({"Error": {"Code": code, "Message": message}}, status)


def invocation_answer(invocation: Invocation) -> Response:
    """InvokeEndpoint's answer: the body as a stream, or the error with its members (ModelError's
    OriginalStatusCode, ...)."""
    if invocation.error_code is not None:
        parsed: dict[str, Any] = {
            "Error": {"Code": invocation.error_code, "Message": invocation.message},
            **dict(invocation.error_fields),
        }
        return answer(parsed, invocation.status)
    headers = dict(invocation.headers)
    parsed = {
        "Body": StreamingBody(io.BytesIO(invocation.body), len(invocation.body)),
        "ContentType": headers["Content-Type"],
        "InvokedProductionVariant": headers["x-Amzn-Invoked-Production-Variant"],
    }
    return answer(parsed, invocation.status)
