"""The gateway's configuration: a TOML file, flags over it, and upstream shortcuts.

``load_config(path)`` reads ``toolwire.toml``; ``GatewayConfig.with_overrides`` lays
command-line flags over it; environment variables hold secrets only (``*_env`` keys
name them).
"""

from ._load import ConfigError, config_key, load_config, parse_config, validator_message
from ._model import (
    DEFAULT_CAPTURE_KEEP,
    DEFAULT_CAPTURE_MAX_BYTES,
    DEFAULT_INSPECTOR_MAX_BYTES,
    DEFAULT_INSPECTOR_MAX_EXCHANGES,
    DEFAULT_MAX_BODY_BYTES,
    GatewayConfig,
    ModelConfig,
    ServerConfig,
    UpstreamConfig,
)
from ._shortcuts import SHORTCUTS, Shortcut, upstream_from_flag

__all__ = [
    "DEFAULT_CAPTURE_KEEP",
    "DEFAULT_CAPTURE_MAX_BYTES",
    "DEFAULT_INSPECTOR_MAX_BYTES",
    "DEFAULT_INSPECTOR_MAX_EXCHANGES",
    "DEFAULT_MAX_BODY_BYTES",
    "SHORTCUTS",
    "ConfigError",
    "GatewayConfig",
    "ModelConfig",
    "ServerConfig",
    "Shortcut",
    "UpstreamConfig",
    "config_key",
    "load_config",
    "parse_config",
    "upstream_from_flag",
    "validator_message",
]
