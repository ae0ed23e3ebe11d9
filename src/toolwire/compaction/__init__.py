"""Compaction for every backend: a conversation summarised into one sealed ``compaction`` item.

A client compacts a long conversation with ``POST /v1/responses/compact`` or (Codex) a
``compaction_trigger`` item in a normal request, and gets a ``compaction`` item it keeps
in place of the history. For a backend that does not compact by itself, the gateway
does it, with these pieces (the pipeline decides when, ``toolwire.server``):

* ``summary_request`` (``_summary``): the conversation, our ``COMPACTION_PROMPT``, no
  tools: what the backend's model is asked;
* ``CompactionAnswer`` (``_answer``): the backend's answer in, one ``compaction`` item
  out, whatever the wire the answer came in; ``retained_messages``: what
  ``/v1/responses/compact`` keeps beside it;
* ``CompactionSeal`` (``_seal``): the summary sealed into ``encrypted_content``
  (AES-256-GCM), bound to the client key that made it; an item that is not ours, not
  under our key, not the caller's or altered is ``UnreadableCompaction`` (400);
* ``open_compactions`` (``_history``): before a request goes to the backend, every
  compaction of ours becomes its summary, as a user message, in its place;
* ``CompactionKeySource`` (``_keys``, the only I/O here): the key, kept beside the store
  (``compaction_key_for``) so that every gateway sharing the store shares it.
"""

from ._answer import CompactionAnswer
from ._history import SUMMARY_HEADING, OpenedHistory, has_trigger, open_compactions, summary_message
from ._keys import (
    KEY_FILE_SUFFIX,
    CompactionKeySource,
    FileCompactionKey,
    ProcessCompactionKey,
    RedisCompactionKey,
    compaction_key_for,
)
from ._seal import SEALED_PREFIX, CompactionSeal, Unreadable, UnreadableCompaction
from ._summary import COMPACTION_PROMPT, RETAINED_TEXT_BUDGET, retained_messages, summary_request

__all__ = [
    "COMPACTION_PROMPT",
    "KEY_FILE_SUFFIX",
    "RETAINED_TEXT_BUDGET",
    "SEALED_PREFIX",
    "SUMMARY_HEADING",
    "CompactionAnswer",
    "CompactionKeySource",
    "CompactionSeal",
    "FileCompactionKey",
    "OpenedHistory",
    "ProcessCompactionKey",
    "RedisCompactionKey",
    "Unreadable",
    "UnreadableCompaction",
    "compaction_key_for",
    "has_trigger",
    "open_compactions",
    "retained_messages",
    "summary_message",
    "summary_request",
]
