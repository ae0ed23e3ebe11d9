"""Responses SSE bytes -> completed items -> calls, in one iterator."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from toolwire.protocol import ResponseStreamReader

from ._payloads import ToolCall, decode_call


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
    # Raises without a terminal event; completes no item otherwise, since the reader
    # ignores whatever follows the terminal event.
    reader.flush()
