#!/usr/bin/env bash
# The README's test command, and exactly what CI runs (.ci/run).
#
# Installs what the tests need, then runs the checks and the whole suite:
#   - system packages (Debian): redis-server, chromium + chromium-driver, wrk, valgrind, and Node.js
#     with npm (installed when missing and we are root; otherwise they must already be there);
#   - .venv with toolwire and its test dependencies;
#   - the Codex CLI versions the end-to-end tests run, from npm into .cache/.
# Under CI (TOOLWIRE_CI=1, set by .ci/run) a test that would skip fails instead.
# Extra arguments go to pytest, e.g. ./scripts/test.sh -k codex
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(redis-server chromium chromium-driver wrk valgrind)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# Node.js may come from another source than Debian's packages: what counts is npm on PATH.
command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        echo "installing system packages: ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "warning: missing system packages (${missing[*]}); tests that need them will fail" >&2
    fi
fi

python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[test]'

if command -v npm >/dev/null; then
    .venv/bin/python -m tests.support.codex
elif [[ -n "${TOOLWIRE_CI:-}" && "${TOOLWIRE_CI}" != 0 ]]; then
    echo "error: npm is missing, so the Codex CLI cannot be installed" >&2
    exit 1
else
    echo "warning: npm is missing; the Codex tests will be skipped" >&2
fi

.venv/bin/ruff check --output-format concise .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"

# Under CI: mutation testing of the modules the newest commit changed (against its first
# parent: for a merge, all the branch brought), within a time budget; see scripts/mutation.py.
if [[ -n "${TOOLWIRE_CI:-}" && "${TOOLWIRE_CI}" != 0 ]]; then
    if git rev-parse -q --verify 'HEAD^' >/dev/null; then
        .venv/bin/python scripts/mutation.py --changed 'HEAD^' --budget "${TOOLWIRE_MUTATION_BUDGET:-420}"
    else
        echo "warning: no commit before HEAD in this clone (shallow?): mutation testing of the change not run" >&2
    fi
fi
