"""The Chat Completions wire: a Responses request as a Chat request, and the answer back.

``translate_request`` (``request``) turns a Responses request into a Chat Completions
request for a backend described by a ``BackendProfile`` (``profile``: what the backend
accepts, and the named ``PRESETS``). ``ChatStreamTranslator`` (``stream``) turns the
upstream's chunks into Responses stream events, and a whole completion into a Response
object (``translate_whole``; ``translate_completion`` in ``completion``).
"""

from .completion import completion_chunks, translate_completion
from .profile import GENERIC, PRESETS, BackendProfile
from .request import TranslatedRequest, translate_request
from .stream import ChatStreamTranslator
from .text_calls import ToolCallText

__all__ = [
    "GENERIC",
    "PRESETS",
    "BackendProfile",
    "ChatStreamTranslator",
    "ToolCallText",
    "TranslatedRequest",
    "completion_chunks",
    "translate_completion",
    "translate_request",
]
