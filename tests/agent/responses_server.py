"""A scripted Responses server: a real HTTP server on 127.0.0.1 for agent tests.

``POST /v1/responses`` answers each request with the next scripted reply, streamed as
the SSE frames of ``toolwire.agent.response_stream`` (``response.created`` ... per item
``output_item.added`` / delta / ``output_item.done`` ... ``response.completed`` with the
full output). It records every request (headers and JSON body) and every client that
went away before its stream was over. aiohttp runs in a background thread with its own
loop, so sync tests, async tests and a CLI in a subprocess can all reach it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import orjson
from aiohttp import web

from toolwire.agent import ScriptedResponse, response_stream


@dataclass(frozen=True)
class HttpErrorReply:
    status: int
    message: str


Reply = ScriptedResponse | HttpErrorReply


@dataclass(frozen=True)
class Recorded:
    headers: dict[str, str]
    body: dict[str, Any]


class ResponsesServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._disconnected = threading.Condition(self._lock)
        self._queue: deque[Reply] = deque()
        self._requests: list[Recorded] = []
        self.disconnects: list[int] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self.port = 0

    # ------------------------------------------------------------ script & records

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [request.body for request in self.requests]

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self.disconnects.clear()

    def wait_for_disconnect(self, timeout: float = 5.0) -> int:
        with self._disconnected:
            if not self._disconnected.wait_for(lambda: bool(self.disconnects), timeout):
                raise TimeoutError(f"no client disconnect within {timeout} s")
            return self.disconnects[0]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> ResponsesServer:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name="responses-server", daemon=True
        )
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), loop).result(timeout=10)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._loop is not None and self._thread is not None
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/responses", self._responses)
        runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        self.port = sock.getsockname()[1]
        self._runner = runner

    async def _close(self) -> None:
        for task in list(self._handlers):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------ handler

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            return await self._answer(request)
        finally:
            self._handlers.discard(task)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        with self._lock:
            self._requests.append(
                Recorded({k.lower(): v for k, v in request.headers.items()}, body)
            )
            index = len(self._requests) - 1
            reply = self._queue.popleft() if self._queue else None
        if reply is None:
            return _error(500, f"the script ran out at request #{index}")
        if isinstance(reply, HttpErrorReply):
            return _error(reply.status, reply.message)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        try:
            await response.prepare(request)
            for frame in response_stream(
                reply, response_id=f"resp_{index}", model=str(body.get("model"))
            ):
                await response.write(frame)
            if reply.stall_after is not None:
                await asyncio.sleep(3600)
            await response.write_eof()
        except (asyncio.CancelledError, ConnectionError):
            with self._disconnected:
                self.disconnects.append(index)
                self._disconnected.notify_all()
            raise
        return response


def _error(status: int, message: str) -> web.Response:
    payload = {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")
