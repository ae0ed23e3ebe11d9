"""Mutation testing with mutmut: run it over packages of src/toolwire and write the result.

    python scripts/mutation.py PACKAGE...            # e.g. tools translate
    python scripts/mutation.py --changed BASE_REV    # only the modules changed since BASE_REV
    python scripts/mutation.py --changed HEAD^ --budget 420   # what CI runs (scripts/test.sh)
    python scripts/mutation.py translate.chat        # one declared part of a package
    python scripts/mutation.py translate/anthropic   # any subfolder or module, while working on it
    python scripts/mutation.py server.edge --resume  # its last run, carried on to today's source and tests

A package is a folder of ``src/toolwire`` (``tools``) or a top-level module (``cli``).
A package too large for one run to be repeated while working on it is reported in the
parts declared in ``PARTS`` (``translate.chat``, ``translate.shared``): each part is run
with the whole package's tests and its result written to ``mutation/<package>.<part>.md``;
the parts together must cover every module of the package exactly once (checked before
each run), and naming the package runs each of its parts in turn.
Any subfolder or module (``translate/anthropic``, ``translate/writer``) can also be run
with the whole package's tests while working on it; that report is printed and written to
``.cache/mutation/<package>-<part>.md`` only.
Each run happens in a scratch copy of the repository (``.cache/mutation/<label>/``, with
a ``[tool.mutmut]`` section added to its ``pyproject.toml``), so the work tree and its
``pyproject.toml`` are never touched. mutmut first runs the package's tests once to learn
which tests reach which function, then runs each mutant against those tests only.

For packages and parts, the result goes to ``mutation/<package>.md`` (or
``mutation/<package>.<part>.md``): the command, the date, the
counts, the score, and every surviving mutant, each either matched by an entry of
``mutation/equivalent.toml`` (a mutant that changes no behaviour, with the reason) or
listed as "not killed". With ``--changed`` the report is printed and written to
``.cache/mutation/changed.md`` only; CI calls this mode, with ``--budget``. The changed
modules are run package by package, each against its own tests (``run_changed``; for
``server``, whose tests take longer than the budget, only the test files that name a
changed module): each package may take an even share of the budget left (what one leaves
goes to the next), and mutmut is stopped at the end of its share, the mutants it had not
run yet left out of the counts (the report says how many). Each package is then judged on
its own: a package whose report in ``mutation/`` meets the bar must meet it on the
mutants of the change too (exit status 1 otherwise); a package still under the bar is
reported only, so that the work which brings it up is never blocked by it.

Score = killed / (mutants - equivalent), where a timeout counts as killed (the mutant
changed behaviour: it hangs) and "no tests" counts as not killed. The exit status is 1
when a package's score is under ``--fail-under`` (default 90).

Tests that start a gateway process run the mutated code too (``PYTHONPATH`` points the
child at the mutants), but mutmut learns which tests reach a function only in the test
process itself: a function reached only through a child process has "no tests".
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import re
import shutil
import signal
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
    "_addresses": ["tests/test_addresses.py"],
    # The admin API and the keys command, in the test process (tests/keys/test_gateway.py
    # and test_shared_redis.py reach the gate only through gateway processes).
    "keys": ["tests/server/test_admin_api.py", "tests/cli/test_keys_command.py"],
}

# Packages whose tests, run once under mutmut's tracing, take longer than CI's whole budget
# (tests/server: about 9 minutes, before a mutant has run). A change of theirs is run against
# the test files that name a changed module (``test_files_naming``), not all of them.
CHANGE_TESTS_BY_NAME = {"server"}

# Packages reported in parts: part name -> glob patterns relative to the package's folder
# (``*.py`` is the modules at its top only; subfolders are parts of their own).
PARTS: dict[str, dict[str, list[str]]] = {
    "translate": {
        "shared": ["*.py"],
        "chat": ["chat/*.py"],
        "responses": ["responses/*.py"],
        "anthropic": ["anthropic/*.py"],
    },
    "server": {
        "observe": ["observe/*.py"],
        # The connection's edge: sockets, protocols, workers, limits, who may come in.
        "edge": [
            "_connections.py", "_websocket.py", "_asgi.py", "_content_coding.py", "_uvicorn.py",
            "_workers.py", "_capacity.py", "_limits.py", "_transport.py", "_settings.py", "_auth.py",
            "_siblings.py", "_turn_writes.py", "_log_lines.py",
        ],
        # A request's way through: the app, its routes, the exchange, what is stored.
        "exchange": [
            "__init__.py", "types.py", "_admin.py", "_answer.py", "_app.py", "_compaction.py",
            "_errors.py", "_exchange.py", "_factory.py", "_history.py", "_http_responses.py",
            "_model_list.py", "_pipeline.py", "_routing.py", "_stored.py", "_unsampled.py",
        ],
    },
}

# Modules never mutated: the agent's terminal UI and the demo (issue #21 exempts them).
EXCLUDED = ["src/toolwire/agent/_progress.py", "src/toolwire/cli/_demo.py", "src/toolwire/demo.py"]

KILLED = {"killed", "timeout", "caught by type check", "segfault"}
NOT_RUN = "not checked"  # mutmut's status for a mutant it never ran (a run cut by --budget)


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
    statuses: list[tuple[str, str]]  # (module, status) of every mutant
    survivors: list[Survivor]

    @property
    def counts(self) -> Counter[str]:
        return Counter(status for _, status in self.statuses)

    def of_package(self, package: str) -> Outcome:
        """The part of this outcome that concerns one package's modules."""
        def inside(module: str) -> bool:
            return package_of_module(module) == package

        return Outcome(
            package, self.command, self.started, self.seconds,
            [entry for entry in self.statuses if inside(entry[0])],
            [survivor for survivor in self.survivors if inside(survivor.module)],
        )

    @property
    def total(self) -> int:
        """The mutants that were run (a run cut by ``--budget`` leaves some out)."""
        return sum(n for status, n in self.counts.items() if status != NOT_RUN)

    @property
    def not_run(self) -> int:
        return self.counts[NOT_RUN]

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


