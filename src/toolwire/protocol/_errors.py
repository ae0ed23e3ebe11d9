"""Turn a pydantic ValidationError into a RequestError that names the bad field."""

from __future__ import annotations

from pydantic import ValidationError

from toolwire.errors import RequestError

_UNION_MEMBER_NAMES = frozenset({"str", "int", "float", "bool", "none", "dict", "list", "unknown", "hosted"})


def _is_union_member(part: str) -> bool:
    return "[" in part or part in _UNION_MEMBER_NAMES


def error_path(loc: tuple[int | str, ...], prefix: str = "", *, tagged: bool = False) -> str:
    """``("input", 3, "function_call", "arguments")`` -> ``input[3].arguments``.

    Discriminator tags (the type name right after a list index or a tagged field such
    as ``format``) and union member names are not fields, so they are left out.
    ``tagged`` says that ``loc`` starts at a discriminated union (a single item or
    tool validated on its own), so its first part is a tag too.
    """
    path = prefix
    previous: int | str | None = 0 if tagged else None  # a tagged start reads like a list element
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _is_union_member(part) or (_follows_union(previous) and _looks_like_tag(part)):
            pass
        else:
            path = f"{path}.{part}" if path else part
        previous = part
    return path


_TAGGED_FIELDS = frozenset({"format"})


def _follows_union(previous: int | str | None) -> bool:
    return isinstance(previous, int) or previous in _TAGGED_FIELDS


def _looks_like_tag(part: str) -> bool:
    return part.replace("_", "").isalpha() and part.islower()


def request_error_from(
    exc: ValidationError, *, prefix: str = "", tagged: bool = False
) -> RequestError:
    """The first problem in ``exc`` as a RequestError whose ``param`` is the field's path.

    ``prefix`` is the path of the validated value itself (``input[3]``); ``tagged`` says
    the value was validated against a discriminated union (see ``error_path``).
    """
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    # A union field reports one error per member; the deepest is the one that matters
    # (``input`` failing as a string says less than ``input[3].arguments`` failing).
    first = max(errors, key=lambda error: len(error["loc"]))
    param = error_path(tuple(first["loc"]), prefix, tagged=tagged)
    messages = [first["msg"]]
    for other in errors:
        same_param = error_path(tuple(other["loc"]), prefix, tagged=tagged) == param
        if other is not first and same_param and other["msg"] not in messages:
            messages.append(other["msg"])
    detail = " or ".join(m[0].lower() + m[1:] if m else m for m in messages)
    if first["type"] == "missing":
        detail = "missing required field"
    return RequestError(f"Invalid '{param}': {detail}.", param=param)
