"""One module per ``opal`` command, named after it (``clone-state`` is ``clone_state.py``); a group
holds its subcommands (``op``, ``hooks``, ``hook``, ``secrets``, ``server``). Importing one attaches
its command to :data:`opalgit.cli.main.cli`.
"""
