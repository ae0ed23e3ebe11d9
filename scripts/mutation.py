"""Mutation testing with mutmut: run it over packages of src/toolwire and write the result.

    python scripts/mutation.py PACKAGE...            # e.g. tools translate
    python scripts/mutation.py --changed BASE_REV    # only the modules changed since BASE_REV
    python scripts/mutation.py translate/anthropic   # a part of a package, while working on it

A package is a folder of ``src/toolwire`` (``tools``) or a top-level module (``cli``).
A part of one is a subfolder or a module of it (``translate/anthropic``,
``translate/writer``), run with the whole package's tests; its report is printed and
written to ``.cache/mutation/<package>-<part>.md`` only: a package's result in
``mutation/`` comes from a run over all of it.
Each run happens in a scratch copy of the repository (``.cache/mutation/<label>/``, with
a ``[tool.mutmut]`` section added to its ``pyproject.toml``), so the work tree and its
``pyproject.toml`` are never touched. mutmut first runs the package's tests once to learn
which tests reach which function, then runs each mutant against those tests only.

For packages, the result goes to ``mutation/<package>.md``: the command, the date, the
counts, the score, and every surviving mutant, each either matched by an entry of
``mutation/equivalent.toml`` (a mutant that changes no behaviour, with the reason) or
listed as "not killed". With ``--changed`` the report is printed and written to
``.cache/mutation/changed.md`` only; CI calls this mode.

Score = killed / (mutants - equivalent), where a timeout counts as killed (the mutant
changed behaviour: it hangs) and "no tests" counts as not killed. The exit status is 1
when a package's score is under ``--fail-under`` (default 90).

Tests that start a gateway process run the mutated code too (``PYTHONPATH`` points the
child at the mutants), but mutmut learns which tests reach a function only in the test
process itself: a function reached only through a child process has "no tests".
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "toolwire"
RESULTS = ROOT / "mutation"
EQUIVALENTS = RESULTS / "equivalent.toml"
SCRATCH = ROOT / ".cache" / "mutation"

# The tests that exercise each package, beyond its mirror folder tests/<package>/.
EXTRA_TESTS: dict[str, list[str]] = {
    # tests/reliability reaches the server only through gateway processes: none of it runs
    # in the test process, so none of it is ever chosen for a mutant (see the docstring).
    "server": ["tests/cli/test_serve_command.py", "tests/store/test_routes.py"],
    "protocol": ["tests/reliability/test_properties.py"],
    "cli": ["tests/agent/test_cli.py", "tests/test_codex_config.py", "tests/test_codex_config_builtin.py"],
    "codex_config": ["tests/test_codex_config.py", "tests/cli/test_codex_config_command.py"],
    "demo": ["tests/test_demo.py"],
    # Every status, type and body is pinned there; the server's mapping of them is the
    # server's (tests/server runs gateway processes, slow to run per mutant).
    "errors": ["tests/test_errors.py"],
    "_memory": ["tests/test_memory.py"],
    # The admin API and the keys command, in the test process (tests/keys/test_gateway.py
    # and test_shared_redis.py reach the gate only through gateway processes).
    "keys": ["tests/server/test_admin_api.py", "tests/cli/test_keys_command.py"],
}

# Modules never mutated: the agent's terminal UI and the demo (issue #21 exempts them).
EXCLUDED = ["src/toolwire/agent/_progress.py", "src/toolwire/cli/_demo.py", "src/toolwire/demo.py"]

KILLED = {"killed", "timeout", "caught by type check", "segfault"}


@dataclass(frozen=True)
class Survivor:
    name: str
    status: str
    module: str
    function: str
    removed: tuple[str, ...]
    added: tuple[str, ...]
    equivalent_reason: str | None


@dataclass(frozen=True)
class Outcome:
    label: str
    command: str
    started: dt.datetime
    seconds: float
    counts: Counter[str]
    survivors: list[Survivor]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def killed(self) -> int:
        return sum(n for status, n in self.counts.items() if status in KILLED)

    @property
    def equivalent(self) -> int:
        return sum(1 for s in self.survivors if s.equivalent_reason is not None)

    @property
    def score(self) -> float:
        counted = self.total - self.equivalent
        return 100.0 if counted == 0 else 100.0 * self.killed / counted


def package_of(path: Path) -> str:
    """``src/toolwire/tools/_names.py`` -> ``tools``; ``src/toolwire/cli.py`` -> ``cli``."""
    relative = path.resolve().relative_to(SOURCE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def package_files(package: str) -> list[str]:
    folder = SOURCE / package
    if folder.is_dir():
        return [f"src/toolwire/{package}/*"]
    if (SOURCE / f"{package}.py").is_file():
        return [f"src/toolwire/{package}.py"]
    raise SystemExit(f"no package or module named {package!r} in src/toolwire")


def tests_for(package: str) -> list[str]:
    package = package.partition("/")[0]  # a part of a package is run with all its tests
    paths = [f"tests/{package}"] if (ROOT / "tests" / package).is_dir() else []
    paths += EXTRA_TESTS.get(package, [])
    if not paths:
        raise SystemExit(f"no tests known for {package!r}: add it to EXTRA_TESTS in {__file__}")
    return paths


def changed_files(base: str) -> list[Path]:
    """The Python files of src/toolwire that differ from ``base`` (committed or not)."""
    listed = subprocess.run(
        ["git", "diff", "--name-only", base, "--", "src/toolwire"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.split()
    return [
        ROOT / name
        for name in listed
        if name.endswith(".py") and (ROOT / name).is_file() and name not in EXCLUDED
    ]


def prepare(label: str, mutate: list[str], tests: list[str]) -> Path:
    """A scratch copy of src/, tests/ and pyproject.toml with mutmut's settings added."""
    work = SCRATCH / label
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache")
    shutil.copytree(ROOT / "src", work / "src", ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    settings = "\n".join(
        [
            "",
            "[tool.mutmut]",
            'source_paths = ["src"]',
            f"only_mutate = {toml_list(mutate)}",
            f"do_not_mutate = {toml_list(EXCLUDED)}",
            f"pytest_add_cli_args_test_selection = {toml_list(tests)}",
            # One hypothesis seed: every mutant meets the same examples, so a property
            # test's verdict is the mutant's doing, not the luck of the draw.
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "--hypothesis-seed=0"]',
            # Each mutant is forked from a server that has only collected the tests: forked
            # from the process that ran them all once (mutmut's default), a mutant would
            # inherit the caches they filled (tool catalogs and what is derived from them),
            # and the mutated code behind a cached value would never run.
            'process_isolation = "forkserver"',
            "",
        ]
    )
    (work / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text() + settings)
    # The Codex CLI the tests installed under .cache/ (tests/support/codex.py), shared
    # rather than installed again with npm in every scratch copy.
    for installed in (ROOT / ".cache").glob("codex-*"):
        if installed.is_dir():
            (work / ".cache").mkdir(exist_ok=True)
            (work / ".cache" / installed.name).symlink_to(installed)
    # Made now, so that the PYTHONPATH entry naming it is a folder from the start: Python
    # would otherwise remember at start-up that it has nothing to import there.
    (work / "mutants" / "src").mkdir(parents=True)
    return work


