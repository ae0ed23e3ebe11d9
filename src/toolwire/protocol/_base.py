"""The base of every typed wire value: strict, and lossless for fields we do not know."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    """A JSON object from the wire.

    Strict (no silent coercion: ``5`` is not a string), and ``extra="allow"`` so that
    fields added by newer clients survive: ``dump`` gives back exactly what was parsed,
    unknown fields included, defaults not added.
    """

    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)

    def dump(self) -> dict[str, Any]:
        """The JSON object this value was parsed from (plus any fields set since)."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)

    def shared_dump(self) -> dict[str, Any]:
        """Like ``dump``, but sharing nested plain values (schemas, extra fields) with this
        model instead of copying them: cheap in time and memory, for values that are only
        serialized (a Response echoing the request's tools). Do not mutate the result."""
        out: dict[str, Any] = {}
        fields_set = self.model_fields_set
        for name, info in type(self).model_fields.items():
            if name in fields_set:
                out[info.alias or name] = _shared(getattr(self, name))
        if self.model_extra:
            out.update(self.model_extra)
        return out


def _shared(value: Any) -> Any:
    if isinstance(value, WireModel):
        return value.shared_dump()
    if isinstance(value, list) and value and isinstance(value[0], WireModel):
        return [_shared(item) for item in value]
    return value


def type_tag(
    known: frozenset[str],
    fallback: str,
    *,
    default: str | None = None,
    aliases: Mapping[str, str] | None = None,
) -> Any:
    """A pydantic discriminator: the value's ``type`` if it is one we model, else ``fallback``.

    ``default`` is the tag for an object without ``type`` (an input message may omit it);
    ``aliases`` maps other ``type`` values to a known tag. A ``type`` that is not a
    string (a list, an object) gets ``fallback``, whose model then reports the error.
    """
    alias = dict(aliases or {})

    def discriminate(value: Any) -> str:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        if kind is None and default is not None:
            return default
        if not isinstance(kind, str):
            return fallback
        kind = alias.get(kind, kind)
        return kind if kind in known else fallback

    return discriminate
