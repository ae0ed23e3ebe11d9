"""``certified``: a TLS server's certificate for a host name, from a certificate authority
made for one test (trustme), and that authority written to a file a client can be told to
trust: ``SSL_CERT_FILE`` for a gateway in its own process, ``ssl.create_default_context(cafile=...)``
for a client in the test's."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class Certified:
    server_context: ssl.SSLContext
    """What the TLS server (``ChatUpstream(ssl_context=...)``) answers with."""
    authority_file: Path
    """The test authority's certificate, PEM: what a client trusts to accept the server."""


def certified(host: str, directory: Path) -> Certified:
    """A server certificate for ``host``, its authority written under ``directory``."""
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(host).configure_cert(server_context)
    authority_file = directory / "test-ca.pem"
    authority.cert_pem.write_to_path(str(authority_file))
    return Certified(server_context, authority_file)