def toml_list(values: list[str]) -> str:
    return "[" + ", ".join(f'"{value}"' for value in values) + "]"


def run_mutmut(work: Path, jobs: int) -> float:
    mutmut = Path(sys.executable).parent / "mutmut"
    env = dict(os.environ, PYTHONPATH=str(work / "mutants" / "src"))
    started = time.monotonic()
    with (work / "mutmut.log").open("w") as log:
        finished = subprocess.run(
            [str(mutmut), "run", "--max-children", str(jobs)], cwd=work, env=env, stdout=log, stderr=log
        )
    if finished.returncode != 0:
        tail = (work / "mutmut.log").read_text(errors="replace")[-3000:]
        raise SystemExit(f"mutmut failed ({finished.returncode}); the end of {work}/mutmut.log:\n{tail}")
    return time.monotonic() - started


# Run by the driver's Python in the scratch copy (mutmut reads its settings there): every
# mutant's status, and the diff of each one not killed, in one process rather than one
# ``mutmut show`` per survivor (a second each, hundreds of survivors in a package).
_LIST_MUTANTS = """
import json, sys
from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
from mutmut.utils.file_utils import walk_mutatable_files
killed = set(sys.argv[1:])
for path in walk_mutatable_files():
    data = SourceFileMutationData(path=path)
    data.load()
    for name, exit_code in data.exit_code_by_key.items():
        status = status_by_exit_code[exit_code]
        diff = None if status in killed else get_diff_for_mutant(name, path=path)
        print(json.dumps({"name": name, "status": status, "diff": diff}))
"""


def collect(work: Path) -> tuple[Counter[str], list[Survivor]]:
    listed = subprocess.run(
        [sys.executable, "-c", _LIST_MUTANTS, *sorted(KILLED)], cwd=work, check=True, capture_output=True, text=True
    ).stdout
    counts: Counter[str] = Counter()
    survivors = []
    equivalents = load_equivalents()
    for line in listed.splitlines():
        mutant = json.loads(line)
        counts[mutant["status"]] += 1
        if mutant["diff"] is not None:
            survivors.append(describe(mutant["name"], mutant["status"], mutant["diff"], equivalents))
    return counts, survivors


def describe(name: str, status: str, diff_text: str, equivalents: list[dict[str, str]]) -> Survivor:
    diff = diff_text.splitlines()
    removed = tuple(line[1:].strip() for line in diff if line.startswith("-") and not line.startswith("---"))
    added = tuple(line[1:].strip() for line in diff if line.startswith("+") and not line.startswith("+++"))
    module, function = split_name(name)
    reason = next(
        (
            entry["reason"]
            for entry in equivalents
            if entry["module"] == module
            and entry["function"] == function
            and entry["original"].strip() == "\n".join(removed)
            and entry["mutated"].strip() == "\n".join(added)
        ),
        None,
    )
    return Survivor(name, status, module, function, removed, added, reason)


