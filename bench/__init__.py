"""A rerunnable benchmark of toolwire: ``python -m bench.run`` (see bench/README.md)."""
