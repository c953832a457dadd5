"""Connections per client address: at most ``limit``, enforced from outside gRPC.

grpcio's server has no hook on accept and no per-peer limit (its options bound connections only
in total, ``grpc.max_allowed_incoming_connections``), and it cannot serve a socket accepted by
someone else. So the warden looks from outside, once a ``interval``: the process's own socket
descriptors (``/proc/self/fd``), each new one asked once for its addresses (a socket's never
change), counted by client address (an IPv6 address as its /64, as ``edge.peers.peer_address``). A sweep
costs in proportion to the dealer's own descriptors, never to the host's TCP table (closed
connections in TIME_WAIT, other programs'). An address over the limit loses its newest
connections: ``shutdown(2)`` on the socket, which gRPC then sees end and closes as any connection
the peer closed. The descriptor stays gRPC's (never closed here); one is cut only if it still is
that connection. An address that went over is refused before gRPC accepts: a socket filter on
the listening socket (``gate_program``) drops its SYNs until it holds fewer (docs/security.md,
"Connections"). Linux only (``available``); elsewhere the limit is off.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import ipaddress
import logging
import os
import resource
import socket
import stat
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fairdeck_server.log_causes import Repeats, cause

log = logging.getLogger(__name__)

PROC = Path("/proc")
SWEEP_SECONDS = 1.0
"""Seconds between two looks at the connections."""
RESERVED_DESCRIPTORS = 256
"""File descriptors kept for what is not a client connection (the database, logs, metrics)."""
TCP_ESTABLISHED = 1
"""The TCP state of a connection both sides opened (linux/tcp_states.h): the only one counted."""
TCP_LISTEN = 10
SO_ATTACH_FILTER, SO_DETACH_FILTER = 26, 27
"""asm-generic/socket.h; Python's socket module does not name them."""
HOLD_SECONDS = 10.0
"""An address that went over the limit is refused for at least this long, doubled each time it
goes over again before twice its last hold has passed, up to HOLD_MOST_SECONDS: let in again the
moment it held fewer, a client retrying hundreds of connections came back all at once every few
seconds (its connections closed by the handshake bound), each time accepted and cut again."""
HOLD_MOST_SECONDS = 300.0
MAX_GATED = 512
"""Client addresses refused at the listening socket at once, at most: the filter takes 2
instructions for an IPv4 address and 5 for an IPv6 /64, within the kernel's 4,096. Past it, the
addresses with the most connections; the others are still cut once accepted."""


@dataclass(frozen=True)
class Connection:
    inode: int
    peer: str
    """The client address it counts against (an IPv6 one as its /64)."""
    address: tuple[str, int]
    """The peer's address and port, as getpeername gives them (an IPv4-mapped one unmapped)."""


LISTENING = Connection(0, "", ("", 0))
"""What ``_look`` says of the listening socket on the port."""


def client_address(ip: str) -> str:
    """What a connection counts against: the address, or an IPv6 address's /64."""
    parsed = ipaddress.ip_address(ip)
    if parsed.version == 6:
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


def connection_of(fd: int, inode: int, port: int) -> Connection | None:
    """The TCP connection a client opened to ``port`` that ``fd`` holds, or None (another kind of
    socket, the listening one, one not yet or no longer established, or a closed descriptor)."""
    found = _look(fd, inode, port)[0]
    return None if found is LISTENING else found


def _borrow(fd: int) -> socket.socket:
    """A socket object on ``fd`` that changes nothing of it: given a type with SOCK_NONBLOCK,
    Python does not set the descriptor non-blocking as it does (a file status flag, shared with
    its owner) when a default timeout is set. Its real type is asked with SO_TYPE. Detach it."""
    return socket.socket(type=socket.SOCK_STREAM | socket.SOCK_NONBLOCK, fileno=fd)


def _look(fd: int, inode: int, port: int) -> tuple[Connection | None, bool]:
    """``connection_of``, and whether the answer holds for the socket's life: a TCP socket on
    ``port`` not established yet (SYN_RECV, with TCP Fast Open) may be a client's later."""
    try:
        sock = _borrow(fd)
    except OSError:  # closed meanwhile, or no longer a socket
        return None, False
    try:
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) != socket.SOCK_STREAM or sock.family not in (
            socket.AF_INET,
            socket.AF_INET6,
        ):
            return None, True
        local = sock.getsockname()[1]
        if local != port:
            return None, local != 0  # an unbound socket may be bound later
        # struct tcp_info begins with tcpi_state (linux/tcp.h).
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
        if state == TCP_LISTEN:
            return LISTENING, True
        if state != TCP_ESTABLISHED:
            return None, False
        peer = sock.getpeername()
    except OSError:
        return None, False
    finally:
        sock.detach()  # the descriptor is gRPC's: never closed here
    host = _unmapped(peer[0])
    return Connection(inode, client_address(host), (host, peer[1])), True