def package_of_module(module: str) -> str:
    """``toolwire.tools._catalog`` -> ``tools``; ``toolwire.errors`` -> ``errors``."""
    return module.split(".")[1]


def package_files(package: str) -> list[str]:
    folder = SOURCE / package
    if folder.is_dir():
        return [f"src/toolwire/{package}/*"]
    if (SOURCE / f"{package}.py").is_file():
        return [f"src/toolwire/{package}.py"]
    raise SystemExit(f"no package or module named {package!r} in src/toolwire")


def part_files(package: str, part: str) -> list[str]:
    """The modules of a declared part, after checking that the parts cover the package."""
    parts = PARTS.get(package, {})
    if part not in parts:
        raise SystemExit(f"{package!r} has no part {part!r}; its parts: {', '.join(parts) or 'none'}")
    check_parts(package)
    folder = SOURCE / package
    return sorted(str(path.relative_to(ROOT)) for pattern in parts[part] for path in folder.glob(pattern))


def check_parts(package: str) -> None:
    """Every module of the package (but the excluded ones) in exactly one of its parts."""
    folder = SOURCE / package
    modules = {path for path in folder.rglob("*.py") if str(path.relative_to(ROOT)) not in EXCLUDED}
    placed = Counter(
        path for patterns in PARTS[package].values() for pattern in patterns for path in folder.glob(pattern)
    )
    unplaced = sorted(str(path.relative_to(ROOT)) for path in modules - placed.keys())
    doubled = sorted(str(path.relative_to(ROOT)) for path, times in placed.items() if times > 1)
    if unplaced or doubled:
        raise SystemExit(
            f"the parts of {package!r} in PARTS ({__file__}) must cover each of its modules once: "
            f"in no part: {', '.join(unplaced) or 'none'}; in more than one: {', '.join(doubled) or 'none'}"
        )


def known_tests(package: str) -> list[str]:
    package = re.split(r"[/.]", package)[0]  # a part of a package is run with all its tests
    paths = [f"tests/{package}"] if (ROOT / "tests" / package).is_dir() else []
    return paths + EXTRA_TESTS.get(package, [])


def tests_for(package: str) -> list[str]:
    paths = known_tests(package)
    if not paths:
        raise SystemExit(f"no tests known for {package!r}: add it to EXTRA_TESTS in {__file__}")
    return paths


