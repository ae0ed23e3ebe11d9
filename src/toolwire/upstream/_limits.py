"""How much of an upstream's answer the gateway holds at once, and what it does past that.

``UpstreamLimits`` bounds every read from a backend: the longest SSE line and event of a
stream (``SSEDecoder`` holds at most one unfinished line and one unfinished event), the
whole stream (what the stream translator keeps of it, the answer so far, grows with it),
and the largest non-streamed body, all counted after decompression (aiohttp decodes gzip and
deflate in steps, so a compression bomb arrives as bytes like any other, and is cut at
the same limit). Past a limit the read fails with ``UpstreamLimitError`` naming the
setting, the caller closes the connection, and nothing read so far is kept: the memory
goes back to the system once the exchange is over (``return_freed_memory_soon``).

The defaults leave room (``python -m bench.answer_sizes``): the largest answer a current
model writes (128k output tokens as one ``apply_patch`` call, or as CJK text escaped as
``\\uXXXX``) makes SSE lines of 0.6 to 1.3 MiB, a twelfth of the default; streamed one
token per event, with as many reasoning tokens, it is a 67 MiB stream, half the default.
The stream's bound is the loosest because the answer so far is what the translator keeps:
an upstream that streams valid text forever makes the gateway hold up to about that much
(measured: 238 MiB more RSS at a 256 MiB bound) until the cut.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from toolwire._memory import return_freed_memory_soon
from toolwire.errors import UpstreamLimitError
from toolwire.protocol import SSELimitExceeded

MiB = 2**20
DEFAULT_UPSTREAM_MAX_LINE_BYTES = 16 * MiB
DEFAULT_UPSTREAM_MAX_EVENT_BYTES = 16 * MiB
DEFAULT_UPSTREAM_MAX_BODY_BYTES = 32 * MiB
DEFAULT_UPSTREAM_MAX_STREAM_BYTES = 128 * MiB  # twice a 256k-token answer streamed token by token
ERROR_BODY_BYTES = 64 * 1024
"""Of an error answer only the message is used: the rest is not read."""


def _ignore(limit: str) -> None:
    pass


@dataclass(frozen=True, slots=True)
class UpstreamLimits:
    """The bounds on what one upstream answer may make the gateway hold.

    ``tripped`` is called with the setting's name each time one is exceeded (the
    server counts them in its metrics).
    """

    max_line_bytes: int = DEFAULT_UPSTREAM_MAX_LINE_BYTES
    max_event_bytes: int = DEFAULT_UPSTREAM_MAX_EVENT_BYTES
    max_body_bytes: int = DEFAULT_UPSTREAM_MAX_BODY_BYTES
    max_stream_bytes: int = DEFAULT_UPSTREAM_MAX_STREAM_BYTES
    tripped: Callable[[str], None] = field(default=_ignore, compare=False, repr=False)

    def stream_error(self, exceeded: SSELimitExceeded) -> UpstreamLimitError:
        """What the client is told when a stream's line or event was too long."""
        return self._exceeded(
            f"upstream_max_{exceeded.what}_bytes",
            f"The upstream sent an SSE {exceeded.what} longer than the gateway's limit of {_size(exceeded.limit)}",
            "the stream was cut",
        )

    def stream_too_long_error(self) -> UpstreamLimitError:
        return self._exceeded(
            "upstream_max_stream_bytes",
            f"The upstream's stream is longer than the gateway's limit of {_size(self.max_stream_bytes)}",
            "it was cut",
        )

    def body_error(self) -> UpstreamLimitError:
        return self._exceeded(
            "upstream_max_body_bytes",
            f"The upstream's answer is larger than the gateway's limit of {_size(self.max_body_bytes)}",
            "it was not read to the end",
        )

    def _exceeded(self, setting: str, what: str, consequence: str) -> UpstreamLimitError:
        """Count the trip, give the memory that held the read back soon, and say so."""
        self.tripped(setting)
        return_freed_memory_soon()
        return UpstreamLimitError(f"{what} ({setting}); {consequence}.", limit=setting)


async def read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The whole (decompressed) body, or None as soon as it is known to be over ``limit``
    bytes: a declared ``Content-Length`` over it is not read at all."""
    declared = response.content_length
    if declared is not None and declared > limit and not response.headers.get("Content-Encoding"):
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def read_prefix(response: aiohttp.ClientResponse, limit: int = ERROR_BODY_BYTES) -> bytes:
    """The first ``limit`` bytes of the body, for an error message; the rest is left unread."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


def _size(limit: int) -> str:
    if limit >= MiB and limit % MiB == 0:
        return f"{limit // MiB} MiB"
    if limit >= 1024 and limit % 1024 == 0:
        return f"{limit // 1024} KiB"
    return f"{limit} bytes"
