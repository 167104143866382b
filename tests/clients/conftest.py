"""Registers the markers of the real-client conformance tests."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "clients: drives the real agent CLIs (tests/clients/harness.py) offline against local mock model servers "
        "(skipped when scripts/install-agents.sh has not been run)",
    )
    config.addinivalue_line(
        "markers",
        "matrix_rest: a rewound or branch resume of a cross-agent pair (skipped with OPAL_MATRIX=once)",
    )
