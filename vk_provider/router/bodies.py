"""The client's request body, streamed through by default and read whole only when it must be signed.

A SigV4 signature covers the body's SHA-256, so a request to a signed endpoint cannot leave before its
whole body is in. SageMaker's runtime accepts no unsigned payload (only S3 does) and bounds an
invocation at 6 MB, so buffering is cheap there and the router refuses anything larger up front
instead of uploading it for AWS to refuse. Once read, the same bytes serve every later attempt of
the request, whichever endpoint it goes to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

SIGNED_BODY_LIMIT = 6 * 1024 * 1024
"""SageMaker's InvokeEndpoint payload limit, 6 MB."""


class BodyTooLargeError(Exception):
    """The body is larger than a signed request may carry."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than the {limit} bytes a signed request may carry")
        self.limit = limit


class RequestBody:
    """One request's body: a stream for plain attempts, bytes once an attempt has read it whole."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._whole: bytes | None = None

    def payload(self) -> bytes | AsyncIterator[bytes] | None:
        """What to send: the bytes if read, else the stream as it arrives, None without a body."""
        if self._whole is not None:
            return self._whole
        if not self._request.body_exists:
            return None
        return _stream(self._request)

    async def whole(self, limit: int) -> bytes:
        """The whole body (read once), or BodyTooLargeError past `limit` bytes.

        A declared Content-Length over the limit is refused before reading anything.
        """
        if self._whole is not None:
            return self._whole
        declared = self._request.content_length
        if declared is not None and declared > limit:
            raise BodyTooLargeError(limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in self._request.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise BodyTooLargeError(limit)
            chunks.append(chunk)
        self._whole = b"".join(chunks)
        return self._whole


async def _stream(request: web.Request) -> AsyncIterator[bytes]:
    """The client's body as it arrives, so uploads stream upstream too."""
    async for chunk in request.content.iter_any():
        yield chunk
