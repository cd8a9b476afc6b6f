"""Ports: the well-known one when it is free, another free loopback port when it is taken."""

from __future__ import annotations

import socket

from vk_devtools.devcluster.ports import LOOPBACK, PortPicker, is_free


def test_a_free_preferred_port_is_used() -> None:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port = probe.getsockname()[1]
    assert PortPicker().pick(port) == port


def test_a_taken_preferred_port_is_replaced_by_a_free_one() -> None:
    with socket.socket() as holder:
        holder.bind((LOOPBACK, 0))
        holder.listen()
        taken = holder.getsockname()[1]
        picked = PortPicker().pick(taken)
        assert picked != taken
        assert is_free(picked)


def test_no_port_is_handed_out_twice() -> None:
    picker = PortPicker()
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port = probe.getsockname()[1]
    first = picker.pick(port)
    second = picker.pick(port)
    others = {picker.pick() for _ in range(20)}
    assert first == port
    assert second != first
    assert len(others) == 20
    assert first not in others
    assert second not in others