def socket_fds(proc: Path = PROC) -> dict[int, int]:
    """This process's socket descriptors, by socket inode (``fstat``: cheaper than ``readlink``)."""
    out: dict[int, int] = {}
    try:
        names = os.listdir(proc / "self" / "fd")
    except OSError:
        return out
    for name in names:
        try:
            fd = int(name)
            st = os.fstat(fd)
        except (ValueError, OSError):  # closed meanwhile (the listing's own descriptor is)
            continue
        if stat.S_ISSOCK(st.st_mode):
            out[st.st_ino] = fd
    return out


def fit_descriptors(max_connections: int) -> int:
    """``max_connections``, with this process's file descriptor limit raised to fit it (up to the
    hard limit); if it cannot be, lowered to what fits, with a warning. 0 stays 0 (no limit)."""
    if max_connections <= 0:
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < wanted:
        fitted = max(1, soft - RESERVED_DESCRIPTORS)
        log.warning(
            "max_connections %d lowered to %d: the file descriptor limit is %d (raise it: ulimit -n, "
            "LimitNOFILE= in systemd)",
            max_connections,
            fitted,
            soft,
        )
        return fitted
    return max_connections


def available(proc: Path = PROC) -> bool:
    return (proc / "self" / "fd").is_dir() and hasattr(socket, "TCP_INFO")


