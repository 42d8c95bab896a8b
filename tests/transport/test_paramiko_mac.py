"""paramiko's per-packet MAC check is the C constant-time comparison, and still refuses."""

from __future__ import annotations

import hmac

from gpunode.transport._paramiko import paramiko


def test_packets_macs_are_compared_in_c_and_constant_time() -> None:
    check = paramiko.util.constant_time_bytes_eq
    assert check is hmac.compare_digest
    mac = bytes(range(32))
    assert check(mac, bytes(range(32)))
    assert not check(mac, bytes(range(31)) + b"\x00")
    assert not check(mac, mac[:16])
