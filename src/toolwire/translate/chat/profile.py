"""``BackendProfile``: what a Chat Completions backend accepts, as data; and the presets.

The translators read these flags instead of branching on vendor names. A preset is a
named instance of this table (reference §7 lists the quirks each one encodes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .text_calls import ToolCallText


@dataclass(frozen=True, slots=True)
class BackendProfile:
    """Defaults suit a generic OpenAI-compatible server (vLLM, llama.cpp, most clouds)."""

    name: str = "generic"
    reasoning_field: str | None = "reasoning_content"
    """The field the backend reads reasoning from on assistant messages:
    ``reasoning_content``, ``reasoning``, or None to never send reasoning back."""
    reasoning_on_every_assistant: bool = False
    """The reasoning field on every assistant message (``""`` when there was none):
    DeepSeek's thinking mode rejects tool-call turns without it."""
    max_tokens_field: str = "max_tokens"
    """``max_tokens`` or ``max_completion_tokens``."""
    merge_consecutive_user: bool = True
    """Consecutive user messages merged (strict chat templates need alternating roles)."""
    supports_tool_choice: bool = True
    """The backend takes ``tool_choice``."""
    supports_parallel_tool_calls: bool = True
    """The backend takes ``parallel_tool_calls``."""
    supports_response_format: bool = True
    """The backend takes ``response_format``."""
    supports_reasoning_effort: bool = True
    """The backend takes ``reasoning_effort``."""
    stream_usage: bool = True
    """Usage asked for in the final chunk (``stream_options.include_usage``)."""
    tool_call_text: ToolCallText = "auto"
    """Tool calls the model wrote into the text (a server without a tool parser): which
    families' formats are recovered as calls, ``"auto"`` (all), ``"off"``, or one family
    (``toolwire.translate.text_calls``)."""


GENERIC = BackendProfile()

PRESETS: dict[str, BackendProfile] = {
    "generic": GENERIC,
    # OpenAI's Chat API hides reasoning and takes none back; reasoning models need
    # max_completion_tokens.
    "openai": replace(GENERIC, name="openai", reasoning_field=None, max_tokens_field="max_completion_tokens"),
    # Thinking mode: reasoning_content must come back on every assistant message of a
    # tool-calling exchange, or the API answers 400.
    "deepseek": replace(GENERIC, name="deepseek", reasoning_on_every_assistant=True),
    # Ollama's /v1 reads "reasoning", emits whole tool calls and ignores tool_choice
    # and parallel_tool_calls (so they are not sent).
    "ollama": replace(
        GENERIC,
        name="ollama",
        reasoning_field="reasoning",
        supports_tool_choice=False,
        supports_parallel_tool_calls=False,
    ),
    # vLLM >= 0.11 names the field "reasoning" (and still accepts reasoning_content).
    "vllm": replace(GENERIC, name="vllm", reasoning_field="reasoning"),
    # llama-server: reasoning_content with --reasoning-format deepseek (its default).
    "llama.cpp": replace(GENERIC, name="llama.cpp"),
    "openrouter": replace(GENERIC, name="openrouter", reasoning_field="reasoning"),
    # DashScope compatible mode: no developer role (toolwire never sends one).
    "qwen": replace(GENERIC, name="qwen"),
    "moonshot": replace(GENERIC, name="moonshot"),
    "zhipu": replace(GENERIC, name="zhipu"),
}
PRESETS["dashscope"] = PRESETS["qwen"]
PRESETS["kimi"] = PRESETS["moonshot"]
PRESETS["glm"] = PRESETS["zhipu"]
PRESETS["llamacpp"] = PRESETS["llama.cpp"]
