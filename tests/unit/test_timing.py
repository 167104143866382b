"""What keeps the suite independent of the machine's speed (issue 19: timing-dependent tests)."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.compat.test_remote import reserved_port


def test_hypothesis_has_no_wall_clock_deadline():
    # A 200 ms deadline per example fails property tests on a loaded machine.
    assert settings.default.deadline is None


@given(st.integers())
def test_a_slow_example_is_not_a_failure(n):
    import time

    if n == 0:
        # Longer than hypothesis's default deadline, as a loaded machine makes an example.
        time.sleep(0.25)


def test_a_reserved_port_refuses_and_cannot_be_taken():
    with reserved_port() as port:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        other = socket.socket()
        with pytest.raises(OSError):
            other.bind(("127.0.0.1", port))
        other.close()
        # A server that shares the port on purpose (git daemon --reuseaddr) can listen on it.
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", port))
        srv.listen()
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        srv.close()
        with pytest.raises(ConnectionRefusedError):  # stopped: refused again, not someone else's
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
