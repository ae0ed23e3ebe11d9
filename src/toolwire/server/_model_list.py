"""``GET /v1/models``: the configured models, as an OpenAI list or as Codex's model catalog.

Without ``client_version`` the answer is the OpenAI list, ``{"object": "list", "data":
[...]}``. Codex asks with ``?client_version=<its version>`` (it refreshes its model list
that way) and reads ``{"models": [...]}``, entries merged over its bundled catalog by
slug: those are the very entries ``toolwire codex-config`` writes into a catalog file
(``toolwire.codex_config.model_entry``), so Codex knows each configured model's context
window, tools and reasoning levels either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolwire.codex_config import DEFAULT_INSTRUCTIONS, CodexModel, model_entry

from ._routing import ModelRouter


def model_list(router: ModelRouter, codex_models: Sequence[CodexModel]) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint; ``codex_models`` describe the configured models (by default, by name only)."""
    described = tuple(codex_models) or tuple(CodexModel(name) for name in router.model_names)

    async def models(request: Request) -> Response:
        if "client_version" in request.query_params:
            base_url = f"{request.base_url}v1"  # Starlette's base URL always ends with "/"
            entries = [
                model_entry(model, base_url=base_url, instructions=DEFAULT_INSTRUCTIONS, priority=index)
                for index, model in enumerate(described, start=1)
            ]
            return JSONResponse({"models": entries})
        data = [{"id": name, "object": "model", "created": 0, "owned_by": router.upstream_of(name)}
                for name in router.model_names]  # each named model has its upstream
        return JSONResponse({"object": "list", "data": data})

    return models
