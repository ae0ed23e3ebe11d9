"""scripts/mutation.py reports large packages in parts: every module of such a package must
be in exactly one part, or a new module would go unmutated (and the part runs refuse to start)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mutation.py"


def mutation_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_script"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("package", ["server", "translate"])
def test_the_parts_of_a_package_cover_each_of_its_modules_once(package: str) -> None:
    script = mutation_script()
    assert package in script.PARTS
    script.check_parts(package)


def test_a_module_in_no_part_is_named(tmp_path: Path) -> None:
    script = mutation_script()
    folder = tmp_path / "src" / "toolwire" / "pkg"
    folder.mkdir(parents=True)
    for name in ("a.py", "b.py"):
        (folder / name).write_text("")
    script.ROOT, script.SOURCE = tmp_path, tmp_path / "src" / "toolwire"
    script.PARTS["pkg"] = {"one": ["a.py"]}
    with pytest.raises(SystemExit, match=r"in no part: src/toolwire/pkg/b\.py; in more than one: none"):
        script.check_parts("pkg")
    script.PARTS["pkg"] = {"one": ["a.py", "b.py"], "two": ["b.py"]}
    with pytest.raises(SystemExit, match=r"in no part: none; in more than one: src/toolwire/pkg/b\.py"):
        script.check_parts("pkg")


def test_the_readme_table_is_the_one_the_reports_give() -> None:
    """mutation/README.md's table is rewritten with each report; one committed by hand, or a
    report whose header no longer reads, would leave it untrue."""
    script = mutation_script()
    readme = (script.RESULTS / "README.md").read_text()
    table = script.summary_table(script.RESULTS)
    assert script.with_table(readme, table) == readme
    reports = sorted(path.stem for path in script.RESULTS.glob("*.md") if path.name != "README.md")
    assert [row.split(" | ")[0].removeprefix("| ") for row in table.splitlines()[2:]] == reports


def test_the_table_reads_each_report_s_header(tmp_path: Path) -> None:
    script = mutation_script()
    (tmp_path / "README.md").write_text(f"before\n{script.TABLE_START}\nold rows\n{script.TABLE_END}\nafter\n")
    (tmp_path / "pkg.md").write_text(
        "# Mutation testing: pkg\n\n- command: `scripts/mutation.sh pkg`\n"
        "- date: 2026-12-05 18:21 UTC, 549 s\n- mutants: 1593 (killed 1485, survived 96, timeout 12)\n"
        "- killed: 1497; equivalent: 95; not killed: 1\n"
        "- score: **99.9 %** killed of the non-equivalent mutants (bar: 90 %); 94.0 % of all\n"
    )
    readme = script.with_table((tmp_path / "README.md").read_text(), script.summary_table(tmp_path))
    assert readme == (
        f"before\n{script.TABLE_START}\n"
        "| report | mutants | killed | equivalent | not killed | score | run | time |\n"
        "|---|---:|---:|---:|---:|---:|---|---:|\n"
        "| pkg | 1593 | 1497 | 95 | 1 | 99.9 % | 2026-12-05 18:21 | 549 s |\n"
        f"{script.TABLE_END}\nafter\n"
    )


def test_a_change_is_mutated_package_by_package_each_with_its_share_of_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CI's ``--changed`` run: one package's slow mutants must not spend the whole budget
    and leave the other packages of the change unjudged."""
    script = mutation_script()
    clock = [0.0]
    monkeypatch.setattr(script.time, "monotonic", lambda: clock[0])
    runs: list[tuple[str, list[str], list[str], float | None]] = []
    took = {"changed-errors": 10.0, "changed-tools": 200.0, "changed-server": 0.0}

    def run(label: str, mutate: list[str], tests: list[str], command: str, jobs: int, budget: float | None):
        runs.append((label, mutate, tests, budget))
        clock[0] += took[label]
        module = "toolwire." + label.removeprefix("changed-") + ".m"
        return script.Outcome(label, command, script.dt.datetime.now(script.dt.UTC), took[label],
                              [(module, "killed"), ("toolwire.other.m", "survived")], [])

    monkeypatch.setattr(script, "run", run)
    files = [script.SOURCE / "server" / "_app.py", script.SOURCE / "tools" / "_names.py",
             script.SOURCE / "tools" / "_catalog.py", script.SOURCE / "errors.py"]
    outcomes = script.run_changed(files, "cmd", 2, 300.0)

    # The packages with the fewest test files first; each the budget left over those left.
    assert [label for label, *_ in runs] == ["changed-errors", "changed-tools", "changed-server"]
    assert [budget for *_, budget in runs] == [100.0, 145.0, 90.0]
    assert runs[1][1] == ["src/toolwire/tools/_names.py", "src/toolwire/tools/_catalog.py"]
    assert runs[1][2] == script.tests_for("tools")
    # Each judged on its own mutants only.
    assert [(outcome.label, outcome.total, outcome.score) for outcome in outcomes] == [
        ("errors", 1, 100.0), ("tools", 1, 100.0), ("server", 1, 100.0),
    ]


