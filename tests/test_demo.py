"""``toolwire demo``: the transcript of both turns, as a user runs it (a real subprocess)."""

from __future__ import annotations

import subprocess
import sys

from toolwire.demo import summarize_events, summarize_output

RUN_DEMO = "import typer; from toolwire.cli import demo_command; typer.run(demo_command)"


def test_demo_shows_both_sides_and_the_restored_calls() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", RUN_DEMO, "--width", "200"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for expected in [
        "Turn 1: the model calls two tools",
        "Turn 2: the tool outputs go back",
        # the client's side: namespaces and a custom tool
        "namespace functions: custom exec",
        "namespace collaboration: function list_agents",
        # the backend's side: flat function names, the custom tool taking {"input": ...}
        "function functions__exec(input: string)",
        "tool_call collaboration__list_agents({})",
        # back on the client's side, restored
        "output_item.done custom_tool_call functions.exec",
        "custom_tool_call functions.exec  input (raw JavaScript): const files = await tools.exec_command",
        "function_call collaboration.list_agents({})",
        "custom exec restored",
        "namespace functions restored",
        "namespace collaboration restored",
        # turn 2: the outputs reach the backend as tool messages, and the answer comes back
        "custom_tool_call_output [",
        "tool [",
        "message: functions__exec returned: README.md  src  tests",
    ]:
        assert expected in out, f"{expected!r} missing from:\n{out}"


def test_event_summary_folds_runs_of_deltas() -> None:
    events = [
        {"type": "response.created"},
        {
            "type": "response.output_item.added",
            "item": {"type": "custom_tool_call", "name": "exec", "namespace": "functions"},
        },
        {"type": "response.custom_tool_call_input.delta"},
        {"type": "response.custom_tool_call_input.delta"},
        {"type": "response.custom_tool_call_input.done"},
        {"type": "response.completed"},
    ]
    assert summarize_events(events) == [
        "created",
        "output_item.added custom_tool_call functions.exec",
        "custom_tool_call_input.delta x2",
        "custom_tool_call_input.done",
        "completed",
    ]


def test_output_summary() -> None:
    output = [
        {
            "type": "function_call",
            "name": "list_agents",
            "namespace": "collaboration",
            "arguments": "{}",
        },
        {"type": "message", "content": [{"type": "output_text", "text": "done"}]},
    ]
    assert summarize_output(output) == [
        "function_call collaboration.list_agents({})",
        "message: done",
    ]
