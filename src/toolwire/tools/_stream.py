"""Responses SSE bytes -> completed items -> calls, in one iterator."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from toolwire.protocol import ResponseStreamReader

from ._payloads import ToolCall
from ._router import decode_call


def calls_from_stream(chunks: Iterable[bytes]) -> Iterator[ToolCall]:
    """Yield each call as soon as its ``response.output_item.done`` arrives.

    Deltas never create a call. Raises ``UpstreamError`` if the stream ends without a
    terminal event.
    """
    reader = ResponseStreamReader()
    seen = 0
    for chunk in chunks:
        reader.feed(chunk)
        while seen < len(reader.items):
            call = decode_call(reader.items[seen])
            seen += 1
            if call is not None:
                yield call
    reader.flush()
    for item in reader.items[seen:]:
        call = decode_call(item)
        if call is not None:
            yield call
