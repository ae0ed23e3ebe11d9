"""The two ways a tool call fails, and the configuration error.

::

    ToolError
    ├── RespondToModel      the model made a mistake it can fix: tell it, go on
    ├── FatalRuntimeError   the turn cannot go on (e.g. a payload kind the handler refuses)
    └── ConfigurationError  tools were declared or registered inconsistently
"""

from __future__ import annotations


class ToolError(Exception):
    """Base of the tool layer's errors."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RespondToModel(ToolError):
    """The model called a tool wrongly (unknown tool, bad arguments).

    The message goes back to the model as the call's output, and the loop continues.
    """


class FatalRuntimeError(ToolError):
    """The turn must stop: the call cannot be executed and telling the model won't help."""


class ConfigurationError(ToolError):
    """Two tools with one name, or a handler registered twice."""
