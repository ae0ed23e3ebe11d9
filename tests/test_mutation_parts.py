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
