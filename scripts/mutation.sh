#!/usr/bin/env bash
# Mutation testing (mutmut, pinned in the test extras): see scripts/mutation.py.
#   scripts/mutation.sh tools translate     # writes mutation/tools.md, mutation/translate.md
#   scripts/mutation.sh --changed origin/main   # only the modules changed since that rev
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python scripts/mutation.py "$@"
