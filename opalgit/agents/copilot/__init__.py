"""GitHub Copilot CLI: its session-state folders, read and written (issue 21)."""
