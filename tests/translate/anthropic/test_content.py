"""Content blocks of a Messages request (``anthropic/_content``): each kind of part of a
user message, a tool output and an assistant or system message, on backends with and
without images and documents; and the request errors that name the part at fault.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.errors import RequestError

from .test_request import translate

JSON = dict[str, Any]
CACHED = "cache_control breakpoints on tools, system and the latest turn"
NOTE = {"type": "text", "text": "[an image was attached here, but this model cannot see images]"}
F = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}

USER_PARTS: list[JSON] = [
    {"type": "input_text", "text": "a"},
    {"type": "input_text", "text": ""},
    {"type": "output_text", "text": "b"},
    {"type": "refusal", "refusal": "no"},
    {"type": "refusal", "refusal": ""},
    {"type": "input_image", "image_url": "https://example.com/a.png"},
    {"type": "input_image", "image_url": "data:image/webp;base64,UklG"},
    {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE"},
    {"type": "input_file", "file_url": "https://example.com/a.pdf"},
    {"type": "input_file", "file_data": "data:text/plain;base64,aGk="},
    {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
]
TEXTS = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, {"type": "text", "text": "no"}]
IMAGES = [
    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
    {"type": "image", "source": {"type": "base64", "media_type": "image/webp", "data": "UklG"}},
]
DOCUMENTS = [
    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
    {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
]
AUDIO_DROPPED = "message parts dropped (no Messages API equivalent): input_audio at input[0].content[10]"


@pytest.mark.parametrize(
    ("preset", "blocks", "warnings"),
    [
        (
            "anthropic",
            [*TEXTS, *IMAGES, *DOCUMENTS],
            ["files dropped (only PDF documents can be sent): text/plain at input[0].content[9]", AUDIO_DROPPED],
        ),
        (
            "kimi-anthropic",
            [*TEXTS, *IMAGES],
            [
                "files dropped (the backend takes no documents): input[0].content[7], input[0].content[8], input[0].content[9]",
                AUDIO_DROPPED,
            ],
        ),
        (
            "deepseek-anthropic",
            [*TEXTS, NOTE, NOTE],
            [
                "images replaced by a note (the backend takes no images): input[0].content[5], input[0].content[6]",
                "files dropped (the backend takes no documents): input[0].content[7], input[0].content[8], input[0].content[9]",
                AUDIO_DROPPED,
            ],
        ),
    ],
)
def test_the_parts_of_a_user_message(preset: str, blocks: list[JSON], warnings: list[str]) -> None:
    translated = translate({"input": [{"type": "message", "role": "user", "content": USER_PARTS}]}, preset)
    [message] = translated.body["messages"]
    for block in message["content"]:
        block.pop("cache_control", None)
    assert message == {"role": "user", "content": blocks}
    assert translated.warnings == warnings


TOOL_OUTPUT: list[JSON] = [
    {"type": "input_text", "text": "t"},
    {"type": "input_text", "text": ""},
    {"type": "output_text", "text": "o"},
    {"type": "input_image", "image_url": "https://example.com/a.png"},
    {"type": "input_file", "file_url": "https://example.com/a.pdf"},
]
FILE_DROPPED = "tool output parts dropped (tool results take text and images): input_file at input[2].output[4]"


@pytest.mark.parametrize(
    ("preset", "content", "warnings"),
    [
        ("anthropic", [{"type": "text", "text": "t"}, {"type": "text", "text": "o"}, IMAGES[0]], [FILE_DROPPED]),
        (
            "deepseek-anthropic",
            [{"type": "text", "text": "t"}, {"type": "text", "text": "o"}, NOTE],
            ["images replaced by a note (the backend takes no images): input[2].output[3]", FILE_DROPPED],
        ),
    ],
)
def test_the_parts_of_a_tool_output(preset: str, content: list[JSON], warnings: list[str]) -> None:
    translated = translate(
        {
            "tools": [F],
            "input": [
                {"type": "message", "role": "user", "content": "go"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": TOOL_OUTPUT},
            ],
        },
        preset,
    )
    [result] = translated.body["messages"][2]["content"]
    assert (result["tool_use_id"], result["content"]) == ("c1", content)
    assert translated.warnings == warnings


def test_assistant_and_system_messages_keep_their_text_only() -> None:
    parts = [
        {"type": "output_text", "text": "x"},
        {"type": "input_text", "text": "y"},
        {"type": "refusal", "refusal": "r"},
        {"type": "refusal", "refusal": ""},
        {"type": "input_image", "image_url": "https://example.com/a.png"},
    ]
    translated = translate(
        {
            "input": [
                {"type": "message", "role": "user", "content": "go"},
                {"type": "message", "role": "assistant", "content": parts},
                {"type": "message", "role": "system", "content": parts},
                {"type": "message", "role": "assistant", "content": ""},
                {"type": "message", "role": "user", "content": ""},
                {"type": "message", "role": "user", "content": "more"},
            ]
        }
    )
    assert translated.body["system"] == [
        {"type": "text", "text": "x"},
        {"type": "text", "text": "y"},
        {"type": "text", "text": "r", "cache_control": {"type": "ephemeral"}},
    ]
    assert translated.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "xyr"}]},
        {"role": "user", "content": [{"type": "text", "text": "more", "cache_control": {"type": "ephemeral"}}]},
    ]
    assert translated.warnings == [
        "assistant message parts dropped (text only): input_image at input[1].content[4]",
        "system message parts dropped (text only): input_image at input[2].content[4]",
    ]
    assert translated.conversions == ["system/developer messages sent as the system prompt", CACHED]


DATA_URL_EXPECTED = "expected a base64 data: URL (data:<media type>;base64,<data>)."


@pytest.mark.parametrize(
    ("part", "why"),
    [
        (
            {"type": "input_image", "file_id": "file_1"},
            "an input_image needs an image_url; a file_id cannot be sent (the Messages API has no file ids here).",
        ),
        (
            {"type": "input_image", "image_url": "data:image/bmp;base64,Qk0="},
            "image type 'image/bmp' is not one of image/gif, image/jpeg, image/png, image/webp.",
        ),
        ({"type": "input_image", "image_url": "ftp://example.com/a.png"}, "an image_url must be a data: URL or an http(s) URL."),
        ({"type": "input_image", "image_url": "data:image/png,iVBO"}, DATA_URL_EXPECTED),
        ({"type": "input_image", "image_url": "data:image/png;base64"}, DATA_URL_EXPECTED),
        ({"type": "input_file", "file_data": "application/pdf;base64,JVBE"}, DATA_URL_EXPECTED),
        ({"type": "input_file", "file_id": "file_1"}, "an input_file needs file_data or file_url; a file_id cannot be sent."),
        # A comma in the header must be percent-encoded (RFC 2397): the first one ends it.
        ({"type": "input_file", "file_data": "data:application/pdf;name=a,b.pdf;base64,QUJD"}, DATA_URL_EXPECTED),
    ],
    ids=["image-file-id", "image-type", "image-scheme", "not-base64", "no-comma", "no-data-scheme", "file-id", "comma-in-header"],
)
def test_a_part_that_cannot_be_sent_is_a_request_error_naming_it(part: JSON, why: str) -> None:
    with pytest.raises(RequestError) as raised:
        translate({"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "see"}, part]}]})
    assert raised.value.message == f"Invalid 'input[0].content[1]': {why}"
    assert raised.value.param == "input[0].content[1]"


def test_an_image_in_a_tool_output_that_cannot_be_sent_names_its_place() -> None:
    with pytest.raises(RequestError) as raised:
        translate(
            {
                "tools": [F],
                "input": [
                    {"type": "message", "role": "user", "content": "go"},
                    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_image", "image_url": "data:image/png;base64"}]},
                ],
            }
        )
    assert raised.value.message == f"Invalid 'input[2].output[0]': {DATA_URL_EXPECTED}"
    assert raised.value.param == "input[2].output[0]"
