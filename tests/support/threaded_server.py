"""An aiohttp app served from a background thread: what the test servers have in common.

`ThreadedServer` is the base of `ChatUpstream`, `ResponsesUpstream` and `ForwardProxy`.
It owns an event loop running in a daemon thread and, between `start` and `stop` (or in a
``with`` block), serves the `aiohttp.web.Application` its subclass builds on 127.0.0.1, on
the port asked for or a free one, so sync tests, async tests and other processes can all
reach it. A subclass may do more in that loop once the server listens (`_on_start`) and
before its connections are closed (`_on_stop`). `_noticing_disconnect` wraps the writing
of a stream and reports a client that went away before the stream was over.

`ScriptedServer` is what the scripted upstreams (`ChatUpstream`, `MessagesUpstream`,
`ResponsesUpstream`) add to it: replies queued by the test and taken oldest first (else
made by a `responder`), every request and every client that went away recorded, and the
handlers of their main route cancelled on `stop`, so that it never waits for a stalled one.

`Recorded` is the thread-safe list the handlers append to (requests, disconnects) and a
test reads, or waits on for its first entry.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from aiohttp import web

__all__ = ["Recorded", "ScriptedServer", "ThreadedServer"]

T = TypeVar("T")
ReplyT = TypeVar("ReplyT")
RequestT = TypeVar("RequestT")
DisconnectT = TypeVar("DisconnectT")


class Recorded(Generic[T]):
    """Entries appended in the server's thread and read (or awaited) in the test's."""

    def __init__(self, what: str) -> None:
        self._what = what
        """What an entry is, for the message of `wait_for_first`."""
        self._entries: list[T] = []
        self._changed = threading.Condition()

    def append(self, entry: T) -> int:
        """Add `entry`; return its index."""
        with self._changed:
            self._entries.append(entry)
            self._changed.notify_all()
            return len(self._entries) - 1

    def snapshot(self) -> list[T]:
        with self._changed:
            return list(self._entries)

    def clear(self) -> None:
        with self._changed:
            self._entries.clear()

    def wait_for_first(self, timeout: float) -> T:
        """Block until there is an entry; return the first. TimeoutError after `timeout` s."""
        with self._changed:
            if not self._changed.wait_for(lambda: bool(self._entries), timeout):
                raise TimeoutError(f"no {self._what} within {timeout} s")
            return self._entries[0]


class ThreadedServer:
    """Serves `_make_app()` on 127.0.0.1 from a loop in its own thread.

    `handler_cancellation` (off by default since aiohttp 3.9) cancels a handler when its
    client disconnects; that is how a stalled stream notices the peer went away.
    """

    def __init__(
        self, *, port: int = 0, handler_cancellation: bool = False, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self._requested_port = port
        self._handler_cancellation = handler_cancellation
        self._ssl_context = ssl_context
        """Serve HTTPS with this context (``scheme`` says which)."""
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stopping = False
        """True while `stop` runs: the handlers cancelled then did not lose their client."""

    # ----------------------------------------------------------------- for subclasses

    def _make_app(self) -> web.Application:
        raise NotImplementedError

    async def _on_start(self) -> None:
        """Runs in the loop once the server listens."""

    async def _on_stop(self) -> None:
        """Runs in the loop when the server stops, before its connections are closed."""

    @contextmanager
    def _noticing_disconnect(
        self, notice: Callable[[], object], *, closed_by_us: bool = False
    ) -> Iterator[None]:
        """Around the writing of a stream: call `notice` if its client goes away first.

        A write that finds the connection closed ends the stream quietly. A cancelled
        handler (aiohttp cancels it when the peer closes) counts unless the server is
        stopping or the handler closed the connection itself (`closed_by_us`).
        """
        try:
            yield
        except ConnectionError:
            notice()
        except asyncio.CancelledError:
            if not (closed_by_us or self._stopping):
                notice()
            raise

    # ----------------------------------------------------------------- lifecycle

    @property
    def scheme(self) -> str:
        return "https" if self._ssl_context is not None else "http"

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._port

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError(f"{type(self).__name__} is already started")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=type(self).__name__, daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._run_in_loop(self._serve())
        except BaseException:
            self._shut_down_loop()
            raise
        return self

    def stop(self) -> None:
        """Run `_on_stop`, close every connection, then end the loop and its thread."""
        if self._loop is None:
            return
        try:
            self._run_in_loop(self._close())
        finally:
            self._shut_down_loop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run_in_loop(self, coroutine: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    async def _serve(self) -> None:
        runner = web.AppRunner(
            self._make_app(),
            handler_cancellation=self._handler_cancellation,
            shutdown_timeout=1.0,
            access_log=None,
        )
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", self._requested_port))
            await web.SockSite(runner, sock, ssl_context=self._ssl_context).start()
            self._stopping = False
            await self._on_start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._port = sock.getsockname()[1]
        self._runner = runner

    async def _close(self) -> None:
        self._stopping = True
        await self._on_stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _shut_down_loop(self) -> None:
        loop, thread = self._loop, self._thread
        assert loop is not None and thread is not None
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = self._thread = None
        self._port = None


class ScriptedServer(ThreadedServer, Generic[ReplyT, RequestT, DisconnectT]):
    """A `ThreadedServer` that answers from a script and records what it was sent.

    `responder` (the request's parsed body in, a reply out) may be set or changed at any
    time; it is asked only when no queued reply is left.
    """

    def __init__(self, *, port: int = 0, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(port=port, handler_cancellation=True, ssl_context=ssl_context)
        self.responder: Callable[[Any], ReplyT] | None = None
        self._lock = threading.Lock()
        self._queue: deque[ReplyT] = deque()
        self._requests = Recorded[RequestT]("request")
        self._disconnects = Recorded[DisconnectT]("client disconnect noticed")
        self._handlers: set[asyncio.Task[Any]] = set()

    def enqueue(self, *replies: ReplyT) -> None:
        """Append replies; each request of the main route takes the oldest one."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """How many queued replies are still unused."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RequestT]:
        """A snapshot of every request received so far, in arrival order."""
        return self._requests.snapshot()

    @property
    def disconnects(self) -> list[DisconnectT]:
        """A snapshot of the clients that went away before their answer was over."""
        return self._disconnects.snapshot()

    def wait_for_disconnect(self, timeout: float = 5.0) -> DisconnectT:
        """Block until a client has gone away mid-answer; return the first one noticed."""
        return self._disconnects.wait_for_first(timeout)

    def reset(self) -> None:
        """Forget queued replies, the responder and everything recorded."""
        with self._lock:
            self._queue.clear()
        self._requests.clear()
        self._disconnects.clear()
        self.responder = None

    def _next_reply(self, body: Any) -> ReplyT | None:
        """The oldest queued reply, else the responder's for ``body``, else None (the
        responder's exception, if it raises)."""
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.responder(body) if self.responder is not None else None

    async def _cancelled_on_stop(self, answer: Awaitable[web.StreamResponse]) -> web.StreamResponse:
        """Run a handler's ``answer`` so that `stop` cancels it if it is still running."""
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            return await answer
        finally:
            self._handlers.discard(task)

    async def _on_stop(self) -> None:
        for task in list(self._handlers):
            task.cancel()
