"""opal's benchmark suite: ``python -m bench`` (see docs/performance.md)."""