def split_name(name: str) -> tuple[str, str]:
    """``toolwire.tools._catalog.xǁToolCatalogǁ_add__mutmut_5`` -> module, ``ToolCatalog._add``."""
    module, _, mangled = name.rpartition(".")
    mangled = re.sub(r"__mutmut_\d+$", "", mangled)
    if mangled.startswith("xǁ"):
        class_name, _, method = mangled[2:].partition("ǁ")
        return module, f"{class_name}.{method}"
    return module, mangled.removeprefix("x_")


def load_equivalents() -> list[dict[str, str]]:
    if not EQUIVALENTS.is_file():
        return []
    entries = tomllib.loads(EQUIVALENTS.read_text()).get("equivalent", [])
    for index, entry in enumerate(entries):
        missing = {"module", "function", "original", "mutated", "reason"} - entry.keys()
        if missing:
            raise SystemExit(f"{EQUIVALENTS}: equivalent[{index}] lacks {', '.join(sorted(missing))}")
    return list(entries)


def render(outcome: Outcome, fail_under: float) -> str:
    counts = ", ".join(f"{status} {n}" for status, n in sorted(outcome.counts.items()))
    lines = [
        f"# Mutation testing: {outcome.label}",
        "",
        f"- command: `{outcome.command}`",
        f"- date: {outcome.started:%Y-%m-%d %H:%M} UTC, {outcome.seconds:.0f} s",
        f"- mutants: {outcome.total} ({counts})",
        f"- killed: {outcome.killed}; equivalent: {outcome.equivalent}; "
        f"not killed: {outcome.total - outcome.killed - outcome.equivalent}",
        f"- score: **{outcome.score:.1f} %** killed of the non-equivalent mutants "
        f"(bar: {fail_under:.0f} %); {100.0 * outcome.killed / max(outcome.total, 1):.1f} % of all",
        "",
    ]
    equivalent = [s for s in outcome.survivors if s.equivalent_reason is not None]
    not_killed = [s for s in outcome.survivors if s.equivalent_reason is None]
    if not_killed:
        lines += ["## Not killed", ""]
        for survivor in not_killed:
            lines += [f"- `{survivor.module}` `{survivor.function}` ({survivor.status}):", *diff_block(survivor)]
        lines.append("")
    if equivalent:
        lines += ["## Equivalent (from mutation/equivalent.toml)", ""]
        for survivor in equivalent:
            lines += [
                f"- `{survivor.module}` `{survivor.function}`: {survivor.equivalent_reason}",
                *diff_block(survivor),
            ]
        lines.append("")
    return "\n".join(lines)


def diff_block(survivor: Survivor) -> list[str]:
    body = [f"  - {line}" for line in survivor.removed] + [f"  + {line}" for line in survivor.added]
    return ["  ```diff", *body, "  ```"]


def run(label: str, mutate: list[str], tests: list[str], command: str, jobs: int) -> Outcome:
    started = dt.datetime.now(dt.UTC)
    work = prepare(label, mutate, tests)
    seconds = run_mutmut(work, jobs)
    counts, survivors = collect(work)
    return Outcome(label, command, started, seconds, counts, survivors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("packages", nargs="*", help="folders or top-level modules of src/toolwire")
    parser.add_argument("--changed", metavar="BASE_REV", help="mutate only the files changed since BASE_REV")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--fail-under", type=float, default=90.0, help="lowest passing score in %% (default 90)")
    args = parser.parse_args(argv)
    if bool(args.packages) == bool(args.changed):
        parser.error("name packages, or give --changed BASE_REV (not both)")

    if args.changed:
        files = changed_files(args.changed)
        if not files:
            print(f"mutation: no module of src/toolwire changed since {args.changed}")
            return 0
        mutate = [str(path.relative_to(ROOT)) for path in files]
        tests = sorted({test for path in files for test in tests_for(package_of(path))})
        command = f"scripts/mutation.sh --changed {args.changed}"
        outcome = run("changed", mutate, tests, command, args.jobs)
        report = render(outcome, args.fail_under)
        (SCRATCH / "changed.md").write_text(report)
        print(report)
        return 0 if outcome.score >= args.fail_under else 1

    failed = False
    RESULTS.mkdir(exist_ok=True)
    for package in args.packages:
        command = f"scripts/mutation.sh {package}"
        if "/" in package:
            label = package.replace("/", "-")
            outcome = run(label, package_files(package), tests_for(package), command, args.jobs)
            report = render(outcome, args.fail_under)
            (SCRATCH / f"{label}.md").write_text(report)
            print(report)
            failed |= outcome.score < args.fail_under
            continue
        outcome = run(package, package_files(package), tests_for(package), command, args.jobs)
        (RESULTS / f"{package}.md").write_text(render(outcome, args.fail_under))
        print(f"{package}: {outcome.score:.1f} % killed ({outcome.killed} of {outcome.total}, "
              f"{outcome.equivalent} equivalent) in {outcome.seconds:.0f} s -> mutation/{package}.md")
        failed |= outcome.score < args.fail_under
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
