"""view_image: an image file becomes an input_image part of a function_call_output."""

from __future__ import annotations

import base64

import pytest

from toolwire.agent import ToolContext, ViewImage, output_for_call
from toolwire.agent.builtin.view_image import image_media_type
from toolwire.tools import FunctionPayload, RespondToModel, ToolCall, ToolName

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (PNG, "image/png"),
        (b"\xff\xd8\xff\xe0rest", "image/jpeg"),
        (b"GIF89a...", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"%PDF-1.7", None),
        (b"", None),
    ],
)
def test_image_media_type(data: bytes, media_type: str | None) -> None:
    assert image_media_type(data) == media_type


async def test_an_image_goes_back_as_an_input_image(full_access: ToolContext) -> None:
    (full_access.cwd / "shot.png").write_bytes(PNG)
    output = await ViewImage().run({"path": "shot.png"}, full_access)
    call = ToolCall(ToolName.plain("view_image"), "call_1", FunctionPayload('{"path": "shot.png"}'))
    assert output_for_call(call, output).dump() == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [
            {
                "type": "input_image",
                "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
            }
        ],
    }


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("notes.txt", b"hello", "notes.txt is not a PNG, JPEG, GIF or WebP image"),
        ("missing.png", None, "missing.png does not exist"),
        ("big.png", PNG * 100, r"big.png is 2400 bytes, more than 1000"),
    ],
)
async def test_problems_are_told_to_the_model(
    full_access: ToolContext, name: str, content: bytes | None, message: str
) -> None:
    if content is not None:
        (full_access.cwd / name).write_bytes(content)
    with pytest.raises(RespondToModel, match=message):
        await ViewImage(max_bytes=1000).run({"path": name}, full_access)


def test_riff_that_is_not_webp_is_no_image() -> None:
    assert image_media_type(b"RIFF\x00\x00\x00\x00WAVEfmt ") is None
    assert image_media_type(b"RIFX\x00\x00\x00\x00WEBPVP8 ") is None


@pytest.mark.parametrize("path", [None, "", 7])
async def test_the_path_must_be_a_non_empty_string(full_access: ToolContext, path: object) -> None:
    with pytest.raises(RespondToModel) as refused:
        await ViewImage().run({} if path is None else {"path": path}, full_access)
    assert refused.value.message == "view_image needs `path`, a non-empty string"


async def test_an_image_of_exactly_the_limit_is_shown(full_access: ToolContext) -> None:
    (full_access.cwd / "exact.png").write_bytes(PNG)
    output = await ViewImage(max_bytes=len(PNG)).run({"path": "exact.png"}, full_access)
    assert isinstance(output.content, list) and output.content[0].type == "input_image"


async def test_a_path_that_cannot_be_read(full_access: ToolContext) -> None:
    (full_access.cwd / "folder.png").mkdir()
    with pytest.raises(RespondToModel) as refused:
        await ViewImage().run({"path": "folder.png"}, full_access)
    assert refused.value.message == "view_image: cannot read folder.png: Is a directory"
