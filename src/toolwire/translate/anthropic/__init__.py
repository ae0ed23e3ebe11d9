"""The Anthropic Messages wire: a Responses request as a Messages request, and the answer back.

``translate_messages_request`` (``request``) turns a Responses request into the body of
``POST /v1/messages`` for a backend described by a ``MessagesProfile`` (``profile``:
what it accepts, and the named ``MESSAGES_PRESETS``: Anthropic and the
Anthropic-compatible endpoints of DeepSeek, Moonshot/Kimi, Zhipu/GLM and MiniMax).
``MessagesStreamTranslator`` (``stream``) turns the stream's events into Responses
events, and a whole Message into a Response object (``translate_whole``).
"""

from .profile import ANTHROPIC, ANTHROPIC_VERSION, MESSAGES_PRESETS, MessagesProfile
from .request import TranslatedMessages, translate_messages_request
from .stream import MessagesStreamTranslator

__all__ = [
    "ANTHROPIC",
    "ANTHROPIC_VERSION",
    "MESSAGES_PRESETS",
    "MessagesProfile",
    "MessagesStreamTranslator",
    "TranslatedMessages",
    "translate_messages_request",
]
