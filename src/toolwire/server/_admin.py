"""The admin API: client keys over HTTP, for automation, with an admin key only::

    POST   /admin/keys           {"name", "models"?, "rpm"?, "tpm"?, "max_concurrent"?,
                                  "budget_tokens"?, "expires"?: "30d"} -> 201, the key once
    GET    /admin/keys           {"object": "list", "data": [key, ...]} (no key, no digest)
    DELETE /admin/keys/{name}    revoke the active key of that name
    GET    /admin/usage[?name=]  {"object": "list", "data": [row per key and model]}

Every call needs ``Authorization: Bearer <admin key>`` (``--admin-key-env``): 401
otherwise, and 404 on a gateway started without admin keys. Client keys, static or
stored, are not admin keys. Bodies are ``toolwire keys``'s, from the same functions
(``toolwire.keys.create_key`` ...); errors are OpenAI-shaped. Answers are never cached.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.errors import NotFoundError, RequestError, ToolwireError
from toolwire.keys import (
    KeyGate,
    KeySpec,
    KeyStore,
    create_key,
    list_keys,
    revoke_key,
    usage_report,
)

from ._errors import as_toolwire_error

Endpoint = Callable[[Request, KeyStore], Awaitable[Response]]
_HEADERS = {"cache-control": "no-store"}


class AdminKeyRequired(ToolwireError):
    status = 401
    error_type = "invalid_request_error"

    def __init__(self) -> None:
        super().__init__("The admin API needs 'Authorization: Bearer <admin key>'.", code="invalid_admin_key")


def admin_routes(gate: KeyGate | None) -> list[Route]:
    """The admin API over ``gate``'s store, on when the gate has admin keys."""

    async def create(request: Request, store: KeyStore) -> Response:
        try:
            spec = KeySpec.model_validate_json(await request.body())
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            where = ".".join(map(str, error["loc"])) or "body"
            raise RequestError(f"Invalid key request at '{where}': {error['msg']}.", param=where) from None
        record, key = await create_key(store, spec)
        return _json({"key": key, **record.describe(record.created_at)}, 201)

    async def listing(request: Request, store: KeyStore) -> Response:
        return _json({"object": "list", "data": await list_keys(store)})

    async def revoke(request: Request, store: KeyStore) -> Response:
        revoked = await revoke_key(store, request.path_params["name"])
        return _json({"name": revoked.name, "prefix": revoked.prefix, "revoked": True})

    async def usage(request: Request, store: KeyStore) -> Response:
        rows = await usage_report(store, request.query_params.get("name") or None)
        return _json({"object": "list", "data": rows})

    def guarded(endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
        async def answer(request: Request) -> Response:
            try:
                if gate is None or not gate.has_admin_keys:
                    raise NotFoundError(
                        "The admin API is off: start the gateway with --admin-key-env VAR (VAR holding the admin key).",
                        code="admin_api_off",
                    )
                if not gate.is_admin(request.headers.get("authorization")):
                    raise AdminKeyRequired()
                if gate.store is None:
                    raise RequestError("This gateway keeps no key store (--store none).", code="no_key_store", status=409)
                return await endpoint(request, gate.store)
            except Exception as exc:
                error = as_toolwire_error(exc)
                headers = {**_HEADERS, "www-authenticate": "Bearer"} if isinstance(error, AdminKeyRequired) else _HEADERS
                return Response(orjson.dumps(error.to_body()), error.status, headers, "application/json")

        return answer

    return [
        Route("/admin/keys", guarded(create), methods=["POST"]),
        Route("/admin/keys", guarded(listing), methods=["GET"]),
        Route("/admin/keys/{name}", guarded(revoke), methods=["DELETE"]),
        Route("/admin/usage", guarded(usage), methods=["GET"]),
    ]


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status, _HEADERS, "application/json")
