"""The HTTP shell: an ASGI app serving the Responses API over the pure core."""

from ._app import create_app
from ._settings import GatewaySettings

__all__ = ["GatewaySettings", "create_app"]
