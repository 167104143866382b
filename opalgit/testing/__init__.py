"""Contract suites that ship with opal: run them against any store or adapter of your own."""
