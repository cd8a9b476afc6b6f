"""Server-sent events as the development tools serve them: the demo's token stream, the RunPod
stand-in's log stream.

One writer for both, so both stream the same way: no caching, no proxy buffering (the demo's point is
seeing tokens as they come), and each event written to the transport at once (chunked, uncompressed).
"""

from __future__ import annotations

from aiohttp import web

HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    # Tells nginx-like proxies not to buffer the stream.
    "X-Accel-Buffering": "no",
}


async def open_event_stream(request: web.Request) -> web.StreamResponse:
    """A prepared response that streams events to `request`'s client."""
    response = web.StreamResponse(headers=HEADERS)
    await response.prepare(request)
    return response


def encode_event(data: str, *, event_id: str | int | None = None) -> bytes:
    """One event: an optional `id:` line, a `data:` line and the blank line that ends it."""
    head = "" if event_id is None else f"id: {event_id}\n"
    return f"{head}data: {data}\n\n".encode()
