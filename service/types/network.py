"""Network types: inet, cidr, macaddr, macaddr8 (network.c, mac.c, mac8.c).

Receives: inet/cidr varlena payloads (`inet_struct`: family byte, netmask bits byte,
then 4 or 16 address bytes; family 2 is IPv4 (PGSQL_AF_INET) and 3 IPv6
(PGSQL_AF_INET6)); macaddr's 6 and macaddr8's 8 fixed bytes. Hands on: `ipaddress`
interface objects for inet, network objects for cidr, lowercase colon-separated text
for MAC addresses, or the exact output-function text.

Text rules (inet_out/cidr_out via pg_inet_net_ntop): IPv4 prints all four octets and
`/bits` unless bits is 32; IPv6 uses the longest (first, at least two words) run of
zero words as `::`, prints an embedded IPv4 tail for the ::a.b.c.d and ::ffff:a.b.c.d
forms, and `/bits` unless bits is 128. cidr always prints `/bits`.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import ipaddress

from service.errors import DecodeError

PGSQL_AF_INET = 2
PGSQL_AF_INET6 = 3

IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _parse(buf: bytes) -> tuple[int, int, bytes]:
    if len(buf) < 2:
        raise DecodeError(f"inet datum of {len(buf)} bytes is too short")
    family, bits = buf[0], buf[1]
    size = {PGSQL_AF_INET: 4, PGSQL_AF_INET6: 16}.get(family)
    if size is None:
        raise DecodeError(f"inet family {family} is neither IPv4 nor IPv6")
    addr = bytes(buf[2 : 2 + size])
    if len(addr) != size or bits > 8 * size:
        raise DecodeError(f"inet datum is malformed (family {family}, bits {bits})")
    return family, bits, addr


def _ipv6_text(addr: bytes) -> str:
    """inet_net_ntop_ipv6 without the mask."""
    words = [(addr[i] << 8) | addr[i + 1] for i in range(0, 16, 2)]
    best_base, best_len, cur_base, cur_len = -1, 0, -1, 0
    for i, w in enumerate([*words, 1]):  # the sentinel closes a trailing run
        if w == 0 and i < 8:
            if cur_base == -1:
                cur_base, cur_len = i, 1
            else:
                cur_len += 1
        elif cur_base != -1:
            if best_base == -1 or cur_len > best_len:
                best_base, best_len = cur_base, cur_len
            cur_base = -1
    if best_base != -1 and best_len < 2:
        best_base = -1
    out = ""
    for i in range(8):
        if best_base != -1 and best_base <= i < best_base + best_len:
            if i == best_base:
                out += ":"
            continue
        if i:
            out += ":"
        if (
            i == 6
            and best_base == 0
            and (
                best_len == 6
                or (best_len == 7 and words[7] != 1)
                or (best_len == 5 and words[5] == 0xFFFF)
            )
        ):
            out += ".".join(str(b) for b in addr[12:])
            break
        out += f"{words[i]:x}"
    if best_base != -1 and best_base + best_len == 8:
        out += ":"
    return out


def inet_text(buf: bytes, *, is_cidr: bool = False) -> str:
    """inet_out / cidr_out."""
    family, bits, addr = _parse(buf)
    if family == PGSQL_AF_INET:
        text = ".".join(str(b) for b in addr)
        full = 32
    else:
        text = _ipv6_text(addr)
        full = 128
    if bits != full or is_cidr:
        text += f"/{bits}"
    return text


def cidr_text(buf: bytes) -> str:
    return inet_text(buf, is_cidr=True)


def inet_value(buf: bytes) -> IPInterface:
    family, bits, addr = _parse(buf)
    if family == PGSQL_AF_INET:
        return ipaddress.IPv4Interface((addr, bits))
    return ipaddress.IPv6Interface((addr, bits))


def cidr_value(buf: bytes) -> IPNetwork:
    family, bits, addr = _parse(buf)
    try:
        if family == PGSQL_AF_INET:
            return ipaddress.IPv4Network((addr, bits))
        return ipaddress.IPv6Network((addr, bits))
    except ValueError as exc:
        raise DecodeError(f"cidr value has bits set right of the mask: {exc}") from exc


def mac_text(buf: bytes) -> str:
    """macaddr_out / macaddr8_out."""
    if len(buf) not in (6, 8):
        raise DecodeError(f"MAC address datum has {len(buf)} bytes")
    return ":".join(f"{b:02x}" for b in buf)