class ConnectionWarden:
    """Cuts the newest connections of any client address over ``limit`` (0: no limit)."""

    def __init__(
        self,
        port: int,
        limit: int,
        *,
        on_cut: Callable[[str, int], None] = lambda peer, n: None,
        proc: Path = PROC,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.port = port
        self.limit = limit
        self._on_cut = on_cut
        self._proc = proc
        self._clock = clock
        self._first_seen: dict[int, float] = {}
        self._known: dict[int, Connection | None] = {}
        """Each socket descriptor's connection (None: not a client's), by inode, from the last sweep:
        only answers that hold for the socket's life (not a socket not yet established)."""
        self.open = 0
        """Connections on the port at the last sweep."""
        self.gated: frozenset[str] = frozenset()
        """Client addresses the listening sockets refuse now (at the limit)."""
        self._gated_on: frozenset[int] = frozenset()
        """The listening sockets (inodes) that have the filter for ``gated``."""
        self._gate_failed = False
        self._holds: dict[str, tuple[float, float]] = {}
        """Per address that went over: until when it is refused, and that hold's length."""
        self._most = MAX_GATED
        """Addresses the filter holds at most: fewer where the kernel's option memory is short."""
        self._filtered = False
        """A filter was attached to a listening socket: each connection accepted meanwhile got a
        copy, which would run on each of its packets and keep that program in the kernel's memory
        for the connection's life (an hour), one program per change of ``gated``. Its first look
        takes it off (the client was let in: its filter has nothing to refuse)."""

    def sweep(self) -> int:
        """One look: count, cut what is over the limit; the number of connections cut."""
        fds = socket_fds(self._proc)
        known = self._known
        self._known = {}
        ours: dict[int, Connection] = {}
        listeners: dict[int, int] = {}
        for inode, fd in fds.items():
            if inode in known:
                conn = self._known[inode] = known[inode]
            else:
                conn, settled = _look(fd, inode, self.port)
                if settled:  # else asked again next time
                    self._known[inode] = conn
                if self._filtered and conn is not None and conn is not LISTENING:
                    _detach(fd)  # the listener's filter, which the kernel copied to it on accept
            if conn is LISTENING:
                listeners[inode] = fd
            elif conn is not None:
                ours[inode] = conn
        now = self._clock()
        self._first_seen = {inode: self._first_seen.get(inode, now) for inode in ours}
        self.open = len(ours)
        if self.limit <= 0:
            return 0
        cut = 0
        held: dict[str, int] = {}
        for peer, conns in _by_peer(ours.values()):
            held[peer] = len(conns)
            over = len(conns) - self.limit
            if over <= 0:
                continue
            # Newest first: first seen latest, then the higher descriptor (allocated later).
            conns.sort(key=lambda c: (self._first_seen[c.inode], fds[c.inode]), reverse=True)
            done = sum(_cut(fds[c.inode], c, self.port) for c in conns[:over])
            if done:
                cut += done
                self._on_cut(peer, done)
                log.warning(
                    "client %s held %d connections, over max_connections_per_peer %d: closed the %d newest",
                    peer,
                    len(conns),
                    self.limit,
                    done,
                )
        self._gate(listeners, held, now)
        return cut

    def _gate(self, listeners: dict[int, int], held: dict[str, int], now: float) -> None:
        """Refuse at the listening sockets (by inode: descriptor) every address that went over
        ``limit`` while it holds ``limit`` connections or more, and let in again those that hold
        fewer: the bound kept before gRPC accepts, so that a client reopening what was cut costs no
        accept and no handshake. One that only reached it is not refused: a client that keeps its
        share and replaces a connection (closed idle, or at its age) would wait for its SYN's
        retry, a second or more, where before it was let in at once. One that went over stays
        refused for its hold (HOLD_SECONDS) even once it holds fewer."""
        for peer, n in held.items():
            if n > self.limit:
                until, length = self._holds.get(peer, (float("-inf"), 0.0))
                if until < now:  # over again: a longer hold if it came back soon after the last
                    length = min(length * 2, HOLD_MOST_SECONDS) if now < until + length else HOLD_SECONDS
                    self._holds[peer] = (now + length, length)
        self._holds = {p: h for p, h in self._holds.items() if now < h[0] + h[1]}  # the rest forgotten
        full = sorted(
            (
                p
                for p in {*held, *self._holds}
                if held.get(p, 0) > self.limit
                or (held.get(p, 0) == self.limit and p in self.gated)
                or self._holds.get(p, (float("-inf"),))[0] > now
            ),
            key=lambda p: (-held.get(p, 0), p),
        )
        gated = frozenset(full[: self._most])
        if self._gate_failed or (gated == self.gated and frozenset(listeners) == self._gated_on):
            return
        if not gated and not self._filtered:  # none refused yet: no filter to copy to each connection
            self._gated_on = frozenset(listeners)
            return
        if not listeners:  # none found to filter: nobody is refused before accept, nor said to be
            self.gated, self._gated_on = frozenset(), frozenset()
            return
        most = self._most
        while True:
            program = gate_program(sorted(gated))
            try:
                for fd in listeners.values():
                    _attach(fd, program)
                    self._filtered = True
                break
            except OSError as e:
                if e.errno == errno.ENOMEM and gated:  # longer than the listener's option memory holds
                    self._most = len(gated) // 2
                    gated = frozenset(full[: self._most])
                    continue
                # No address may stay refused by a filter no longer kept up, on any listener.
                for fd in listeners.values():
                    _detach(fd)
                self._gate_failed = True
                self.gated, self._gated_on = frozenset(), frozenset()
                log.warning(
                    "cannot filter the listening socket (%s): clients over max_connections_per_peer are "
                    "closed after gRPC accepts them, not refused before",
                    e.strerror or e,
                )
                return
        if self._most < most:
            log.warning(
                "the listening socket's filter holds at most %d addresses (net.core.optmem_max): "
                "past them, clients at max_connections_per_peer are closed after gRPC accepts them, "
                "not refused before",
                self._most,
            )
        for peer in sorted(gated - self.gated):
            log.info(
                "client %s holds %d connections, max_connections_per_peer %d: its new ones go "
                "unanswered for %g s, and then while it holds %d",
                peer,
                held.get(peer, 0),
                self.limit,
                self._holds[peer][1] if peer in self._holds else 0,
                self.limit,
            )
        self.gated, self._gated_on = gated, frozenset(listeners)


# Classic BPF (linux/filter.h, Documentation/networking/filter.rst): a socket filter on a TCP
# listening socket sees each packet that reaches it (a SYN, a handshake's last ACK) with its IP
# header at SKF_NET_OFF; returning 0 drops the packet, as if it never came.
_SKF_NET_OFF = -0x100000
_LD_B_ABS, _LD_W_ABS, _LD_MEM, _ST = 0x30, 0x20, 0x60, 0x02
_RSH_K, _JEQ_K, _JA, _RET_K = 0x74, 0x15, 0x05, 0x06
_ACCEPT, _DROP = 0xFFFFFFFF, 0


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def gate_program(peers: Sequence[str]) -> bytes:
    """A socket filter that drops packets from ``peers`` (IPv4 addresses and IPv6 /64s, as
    ``client_address`` gives them) and passes every other. Each comparison that matches falls
    through to a ``ret 0`` right after it, so no jump is longer than the 8 bits allow."""
    v4 = [int(ipaddress.IPv4Address(p)) for p in peers if ":" not in p]
    v6 = [ipaddress.IPv6Network(p).network_address.packed for p in peers if ":" in p]
    ipv4: list[bytes] = [_insn(_LD_W_ABS, _SKF_NET_OFF + 12)]  # the source address
    for address in v4:
        ipv4 += [_insn(_JEQ_K, address, 0, 1), _insn(_RET_K, _DROP)]
    ipv4.append(_insn(_RET_K, _ACCEPT))
    # The source's first 64 bits, in two words, read from the packet once into scratch memory:
    # the kernel makes each read at SKF_NET_OFF a call of 8 instructions, two per /64 tripled the
    # filter's size (its charge to the socket's option memory) and the work of each IPv6 SYN.
    ipv6: list[bytes] = []
    if v6:
        ipv6 += [_insn(_LD_W_ABS, _SKF_NET_OFF + 8), _insn(_ST, 0)]
        ipv6 += [_insn(_LD_W_ABS, _SKF_NET_OFF + 12), _insn(_ST, 1)]
    for prefix in v6:
        high, low = struct.unpack("!II", prefix[:8])
        ipv6 += [
            _insn(_LD_MEM, 0),
            _insn(_JEQ_K, high, 0, 3),
            _insn(_LD_MEM, 1),
            _insn(_JEQ_K, low, 0, 1),
            _insn(_RET_K, _DROP),
        ]
    ipv6.append(_insn(_RET_K, _ACCEPT))
    head = [
        _insn(_LD_B_ABS, _SKF_NET_OFF),  # version and header length
        _insn(_RSH_K, 4),
        _insn(_JEQ_K, 4, 0, 1),
        _insn(_JA, 3),  # to the IPv4 part, past the four after this one
        _insn(_JEQ_K, 6, 0, 1),
        _insn(_JA, 1 + len(ipv4)),  # to the IPv6 part
        _insn(_RET_K, _ACCEPT),
    ]
    return b"".join(head + ipv4 + ipv6)


def _attach(fd: int, program: bytes) -> None:
    """SO_ATTACH_FILTER on ``fd`` (it replaces the one before); the kernel copies the program."""
    code = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("HP", len(program) // 8, ctypes.addressof(code))  # struct sock_fprog
    sock = _borrow(fd)
    try:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        except OSError as e:
            if e.errno != errno.ENOMEM:
                raise
            # The filter it replaces is charged to the socket until then: without it, this one may
            # fit. For that instant nothing is refused (what comes in then is cut once accepted).
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0)
            sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    finally:
        sock.detach()


def _detach(fd: int) -> None:
    """Take any filter off ``fd`` (none there, or no longer a socket: nothing to do)."""
    try:
        sock = _borrow(fd)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0)
    finally:
        sock.detach()


