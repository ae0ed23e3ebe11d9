"""The ASGI aliases, in one place: Starlette's (``Scope``, ``Receive``, ``Send``, ...)."""

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ASGIApp", "Message", "Receive", "Scope", "Send"]
