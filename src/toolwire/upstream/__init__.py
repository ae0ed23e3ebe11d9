"""Backends behind one seam: ``ChatBackend`` opens a Chat Completions exchange.

``HttpChatBackend`` talks to a real server over HTTP with pooled connections;
``MockChatBackend`` is the built-in scripted model (``--upstream mock``).
"""

from ._base import ChatBackend, ChatStream
from ._http import HttpChatBackend, RetryPolicy
from ._mock import MockChatBackend

__all__ = ["ChatBackend", "ChatStream", "HttpChatBackend", "MockChatBackend", "RetryPolicy"]