def test_files_naming(package: str, modules: list[str]) -> list[str]:
    """The test files of ``package`` (of ``known_tests``) that name one of ``modules``: its
    dotted name (``toolwire.server._log_lines``), ``from <its package> import <it>``, or a
    class or function it defines at its top (``LineHandler``). A mutant of a module is
    reached by tests that import it, or what it defines; one reached only through other
    modules is left out (it counts as not killed, "no tests")."""
    words: set[str] = set()
    for module in modules:
        path = ROOT / module
        dotted = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts).removesuffix(".__init__")
        parent, _, stem = dotted.rpartition(".")
        words.add(rf"{re.escape(dotted)}(?!\.)")  # (not a module inside it)
        words.add(rf"{re.escape(parent)} import [\w, ]*\b{re.escape(stem)}")
        words |= {re.escape(name) for name in defined_names(path) if len(name) > 3}
    naming = re.compile(rf"\b(?:{'|'.join(sorted(words))})\b")
    found = []
    for name in known_tests(package):
        path = ROOT / name
        files = sorted(path.rglob("test_*.py")) if path.is_dir() else [path]
        found += [str(file.relative_to(ROOT)) for file in files if naming.search(file.read_text())]
    return found


def defined_names(path: Path) -> list[str]:
    """The classes and functions a module defines at its top."""
    tree = ast.parse(path.read_text())
    return [node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]


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
            # scripts/mutation_order.py: each mutant's tests fastest first (same verdicts).
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "--hypothesis-seed=0", "-p", "mutation_order"]',
            # Each mutant is forked from a server that has only collected the tests: forked
            # from the process that ran them all once (mutmut's default), a mutant would
            # inherit the caches they filled (tool catalogs and what is derived from them),
            # and the mutated code behind a cached value would never run.
            'process_isolation = "forkserver"',
            # A mutant that hangs is stopped after 3 times its tests' time (mutmut's default is
            # 15): the connection code's hanging mutants otherwise cost minutes each. Still
            # wall-clock room for a machine loaded twice over.
            "timeout_multiplier = 3.0",
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


def run_mutmut(
    work: Path, jobs: int, budget: float | None = None, names: list[str] | None = None, *, again: bool = True
) -> float:
    """Run mutmut in ``work`` (only the mutants ``names``, if given, whatever their verdicts
    so far); past ``budget`` seconds stop it (its results so far are kept). When its first
    run of the tests, unmutated, fails (mutmut then says only "Failed to run clean test"),
    the same tests are run by pytest to show what failed, and mutmut is given one more try
    (``again``) if they pass there: a test that fails only now and then."""
    mutmut = Path(sys.executable).parent / "mutmut"
    # The mutants first; scripts/ for the pytest plugin mutation_order.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(work / "mutants" / "src"), str(ROOT / "scripts")]))
    started = time.monotonic()
    with (work / "mutmut.log").open("a") as log:
        process = subprocess.Popen(
            [str(mutmut), "run", "--max-children", str(jobs), *(names or [])],
            cwd=work, env=env, stdout=log, stderr=log, start_new_session=True,
        )
        try:
            returncode = process.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            stop_group(process)
            return time.monotonic() - started
    seconds = time.monotonic() - started
    if returncode != 0:
        tail = (work / "mutmut.log").read_text(errors="replace")[-3000:]
        if "Failed to run clean test" in tail:
            passed, shown = clean_tests(work, env)
            print(f"mutation: mutmut's run of the unmutated tests failed; the same tests by pytest:\n{shown}", flush=True)
            left = None if budget is None else budget - seconds
            if passed and again and (left is None or left > 0):
                print("mutation: they passed there (a test that fails now and then): mutmut once more", flush=True)
                return seconds + run_mutmut(work, jobs, left, names, again=False)
        raise SystemExit(f"mutmut failed ({returncode}); the end of {work}/mutmut.log:\n{tail}")
    return seconds


