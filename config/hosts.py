"""Which Host headers the server answers when nobody set ALLOWED_HOSTS.

`make run` binds 127.0.0.1 and answers only loopback names. With `HOST=0.0.0.0` (every
address of this machine) or one address of it, the nodes of a job reach the server by
this machine's name or one of its addresses, so those are accepted too: never a
wildcard, which would let any Host header through (Django's host-header checks exist
to stop links and cache keys built from a forged one). `FLAMEDECK_BASE_URL`'s host is
accepted whatever the bind, and is a trusted CSRF origin.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import socket
import struct
from pathlib import Path
from urllib.parse import urlsplit

LOOPBACK_NAMES = ["127.0.0.1", "localhost", "[::1]"]
WILDCARDS = {"0.0.0.0", "::", "[::]", ""}  # noqa: S104 — names of "every address"
SIOCGIFADDR = 0x8915


def is_loopback(bind: str) -> bool:
    if bind.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:
        return False


def host_entry(address: str) -> str:
    """An address as ALLOWED_HOSTS and URLs spell it: IPv6 in brackets."""
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(address).version == 6:
            return f"[{address}]"
    return address


def _interface_ipv4() -> set[str]:
    found = set()
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            with contextlib.suppress(OSError):
                packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()))
                found.add(socket.inet_ntoa(packed[20:24]))
    return found


def _interface_ipv6() -> set[str]:
    found = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            raw = line.split()[0]
            address = ipaddress.IPv6Address(bytes.fromhex(raw))
            if not address.is_link_local:  # needs a zone id no Host header carries
                found.add(str(address))
    return found


def machine_names() -> list[str]:
    """This machine's host name, fully qualified name and the addresses of its interfaces."""
    names = {socket.gethostname(), socket.getfqdn()}
    addresses = _interface_ipv4() | _interface_ipv6()
    with contextlib.suppress(OSError):
        addresses |= {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)}
    usable = {a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_link_local}
    return sorted(n for n in names if n) + sorted(host_entry(a) for a in usable)


def default_allowed_hosts(bind: str, base_url: str = "") -> list[str]:
    """Loopback names; plus this machine's names when bound beyond loopback (all of its
    addresses for a wildcard bind, else the one bound); plus FLAMEDECK_BASE_URL's host."""
    hosts = list(LOOPBACK_NAMES)
    if bind in WILDCARDS:
        hosts += machine_names()
    elif not is_loopback(bind):
        hosts += [n for n in (socket.gethostname(), socket.getfqdn()) if n]
        hosts.append(host_entry(bind.strip("[]")))
    base_host = urlsplit(base_url).hostname if base_url else None
    if base_host:
        hosts.append(host_entry(base_host))
    return list(dict.fromkeys(hosts))


def default_csrf_origins(base_url: str) -> list[str]:
    """FLAMEDECK_BASE_URL's origin (scheme://host[:port]): the address users post forms
    from when a proxy in front changes the scheme or the host."""
    if not base_url:
        return []
    parts = urlsplit(base_url)
    return [f"{parts.scheme}://{parts.netloc}"]


def address_for_others(bind: str) -> str:
    """The name other machines most likely reach a server bound to `bind` by."""
    if bind not in WILDCARDS:
        return host_entry(bind.strip("[]"))
    fqdn, name = socket.getfqdn(), socket.gethostname()
    for candidate in (fqdn if "." in fqdn else "", name):
        if candidate and not candidate.startswith("localhost"):
            return candidate
    addresses = [a for a in machine_names() if a[0].isdigit() or a.startswith("[")]
    return next((a for a in addresses if not is_loopback(a)), "127.0.0.1")