def test_a_package_left_no_budget_is_reported_not_run(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    script = mutation_script()
    clock = [0.0]
    monkeypatch.setattr(script.time, "monotonic", lambda: clock[0])
    labels: list[str] = []

    def run(label: str, mutate: list[str], tests: list[str], command: str, jobs: int, budget: float | None):
        labels.append(label)
        clock[0] += 500.0  # stopped late, past the whole budget
        return script.Outcome(label, command, script.dt.datetime.now(script.dt.UTC), 500.0,
                              [("toolwire.errors", "survived")], [])

    monkeypatch.setattr(script, "run", run)
    outcomes = script.run_changed([script.SOURCE / "errors.py", script.SOURCE / "server" / "_app.py"], "cmd", 2, 420.0)
    assert labels == ["changed-errors"]
    assert [(outcome.label, outcome.total) for outcome in outcomes] == [("errors", 1), ("server", 0)]
    # A package still under the bar is reported only; one whose mutants did not run is not judged.
    assert script.judge_change(outcomes[1], ["server"], 90.0) == 0
    assert "server: none of the change's mutants ran within the budget: not judged" in capsys.readouterr().out


def test_without_a_budget_every_package_runs_unbounded() -> None:
    script = mutation_script()
    assert script.budget_share(None, 1000.0, 3) is None
    assert script.budget_share(420.0, 20.0, 4) == 100.0
    assert script.budget_share(420.0, 421.0, 1) == 0.0


def test_a_slow_package_s_change_runs_against_the_test_files_that_name_its_modules(tmp_path: Path) -> None:
    """``server``'s tests take longer than CI's budget under mutmut: a change of it is run
    against the test files naming a changed module, by its dotted name, an import of it from
    its package, or a class or function it defines."""
    script = mutation_script()
    source = tmp_path / "src" / "toolwire" / "pkg"
    (source / "sub").mkdir(parents=True)
    (source / "_widgets.py").write_text("class Widget:\n    pass\n\n\ndef make_widget():\n    pass\n\n\ndef run():\n    pass\n")
    (source / "sub" / "__init__.py").write_text("")
    tests = tmp_path / "tests" / "pkg"
    tests.mkdir(parents=True)
    files = {
        "test_dotted.py": "from toolwire.pkg._widgets import thing\n",
        "test_from_package.py": "from toolwire.pkg import other, _widgets\n",
        "test_class.py": "def test():\n    assert Widget\n",
        "test_function.py": "x = mod.make_widget()\n",
        "test_short_name.py": "run()\n",  # three letters: too common a word to go by
        "test_longer_name.py": "Widgets = 1\nmake_widgets()\ntoolwire.pkg._widgets_more\n",
        "test_inside_sub.py": "import toolwire.pkg.sub.thing\n",
    }
    for name, text in files.items():
        (tests / name).write_text(text)
    (tests / "helpers.py").write_text("Widget\n")  # not a test file
    script.ROOT, script.SOURCE = tmp_path, tmp_path / "src" / "toolwire"
    assert script.test_files_naming("pkg", ["src/toolwire/pkg/_widgets.py"]) == [
        "tests/pkg/test_class.py", "tests/pkg/test_dotted.py", "tests/pkg/test_from_package.py",
        "tests/pkg/test_function.py",
    ]
    # A package's own __init__: its dotted name alone, not as the start of its modules' names.
    assert script.test_files_naming("pkg", ["src/toolwire/pkg/sub/__init__.py"]) == []
    (tests / "test_sub.py").write_text("import toolwire.pkg.sub\n")
    assert script.test_files_naming("pkg", ["src/toolwire/pkg/sub/__init__.py"]) == ["tests/pkg/test_sub.py"]


def test_a_slow_package_s_change_named_by_no_test_is_not_run(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    script = mutation_script()
    ran: list[tuple[str, list[str]]] = []

    def run(label: str, mutate: list[str], tests: list[str], command: str, jobs: int, budget: float | None):
        ran.append((label, tests))
        return script.Outcome(label, command, script.dt.datetime.now(script.dt.UTC), 1.0,
                              [("toolwire.server._turn_writes", "killed")], [])

    monkeypatch.setattr(script, "test_files_naming", lambda package, modules: {
        ("src/toolwire/server/_turn_writes.py",): ["tests/server/test_turn_writes.py"],
    }.get(tuple(modules), []))
    monkeypatch.setattr(script, "run", run)
    outcomes = script.run_changed([script.SOURCE / "server" / "_turn_writes.py"], "cmd", 2, 420.0)
    assert ran == [("changed-server", ["tests/server/test_turn_writes.py"])]
    assert [(outcome.label, outcome.total) for outcome in outcomes] == [("server", 1)]
    ran.clear()
    outcomes = script.run_changed([script.SOURCE / "server" / "_uvicorn.py"], "cmd", 2, 420.0)
    assert ran == []
    assert [(outcome.label, outcome.total) for outcome in outcomes] == [("server", 0)]
    assert "mutation: server: no test file names src/toolwire/server/_uvicorn.py: not run" in capsys.readouterr().out
