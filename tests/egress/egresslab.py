"""What the egress tests share (see ``conftest``): the hosts file and ``PLAYS_PUBLIC``."""

from __future__ import annotations

from ipaddress import IPv4Network
from pathlib import Path

from pysandboxes._policy.netclasses import DEFAULTED, AddressClass

_LOOPBACK = IPv4Network("127.0.0.0/8")
PLAYS_PUBLIC = tuple(
    AddressClass(part, "loopback")
    for part in _LOOPBACK.address_exclude(IPv4Network("127.0.0.2/32"))
) + tuple(c for c in DEFAULTED if c.network != _LOOPBACK)

HOSTS = """\
127.0.0.1 localhost
127.0.0.2 api.example.test
127.0.0.3 evil.example.test
169.254.169.254 metadata.example.test
"""


class Hosts:
    """The hosts file, and a way to rewrite it (the resolver reads it at each lookup)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.write(HOSTS)

    def write(self, text: str) -> None:
        self.path.write_text(text)
