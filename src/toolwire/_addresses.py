"""How toolwire writes a host in a URL or beside its port: an IPv6 address in brackets
(``[::1]:8080``), as URLs write it (RFC 3986), so that its port can be told from it."""

from __future__ import annotations


def url_host(host: str) -> str:
    """``host`` as a URL's authority writes it: an IPv6 address bracketed, any other as it is."""
    return f"[{host}]" if ":" in host else host
