"""``serving_lines``: what ``toolwire serve`` says it serves as it starts, as a pure function.

Where clients reach the gateway, then one line per upstream: its kind, its address
without credentials, its preset, where its key comes from (the variable, never the key),
and the models routed to it, with the name each is sent upstream under; last, where
responses and client keys are kept (a Redis store's password never shown). Read from the
configuration alone (flags laid over the file), as ``serve_problems`` is: a user sees at
once that a flag or a file says what they meant, before any request finds out.
"""

from __future__ import annotations

from toolwire._addresses import url_host
from toolwire.config import GatewayConfig, UpstreamConfig
from toolwire.store import redact_url, sqlite_path
from toolwire.upstream import KINDS, without_credentials


def serving_lines(config: GatewayConfig, *, model_override: str | None = None) -> list[str]:
    """The lines, in order; ``model_override``: ``--model``, the name every request to the
    default upstream is sent under."""
    server = config.server
    lines = [f"the Responses API at http://{url_host(server.host)}:{server.port}/v1"]
    routed: dict[str, list[str]] = {}
    for model in config.models:
        sent = model.upstream_model
        routed.setdefault(model.upstream, []).append(model.name + (f" (as {sent})" if sent and sent != model.name else ""))
    default = config.default_upstream
    for upstream in config.upstreams:
        served = routed.get(upstream.name, [])
        if upstream.name == default:
            rest = "every other model" if served else "every model"
            served = [*served, rest + (f" (as {model_override})" if model_override else "")]
        lines.append(f"upstream '{upstream.name}': {_described(upstream)}; serves {', '.join(served) or 'no model'}")
    lines.append(_kept(server.store))
    return lines


def _kept(store: str) -> str:
    """Where responses and client keys are kept: ``store``, a URL ``open_store`` took."""
    scheme = store.partition(":")[0].lower()
    if store == "none":
        return "responses and client keys: not kept (store none)"
    if scheme == "memory":
        return "responses and client keys kept in this process only (memory://)"
    if scheme == "sqlite":
        return f"responses and client keys kept in {sqlite_path(store)}"
    return f"responses and client keys kept in Redis at {redact_url(store)}"


def _described(upstream: UpstreamConfig) -> str:
    words = [KINDS[upstream.kind].description]
    if upstream.base_url is not None:
        words.append(f"at {without_credentials(upstream.base_url)}")
    details = [f"preset {upstream.preset}"] if upstream.preset != "generic" else []
    if upstream.api_key_env is not None:
        details.append(f"its key from ${upstream.api_key_env}")
    return " ".join(words) + "".join(f", {detail}" for detail in details)
