"""``--upstream ollama`` and friends: the usual address, preset and key variable of a backend.

A URL given with ``--preset`` of one kind only (``--preset anthropic``) is an upstream of
that kind; otherwise a URL is a Chat Completions server.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.upstream import KINDS

from ._model import UpstreamConfig


@dataclass(frozen=True, slots=True)
class Shortcut:
    base_url: str
    preset: str
    api_key_env: str | None = None
    kind: str = "chat"


SHORTCUTS: dict[str, Shortcut] = {
    "ollama": Shortcut("http://127.0.0.1:11434/v1", "ollama"),
    "vllm": Shortcut("http://127.0.0.1:8000/v1", "vllm"),
    "llama.cpp": Shortcut("http://127.0.0.1:8080/v1", "llama.cpp"),
    "lmstudio": Shortcut("http://127.0.0.1:1234/v1", "generic"),
    "openai": Shortcut("https://api.openai.com/v1", "openai", "OPENAI_API_KEY"),
    "deepseek": Shortcut("https://api.deepseek.com/v1", "deepseek", "DEEPSEEK_API_KEY"),
    "openrouter": Shortcut("https://openrouter.ai/api/v1", "openrouter", "OPENROUTER_API_KEY"),
    "dashscope": Shortcut("https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen", "DASHSCOPE_API_KEY"),
    "moonshot": Shortcut("https://api.moonshot.ai/v1", "moonshot", "MOONSHOT_API_KEY"),
    "zhipu": Shortcut("https://open.bigmodel.cn/api/paas/v4", "zhipu", "ZHIPUAI_API_KEY"),
    # Anthropic Messages APIs (kind "anthropic"): Claude, and other vendors' Anthropic endpoints.
    "anthropic": Shortcut("https://api.anthropic.com", "anthropic", "ANTHROPIC_API_KEY", "anthropic"),
    "deepseek-anthropic": Shortcut("https://api.deepseek.com/anthropic", "deepseek-anthropic", "DEEPSEEK_API_KEY", "anthropic"),
    "kimi-anthropic": Shortcut("https://api.moonshot.ai/anthropic", "kimi-anthropic", "MOONSHOT_API_KEY", "anthropic"),
    "glm-anthropic": Shortcut("https://open.bigmodel.cn/api/anthropic", "glm-anthropic", "ZHIPUAI_API_KEY", "anthropic"),
    "minimax-anthropic": Shortcut("https://api.minimax.io/anthropic", "minimax-anthropic", "MINIMAX_API_KEY", "anthropic"),
}


def upstream_from_flag(value: str, *, api_key_env: str | None = None, preset: str | None = None) -> UpstreamConfig:
    """The default upstream that ``--upstream VALUE`` describes: a URL, a shortcut, or ``mock``."""
    if value == "mock":
        return UpstreamConfig(name="mock", kind="mock", default=True)
    shortcut = SHORTCUTS.get(value)
    if shortcut is not None:
        return UpstreamConfig(
            name=value,
            kind=shortcut.kind,
            base_url=shortcut.base_url,
            preset=preset or shortcut.preset,
            api_key_env=api_key_env or shortcut.api_key_env,
            default=True,
        )
    if "://" not in value:
        known = ", ".join(["mock", *SHORTCUTS])
        raise ValueError(f"--upstream takes a URL or one of: {known} (got {value!r})")
    return UpstreamConfig(
        name="upstream",
        kind=_kind_of_preset(preset),
        base_url=value,
        preset=preset or "generic",
        api_key_env=api_key_env,
        default=True,
    )


def _kind_of_preset(preset: str | None) -> str:
    """The kind a URL upstream is: the one kind whose presets name ``preset``, else chat."""
    kinds = [kind.name for kind in KINDS.values() if preset is not None and preset in kind.presets]
    return kinds[0] if len(kinds) == 1 else "chat"