def clean_tests(work: Path, env: dict[str, str]) -> tuple[bool, str]:
    """The tests mutmut runs in ``work``, unmutated, run by pytest: whether they passed, and
    the end of what pytest said."""
    settings = tomllib.loads((work / "pyproject.toml").read_text())["tool"]["mutmut"]
    arguments = [*settings["pytest_add_cli_args_test_selection"], *settings["pytest_add_cli_args"], "-x", "-p", "no:randomly"]
    try:
        ran = subprocess.run(
            [sys.executable, "-m", "pytest", *arguments],
            cwd=work / "mutants", env=env, capture_output=True, text=True, timeout=900,
        )
    except subprocess.TimeoutExpired:
        return False, "(pytest did not finish within 900 s)"
    return ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop mutmut and the workers it forked (its own process group)."""
    for signal_number, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, signal_number)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


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


def collect(work: Path) -> tuple[list[tuple[str, str]], list[Survivor]]:
    listed = subprocess.run(
        [sys.executable, "-c", _LIST_MUTANTS, *sorted(KILLED | {NOT_RUN})], cwd=work, check=True, capture_output=True, text=True
    ).stdout
    statuses = []
    survivors = []
    equivalents = load_equivalents()
    for line in listed.splitlines():
        mutant = json.loads(line)
        statuses.append((split_name(mutant["name"])[0], mutant["status"]))
        if mutant["diff"] is not None:
            survivors.append(describe(mutant["name"], mutant["status"], mutant["diff"], equivalents))
    return statuses, survivors


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
    ]
    if outcome.not_run:
        lines.append(
            f"- **not run: {outcome.not_run} of {outcome.total + outcome.not_run} mutants** (the run was stopped "
            "before them; not counted): the score is that of the mutants run, not yet the package's"
        )
    lines.append("")
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


def run(label: str, mutate: list[str], tests: list[str], command: str, jobs: int, budget: float | None = None) -> Outcome:
    started = dt.datetime.now(dt.UTC)
    work = prepare(label, mutate, tests)
    seconds = run_mutmut(work, jobs, budget)
    record_run(work, command, started, seconds)
    return outcome_of(work, label)


def run_changed(files: list[Path], command: str, jobs: int, budget: float | None) -> list[Outcome]:
    """The changed modules mutated package by package, each against its own tests, the
    packages whose tests are fewest first: each run has the budget left shared among the
    packages left, so what one does not use goes to those after it, and a package whose
    mutants take long (``server``: tests that start gateways) cannot spend the whole
    budget and leave the others unjudged. A package of ``CHANGE_TESTS_BY_NAME`` is run
    against the test files that name its changed modules only."""
    by_package: dict[str, list[str]] = {}
    for path in files:
        by_package.setdefault(package_of(path), []).append(str(path.relative_to(ROOT)))
    order = sorted(by_package, key=lambda package: (test_file_count(package), package))
    outcomes = []
    started = time.monotonic()
    for index, package in enumerate(order):
        share = budget_share(budget, time.monotonic() - started, len(order) - index)
        modules = by_package[package]
        tests = test_files_naming(package, modules) if package in CHANGE_TESTS_BY_NAME else tests_for(package)
        if not tests:
            print(f"mutation: {package}: no test file names {', '.join(modules)}: not run")
        if share == 0.0 or not tests:  # the budget is spent, or nothing to run against: nothing of it runs
            outcomes.append(Outcome(package, command, dt.datetime.now(dt.UTC), 0.0, [], []))
            continue
        outcome = run(f"changed-{package}", modules, tests, command, jobs, share)
        outcomes.append(outcome.of_package(package))
    return outcomes


def budget_share(budget: float | None, spent: float, packages_left: int) -> float | None:
    """The seconds the next of ``packages_left`` packages may take: an even share of what is
    left of ``budget`` (None: no budget), never less than nothing."""
    if budget is None:
        return None
    return max(0.0, budget - spent) / packages_left


def test_file_count(package: str) -> int:
    """How many test files a package's mutants are run against: the measure of its cost."""
    count = 0
    for name in known_tests(package):
        path = ROOT / name
        count += len(list(path.rglob("test_*.py"))) if path.is_dir() else 1
    return count


def resume(label: str, command: str, jobs: int) -> Outcome:
    """Carry the run in ``label``'s scratch copy on to the repository as it is now.

    Its ``src/`` and ``tests/`` are replaced by the repository's; mutmut then mutates again
    the functions that changed and runs their mutants, learns which functions the new
    tests reach, and keeps every other verdict. Then each mutant not killed (and not
    listed as equivalent) is run again against the tests that now reach it. The tests
    only ever grow in between, so a mutant killed before is still killed.
    """
    work = SCRATCH / label
    if not (work / "mutants").is_dir():
        raise SystemExit(f"nothing to resume: {work} holds no mutmut run (run `scripts/mutation.sh {label}` first)")
    started = dt.datetime.now(dt.UTC)
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache")
    for folder in ("src", "tests"):
        shutil.rmtree(work / folder)
        # copy2 keeps each file's time: mutmut mutates again only the files changed since.
        shutil.copytree(ROOT / folder, work / folder, ignore=ignore)
    seconds = run_mutmut(work, jobs)
    _, survivors = collect(work)
    again = [s.name for s in survivors if s.equivalent_reason is None and s.status != NOT_RUN]
    if again:
        seconds += run_mutmut(work, jobs, names=again)
    record_run(work, f"{command} ({len(again)} mutants not killed run again)", started, seconds)
    return outcome_of(work, label)


