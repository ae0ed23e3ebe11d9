"""The secrets a gateway holds, for its ``Redactor`` to take out of all it writes.

Upstream keys (read from the variables the configuration names), client keys, and the
credentials of what upstreams are reached through: the password in an upstream URL
(``http://user:password@host/v1``) and the proxy's, from the environment's proxy
variables, both as written and as the ``Basic`` token the proxy receives. They are
secrets whatever they look like, so they are hidden as exact strings, not by shape.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import unquote, urlsplit

from toolwire.config import GatewayConfig
from toolwire.upstream import proxy_for


def known_secrets(config: GatewayConfig, client_keys: Sequence[bytes], environ: Mapping[str, str]) -> list[str]:
    secrets = [environ.get(upstream.api_key_env, "") for upstream in config.upstreams if upstream.api_key_env]
    secrets += [key.decode("utf-8", "replace") for key in client_keys]
    for upstream in config.upstreams:
        if upstream.base_url is None:
            continue
        secrets += _url_password(upstream.base_url)
        try:
            proxy = proxy_for(upstream.base_url, environ)
        except ValueError:  # a proxy toolwire cannot use: serve refuses to start
            continue
        if proxy is not None:
            secrets += _basic_credentials(proxy.headers.get("Proxy-Authorization"))
    return [secret for secret in secrets if secret]


def _url_password(url: str) -> Iterable[str]:
    password = urlsplit(url).password
    return () if password is None else (password, unquote(password))


def _basic_credentials(header: str | None) -> Iterable[str]:
    """``Basic <token>``: the token, and the password inside it."""
    if header is None or not header.startswith("Basic "):
        return ()
    token = header.removeprefix("Basic ")
    try:
        _, _, password = base64.b64decode(token, validate=True).decode("utf-8", "replace").partition(":")
    except (binascii.Error, ValueError):
        return (token,)
    return (token, password)
