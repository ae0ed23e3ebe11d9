"""``apply_patch``: a freeform custom tool with Codex's Lark grammar, applied all-or-nothing.

The patch is validated against the grammar, every path is checked to stay inside the
working directory, every edit is computed in memory (``_patch.apply_hunks``), and only
then are the files written: new contents go to temporary files beside their targets,
the old files are moved aside, the new ones moved in. If any step fails, what was done
is undone and the model is told that nothing changed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from toolwire.protocol import CustomTool, GrammarFormat
from toolwire.tools import RespondToModel

from .._handlers import CustomToolHandler, ToolContext, ToolOutput
from .._policy import ApprovalRequest
from ._patch import PATCH_GRAMMAR, PatchError, apply_hunks, parse_patch, paths_of, with_paths

APPLY_PATCH_DESCRIPTION = (
    "The `apply_patch` tool can be used to edit files. This is a FREEFORM tool, "
    "so do not wrap the patch in JSON."
)


class ApplyPatch(CustomToolHandler):
    """The ``apply_patch`` tool; it runs alone, never beside another call."""

    spec = CustomTool(
        type="custom",
        name="apply_patch",
        description=APPLY_PATCH_DESCRIPTION,
        format=GrammarFormat(type="grammar", syntax="lark", definition=PATCH_GRAMMAR),
    )
    parallel = False

    async def run(self, text: str, context: ToolContext) -> ToolOutput:
        root = context.cwd.resolve()
        try:
            hunks = [
                with_paths(hunk, lambda path: relative_path(path, root))
                for hunk in parse_patch(text)
            ]
        except PatchError as exc:
            raise RespondToModel(str(exc)) from exc
        paths = paths_of(hunks)
        await context.policy.authorize(
            ApprovalRequest("apply_patch", f"edit {', '.join(paths)} in {root}"), writes=True
        )
        try:
            result = apply_hunks(hunks, {path: read_text(root / path) for path in paths})
        except PatchError as exc:
            raise RespondToModel(f"{exc}\nNothing was changed.") from exc
        try:
            commit({root / path: content for path, content in result.files.items()})
        except OSError as exc:
            raise RespondToModel(
                f"apply_patch could not write the files ({exc}); nothing was changed."
            ) from exc
        return ToolOutput(
            "Success. Updated the following files:\n" + "\n".join(result.summary) + "\n"
        )


def relative_path(path: str, root: Path) -> str:
    """``path`` as a clean path relative to ``root``; a path that leaves it (``..``, an
    absolute path elsewhere, a symlink out) is a ``PatchError``."""
    target = (root / path).resolve()
    if not target.is_relative_to(root) or target == root:
        raise PatchError(f"the path {path} is outside the working directory {root}")
    return target.relative_to(root).as_posix()


def read_text(path: Path) -> str | None:
    """The file's text (CRLF read as LF), or None when it does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        raise PatchError(f"{path} is a directory") from exc
    except OSError as exc:
        raise PatchError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return data.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        raise PatchError(f"{path} is not a UTF-8 text file") from exc


def commit(changes: Mapping[Path, str | None]) -> None:
    """Write every change (None deletes), or none: on failure, restore what was there."""
    token = secrets.token_hex(4)
    staged: dict[Path, Path] = {}
    moved_aside: dict[Path, Path] = {}
    installed: list[Path] = []
    created_dirs: list[Path] = []
    try:
        for target, content in changes.items():
            if content is None:
                continue
            _make_parents(target.parent, created_dirs)
            temporary = target.with_name(f".{target.name}.{token}.new")
            staged[target] = temporary  # before writing: a write that fails halfway is removed too
            temporary.write_bytes(content.encode("utf-8"))
            with contextlib.suppress(OSError):
                os.chmod(temporary, target.stat().st_mode)
        for target in changes:
            if target.exists():
                aside = target.with_name(f".{target.name}.{token}.old")
                os.replace(target, aside)
                moved_aside[target] = aside
        for target, temporary in staged.items():
            os.replace(temporary, target)
            installed.append(target)
    except BaseException:
        for target in installed:
            with contextlib.suppress(OSError):
                target.unlink()
        for target, aside in moved_aside.items():
            with contextlib.suppress(OSError):
                os.replace(aside, target)
        for temporary in staged.values():
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
        for directory in reversed(created_dirs):
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
    for aside in moved_aside.values():
        with contextlib.suppress(OSError):
            aside.unlink()


def _make_parents(directory: Path, created: list[Path]) -> None:
    """Create ``directory`` and its missing parents, adding each to ``created``
    (outermost first) as soon as it exists."""
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        path.mkdir()
        created.append(path)
