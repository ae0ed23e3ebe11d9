"""The built-in tools: ``exec_command``, ``apply_patch`` and ``view_image``."""

from __future__ import annotations

from toolwire.tools import ToolRouter

from .._handlers import ToolHandler, register_tool
from .apply_patch import ApplyPatch
from .exec_command import ExecCommand
from .view_image import ViewImage

__all__ = ["ApplyPatch", "ExecCommand", "ViewImage", "builtin_router", "builtin_tools"]


def builtin_tools() -> list[ToolHandler]:
    """One handler per built-in tool, with default limits."""
    return [ExecCommand(), ApplyPatch(), ViewImage()]


def builtin_router(*extra: ToolHandler) -> ToolRouter:
    """A router holding the built-in tools, then ``extra``."""
    router = ToolRouter()
    for handler in [*builtin_tools(), *extra]:
        register_tool(router, handler)
    return router
