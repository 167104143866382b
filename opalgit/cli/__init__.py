"""The ``opal`` command line: click lives only here."""