def record_run(work: Path, command: str, started: dt.datetime, seconds: float) -> None:
    """Note a run in the scratch copy (``runs.json``): a resumed report lists them all."""
    runs_file = work / "runs.json"
    runs = json.loads(runs_file.read_text()) if runs_file.is_file() else []
    runs.append({"command": command, "started": started.isoformat(), "seconds": seconds})
    runs_file.write_text(json.dumps(runs, indent=1))


def outcome_of(work: Path, label: str) -> Outcome:
    """The verdicts in ``work`` now, with the runs that gave them."""
    runs_file = work / "runs.json"
    if not runs_file.is_file():
        raise SystemExit(f"{work} holds no run to report (run `scripts/mutation.sh {work.name}` first)")
    runs = json.loads(runs_file.read_text())
    command = ", then ".join(
        f"{entry['command']} ({dt.datetime.fromisoformat(entry['started']):%Y-%m-%d %H:%M} UTC)" if len(runs) > 1
        else entry["command"]
        for entry in runs
    )
    statuses, survivors = collect(work)
    started = dt.datetime.fromisoformat(runs[0]["started"])
    return Outcome(label, command, started, sum(entry["seconds"] for entry in runs), statuses, survivors)


def committed_scores(package: str) -> list[float]:
    """The scores of the package's reports in mutation/ (one, or one per part)."""
    reports = [RESULTS / f"{package}.md", *sorted(RESULTS.glob(f"{package}.*.md"))]
    found = (SCORE_LINE.search(report.read_text()) for report in reports if report.is_file())
    return [float(match.group(1)) for match in found if match]


SCORE_LINE = re.compile(r"^- score: \*\*([0-9.]+) %\*\*", re.MULTILINE)


def judge_change(outcome: Outcome, packages: list[str], fail_under: float) -> int:
    """1 when a package at the bar in mutation/ falls under it on the change's mutants."""
    failed = False
    for package in packages:
        part = outcome.of_package(package)
        committed = committed_scores(package)
        complete = len(committed) == max(1, len(PARTS.get(package, {})))  # every part reported
        held = complete and min(committed) >= fail_under
        if part.total == 0:
            print(f"mutation: {package}: none of the change's mutants ran within the budget: not judged")
            continue
        verdict = "ok" if part.score >= fail_under else ("UNDER THE BAR" if held else "under the bar (reported only)")
        print(f"mutation: {package}: {part.score:.1f} % of {part.total} mutants of the change killed; "
              f"committed report(s): {', '.join(f'{score:.1f} %' for score in committed) or 'none'}; {verdict}")
        failed |= held and part.score < fail_under
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("packages", nargs="*", help="folders or top-level modules of src/toolwire")
    parser.add_argument("--changed", metavar="BASE_REV", help="mutate only the files changed since BASE_REV")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--fail-under", type=float, default=90.0, help="lowest passing score in %% (default 90)")
    parser.add_argument("--resume", action="store_true",
                        help="carry each named package's or part's last run on to the current source and "
                             "tests, in its scratch copy (see resume), instead of starting afresh")
    parser.add_argument("--report-only", action="store_true",
                        help="write the report of each named package's or part's last run as it stands "
                             "(stopped, or still going: the mutants not run yet are counted apart), running nothing")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help="with --changed: stop mutmut after this long and judge the mutants run so far")
    args = parser.parse_args(argv)
    if bool(args.packages) == bool(args.changed):
        parser.error("name packages, or give --changed BASE_REV (not both)")
    if (args.resume or args.report_only) and args.changed:
        parser.error("--resume and --report-only take named packages, not --changed")

    if args.changed:
        files = changed_files(args.changed)
        if not files:
            print(f"mutation: no module of src/toolwire changed since {args.changed}")
            return 0
        untested = [path for path in files if not known_tests(package_of(path))]
        for path in untested:
            print(f"mutation: {path.relative_to(ROOT)}: no tests known for it (EXTRA_TESTS), not mutated")
        files = [path for path in files if path not in untested]
        if not files:
            return 0
        outcomes = run_changed(files, f"scripts/mutation.sh --changed {args.changed}", args.jobs, args.budget)
        report = "\n".join(render(outcome, args.fail_under) for outcome in outcomes)
        SCRATCH.mkdir(parents=True, exist_ok=True)
        (SCRATCH / "changed.md").write_text(report)
        print(report)
        return max(judge_change(outcome, [outcome.label], args.fail_under) for outcome in outcomes)

    failed = False
    RESULTS.mkdir(exist_ok=True)
    for package in args.packages:
        if "/" in package:
            if args.resume or args.report_only:
                parser.error("--resume and --report-only take packages and declared parts")
            label = package.replace("/", "-")
            outcome = run(label, package_files(package), tests_for(package), f"scripts/mutation.sh {package}", args.jobs)
            report = render(outcome, args.fail_under)
            (SCRATCH / f"{label}.md").write_text(report)
            print(report)
            failed |= outcome.score < args.fail_under
            continue
        for label, modules in reported(package):
            if args.report_only:
                outcome = outcome_of(SCRATCH / label, label)
            elif args.resume:
                outcome = resume(label, f"scripts/mutation.sh {label} --resume", args.jobs)
            else:
                outcome = run(label, modules, tests_for(label), f"scripts/mutation.sh {label}", args.jobs)
            failed |= write_report(label, outcome, args.fail_under)
    return 1 if failed else 0


