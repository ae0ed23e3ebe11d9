"""``ResponsesCapabilities``: what a Responses backend understands beyond V1 function tools.

A Responses backend (vLLM's or Ollama's own ``/v1/responses``, OpenAI, OpenRouter) may
know only top-level ``function`` tools. These flags say what else it takes; whatever is
off, ``downgrade_request`` rewrites on the way there and ``ResponsesStreamRestorer``
restores on the way back.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ResponsesCapabilities"]


@dataclass(frozen=True, slots=True)
class ResponsesCapabilities:
    """What a Responses backend understands beyond V1 function tools. All off is V1 only."""

    supports_additional_tools: bool = False
    """It reads tools declared in ``input`` (``additional_tools`` items); off: they are
    hoisted into the top-level ``tools``."""
    supports_custom_tools: bool = False
    """It takes ``custom`` (freeform) tools and their calls and outputs; off: they go as
    functions taking the raw input, and the calls are restored on the way back."""
    supports_namespaces: bool = False
    """It takes ``namespace`` tools; off: their tools are flattened to upstream names."""
    supports_tool_search: bool = False
    """It takes ``tool_search`` and its calls and outputs; off: a client-run search is a
    function, a server-run one is dropped."""
    supports_hosted_tools: bool = False
    """It runs hosted tools itself (``web_search``, ``file_search``, ...); off: they are
    dropped."""
    supports_compaction: bool = False
    """It compacts conversations itself (its own ``/responses/compact``, ``compaction_trigger``
    items, and the ``compaction`` items it made): the gateway passes compaction through
    instead of writing the summary with the backend's model."""

    @classmethod
    def everything(cls) -> ResponsesCapabilities:
        """A backend that takes every request as it is (OpenAI itself): a pure passthrough."""
        return cls(True, True, True, True, True, True)
