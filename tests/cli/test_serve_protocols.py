"""``toolwire serve``'s uvicorn protocol settings, from the ``[server]`` configuration.

The real process runs with them in tests/server/test_websocket.py; here, the table.
"""

from __future__ import annotations

from typing import Any

import pytest
from uvicorn.importer import import_from_string
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from toolwire.cli._serve import uvicorn_protocols
from toolwire.config import ServerConfig


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ({}, {"ws_max_size": 32 * 1024 * 1024, "ws_ping_interval": 20.0, "ws_ping_timeout": 20.0}),
        ({"max_body_bytes": 1000}, {"ws_max_size": 1000}),  # the WebSocket limit follows the body limit
        ({"max_body_bytes": 1000, "ws_max_message_bytes": 5000}, {"ws_max_size": 5000}),
        ({"ws_ping_interval": 0}, {"ws_ping_interval": None}),  # 0: no pings
        ({"ws_ping_interval": 2.5, "ws_ping_timeout": 1}, {"ws_ping_interval": 2.5, "ws_ping_timeout": 1.0}),
    ],
)
def test_websocket_settings(server: dict[str, Any], expected: dict[str, Any]) -> None:
    settings = uvicorn_protocols(ServerConfig.model_validate(server))
    assert {key: settings[key] for key in expected} == expected
    assert settings["ws_per_message_deflate"] is False


def test_the_protocols_are_toolwires_subclasses_of_uvicorns_own() -> None:
    settings = uvicorn_protocols(ServerConfig())
    assert issubclass(import_from_string(settings["http"]), HttpToolsProtocol)
    assert issubclass(import_from_string(settings["ws"]), WebSocketsSansIOProtocol)


@pytest.mark.parametrize("key", ["ws_max_message_bytes", "ws_max_lifetime", "ws_ping_timeout", "client_header_timeout"])
def test_bounds_must_be_positive(key: str) -> None:
    with pytest.raises(ValueError, match=key):
        ServerConfig.model_validate({key: 0})
