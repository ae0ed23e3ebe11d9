"""apply_patch: the grammar, the pure edit, and all-or-nothing writes inside the working directory."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

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


# ---------------------------------------------------------------- what the model is told, and rollback


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "*** Begin Patch\n*** Frobnicate: x\n*** End Patch\n",
            "invalid patch at line 2: '*** Frobnicate: x' is there, but the grammar expects one of: "
            "'*** Add File: ', '*** Delete File: ', '*** Update File: '",
        ),
        (
            "*** Begin Patch x\n*** Delete File: a\n*** End Patch\n",
            "invalid patch at line 1: ' x' is there, but the grammar expects one of: a line break",
        ),
        (
            "*** Begin Patch\n*** Add File: \n+x\n*** End Patch\n",
            "invalid patch at line 2: '\\n' is there, but the grammar expects one of: text",
        ),
        (
            "*** Begin Patch\n*** Add File: a.txt\n*** End Patch\n",
            "invalid patch at line 3: '*** End Patch' is there, but the grammar expects one of: '+'",
        ),
    ],
)
def test_a_parse_error_names_what_the_grammar_expects_at_that_place(text: str, message: str) -> None:
    with pytest.raises(PatchError) as refused:
        parse_patch(text)
    assert str(refused.value) == message


def test_parsed_names_and_lines_keep_their_text() -> None:
    [add, update] = parse_patch(
        patch("*** Add File: dir/my file.txt", "+  two  spaces", "*** Update File: a.py", "@@", "-x", "+y", "@@", "+z")
    )
    assert add == AddFile("dir/my file.txt", ("  two  spaces",))
    assert update == UpdateFile("a.py", None, (Chunk(None, ("x",), ("y",)), Chunk(None, (), ("z",))))


@pytest.mark.parametrize(
    ("original", "chunks", "expected"),
    [
        # several chunks are applied where each was found, whatever the order of their starts
        ("a\nb\nc\nd\n", [Chunk(None, ("b",), ("B", "B2")), Chunk(None, ("d",), ("D",))], "a\nB\nB2\nc\nD\n"),
        # a pure addition after its context, then a change further down
        ("f\ng\nh\n", [Chunk("f", (), ("new",)), Chunk(None, ("h",), ("H",))], "f\nnew\ng\nH\n"),
        # ... or of the very next line: the addition stays before the change
        ("f\ng\nh\n", [Chunk("f", (), ("new",)), Chunk(None, ("g",), ("G",))], "f\nnew\nG\nh\n"),
        # two additions after one context line keep their order
        ("f\nf\n", [Chunk("f", (), ("a",)), Chunk(None, (), ("end",))], "f\na\nf\nend\n"),
        # an empty last line the file lacks, anchored at the end of the file
        ("x\ny\nx\n", [Chunk(None, ("x", ""), ("z", ""), True)], "x\ny\nz\n"),
        # several lines matched together, at the end of the file when told so
        ("x\ny\nx\ny\n", [Chunk(None, ("x", "y"), ("z",), True)], "x\ny\nz\n"),
        # an empty last line the file lacks, on both sides of the change
        ("a\nb\n", [Chunk(None, ("a", "b", ""), ("A", "b", ""))], "A\nb\n"),
        ("a\nb\n", [Chunk(None, ("b", ""), ("B",))], "a\nB\n"),
        # several lines matched together after the first line, each at its own place
        ("a\nb\nc\n", [Chunk(None, ("b", "c"), ("B", "C"))], "a\nB\nC\n"),
        # two additions at the end of the file keep the order of their chunks, whatever they say
        ("x\n", [Chunk(None, (), ("z",)), Chunk(None, (), ("a",))], "x\nz\na\n"),
        # a change that adds a line, then an addition at the end: the addition stays last
        ("a\nb\n", [Chunk(None, ("a",), ("A1", "A2")), Chunk(None, (), ("end",))], "A1\nA2\nb\nend\n"),
    ],
)
def test_update_text_more(original: str, chunks: list[Chunk], expected: str) -> None:
    assert update_text(original, chunks, "f") == expected


def test_update_text_says_which_lines_it_looked_for() -> None:
    with pytest.raises(PatchError) as missing:
        update_text("a\n", [Chunk(None, ("x", "y"), ("z",))], "f.py")
    assert str(missing.value) == "cannot update f.py: these lines were not found:\nx\ny"


async def test_files_that_cannot_be_read_as_text(full_access: ToolContext) -> None:
    root = full_access.cwd
    (root / "dir").mkdir()
    (root / "binary.bin").write_bytes(b"\xff\xfe\x00")
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    with pytest.raises(RespondToModel) as directory:
        await ApplyPatch().run(patch("*** Update File: dir", "-x", "+y"), full_access)
    assert directory.value.message == f"{root.resolve() / 'dir'} is a directory\nNothing was changed."
    with pytest.raises(RespondToModel) as binary:
        await ApplyPatch().run(patch("*** Delete File: binary.bin"), full_access)
    assert binary.value.message == f"{root.resolve() / 'binary.bin'} is not a UTF-8 text file\nNothing was changed."
    await ApplyPatch().run(patch("*** Update File: crlf.txt", "-two", "+2"), full_access)
    assert (root / "crlf.txt").read_bytes() == b"one\n2\n"
    with pytest.raises(RespondToModel) as under_a_file:
        await ApplyPatch().run(patch("*** Add File: binary.bin/inside.txt", "+x"), full_access)
    assert under_a_file.value.message == (
        f"cannot read {root.resolve() / 'binary.bin' / 'inside.txt'}: Not a directory\nNothing was changed."
    )


async def test_approval_names_every_path_it_would_edit(tmp_path: Path) -> None:
    approver = ScriptedApprover([False])
    context = ToolContext(tmp_path, Policy(Sandbox.READ_ONLY, Approval.ON_REQUEST, approver))
    (tmp_path / "a.txt").write_text("a\n")
    with pytest.raises(RespondToModel):
        await ApplyPatch().run(patch("*** Add File: b.txt", "+b", "*** Update File: a.txt", "*** Move to: c.txt"), context)
    [request] = approver.requests
    assert request.action == f"edit b.txt, a.txt, c.txt in {tmp_path.resolve()}"


def test_a_write_that_fails_midway_puts_everything_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rename that fails after others succeeded (a full disk, a read-only remount): the
    files already installed are removed and the old ones put back."""
    (tmp_path / "a.txt").write_text("old a\n")
    (tmp_path / "b.txt").write_text("old b\n")
    real_replace = os.replace
    calls: list[tuple[str, str]] = []

    def replace(source: Any, target: Any) -> None:
        calls.append((Path(source).name, Path(target).name))
        if len(calls) == 4:  # a aside, b aside, a installed, then b fails
            raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError):
        commit({tmp_path / "a.txt": "new a\n", tmp_path / "b.txt": "new b\n", tmp_path / "c.txt": "new c\n"})
    monkeypatch.undo()
    assert (tmp_path / "a.txt").read_text() == "old a\n" and (tmp_path / "b.txt").read_text() == "old b\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


