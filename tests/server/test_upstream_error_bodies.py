"""What backends really send with an error status, each reported to the client with its
text, through the real gateway, streamed or not (nothing was streamed yet)."""

from __future__ import annotations

import httpx
import pytest

from tests.support.chat_upstream import ChatUpstream, HttpError
from tests.support.gateway import GatewayProcess

NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.27.0</center>\r\n</body>\r\n</html>\r\n"
)

# name -> (the upstream's answer, the client's status, texts its error message must hold)
BODIES: dict[str, tuple[HttpError, int, list[str]]] = {
    "openai object": (
        HttpError(400, {"error": {"message": "max_tokens is too large", "type": "invalid_request_error", "param": "max_tokens", "code": None}}),
        400, ["max_tokens is too large"],
    ),
    "vllm object": (
        HttpError(400, {"object": "error", "message": "This model's maximum context length is 32768 tokens.", "type": "BadRequestError", "code": 400}),
        400, ["maximum context length is 32768 tokens"],
    ),
    "ollama string": (HttpError(404, {"error": "model 'qwen3:8b' not found, try pulling it first"}), 404, ["model 'qwen3:8b' not found"]),
    "json string": (HttpError(503, '"server overloaded, retry later"', {"Content-Type": "application/json"}), 503, ["server overloaded, retry later"]),
    "json list": (
        HttpError(422, [{"loc": ["body", "messages"], "msg": "field required", "type": "missing"}]),
        422, ["field required", "messages"],
    ),
    "fastapi detail list": (
        HttpError(422, {"detail": [{"loc": ["body", "temperature"], "msg": "must be at most 2", "type": "less_than_equal"}]}),
        422, ["must be at most 2", "temperature"],
    ),
    "fastapi detail string": (HttpError(401, {"detail": "Not authenticated"}), 401, ["Not authenticated"]),
    "html page": (HttpError(502, NGINX_502, {"Content-Type": "text/html"}), 502, ["502 Bad Gateway", "nginx/1.27.0"]),
    "plain text": (HttpError(429, "Rate limit exceeded: 3 requests per minute\n"), 429, ["Rate limit exceeded: 3 requests per minute"]),
    "empty": (HttpError(503, ""), 503, ["HTTP 503", "Service Unavailable"]),
    "empty object": (HttpError(400, {}), 400, ["HTTP 400", "Bad Request"]),
}


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("name", list(BODIES))
def test_an_upstream_error_body_reaches_the_client_with_its_text(
    gateway: GatewayProcess, upstream: ChatUpstream, name: str, streaming: bool
) -> None:
    reply, status, texts = BODIES[name]
    upstream.enqueue(*[reply] * 3)  # a 5xx is retried: each attempt gets the same answer
    response = httpx.post(gateway.base_url + "/responses", json={"model": "m", "input": "hi", "stream": streaming}, timeout=60)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert all(text in error["message"] for text in texts), error
    assert error["type"] and "Traceback" not in error["message"], error
