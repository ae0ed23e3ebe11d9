"""The words of an upstream's failures, each an ``UpstreamError``.

What the endpoint (``_http``) and a stream's reader (``_sse_batches``) say when an
upstream cannot be reached, is too slow, redirects, answers with a web page, or sends a
head or a body that cannot be read. Each names the upstream by its address without
credentials (``without_credentials``), never with a key, and keeps the foreign exception
(aiohttp's, asyncio's) as its cause. Of an upstream's own error answer, its message,
type, code and param are kept (``error_fields``), and its status, but for a 500, which
the client gets as 502 (``client_status``). Before any request, why an address cannot
be used at all (``unusable_url``), said without its credentials too.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from aiohttp.http_exceptions import ContentEncodingError, HttpProcessingError

from toolwire._addresses import url_host
from toolwire.errors import UpstreamError, UpstreamProtocolError

from ._connector import MalformedBody, parser_said

_UNSEEN = re.compile(r"<(script|style)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def web_page(raw: bytes, content_type: str) -> str | None:
    """``an HTML page ("its words")`` (the text a browser would show, title first, cut at
    200 characters) when ``raw`` is one, else None."""
    if content_type != "text/html" and raw.lstrip()[:1] != b"<":
        return None
    text = _TAG.sub(" ", _UNSEEN.sub(" ", raw[:16384].decode("utf-8", "replace")))
    said = " ".join(text.split())[:200]
    return f'an HTML page ("{said}")' if said else "an HTML page"


_ASK_THE_ADDRESS = "not an API's answer: is that the API's address (often ending in /v1)?"


def not_the_api(url: str, what: str) -> str:
    return f"The upstream at {url} {what}, {_ASK_THE_ADDRESS}"


def no_such_path(status: int, status_line: str, raw: bytes, content_type: str) -> str | None:
    """``answered HTTP 404 ... ("its words")`` when an answer at 404 or 405 is a server's
    own for a path it does not serve, not an API's error: a web page, Go's and Ollama's
    ``404 page not found``, FastAPI's (vLLM's, SGLang's) ``{"detail": "Not Found"}``. An
    API's error object (``{"error": ...}``, vLLM's ``{"object": "error", "message": ...}``)
    is its answer (a model it does not know). None otherwise."""
    if status not in (404, 405) or _is_api_error(raw):
        return None
    return f"answered {status_line}{_said(raw, content_type)}"


def _is_api_error(raw: bytes) -> bool:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(body, dict) and ("error" in body or "message" in body)


def check_doubt(request: str, status: int, status_line: str, raw: bytes, content_type: str, *, sends_key: bool) -> str | None:
    """What an upstream's answer to its check (``request``, ``GET /models``) says may keep
    it from serving requests, though it is there: its key refused (401, 403), or an address
    that is not the API's (``no_such_path``). None when it says nothing of the kind."""
    if status in (401, 403):
        answered = f"{request} answered {status_line}{_said(raw, content_type)}"
        if sends_key:
            return f"it refuses the key the gateway sends ({answered})"
        return f"it wants a key, and the gateway sends none ({answered})"
    wrong_address = no_such_path(status, status_line, raw, content_type)
    if wrong_address is not None:
        return f"{request} {wrong_address}, {_ASK_THE_ADDRESS}"
    return None


def _said(raw: bytes, content_type: str) -> str:
    """What an error answer's body says, to follow its status: `` with an HTML page
    ("its words")``, else `` ("words")`` (its message, or its text), blanks collapsed and
    cut at 200 characters; nothing for none."""
    page = web_page(raw, content_type)
    if page is not None:
        return f" with {page}"
    said = " ".join(error_fields(raw)[0].split())[:200]
    return f' ("{said}")' if said else ""


def status_line(status: int, reason: str | None) -> str:
    """``HTTP 404 Not Found``; ``HTTP 401`` when the server gave no reason phrase."""
    return f"HTTP {status} {reason or ''}".strip()


def client_status(upstream_status: int) -> int:
    """The status to give the client for an upstream error status.

    The upstream's own status, except 500: a gateway whose backend failed answers 502
    (Bad Gateway), and clients treat the two differently — Codex shows the body of a
    502 to its user but replaces a 500's with a generic "high demand" notice.
    """
    return 502 if upstream_status == 500 else upstream_status


def error_fields(raw: bytes) -> tuple[str, str | None, str | None, str | None]:
    """message, type, code and param from the usual error bodies (OpenAI, vLLM, Ollama, and
    Anthropic's ``{"type": "error", "error": {"type", "message"}}``)."""
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace").strip()[:2000], None, None, None
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, str):
        return error, None, None, None
    if not isinstance(error, dict):
        return str(error)[:2000], None, None, None
    message = error.get("message") or error.get("detail") or ""
    code = error.get("code")
    param = error.get("param")
    error_type = error.get("type")
    return (
        str(message),
        error_type if isinstance(error_type, str) else None,
        code if isinstance(code, str) else None,
        param if isinstance(param, str) else None,
    )


