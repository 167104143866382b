"""Sharing state through git remotes: push, fetch, pull, and links to code commits."""
