#!/usr/bin/env bash
# Install everything the tests need into .venv (and the system packages they use, when
# run as root), then run the whole test suite. This is the README's test command and
# exactly what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[test]'

.venv/bin/ruff check --output-format concise src tests bench
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
