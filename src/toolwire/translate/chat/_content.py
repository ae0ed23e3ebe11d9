"""The content of Chat messages, from the parts of Responses input messages.

A user message keeps text, images (``image_url``), files (``file_data``) and audio; a
system message keeps its text (``part_texts``, which also reads an assistant message's).
Parts without a Chat equivalent are dropped with a warning naming where they were; an
image or file given only by id or URL (which Chat cannot take) is a ``RequestError``
naming the part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from toolwire.errors import RequestError
from toolwire.protocol import ContentPart, InputFile, InputImage, InputText, OutputText, Refusal

from .._conversation import part_texts
from .._notes import Notes
from .._tools import join_paragraphs

_IMAGE_DETAILS = frozenset({"low", "high", "auto"})
# Parts are told apart by their exact class (``type(part) is InputText``), the classes
# parsing makes: isinstance on a pydantic model goes through its metaclass.


def user_content(
    content: str | Sequence[ContentPart], where: str, notes: Notes
) -> str | list[dict[str, Any]]:
    """A user message's content: a string, or text / image_url / file parts."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    only_text = True
    for index, part in enumerate(content):
        if type(part) is InputText or type(part) is OutputText:
            parts.append({"type": "text", "text": part.text})
        elif type(part) is Refusal:
            parts.append({"type": "text", "text": part.refusal})
        elif type(part) is InputImage:
            parts.append(image_part(part, f"{where}[{index}]"))
            only_text = False
        elif type(part) is InputFile:
            parts.append(file_part(part, f"{where}[{index}]"))
            only_text = False
        elif part.type == "input_audio" and isinstance(
            audio := (part.model_extra or {}).get("input_audio"), dict
        ):
            parts.append({"type": "input_audio", "input_audio": audio})
            only_text = False
        else:
            notes.warn(
                "message parts dropped (no Chat Completions equivalent)",
                f"{part.type} at {where}[{index}]",
            )
    if only_text:
        return "\n\n".join(part["text"] for part in parts)
    return parts


def merge_user_content(
    first: str | list[dict[str, Any]] | None, second: str | list[dict[str, Any]]
) -> str | list[dict[str, Any]]:
    if isinstance(first, str | None) and isinstance(second, str):
        return join_paragraphs(first, second)
    return _as_parts(first) + _as_parts(second)


def _as_parts(content: str | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if content else []


def system_text(content: str | Sequence[ContentPart], where: str, notes: Notes) -> str:
    """A system/developer message's text; its parts joined with blank lines."""
    return join_paragraphs(*part_texts(content, where, notes, "system message parts", refusals=False))


def image_part(part: InputImage, where: str) -> dict[str, Any]:
    if not part.image_url:
        _cannot_send(where, "an input_image needs an image_url; a file_id cannot be sent (Chat Completions has no file ids).")
    image_url: dict[str, Any] = {"url": part.image_url}
    if part.detail in _IMAGE_DETAILS:
        image_url["detail"] = part.detail
    return {"type": "image_url", "image_url": image_url}


def file_part(part: InputFile, where: str) -> dict[str, Any]:
    if not part.file_data:
        _cannot_send(where, "an input_file needs file_data; a file_id or file_url cannot be sent (Chat Completions has no file ids or URLs).")
    file: dict[str, Any] = {"file_data": part.file_data}
    if part.filename:
        file["filename"] = part.filename
    return {"type": "file", "file": file}


def _cannot_send(where: str, why: str) -> NoReturn:
    raise RequestError(f"Invalid '{where}': {why}", param=where)
