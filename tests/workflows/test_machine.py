"""The whole state machine, driven by hypothesis: see tests/workflows/machine.py.

CI runs a bounded number of sequences (derandomized when CI is set);
``OPAL_STATEFUL_LONG=1`` runs the long version (docs/reliability.md).
"""

from tests.workflows.machine import Workflows, settings_for_ci

TestWorkflows = Workflows.TestCase
TestWorkflows.settings = settings_for_ci()
