"""Content blocks of Messages, from the parts of Responses items.

A user message keeps text, images (``image`` blocks: base64 from a data URL, or a URL
source) and PDF files (``document`` blocks); a tool's output keeps its text and images
inside the ``tool_result``. Text blocks are never empty (the API rejects them). A backend
whose profile takes no images or documents gets a short text note in their place, and a
warning says so. An image or file given by id only is a ``RequestError`` naming the part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from toolwire.errors import RequestError
from toolwire.protocol import ContentPart, InputFile, InputImage, InputText, OutputText, Refusal

from .._notes import Notes
from .profile import MessagesProfile

JSON = dict[str, Any]

_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def text_block(text: str) -> JSON:
    return {"type": "text", "text": text}


def user_blocks(
    content: str | Sequence[ContentPart], where: str, profile: MessagesProfile, notes: Notes
) -> list[JSON]:
    """A user message's blocks: text, images and documents (no empty text)."""
    if isinstance(content, str):
        return [text_block(content)] if content else []
    return _blocks(content, where, profile, notes, user=True)


def tool_result_content(
    output: str | Sequence[ContentPart], where: str, profile: MessagesProfile, notes: Notes
) -> str | list[JSON]:
    """A tool output as ``tool_result`` content: its string, or text and image blocks."""
    if isinstance(output, str):
        return output
    return _blocks(output, where, profile, notes, user=False)


def _blocks(
    parts: Sequence[ContentPart], where: str, profile: MessagesProfile, notes: Notes, *, user: bool
) -> list[JSON]:
    """The parts' text and image blocks; in a ``user`` message also its refusals (as text)
    and documents. Other parts are dropped with a warning."""
    blocks: list[JSON] = []
    for index, part in enumerate(parts):
        here = f"{where}[{index}]"
        if type(part) is InputText or type(part) is OutputText:
            if part.text:
                blocks.append(text_block(part.text))
        elif type(part) is InputImage:
            blocks.append(image_block(part, here, profile, notes))
        elif user and type(part) is Refusal:
            if part.refusal:
                blocks.append(text_block(part.refusal))
        elif user and type(part) is InputFile:
            block = document_block(part, here, profile, notes)
            if block is not None:
                blocks.append(block)
        elif user:
            notes.warn("message parts dropped (no Messages API equivalent)", f"{part.type} at {here}")
        else:
            notes.warn("tool output parts dropped (tool results take text and images)", f"{part.type} at {here}")
    return blocks


def image_block(part: InputImage, where: str, profile: MessagesProfile, notes: Notes) -> JSON:
    """An ``image`` block (base64 from a data URL, else a URL source), or the note that
    replaces it for a backend without images."""
    url = part.image_url
    if not url:
        _cannot_send(where, "an input_image needs an image_url; a file_id cannot be sent (the Messages API has no file ids here).")
    if not profile.images:
        notes.warn("images replaced by a note (the backend takes no images)", where)
        return text_block("[an image was attached here, but this model cannot see images]")
    if url.startswith("data:"):
        media_type, data = _data_url(url, where)
        if media_type not in _IMAGE_TYPES:
            _cannot_send(where, f"image type {media_type!r} is not one of {', '.join(sorted(_IMAGE_TYPES))}.")
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    if url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    _cannot_send(where, "an image_url must be a data: URL or an http(s) URL.")


def document_block(part: InputFile, where: str, profile: MessagesProfile, notes: Notes) -> JSON | None:
    """A PDF as a ``document`` block; other files, or a backend without documents: None."""
    if not profile.documents:
        notes.warn("files dropped (the backend takes no documents)", where)
        return None
    if part.file_data:
        media_type, data = _data_url(part.file_data, where)
        if media_type != "application/pdf":
            notes.warn("files dropped (only PDF documents can be sent)", f"{media_type} at {where}")
            return None
        return {"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}}
    if part.file_url:
        return {"type": "document", "source": {"type": "url", "url": part.file_url}}
    _cannot_send(where, "an input_file needs file_data or file_url; a file_id cannot be sent.")


def _data_url(url: str, where: str) -> tuple[str, str]:
    """``(media type, base64 data)`` of a ``data:<type>;base64,<data>`` URL."""
    header, comma, data = url.partition(",")
    if not comma or not header.startswith("data:") or not header.endswith(";base64"):
        _cannot_send(where, "expected a base64 data: URL (data:<media type>;base64,<data>).")
    return header[len("data:") : -len(";base64")], data


def _cannot_send(where: str, why: str) -> NoReturn:
    raise RequestError(f"Invalid '{where}': {why}", param=where)
