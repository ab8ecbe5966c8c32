"""Command-line helpers that run with `python -m kiln.tools.NAME` (docs/debugging.md)."""
