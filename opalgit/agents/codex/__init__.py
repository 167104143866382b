"""Codex CLI: where it keeps rollouts, how they are read, how they are written."""
