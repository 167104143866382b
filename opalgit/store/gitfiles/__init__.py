"""opal's own readers and writers of git's files (objects, packs, config), without libgit2."""
