"""The real Codex CLI's follow-up request continues the history the gateway learned from
its first one: Codex writes its JSON as the known histories need it (compact, as orjson
writes it), in each of its tool protocols.

If Codex ever wrote its bodies otherwise, the gateway would still answer correctly but
parse and translate every turn whole again; this is the test that notices. That a
continued turn sends the upstream what translating it whole sends is
``tests/server/test_history_cache.py``'s and ``tests/translate/chat/test_history.py``'s.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import httpx
import pytest

from tests.support.chat_upstream import ChatUpstream, ToolCalls
from tests.support.gateway import GatewayProcess

from .test_codex import V1, V1_PLUS, V2, call, tool_turn, until_tool_result

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("npm") is None, reason="needs node/npm to install Codex"),
]


def continued(gateway: GatewayProcess) -> float:
    metrics = httpx.get(gateway.url + "/metrics", timeout=10).text
    match = re.search(r"^toolwire_history_continued_total (\S+)$", metrics, re.M)
    assert match is not None
    return float(match[1])


@pytest.mark.parametrize(("model", "tool"), [(V1, "exec_command"), (V1_PLUS, "exec_command"), (V2, "exec")])
def test_the_follow_up_continues_the_first_request(
    gateway: GatewayProcess, upstream: ChatUpstream, tmp_path: Path, model: str, tool: str
) -> None:
    # code mode's exec takes the legacy {"cmd": ...} too (the gateway repairs it)
    upstream.responder = until_tool_result(lambda request: ToolCalls([call(request, tool, cmd="echo history-$((6*7))")]))
    before = continued(gateway)
    follow_up = tool_turn(gateway, upstream, model, tmp_path)
    assert "history-42" in str(follow_up["messages"])
    assert continued(gateway) - before == 1, "Codex's follow-up did not continue its first request's history"
