"""``BackendProfile``: what a Chat Completions backend accepts, as data.

The translators read these flags instead of branching on vendor names; presets
(DeepSeek, Ollama, vLLM, ...) are instances of this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BackendProfile:
    """Defaults suit a generic OpenAI-compatible server (vLLM, llama.cpp, most clouds)."""

    name: str = "generic"
    # Field the backend reads reasoning from on assistant messages: "reasoning_content",
    # "reasoning", or None to never send reasoning back.
    reasoning_field: str | None = "reasoning_content"
    # Put the reasoning field on every assistant message ("" when there was none):
    # DeepSeek's thinking mode rejects tool-call turns without it.
    reasoning_on_every_assistant: bool = False
    # "max_tokens" or "max_completion_tokens".
    max_tokens_field: str = "max_tokens"
    # Merge consecutive user messages (strict chat templates need alternating roles).
    merge_consecutive_user: bool = True
    # The backend takes "tool_choice" / "parallel_tool_calls" / "response_format" / "reasoning_effort".
    supports_tool_choice: bool = True
    supports_parallel_tool_calls: bool = True
    supports_response_format: bool = True
    supports_reasoning_effort: bool = True
    # Ask for usage in the final chunk (stream_options.include_usage).
    stream_usage: bool = True


GENERIC = BackendProfile()
