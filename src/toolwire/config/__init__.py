"""The gateway's configuration: a TOML file, flags over it, and upstream shortcuts.

``load_config(path)`` reads ``toolwire.toml``; ``GatewayConfig.with_overrides`` lays
command-line flags over it; environment variables hold secrets only (``*_env`` keys
name them).
"""

from ._load import ConfigError, load_config, parse_config
from ._model import GatewayConfig, ModelConfig, ServerConfig, UpstreamConfig
from ._shortcuts import SHORTCUTS, Shortcut, upstream_from_flag

__all__ = [
    "SHORTCUTS",
    "ConfigError",
    "GatewayConfig",
    "ModelConfig",
    "ServerConfig",
    "Shortcut",
    "UpstreamConfig",
    "load_config",
    "parse_config",
    "upstream_from_flag",
]
