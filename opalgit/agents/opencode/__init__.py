"""opencode: where it keeps sessions (SQLite), how they are read (export JSON), how they are written (import)."""
