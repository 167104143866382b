"""One module per group of ``opal`` commands."""
