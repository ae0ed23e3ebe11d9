"""``python -m toolwire`` is the ``toolwire`` command."""

from toolwire.cli import main

main()
