"""The limit on request bodies the router must read whole: those to signed endpoints.

A SigV4 signature covers the body's SHA-256, so a request to a signed endpoint cannot leave before its
whole body is in. SageMaker's runtime accepts no unsigned payload (only S3 does) and bounds an
invocation at 6 MB, so buffering is cheap there and the router refuses anything larger up front
instead of uploading it for AWS to refuse. Once read, the same bytes serve every later attempt of
the request, whichever endpoint it goes to.
"""

from __future__ import annotations

SIGNED_BODY_LIMIT = 6 * 1024 * 1024
"""SageMaker's InvokeEndpoint payload limit, 6 MB."""


class BodyTooLargeError(Exception):
    """The body is larger than a signed request may carry."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than the {limit} bytes a signed request may carry")
        self.limit = limit