def reported(package: str) -> list[tuple[str, list[str]]]:
    """The reports a package (or one declared part) is written in: (label, its modules) each;
    a package declared in ``PARTS`` is reported part by part."""
    name, _, part = package.partition(".")
    if not part and name not in PARTS:
        return [(package, package_files(package))]
    return [(f"{name}.{part_name}", part_files(name, part_name)) for part_name in ([part] if part else PARTS[name])]


def write_report(label: str, outcome: Outcome, fail_under: float) -> bool:
    """Writes ``mutation/<label>.md``, brings the table of ``mutation/README.md`` up to
    date, and says whether the score is under the bar."""
    (RESULTS / f"{label}.md").write_text(render(outcome, fail_under))
    readme = RESULTS / "README.md"
    readme.write_text(with_table(readme.read_text(), summary_table(RESULTS)))
    print(f"{label}: {outcome.score:.1f} % killed ({outcome.killed} of {outcome.total}, "
          f"{outcome.equivalent} equivalent) in {outcome.seconds:.0f} s -> mutation/{label}.md")
    return outcome.score < fail_under


TABLE_START, TABLE_END = "<!-- table: scripts/mutation.py writes it -->", "<!-- end of table -->"
_HEADER_LINE = re.compile(r"^- (date|mutants|killed|score): (.*)$", re.MULTILINE)


def summary_table(results: Path) -> str:
    """One row per report in ``results``, read from its header: mutants, killed,
    equivalent, not killed, score, and when and how long it ran."""
    rows = [
        "| report | mutants | killed | equivalent | not killed | score | run | time |",
        "|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for report in sorted(results.glob("*.md")):
        if report.name == "README.md":
            continue
        header = dict(_HEADER_LINE.findall(report.read_text()))
        date, _, seconds = header["date"].rpartition(", ")
        counts = re.match(r"(\d+); equivalent: (\d+); not killed: (\d+)$", header["killed"])
        score = re.match(r"\*\*([\d.]+ %)\*\*", header["score"])
        assert counts is not None and score is not None, f"{report}: its header's counts do not read"
        killed, equivalent, not_killed = counts.groups()
        rows.append(
            f"| {report.stem} | {header['mutants'].split()[0]} | {killed} | {equivalent} "
            f"| {not_killed} | {score.group(1)} | {date.removesuffix(' UTC')} | {seconds} |"
        )
    return "\n".join(rows)


def with_table(readme: str, table: str) -> str:
    """``readme`` with the text between its table markers replaced by ``table``."""
    start, end = readme.index(TABLE_START) + len(TABLE_START), readme.index(TABLE_END)
    return f"{readme[:start]}\n{table}\n{readme[end:]}"


if __name__ == "__main__":
    sys.exit(main())
