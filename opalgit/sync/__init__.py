"""Sharing state through git remotes: remotes, push, fetch, clone-state, and links to code commits."""
