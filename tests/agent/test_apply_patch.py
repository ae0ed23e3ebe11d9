"""apply_patch: the grammar, the pure edit, and all-or-nothing writes inside the working directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolwire.agent import ApplyPatch, Approval, Policy, Sandbox, ScriptedApprover, ToolContext
from toolwire.agent.builtin._patch import (
    PATCH_GRAMMAR,
    AddFile,
    Chunk,
    DeleteFile,
    PatchError,
    UpdateFile,
    apply_hunks,
    parse_patch,
    update_text,
)
from toolwire.agent.builtin.apply_patch import commit
from toolwire.protocol import CustomTool, GrammarFormat
from toolwire.tools import RespondToModel

# The grammar of codex-client.md §2.2, character for character.
CODEX_GRAMMAR = (
    'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\nend_patch: "*** End Patch" LF?\n\n'
    'hunk: add_hunk | delete_hunk | update_hunk\nadd_hunk: "*** Add File: " filename LF add_line+\n'
    'delete_hunk: "*** Delete File: " filename LF\nupdate_hunk: "*** Update File: " filename LF change_move? change?\n\n'
    'filename: /(.+)/\nadd_line: "+" /(.*)/ LF -> line\n\nchange_move: "*** Move to: " filename LF\n'
    'change: (change_context | change_line)+ eof_line?\nchange_context: ("@@" | "@@ " /(.+)/) LF\n'
    'change_line: ("+" | "-" | " ") /(.*)/ LF\neof_line: "*** End of File" LF\n\n%import common.LF\n'
)


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"]) + "\n"


def test_the_spec_is_codexs_freeform_tool() -> None:
    spec = ApplyPatch.spec
    assert isinstance(spec, CustomTool) and isinstance(spec.format, GrammarFormat)
    assert PATCH_GRAMMAR == CODEX_GRAMMAR
    assert spec.dump() == {
        "type": "custom",
        "name": "apply_patch",
        "description": "The `apply_patch` tool can be used to edit files. This is a FREEFORM tool, so do not wrap the patch in JSON.",
        "format": {"type": "grammar", "syntax": "lark", "definition": CODEX_GRAMMAR},
    }


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "hunks"),
    [
        (
            patch("*** Add File: a.txt", "+one", "+", "+three"),
            [AddFile("a.txt", ("one", "", "three"))],
        ),
        (patch("*** Delete File: old.txt"), [DeleteFile("old.txt")]),
        (
            patch(
                "*** Update File: m.py",
                "@@ def f():",
                "-    return 1",
                "+    return 2",
                "     pass",
            ),
            [
                UpdateFile(
                    "m.py",
                    None,
                    (
                        Chunk(
                            "def f():", ("    return 1", "    pass"), ("    return 2", "    pass")
                        ),
                    ),
                )
            ],
        ),
        (
            patch(
                "*** Update File: a.py",
                "*** Move to: b.py",
                " keep",
                "@@",
                "+end",
                "*** End of File",
            ),
            [
                UpdateFile(
                    "a.py",
                    "b.py",
                    (Chunk(None, ("keep",), ("keep",)), Chunk(None, (), ("end",), True)),
                )
            ],
        ),
        (patch("*** Update File: a.py", "*** Move to: b.py"), [UpdateFile("a.py", "b.py", ())]),
        # surrounding whitespace, CRLF and a missing final line break are fine
        ("\n  *** Begin Patch\r\n*** Delete File: x \r\n*** End Patch", [DeleteFile("x")]),
    ],
)
def test_parse(text: str, hunks: list[object]) -> None:
    assert parse_patch(text) == hunks


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "just some text",
            " at line 1: 'just some text' is there, but the grammar expects one of: '*** Begin Patch'",
        ),
        (
            patch(),
            " at line 2: '*** End Patch' is there, but the grammar expects one of: '*** Add File: ', '*** Delete File: ', '*** Update File: '",
        ),
        (patch("*** Add File: a.txt"), " at line 3: '*** End Patch' is there"),
        (patch("*** Update File: a.py", "", "-x"), " at line 3: '\\n' is there"),
        (
            "*** Begin Patch\n*** Delete File: a\n",
            ": it ends too early, but the grammar expects one of: '*** Add File: '",
        ),
        ('{"input": "*** Begin Patch"}', " at line 1"),
    ],
)
def test_parse_errors_say_where(text: str, message: str) -> None:
    with pytest.raises(PatchError, match=re.escape("invalid patch" + message)):
        parse_patch(text)


# ---------------------------------------------------------------- the pure edit


@pytest.mark.parametrize(
    ("original", "chunks", "expected"),
    [
        ("a\nb\nc\n", [Chunk(None, ("b",), ("B",))], "a\nB\nc\n"),
        ("a\nb\nc", [Chunk(None, ("c",), ("C",))], "a\nb\nC\n"),
        # the context line picks the right occurrence
        ("x\nv = 1\ny\nv = 1\n", [Chunk("y", ("v = 1",), ("v = 2",))], "x\nv = 1\ny\nv = 2\n"),
        # chunks apply in order, each after the previous one
        ("v\nv\n", [Chunk(None, ("v",), ("1",)), Chunk(None, ("v",), ("2",))], "1\n2\n"),
        # End of File anchors at the end
        ("v\nw\nv\n", [Chunk(None, ("v",), ("last",), True)], "v\nw\nlast\n"),
        # a pure addition goes after its context line, or at the end
        (
            "def f():\n    pass\n",
            [Chunk("def f():", (), ("    # new",))],
            "def f():\n    # new\n    pass\n",
        ),
        ("a\n", [Chunk(None, (), ("b",))], "a\nb\n"),
        # looser matches: trailing whitespace, indentation, typographic punctuation
        ("a  \n", [Chunk(None, ("a",), ("A",))], "A\n"),
        ("    a\n", [Chunk(None, ("a",), ("A",))], "A\n"),
        ("say \u201chi\u201d \u2014 ok\n", [Chunk(None, ('say "hi" - ok',), ("x",))], "x\n"),
        # a trailing empty context line that the file lacks
        ("a\n", [Chunk(None, ("a", ""), ("b", ""))], "b\n"),
        # deleting every line leaves an empty file
        ("a\n", [Chunk(None, ("a",), ())], ""),
    ],
)
def test_update_text(original: str, chunks: list[Chunk], expected: str) -> None:
    assert update_text(original, chunks, "f") == expected


@pytest.mark.parametrize(
    ("original", "chunks", "message"),
    [
        ("a\n", [Chunk(None, ("zzz",), ("y",))], "these lines were not found:\nzzz"),
        ("a\n", [Chunk("class Nope:", ("a",), ("b",))], "context line not found: 'class Nope:'"),
        (
            "b\na\n",
            [Chunk(None, ("a",), ("1",)), Chunk(None, ("b",), ("2",))],
            "these lines were not found:\nb",
        ),
    ],
)
def test_update_text_errors(original: str, chunks: list[Chunk], message: str) -> None:
    with pytest.raises(PatchError, match=message):
        update_text(original, chunks, "f")


def test_apply_hunks_sees_earlier_hunks_and_summarises() -> None:
    hunks = [
        AddFile("new.txt", ("1",)),
        UpdateFile("new.txt", "moved.txt", (Chunk(None, ("1",), ("2",)),)),
        DeleteFile("old.txt"),
    ]
    result = apply_hunks(hunks, {"new.txt": None, "moved.txt": None, "old.txt": "x\n"})
    assert result.files == {"new.txt": None, "moved.txt": "2\n", "old.txt": None}
    assert result.summary == ["A new.txt", "M moved.txt", "D old.txt"]


@pytest.mark.parametrize(
    ("hunk", "message"),
    [
        (DeleteFile("missing"), "cannot delete missing: the file does not exist"),
        (UpdateFile("missing", None, ()), "cannot update missing: the file does not exist"),
    ],
)
def test_apply_hunks_needs_existing_files(hunk: UpdateFile | DeleteFile, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply_hunks([hunk], {"missing": None})


# ---------------------------------------------------------------- the tool


async def test_adds_updates_moves_and_deletes(full_access: ToolContext) -> None:
    root = full_access.cwd
    (root / "main.py").write_text("def main():\n    return 1\n")
    (root / "old.txt").write_text("bye\n")
    (root / "a.txt").write_text("a\n")
    output = await ApplyPatch().run(
        patch(
            "*** Add File: pkg/new.py",
            "+print('new')",
            "*** Update File: main.py",
            "@@ def main():",
            "-    return 1",
            "+    return 2",
            "*** Delete File: old.txt",
            "*** Update File: a.txt",
            "*** Move to: sub/b.txt",
            "-a",
            "+b",
        ),
        full_access,
    )
    assert output.content == (
        "Success. Updated the following files:\nA pkg/new.py\nM main.py\nD old.txt\nM sub/b.txt\n"
    )
    assert (root / "pkg/new.py").read_text() == "print('new')\n"
    assert (root / "main.py").read_text() == "def main():\n    return 2\n"
    assert not (root / "old.txt").exists() and not (root / "a.txt").exists()
    assert (root / "sub/b.txt").read_text() == "b\n"
    assert sorted(p.name for p in root.rglob(".*")) == []  # no temporary files left


async def test_a_failing_hunk_changes_nothing(full_access: ToolContext) -> None:
    root = full_access.cwd
    (root / "keep.txt").write_text("keep\n")
    with pytest.raises(
        RespondToModel, match=r"cannot update keep\.txt: these lines were not found"
    ) as caught:
        await ApplyPatch().run(
            patch(
                "*** Add File: created.txt",
                "+x",
                "*** Delete File: keep.txt",
                "*** Add File: keep.txt",
                "+again",
                "*** Update File: keep.txt",
                "-not there",
            ),
            full_access,
        )
    assert "Nothing was changed." in caught.value.message
    assert sorted(p.name for p in root.iterdir()) == ["keep.txt"]
    assert (root / "keep.txt").read_text() == "keep\n"


async def test_an_invalid_patch_is_told_to_the_model(full_access: ToolContext) -> None:
    with pytest.raises(RespondToModel, match="invalid patch at line 1"):
        await ApplyPatch().run("--- a/x\n+++ b/x\n", full_access)


@pytest.mark.parametrize(
    "path", ["../escape.txt", "/etc/passwd", "sub/../../escape.txt", "link/x.txt", "."]
)
async def test_paths_must_stay_inside_the_working_directory(
    full_access: ToolContext, path: str
) -> None:
    (full_access.cwd / "link").symlink_to(full_access.cwd.parent)
    with pytest.raises(RespondToModel, match="outside the working directory"):
        await ApplyPatch().run(patch(f"*** Add File: {path}", "+x"), full_access)
    assert not (full_access.cwd.parent / "escape.txt").exists()


async def test_an_absolute_path_inside_the_working_directory_is_fine(
    full_access: ToolContext,
) -> None:
    target = full_access.cwd.resolve() / "abs.txt"
    output = await ApplyPatch().run(patch(f"*** Add File: {target}", "+x"), full_access)
    assert output.content == "Success. Updated the following files:\nA abs.txt\n"
    assert target.read_text() == "x\n"


async def test_read_only_mode_refuses_and_on_request_asks(tmp_path: Path) -> None:
    text = patch("*** Add File: a.txt", "+x")
    refusing = ToolContext(tmp_path, Policy(Sandbox.READ_ONLY, Approval.NEVER))
    with pytest.raises(
        RespondToModel, match=r"refused: read-only mode does not allow apply_patch to edit a.txt"
    ):
        await ApplyPatch().run(text, refusing)
    assert not (tmp_path / "a.txt").exists()
    approver = ScriptedApprover([True])
    await ApplyPatch().run(
        text, ToolContext(tmp_path, Policy(Sandbox.READ_ONLY, Approval.ON_REQUEST, approver))
    )
    assert (tmp_path / "a.txt").read_text() == "x\n"
    assert [request.tool for request in approver.requests] == ["apply_patch"]


def test_commit_restores_everything_when_a_write_fails(tmp_path: Path) -> None:
    (tmp_path / "first.txt").write_text("original\n")
    (tmp_path / "blocker").write_text("a file, not a directory\n")
    with pytest.raises(OSError):
        commit(
            {
                tmp_path / "first.txt": "changed\n",
                tmp_path / "gone.txt": None,
                tmp_path / "new/deep/file.txt": "x\n",
                tmp_path / "blocker/inside.txt": "cannot be written\n",
            }
        )
    assert (tmp_path / "first.txt").read_text() == "original\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "first.txt"]


def test_commit_keeps_file_modes(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o755)
    commit({script: "echo 2\n"})
    assert script.read_text() == "echo 2\n"
    assert script.stat().st_mode & 0o777 == 0o755
