"""Read ``toolwire.toml`` and report a mistake with its key and line."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ._model import GatewayConfig


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the key and line."""


def validator_message(error: Any) -> str:
    """One of a pydantic ``ValidationError``'s errors in its own words: without the
    ``Value error, `` pydantic puts before the words of a validator's ``ValueError``."""
    return str(error["msg"]).removeprefix("Value error, ")


def load_config(path: str | Path) -> GatewayConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration file: {exc.strerror or exc}") from None
    return parse_config(text, source=str(path))


def parse_config(text: str, *, source: str = "toolwire.toml") -> GatewayConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    try:
        config = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        raise _located(text, source, tuple(error["loc"]), validator_message(error)) from None
    for loc, message in config.problems():
        raise _located(text, source, loc, message)
    return config


def _located(text: str, source: str, loc: tuple[Any, ...], message: str) -> ConfigError:
    key = config_key(loc) or "(top level)"
    line = _line_of(text, loc)
    where = f"{source}:{line}" if line else source
    return ConfigError(f"{where}: {key}: {message}")


def config_key(loc: Sequence[Any]) -> str:
    """Where a setting is, as the configuration file's reader writes it: ``("upstreams",
    0, "base_url")`` -> ``upstreams[0].base_url`` ("" for no place)."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line that ``loc`` (e.g. ``("upstreams", 1, "kind")``) points at.

    Finds the table header (``[server]`` or the Nth ``[[upstreams]]``), then the key in
    that table; falls back to the header line for a missing key.
    """
    if not loc:
        return None
    lines = text.splitlines()
    table = str(loc[0])
    index = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
    key = next((str(p) for p in loc[1:] if isinstance(p, str)), None)
    header = f"[[{table}]]" if index is not None else f"[{table}]"
    start = None
    count = -1
    for number, line in enumerate(lines):
        if line.strip().split("#")[0].strip() == header:
            count += 1
            if index is None or count == index:
                start = number
                break
    if start is None:
        return None
    for number in range(start + 1, len(lines)):
        stripped = lines[number].strip()
        if stripped.startswith("["):
            break
        if key is not None and stripped.split("=")[0].strip() == key:
            return number + 1
    return start + 1
