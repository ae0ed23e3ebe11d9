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
