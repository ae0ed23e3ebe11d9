"""Request bodies sent compressed (``Content-Encoding: gzip`` or ``zstd``), decoded within a bound.

Codex compresses its request bodies with zstd in some set-ups; other clients use gzip.
``BodyDecoder`` decodes one body as it arrives, chunk by chunk, and refuses it (413) as
soon as the decoded size passes the limit: a small body that would inflate to gigabytes
(a decompression bomb) never takes more memory than the limit. Several gzip members or
zstd frames in one body are decoded one after another; a body that stops inside one is
a 400, as is one that is not what its header says. Pure: bytes in, bytes out.
"""

from __future__ import annotations

import sys
import zlib
from typing import Protocol

from toolwire.errors import RequestError

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

DECODED = ("gzip", "x-gzip", "zstd")


class _Stream(Protocol):
    """One gzip member or zstd frame being decoded (zlib's and zstd's decompressors)."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = ...) -> bytes: ...


def body_decoder(content_encoding: bytes, limit: int) -> BodyDecoder | None:
    """The decoder for a ``Content-Encoding`` header's value; None for ``identity``.

    Raises ``RequestError`` (415) for a coding this gateway does not decode, or more than one.
    """
    coding = content_encoding.decode("latin-1").strip().lower()
    if coding in ("", "identity"):
        return None
    if coding not in DECODED:
        raise RequestError(
            f"The request body's Content-Encoding '{coding}' is not supported; send it as it is, "
            f"or compressed with {' or '.join(c for c in DECODED if c != 'x-gzip')}.",
            param="content-encoding",
            code="unsupported_content_encoding",
            status=415,
        )
    return BodyDecoder("zstd" if coding == "zstd" else "gzip", limit)


class BodyDecoder:
    """``decode(chunk) -> bytes`` as the body arrives, then ``flush() -> bytes`` at its end."""

    def __init__(self, coding: str, limit: int) -> None:
        self.coding = coding
        self.limit = limit
        self.decoded = 0
        self._stream = self._new_stream()
        self._fed = False
        """The current member or frame has been given bytes (so it must be finished)."""

    def decode(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        data = chunk
        while data:
            self._fed = True
            room = self.limit - self.decoded + 1
            try:
                piece = self._stream.decompress(data, room)
            except (zlib.error, zstd.ZstdError) as exc:
                raise self._invalid(str(exc)) from None
            self.decoded += len(piece)
            if self.decoded > self.limit:
                raise RequestError(
                    f"The request body is larger than the gateway's limit of {self.limit} bytes once "
                    f"decompressed ({self.coding}).",
                    code="request_too_large",
                    status=413,
                )
            out.append(piece)
            if self._stream.eof:  # the member or frame ended: what follows is another one
                data = self._stream.unused_data
                self._stream, self._fed = self._new_stream(), False
            else:  # the output fell short of the room left: all of the input was taken
                break
        return b"".join(out)

    def flush(self) -> bytes:
        """The body ended: refuse it if it ended inside a member or frame."""
        if self._fed:
            raise self._invalid("it ends before its compressed data does")
        return b""

    def _new_stream(self) -> _Stream:
        if self.coding == "zstd":
            return zstd.ZstdDecompressor()
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip's header and trailer, no other

    def _invalid(self, detail: str) -> RequestError:
        return RequestError(
            f"The request body is not valid {self.coding} (Content-Encoding: {self.coding}): {detail}.",
            param="content-encoding",
            code="invalid_content_encoding",
        )
