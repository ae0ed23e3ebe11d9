"""The Responses wire: a Responses backend that lacks newer tool features, and back.

``downgrade_request`` (``downgrade``) rewrites what a backend's ``ResponsesCapabilities``
(``capabilities``) lack: ``additional_tools`` hoisted, namespaces flattened, custom tools
and a client tool_search offered as functions, hosted tools dropped
(``DowngradedToolTable``, ``_table``, remembers how). ``ResponsesStreamRestorer``
(``restore``) restores the backend's events, or its whole Response, to the types the
client declared (``_items``).
"""

from ._table import DowngradedTool, DowngradedToolTable
from .capabilities import ResponsesCapabilities
from .downgrade import DowngradedRequest, downgrade_request
from .restore import ResponsesStreamRestorer

__all__ = [
    "DowngradedRequest",
    "DowngradedTool",
    "DowngradedToolTable",
    "ResponsesCapabilities",
    "ResponsesStreamRestorer",
    "downgrade_request",
]
