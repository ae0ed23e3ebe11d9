"""``view_image``: show the model a local image file.

The output is a ``function_call_output`` whose ``output`` holds one ``input_image`` part
with a ``data:`` URL, as Codex sends it. The format is read from the file's first bytes
(PNG, JPEG, GIF, WebP), never from its name. Reading is allowed in every sandbox mode.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from toolwire.protocol import FunctionTool, InputImage
from toolwire.tools import RespondToModel

from .._handlers import FunctionToolHandler, ToolContext, ToolOutput

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_media_type(data: bytes) -> str | None:
    """The media type the bytes start with, or None if they are not a known image."""
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class ViewImage(FunctionToolHandler):
    spec = FunctionTool(
        type="function",
        name="view_image",
        description="Attach a local image (PNG, JPEG, GIF or WebP) so you can look at it.",
        strict=False,
        parameters={
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "The image file, relative to the working directory.",
                }
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    )

    def __init__(self, *, max_bytes: int = 20 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        name = arguments.get("path")
        if not isinstance(name, str) or not name:
            raise RespondToModel("view_image needs `path`, a non-empty string")
        path = context.cwd / name
        data = await asyncio.to_thread(self._read, path, name)
        media_type = image_media_type(data)
        if media_type is None:
            raise RespondToModel(f"view_image: {name} is not a PNG, JPEG, GIF or WebP image")
        url = f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
        return ToolOutput([InputImage(type="input_image", image_url=url)])

    def _read(self, path: Path, name: str) -> bytes:
        try:
            size = path.stat().st_size
            if size > self.max_bytes:
                raise RespondToModel(
                    f"view_image: {name} is {size} bytes, more than {self.max_bytes}"
                )
            return path.read_bytes()
        except FileNotFoundError as exc:
            raise RespondToModel(f"view_image: {name} does not exist") from exc
        except OSError as exc:
            raise RespondToModel(f"view_image: cannot read {name}: {exc.strerror}") from exc