def connect_error(url: str, exc: BaseException, what: str | None = None) -> UpstreamError:
    """The upstream could not be reached: ``what`` says what was not done within which
    bound (a timeout), else the cause's own words."""
    error = UpstreamError(f"Cannot reach the upstream at {url}: {what or describe(exc)}.", code="upstream_unreachable")
    error.__cause__ = exc
    return error


def unreadable_answer(url: str, exc: aiohttp.ClientResponseError) -> UpstreamError:
    said = parser_said(exc.message)
    error = UpstreamProtocolError(f"The upstream at {url} answered with a response the gateway cannot read: {said}.")
    error.__cause__ = exc
    return error


def body_fault(exc: Exception) -> str | None:
    """What the parser said of a body it could not read (its framing, or its compression),
    when that is why reading it failed."""
    if isinstance(exc, MalformedBody):
        return str(exc)
    if isinstance(exc, HttpProcessingError):
        return str(MalformedBody(exc))
    if isinstance(exc, aiohttp.ClientPayloadError) and isinstance(exc.__cause__, ContentEncodingError):
        return str(MalformedBody(exc.__cause__))
    return None


def unreadable_body(fault: str) -> UpstreamError:
    return UpstreamProtocolError(f"The upstream's answer has a body the gateway cannot read: {fault}.")


def redirect_error(url: str, response: aiohttp.ClientResponse) -> UpstreamError:
    """A redirect is not followed: the request, and the key with it, would go to wherever
    the upstream points (aiohttp drops ``Authorization`` for another host, not ``x-api-key``)."""
    location = without_credentials(response.headers.get("Location", ""))[:500] or "nowhere it says"
    response.close()
    return UpstreamError(
        f"The upstream at {url} answered HTTP {response.status}, redirecting to {location}: the gateway "
        "follows no redirect (the request and its key would go elsewhere); set the upstream's address "
        "to where it points.",
        status=502,
        code="upstream_redirect",
    )


def unsent_error(url: str, allowed: float, size: int, exc: BaseException) -> UpstreamError:
    error = UpstreamError(
        f"The upstream at {url} did not take the request ({size} bytes) and answer it within {allowed:.0f} s "
        "(the connect and read timeouts, and the time to send the body at the slowest rate allowed).",
        status=504,
        code="upstream_timeout",
    )
    error.__cause__ = exc
    return error


def slow_body_error(url: str, allowed: float) -> UpstreamError:
    return UpstreamError(
        f"The upstream at {url} did not send its whole answer within {round(allowed, 1):g} s of its head "
        "(the read timeout, and the time to receive the largest answer allowed at the slowest rate allowed).",
        status=504,
        code="upstream_timeout",
    )


def first_byte_timeout(url: str, timeout: float, exc: BaseException) -> UpstreamError:
    error = UpstreamError(
        f"The upstream at {url} sent no response within {timeout:g} s.", status=504, code="upstream_timeout"
    )
    error.__cause__ = exc
    return error


def without_credentials(url: str) -> str:
    """The URL without any ``user:password@`` part, for messages and logs. That part ends
    at the authority's last ``@``, as URL parsers (yarl, ``urlsplit``) read it: a password
    may hold an ``@`` that was not escaped."""
    scheme, sep, rest = url.partition("://")
    end = min((at for at in map(rest.find, "/?#") if at >= 0), default=len(rest))
    _, at, host = rest[:end].rpartition("@")
    if not sep or not at:
        return url
    return f"{scheme}://{host}{rest[end:]}"


def unusable_url(url: str) -> str | None:
    """Why requests cannot be sent to ``url`` (a base URL), said without its credentials;
    None when they can: an http:// or https:// URL with a host that can be looked up and,
    if any, a port. Checked before any request, whose failure would repeat the URL whole
    (aiohttp's ``InvalidURL``) or escape as no connection error does (a ``UnicodeError``)."""
    shown = without_credentials(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- reading it checks it
    except ValueError:
        return f"{shown} is not a URL: its port must be a number up to 65535, and an IPv6 host goes in brackets"
    if parts.scheme not in ("http", "https"):
        return f"{shown} is not an http:// or https:// URL"
    if not parts.hostname:
        return f"{shown} names no host"
    try:
        parts.hostname.encode("idna")  # as the lookup will
    except UnicodeError:
        return f"{shown} names a host that cannot be looked up: each part between its dots is 1 to 63 characters long"
    return None


def describe(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.InvalidURL):
        return "its address is not a URL that can be used"  # aiohttp's words repeat the URL, credentials and all
    if isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(exc, aiohttp.ClientSSLError):
        return _no_connection(exc)
    text = str(exc) or type(exc).__name__
    return text[:500]


def _no_connection(exc: aiohttp.ClientConnectorError) -> str:
    """A connection that could not be opened, in words: aiohttp's say ``ssl:default`` of
    every plain connection and repeat the address its cause names again."""
    cause = exc.os_error
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"its host {exc.host} cannot be looked up ({cause.strerror or cause})"
    reason = os.strerror(cause.errno) if cause.errno else str(cause)  # uvloop's strerror repeats the address
    what = "the proxy at " if isinstance(exc, aiohttp.ClientProxyConnectionError) else ""
    return f"no connection to {what}{url_host(exc.host)}:{exc.port} ({reason})"
