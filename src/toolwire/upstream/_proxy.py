"""Which HTTP proxy the environment names for an upstream, read as curl and the openai SDK read it.

``proxy_for(url, environ)`` is pure: ``https_proxy`` or ``http_proxy`` by the upstream's
scheme, then ``all_proxy`` (each in lower case first, then upper case; empty means
unset), unless ``no_proxy`` names the host: ``*``, a host name, a domain (``example.com``
and ``.example.com`` both cover ``api.example.com``), ``host:port``, an IP address or a
CIDR block. A loopback upstream (``localhost``, ``127.0.0.0/8``, ``::1``) is never sent
through a proxy: a model server on this machine is not behind the network's proxy, and
a proxy setting meant for the internet must not break a local Ollama.

A proxy URL without a scheme is ``http://``. Credentials in it become a
``Proxy-Authorization`` header and never appear in ``Proxy.url``, which is what
messages show. Only ``http://`` and ``https://`` proxies work (aiohttp speaks no
SOCKS): another scheme is a ``ValueError`` naming the variable, not a silent direct
connection. ``aiohttp_arguments`` says where aiohttp wants the proxy's credentials.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import aiohttp

from toolwire._addresses import url_host


@dataclass(frozen=True, slots=True)
class Proxy:
    """A forward proxy to reach an upstream through."""

    url: str
    """Without credentials: safe to show."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """``Proxy-Authorization`` when the configured URL carried credentials."""


def proxy_for(url: str, environ: Mapping[str, str]) -> Proxy | None:
    """The proxy to reach ``url`` through, or None for a direct connection."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if not host or _is_loopback(host) or _bypassed(host, parts.port, _variable(environ, "no_proxy")):
        return None
    for name in (f"{parts.scheme.lower()}_proxy", "all_proxy"):
        value = _variable(environ, name)
        if value:
            return _parse_proxy(value, name)
    return None


def _variable(environ: Mapping[str, str], name: str) -> str:
    return (environ.get(name) or environ.get(name.upper()) or "").strip()


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        entry_host, entry_port = _host_and_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        if "/" in entry_host:
            if _in_network(host, entry_host):
                return True
            continue
        domain = entry_host.lstrip(".")
        if host == domain or host.endswith("." + domain):
            return True
    return False


def _host_and_port(entry: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]:port``, a bare IPv6 address or a CIDR block."""
    if entry.startswith("["):
        address, _, rest = entry[1:].partition("]")
        port = rest.removeprefix(":")
        return address, int(port) if port.isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        if port.isdigit():
            return name, int(port)
    return entry, None


def _in_network(host: str, block: str) -> bool:
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(block, strict=False)
    except ValueError:
        return False


class UnusableProxy(ValueError):
    """A proxy variable of the environment names a proxy toolwire cannot use; the message
    names the variable and the proxy's address (never its credentials)."""


def _parse_proxy(value: str, variable: str) -> Proxy:
    parts = urlsplit(value if "://" in value else "http://" + value)
    scheme, host = parts.scheme.lower(), parts.hostname
    try:
        port = parts.port
    except ValueError:
        host = None
    if scheme not in ("http", "https") or not host:
        address = parts.netloc.rpartition("@")[2]  # as given, without credentials: a port out of range shows
        raise UnusableProxy(
            f"{variable.upper()} names the proxy {scheme}://{address or '?'}, which toolwire cannot use: only "
            "http:// and https:// proxies with a host and a valid port are supported. Set NO_PROXY to the "
            "upstream's host to connect directly."
        )
    netloc = url_host(host)
    if port is not None:
        netloc += f":{port}"
    headers: dict[str, str] = {}
    if parts.username is not None:
        headers["Proxy-Authorization"] = aiohttp.encode_basic_auth(unquote(parts.username), unquote(parts.password or ""))
    return Proxy(f"{scheme}://{netloc}", headers)


def aiohttp_arguments(proxy: Proxy | None, upstream_url: str) -> tuple[dict[str, str], dict[str, Any]]:
    """Extra request headers and keywords for aiohttp to reach ``upstream_url`` through ``proxy``.

    aiohttp sends ``proxy_headers`` only on the ``CONNECT`` that opens a tunnel to an
    https upstream. A request to an http upstream goes to the proxy itself, so there the
    ``Proxy-Authorization`` must be one of the request's own headers (the proxy removes
    it before forwarding); inside a tunnel it would reach the upstream.
    """
    if proxy is None:
        return {}, {}
    if urlsplit(upstream_url).scheme.lower() == "https":
        return {}, {"proxy": proxy.url, "proxy_headers": dict(proxy.headers)}
    return dict(proxy.headers), {"proxy": proxy.url}
