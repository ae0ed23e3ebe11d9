"""Pure translation between the Responses API and the backends' wires.

``translate_request`` turns a Responses request into a Chat Completions request;
``ChatStreamTranslator`` turns upstream chunks into Responses stream events;
``translate_completion`` does the same for a non-streaming answer. No I/O here.
"""

from .completion import completion_chunks, translate_completion
from .profile import GENERIC, PRESETS, BackendProfile
from .reasoning import open_reasoning, seal_reasoning
from .request import TranslatedRequest, custom_tool_description, translate_request
from .responses_downgrade import (
    DowngradedRequest,
    ResponsesCapabilities,
    ResponsesStreamRestorer,
    downgrade_request,
)
from .stream import ChatStreamTranslator
from .tool_table import UpstreamToolTable

__all__ = [
    "GENERIC",
    "PRESETS",
    "BackendProfile",
    "ChatStreamTranslator",
    "DowngradedRequest",
    "ResponsesCapabilities",
    "ResponsesStreamRestorer",
    "TranslatedRequest",
    "UpstreamToolTable",
    "completion_chunks",
    "custom_tool_description",
    "downgrade_request",
    "open_reasoning",
    "seal_reasoning",
    "translate_completion",
    "translate_request",
]
