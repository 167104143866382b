"""The store: git's object database and refs, the only importers of pygit2."""
