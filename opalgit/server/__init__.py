"""The opt-in command server: the ``opal`` entry point (client), the daemon, its key."""
