"""Claude Code: where it keeps sessions, how they are read, how they are written."""
