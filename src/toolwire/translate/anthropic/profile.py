"""``MessagesProfile``: what an Anthropic Messages backend accepts, as data; and the presets.

Anthropic's own API and the Anthropic-compatible endpoints of other vendors speak the
same wire with different gaps (each vendor documents a compatibility table): some take
no images, some reject ``redacted_thinking``, some ignore ``cache_control``, only
Anthropic runs its ``web_search`` server tool. The translators read these flags instead
of branching on vendor names; a preset is a named instance of this table, with the
vendor's documented address and key variable for the ``--upstream`` shortcut.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

ANTHROPIC_VERSION = "2023-06-01"

# The largest output of Anthropic's models, by model-name prefix (longest prefix wins):
# max_tokens is required, and a value above the model's limit is a 400.
_MAX_OUTPUT_BY_PREFIX: dict[str, int] = {
    "claude-3-haiku": 4096,
    "claude-3-opus": 4096,
    "claude-3-sonnet": 4096,
    "claude-3-5-haiku": 8192,
    "claude-3-5-sonnet": 8192,
    "claude-3-7-sonnet": 64000,
    "claude-sonnet-4": 64000,
    "claude-haiku-4": 64000,
    "claude-opus-4": 32000,
    "claude-opus-4-5": 64000,
}


@dataclass(frozen=True, slots=True)
class MessagesProfile:
    """Defaults suit Anthropic's own API."""

    name: str = "anthropic"
    base_url: str = "https://api.anthropic.com"
    """The API root the vendor documents (its SDKs' base URL); requests go to ``/v1/messages``."""
    api_key_env: str = "ANTHROPIC_API_KEY"
    key_header: Literal["bearer", "x-api-key"] = "x-api-key"
    """``x-api-key`` (Anthropic's), or ``bearer`` where the vendor documents only a token."""
    images: bool = True
    """Image blocks, in messages and tool results (else a text note says one was left out)."""
    documents: bool = True
    """PDF ``document`` blocks."""
    redacted_thinking: bool = True
    """``redacted_thinking`` blocks sent back (else dropped, with a warning)."""
    cache_control: bool = True
    """``cache_control`` breakpoints on the tools, the system prompt and the latest turn."""
    web_search: bool = False
    """The backend runs ``web_search_20250305`` itself: Codex's hosted ``web_search`` is offered."""
    max_temperature: float = 1.0
    """Responses allows 0-2; a larger temperature is lowered to this."""
    default_max_tokens: int = 8192
    """``max_tokens`` when the client gave no ``max_output_tokens`` and the model is unknown."""

    def max_output(self, model: str) -> int:
        """The default ``max_tokens`` for ``model``: its known limit, else the preset's."""
        best = ""
        for prefix in _MAX_OUTPUT_BY_PREFIX:
            if model.startswith(prefix) and len(prefix) > len(best):
                best = prefix
        return _MAX_OUTPUT_BY_PREFIX[best] if best else self.default_max_tokens


ANTHROPIC = MessagesProfile(web_search=True)

# What the Anthropic-compatible endpoints of the other vendors below have in common: no
# PDF ``document`` blocks, no ``cache_control`` breakpoints, no server tools, and a
# larger default ``max_tokens``.
_COMPATIBLE = MessagesProfile(documents=False, cache_control=False, default_max_tokens=32768)

MESSAGES_PRESETS: dict[str, MessagesProfile] = {
    "anthropic": ANTHROPIC,
    # Any other Anthropic-compatible server: the full wire, no server tools.
    "generic": replace(ANTHROPIC, name="generic", web_search=False),
    # api.deepseek.com/anthropic: no image blocks either, no redacted_thinking, its prefix
    # cache automatic; temperature 0-2; thinking blocks must come back in a tool loop.
    "deepseek-anthropic": replace(
        _COMPATIBLE,
        name="deepseek-anthropic",
        base_url="https://api.deepseek.com/anthropic",
        api_key_env="DEEPSEEK_API_KEY",
        images=False,
        redacted_thinking=False,
        max_temperature=2.0,
    ),
    # api.moonshot.ai/anthropic (Kimi K2): automatic context caching.
    "kimi-anthropic": replace(
        _COMPATIBLE,
        name="kimi-anthropic",
        base_url="https://api.moonshot.ai/anthropic",
        api_key_env="MOONSHOT_API_KEY",
    ),
    # open.bigmodel.cn/api/anthropic (api.z.ai/api/anthropic abroad): documented with
    # a bearer token (Claude Code's ANTHROPIC_AUTH_TOKEN).
    "glm-anthropic": replace(
        _COMPATIBLE,
        name="glm-anthropic",
        base_url="https://open.bigmodel.cn/api/anthropic",
        api_key_env="ZHIPUAI_API_KEY",
        key_header="bearer",
    ),
    # api.minimax.io/anthropic (api.minimaxi.com in China): text and tool calls only (no
    # image input either), temperature in (0, 1]; the whole assistant content, thinking
    # included, must come back in a tool loop.
    "minimax-anthropic": replace(
        _COMPATIBLE,
        name="minimax-anthropic",
        base_url="https://api.minimax.io/anthropic",
        api_key_env="MINIMAX_API_KEY",
        images=False,
    ),
}