def _by_peer(conns: Iterable[Connection]) -> list[tuple[str, list[Connection]]]:
    groups: dict[str, list[Connection]] = {}
    for c in conns:
        groups.setdefault(c.peer, []).append(c)
    return list(groups.items())


def _cut(fd: int, conn: Connection, port: int) -> bool:
    """Shut down ``fd`` if it is still ``conn``; never close it (it is gRPC's descriptor)."""
    try:
        sock = _borrow(fd)
    except OSError:  # closed, or no longer a socket
        return False
    try:
        peer = sock.getpeername()
        if sock.getsockname()[1] != port or (str(_unmapped(peer[0])), peer[1]) != conn.address:
            return False  # the descriptor was closed and reused meanwhile
        sock.shutdown(socket.SHUT_RDWR)
        return True
    except OSError:
        return False
    finally:
        sock.detach()


async def watch(
    port: int, limit: int, *, on_cut: Callable[[str, int], None], on_count: Callable[[int], None]
) -> None:
    """Once a SWEEP_SECONDS: the connections per client address to ``port`` held to ``limit``, and
    how many are open told to ``on_count`` (the dealer's gauge). Returns at once without /proc."""
    warden = ConnectionWarden(port, limit, on_cut=on_cut)
    if not available():
        if warden.limit:
            log.warning("max_connections_per_peer is not enforced: no /proc on this system")
        return
    failures = Repeats(log)
    while True:
        try:
            await asyncio.to_thread(warden.sweep)
            on_count(warden.open)
        except Exception as e:  # a look that failed is tried again next time
            failures.log(logging.ERROR, f"counting connections failed: {cause(e)}")
        await asyncio.sleep(SWEEP_SECONDS)


def _unmapped(host: str) -> str:
    ip = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)
