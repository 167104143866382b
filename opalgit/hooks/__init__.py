"""Git hooks: the shims git runs, what each does, and the order of their work."""
