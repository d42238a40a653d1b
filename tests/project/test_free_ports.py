"""Ports for the servers tests start: never ones the kernel may give a client
socket in the meantime (a worker died with "Address already in use" when a
port from `bind(0)` was taken by an outgoing connection before it bound)."""

from __future__ import annotations

import socket

from tests.helpers.redis_process import ephemeral_ports, free_port, free_ports


def test_ports_for_test_servers_lie_below_the_ephemeral_range():
    ports = free_ports(64) + [free_port() for _ in range(16)]
    ephemeral = ephemeral_ports()
    assert [p for p in ports if p in ephemeral] == []
    assert len(set(ports[:64])) == 64


def test_a_chosen_port_can_be_listened_on():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