async def test_a_write_that_fails_is_told_to_the_model(full_access: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    def replace(source: Any, target: Any) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(RespondToModel) as refused:
        await ApplyPatch().run(patch("*** Add File: a.txt", "+x"), full_access)
    assert refused.value.message == (
        "apply_patch could not write the files ([Errno 30] Read-only file system); nothing was changed."
    )


@pytest.mark.parametrize(
    "lines",
    [
        ("*** Update File: ../outside.txt", "*** Move to: inside.txt"),
        ("*** Update File: inside.txt", "*** Move to: ../outside.txt"),
    ],
)
async def test_a_move_checks_both_of_its_paths(full_access: ToolContext, lines: tuple[str, str]) -> None:
    root = full_access.cwd
    (root.parent / "outside.txt").write_text("outside\n")
    (root / "inside.txt").write_text("inside\n")
    with pytest.raises(RespondToModel, match="outside the working directory"):
        await ApplyPatch().run(patch(*lines), full_access)
    assert (root.parent / "outside.txt").read_text() == "outside\n" and (root / "inside.txt").read_text() == "inside\n"


async def test_paths_are_cleaned_before_anyone_is_asked(tmp_path: Path) -> None:
    approver = ScriptedApprover([True])
    context = ToolContext(tmp_path, Policy(Sandbox.READ_ONLY, Approval.ON_REQUEST, approver))
    (tmp_path / "a.txt").write_text("one\n")
    output = await ApplyPatch().run(
        patch("*** Update File: ./a.txt", "*** Move to: sub/../b.txt", "-one", "+1", "*** Add File: c.txt", "+x", "+y"),
        context,
    )
    assert approver.requests[0].action == f"edit a.txt, b.txt, c.txt in {tmp_path.resolve()}"
    assert output.content == "Success. Updated the following files:\nM b.txt\nA c.txt\n"
    assert (tmp_path / "b.txt").read_text() == "1\n" and (tmp_path / "c.txt").read_text() == "x\ny\n"
    assert not (tmp_path / "a.txt").exists()


async def test_a_context_line_that_is_not_there_is_an_error_even_alone(full_access: ToolContext) -> None:
    (full_access.cwd / "a.py").write_text("def f():\n    pass\n")
    with pytest.raises(RespondToModel) as refused:
        await ApplyPatch().run(patch("*** Update File: a.py", "@@ def g():"), full_access)
    assert refused.value.message == "cannot update a.py: context line not found: 'def g():'\nNothing was changed."


def test_a_disk_that_fills_up_while_writing_leaves_no_half_written_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("old a\n")
    real_write_bytes = Path.write_bytes

    def write_bytes(self: Path, data: bytes) -> int:
        if self.name.startswith(".b.txt."):
            with self.open("wb") as half:
                half.write(data[:1])
            raise OSError(28, "No space left on device")
        return real_write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    with pytest.raises(OSError, match="No space left on device"):
        commit({tmp_path / "a.txt": "new a\n", tmp_path / "new" / "b.txt": "new b\n"})
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.txt"]
    assert (tmp_path / "a.txt").read_text() == "old a\n"


def test_a_rollback_that_fails_too_still_raises_the_error_that_started_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a rename has failed, every later step of the file system fails as well (a
    disk that went away): what the caller sees is still the first error."""
    (tmp_path / "a.txt").write_text("old a\n")
    (tmp_path / "b.txt").write_text("old b\n")
    real_replace = os.replace
    renames = 0

    def replace(source: Any, target: Any) -> None:
        nonlocal renames
        renames += 1
        if renames == 4:  # a aside, b aside, a installed, then b fails
            raise OSError(28, "No space left on device")
        if renames > 4:
            raise OSError(5, "Input/output error")
        real_replace(source, target)

    def fail(self: Path, *args: Any, **kwargs: Any) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(Path, "unlink", fail)
    monkeypatch.setattr(Path, "rmdir", fail)
    with pytest.raises(OSError) as failed:
        commit({tmp_path / "a.txt": "new a\n", tmp_path / "b.txt": "new b\n", tmp_path / "new" / "c.txt": "c\n"})
    monkeypatch.undo()
    assert (failed.value.errno, failed.value.strerror) == (28, "No space left on device")


def test_an_old_copy_that_cannot_be_removed_does_not_undo_the_patch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("old a\n")

    def fail(self: Path, *args: Any, **kwargs: Any) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Path, "unlink", fail)
    commit({tmp_path / "a.txt": "new a\n"})
    monkeypatch.undo()
    assert (tmp_path / "a.txt").read_text() == "new a\n"
