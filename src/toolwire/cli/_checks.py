"""``serve_problems``: what stops ``toolwire serve`` from starting, as a pure function.

Everything is decided from the configuration (flags already laid over the file) and the
environment it will read its secrets from: nothing is opened, bound or connected. Each
problem is one sentence a user can act on; ``serve`` prints them all and exits 2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from toolwire.config import GatewayConfig, config_key
from toolwire.server import is_loopback, parse_client_keys
from toolwire.server._factory import open_configured_store
from toolwire.upstream import proxy_for


def serve_problems(
    config: GatewayConfig, environ: Mapping[str, str], *, store_has_keys: Callable[[], bool] = lambda: False
) -> list[str]:
    """Every reason ``config`` cannot be served with the secrets in ``environ``.

    ``store_has_keys`` says whether the store holds client keys (``toolwire keys``); it is
    asked only when that decides whether an open address may be served.
    """
    if not config.upstreams:
        return ["no upstream: pass --upstream URL (or a shortcut such as ollama, or mock), or --config FILE."]
    problems = [f"{config_key(where)}: {what}" for where, what in config.problems()]
    problems += _upstream_problems(config, environ)
    server = config.server
    try:
        open_configured_store(config)
    except ValueError as exc:
        problems.append(f"--store: {exc}")
    client_keys = parse_client_keys(environ.get(server.api_key_env, "")) if server.api_key_env else ()
    if server.api_key_env and not client_keys:
        problems.append(f"--api-key-env names {server.api_key_env}, which holds no key.")
    admin_keys = parse_client_keys(environ.get(server.admin_key_env, "")) if server.admin_key_env else ()
    if server.admin_key_env and not admin_keys:
        problems.append(f"--admin-key-env names {server.admin_key_env}, which holds no key.")
    if set(admin_keys) & set(client_keys):
        problems.append("an admin key is also a client key (--api-key-env): give the admin API a key of its own.")
    open_to_others = not is_loopback(server.host) and not server.insecure_no_auth
    if open_to_others and not server.api_key_env and not admin_keys and not store_has_keys():
        problems.append(
            f"refusing to listen on {server.host} without client keys: anyone who can reach it could use "
            "your upstream. Create keys with 'toolwire keys create NAME' (in the gateway's --store), set "
            "--api-key-env VAR (VAR holding comma-separated keys), or pass --insecure-no-auth if this is "
            "really what you want."
        )
    return problems


def _upstream_problems(config: GatewayConfig, environ: Mapping[str, str]) -> list[str]:
    problems = []
    for upstream in config.upstreams:
        key = environ.get(upstream.api_key_env) if upstream.api_key_env else None
        if upstream.api_key_env is not None and key is None:
            problems.append(
                f"the upstream '{upstream.name}' takes its key from {upstream.api_key_env}, which is not set."
            )
        if upstream.base_url is None:
            continue
        if key and urlsplit(upstream.base_url).username is not None:
            problems.append(
                f"the upstream '{upstream.name}' has credentials in its URL and a key in "
                f"{upstream.api_key_env}: give one of them."
            )
        try:
            proxy_for(upstream.base_url, environ)
        except ValueError as exc:
            problems.append(f"the upstream '{upstream.name}': {exc}")
    return problems
