"""The connection warden on real sockets in this process: it counts the established connections
clients opened to its port and nothing else, cuts an address's newest past the limit, follows
descriptors as they close and are reused, and never closes a descriptor itself (they are gRPC's).
The end-to-end case, through a real dealer, is tests/security/test_connections.py."""

from __future__ import annotations

import os
import socket
import struct
import weakref
from collections.abc import Iterator

import pytest

from fairdeck_server.edge import connections
from fairdeck_server.edge.connections import ConnectionWarden, available, connection_of, socket_fds

pytestmark = pytest.mark.skipif(not available(), reason="the warden reads /proc/self/fd (Linux)")


class Accepting:
    """A listening socket on loopback, and the server side of each connection made to it."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.clients: list[socket.socket] = []
        self.served: list[socket.socket] = []

    def connect(self, source: str = "127.0.0.1") -> socket.socket:
        client = socket.create_connection(("127.0.0.1", self.port), source_address=(source, 0))
        self.clients.append(client)
        self.served.append(self.listener.accept()[0])
        _SERVED[client] = self.served[-1]
        return client

    def close(self) -> None:
        for s in [self.listener, *self.clients, *self.served]:
            s.close()


@pytest.fixture
def accepting() -> Iterator[Accepting]:
    a = Accepting()
    try:
        yield a
    finally:
        a.close()


_SERVED: weakref.WeakKeyDictionary[socket.socket, socket.socket] = weakref.WeakKeyDictionary()
"""The server side of each connection an ``Accepting`` made, by its client."""
ESTABLISHED = 1
"""``tcpi_state`` of a connection neither side has shut down (include/net/tcp_states.h)."""


def cut(client: socket.socket) -> bool:
    """Whether the server side of ``client``'s connection was shut down: its TCP state has left
    ESTABLISHED (``shutdown(2)`` moves it to FIN_WAIT1 before it returns), and the client sees the
    end within 2 s. A connection still ESTABLISHED there sent no end, so its client is only looked
    at, not waited on (2 s of waiting for each one not cut was most of this module's time)."""
    state = _SERVED[client].getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    if state == ESTABLISHED:
        client.setblocking(False)
        try:
            return client.recv(1, socket.MSG_PEEK) == b""  # an end from elsewhere: a wrong cut
        except BlockingIOError:
            return False
        finally:
            client.settimeout(2)
    client.settimeout(2)
    try:
        return client.recv(1) == b""
    except TimeoutError:
        return False


def test_only_established_connections_to_the_port_count(accepting: Accepting) -> None:
    other = Accepting()  # another port of this process: not the warden's
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    try:
        for _ in range(3):
            accepting.connect()
            other.connect()
        warden = ConnectionWarden(accepting.port, 10)
        assert warden.sweep() == 0
        assert warden.open == 3  # not the listener, the other port's, their clients' or the UDP socket
        fds = socket_fds()
        listener = next(i for i, fd in fds.items() if fd == accepting.listener.fileno())
        assert connection_of(accepting.listener.fileno(), listener, accepting.port) is None
        served = accepting.served[0]
        found = connection_of(
            served.fileno(), next(i for i, fd in fds.items() if fd == served.fileno()), accepting.port
        )
        assert found is not None and found.address == accepting.clients[0].getsockname()
        assert found.peer == "127.0.0.1"
    finally:
        other.close()
        udp.close()


def test_an_address_over_the_limit_loses_its_newest_and_others_keep_theirs(accepting: Accepting) -> None:
    crowd = [accepting.connect("127.0.0.2") for _ in range(6)]
    alone = accepting.connect("127.0.0.1")
    warden = ConnectionWarden(accepting.port, 4, on_cut=lambda peer, n: cuts.append((peer, n)))
    cuts: list[tuple[str, int]] = []
    assert warden.sweep() == 2
    assert cuts == [("127.0.0.2", 2)]
    assert [cut(c) for c in crowd] == [False] * 4 + [True] * 2  # the newest two
    assert not cut(alone)
    for s in accepting.served:
        os.fstat(s.fileno())  # every descriptor still open: shut down, never closed


def test_descriptors_that_close_and_are_reused_are_followed(accepting: Accepting) -> None:
    for _ in range(4):
        accepting.connect("127.0.0.2")
    warden = ConnectionWarden(accepting.port, 4)
    assert warden.sweep() == 0 and warden.open == 4
    # The server closes two (they go to TIME_WAIT on its side); the descriptors are reused by
    # new connections from the same address, which are then its newest.
    for s in [*accepting.served[:2], *accepting.clients[:2]]:
        s.close()
    accepting.served = accepting.served[2:]
    accepting.clients = accepting.clients[2:]
    assert warden.sweep() == 0 and warden.open == 2
    newer = [accepting.connect("127.0.0.2") for _ in range(3)]
    assert warden.sweep() == 1 and warden.open == 5
    assert [cut(c) for c in newer] == [False, False, True]


def test_looking_leaves_every_descriptor_as_it_was(accepting: Accepting) -> None:
    # socket.socket(fileno=fd) makes the descriptor non-blocking when a default timeout is set
    # (socket.setdefaulttimeout, by any library in the process): the warden must not do that to
    # sockets that are not its own (a blocking client library's, a log handler's).
    accepting.connect()
    a, b = socket.socketpair()
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(5)
    try:
        warden = ConnectionWarden(accepting.port, 1)
        assert warden.sweep() == 0 and warden.open == 1
        assert os.get_blocking(a.fileno()) and os.get_blocking(accepting.served[0].fileno())
    finally:
        socket.setdefaulttimeout(old)
        a.close()
        b.close()


def test_a_connection_first_seen_before_it_is_established_is_counted_once_it_is(
    accepting: Accepting, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An accepted socket can still be in SYN_RECV (TCP Fast Open) when first looked at: not
    # counted then, but not forgotten as "not a client's" either, or the bound never sees it.
    for _ in range(3):
        accepting.connect("127.0.0.2")
    warden = ConnectionWarden(accepting.port, 2)
    monkeypatch.setattr(connections, "TCP_ESTABLISHED", -1)  # nothing looks established yet
    assert warden.sweep() == 0 and warden.open == 0
    monkeypatch.undo()
    assert warden.sweep() == 1 and warden.open == 3


def refused(port: int, source: str, host: str = "127.0.0.1") -> bool:
    """Whether a new connection from ``source`` goes unanswered (its SYN dropped)."""
    try:
        socket.create_connection((host, port), timeout=1.0, source_address=(source, 0)).close()
        return False
    except TimeoutError:
        return True


def test_an_address_at_the_limit_is_refused_before_accept_until_it_holds_fewer(
    accepting: Accepting,
) -> None:
    # Cut connections are reopened at once: each costs gRPC an accept and a handshake, on its
    # own threads, before the next look can cut it again (the abuse table's connections row,
    # ~700 a second). At the limit, the listening socket itself drops the address's SYNs.
    crowd = [accepting.connect("127.0.0.2") for _ in range(4)]
    now = [1000.0]
    warden = ConnectionWarden(accepting.port, 3, clock=lambda: now[0])
    assert warden.sweep() == 1
    assert warden.gated == {"127.0.0.2"}
    assert refused(accepting.port, "127.0.0.2")
    assert not refused(accepting.port, "127.0.0.3")  # another address
    assert [cut(c) for c in crowd] == [False, False, False, True]
    accepting.served[3].close()  # as gRPC closes a connection it sees end
    for client in crowd[:3]:  # what it kept still carries data
        client.sendall(b"x")
    assert [s.recv(1) for s in accepting.served[:3]] == [b"x"] * 3
    crowd[0].close()
    accepting.served[0].close()
    now[0] += connections.HOLD_SECONDS - 1
    assert warden.sweep() == 0 and warden.gated == {"127.0.0.2"}  # holds two, but its hold is on
    assert refused(accepting.port, "127.0.0.2")
    now[0] += 2
    assert warden.sweep() == 0 and warden.gated == frozenset()
    assert not refused(accepting.port, "127.0.0.2")  # holds two, its hold over: in again


def test_an_address_that_goes_over_again_soon_is_held_twice_as_long(accepting: Accepting) -> None:
    # Let in again the moment it held fewer, a client retrying hundreds of connections came back
    # all at once every few seconds, each time accepted and cut again (the connections row, 2.4x).
    now = [1000.0]
    warden = ConnectionWarden(accepting.port, 1, clock=lambda: now[0])
    holds = []
    for _ in range(3):
        clients = [accepting.connect("127.0.0.2") for _ in range(2)]
        assert warden.sweep() == 1 and warden.gated == {"127.0.0.2"}
        for c in clients:  # it lets go of them all
            c.close()
        for served in accepting.served[-2:]:
            served.close()
        began = now[0]
        while warden.sweep() == 0 and warden.gated:
            now[0] += 1
        holds.append(now[0] - began)
        now[0] += 1  # back soon after
    assert holds == [connections.HOLD_SECONDS, 2 * connections.HOLD_SECONDS, 4 * connections.HOLD_SECONDS]
    now[0] += 10 * connections.HOLD_SECONDS  # a long while later: the first hold again
    for _ in range(2):
        accepting.connect("127.0.0.2")
    assert warden.sweep() == 1
    began = now[0]
    for c, served in zip(accepting.clients[-2:], accepting.served[-2:], strict=True):
        c.close()
        served.close()
    while warden.sweep() == 0 and warden.gated:
        now[0] += 1
    assert now[0] - began == connections.HOLD_SECONDS


def test_the_filter_refuses_ipv6_addresses_by_their_64() -> None:
    try:
        listener = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback")
    try:
        port = listener.getsockname()[1]
        fd = listener.fileno()
        connections._attach(fd, connections.gate_program(["2001:db8::/64", "127.0.0.2"]))
        assert not refused(port, "::1", "::1")
        connections._attach(fd, connections.gate_program([connections.client_address("::1")]))
        assert refused(port, "::1", "::1")
        connections._attach(fd, connections.gate_program([]))
        assert not refused(port, "::1", "::1")
    finally:
        listener.close()


def test_a_listener_that_cannot_be_filtered_leaves_the_cut_as_it_was(
    accepting: Accepting, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def denied(fd: int, program: bytes) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(connections, "_attach", denied)
    for _ in range(3):
        accepting.connect("127.0.0.2")
    warden = ConnectionWarden(accepting.port, 2)
    assert warden.sweep() == 1 and warden.gated == frozenset()
    accepting.served[2].close()  # as gRPC closes a connection it sees end
    assert warden.sweep() == 0  # said once, not tried again
    said = [r.getMessage() for r in caplog.records if "listening socket" in r.getMessage()]
    assert said == [
        "cannot filter the listening socket (Operation not permitted): clients over "
        "max_connections_per_peer are closed after gRPC accepts them, not refused before"
    ]


def test_a_filter_the_listener_cannot_take_leaves_no_address_refused(accepting: Accepting) -> None:
    # The kernel charges a socket filter to the listening socket's option memory
    # (net.core.optmem_max), the old one with the new until it is replaced; each gated IPv6 /64
    # lengthens it. One that does not fit must neither leave the filter before it refusing its
    # addresses for good nor end the gate: the addresses with the most connections stay refused.
    fd = accepting.listener.fileno()
    listeners = {os.fstat(fd).st_ino: fd}
    nets = [f"2001:db8:{i:x}::/64" for i in range(connections.MAX_GATED)]
    warden = ConnectionWarden(accepting.port, 2)
    warden._gate(listeners, {"127.0.0.2": 4}, 0.0)
    assert refused(accepting.port, "127.0.0.2")
    warden._gate(listeners, {"127.0.0.2": 4, **dict.fromkeys(nets[:400], 3)}, 0.0)
    warden._gate(listeners, {"127.0.0.2": 4, **dict.fromkeys(nets, 3)}, 0.0)
    assert "127.0.0.2" in warden.gated and refused(accepting.port, "127.0.0.2")
    warden._gate(listeners, {"127.0.0.2": 1}, 1e6)  # every address holds fewer, its hold over
    assert warden.gated == frozenset()
    assert not refused(accepting.port, "127.0.0.2")


def test_with_no_listener_found_no_address_is_said_to_be_refused(caplog: pytest.LogCaptureFixture) -> None:
    # The dealer's listening socket not found among the descriptors (it was closed, or /proc
    # said nothing): nothing is filtered, so the log must not say an address goes unanswered.
    warden = ConnectionWarden(1, 2)
    with caplog.at_level("INFO", logger=connections.__name__):
        warden._gate({}, {"127.0.0.2": 4}, 0.0)
    assert warden.gated == frozenset()
    assert not [r for r in caplog.records if "unanswered" in r.getMessage()]


def test_the_filter_costs_the_listener_little_option_memory_per_ipv6_64() -> None:
    # The kernel charges a filter to the socket's option memory (net.core.optmem_max, 20 KiB by
    # default on older kernels), the old one with its replacement. Each read of the packet at
    # SKF_NET_OFF becomes a call of 8 instructions: read once per /64, not once per packet, a /64
    # took about 170 bytes, so on such a kernel not even 60 fitted.
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        fd = listener.fileno()
        nets = [f"2001:db8:{i:x}::/64" for i in range(256)]
        connections._attach(fd, connections.gate_program([]))
        empty = optmem(listener)
        connections._attach(fd, connections.gate_program(nets))
        per_64 = (optmem(listener) - empty) / len(nets)
    finally:
        listener.close()
    assert per_64 <= 72, f"{per_64:.0f} bytes of option memory per gated /64"


def optmem(sock: socket.socket) -> int:
    """The option memory charged to ``sock`` (SO_MEMINFO's SK_MEMINFO_OPTMEM)."""
    info = sock.getsockopt(socket.SOL_SOCKET, 55, 9 * 4)  # SO_MEMINFO: 9 u32
    return struct.unpack("9I", info)[6]


def filtered(sock: socket.socket) -> bool:
    """Whether ``sock`` has a socket filter (SO_GET_FILTER; a short one: up to 128 instructions)."""
    return sock.getsockopt(socket.SOL_SOCKET, connections.SO_ATTACH_FILTER, 1024) != b""


def test_a_connection_accepted_while_an_address_is_refused_does_not_keep_the_filter(
    accepting: Accepting,
) -> None:
    # The kernel copies the listener's filter to each connection it accepts: kept, it would run
    # on each of that connection's packets, and hold its program in the kernel, for its life
    # (one program per change of the refused addresses: a client at the limit that opens and
    # closes one connection a second changes it at every look).
    for _ in range(3):
        accepting.connect("127.0.0.2")
    warden = ConnectionWarden(accepting.port, 2)
    assert warden.sweep() == 1 and warden.gated == {"127.0.0.2"}
    accepting.served[2].close()  # as gRPC closes a connection it sees end
    other = accepting.connect("127.0.0.3")
    assert filtered(accepting.served[-1])  # what the kernel did
    assert warden.sweep() == 0
    assert not filtered(accepting.served[-1])
    assert filtered(accepting.listener)  # the listener keeps its own
    other.sendall(b"x")
    assert accepting.served[-1].recv(1) == b"x"


def test_an_address_that_only_reached_the_limit_replaces_a_connection_at_once(
    accepting: Accepting,
) -> None:
    # A client that keeps its share (a pool of max_connections_per_peer) reconnects as the dealer
    # closes an idle or aged connection. Refused until the next look and the retry of its SYN
    # (a second, then 3 s), it would wait that long where before it was let in at once.
    for _ in range(3):
        accepting.connect("127.0.0.2")
    warden = ConnectionWarden(accepting.port, 3)
    assert warden.sweep() == 0 and warden.gated == frozenset()
    accepting.served[0].close()  # the dealer closes one; the client opens another at once
    accepting.clients[0].close()
    assert not refused(accepting.port, "127.0.0.2")


def test_a_listener_with_little_option_memory_refuses_those_with_the_most_connections(
    accepting: Accepting, caplog: pytest.LogCaptureFixture
) -> None:
    # As on a kernel whose net.core.optmem_max is the older 20 KiB: the listener's option memory
    # is spent by TCP MD5 keys for other peers (136 bytes each) but for about 20 KiB.
    listener = accepting.listener
    keys = 0
    try:
        while True:
            listener.setsockopt(socket.IPPROTO_TCP, TCP_MD5SIG, md5_key(keys))
            keys += 1
    except OSError:
        if keys == 0:
            pytest.skip("no TCP MD5 signatures in this kernel")
    for i in range(keys - 150, keys):
        listener.setsockopt(socket.IPPROTO_TCP, TCP_MD5SIG, md5_key(i, delete=True))
    fd = listener.fileno()
    listeners = {os.fstat(fd).st_ino: fd}
    nets = [f"2001:db8:{i:x}::/64" for i in range(connections.MAX_GATED)]
    warden = ConnectionWarden(accepting.port, 2)
    warden._gate(listeners, {"127.0.0.2": 4, **dict.fromkeys(nets, 3)}, 0.0)
    assert "127.0.0.2" in warden.gated and 0 < len(warden.gated) < connections.MAX_GATED
    assert refused(accepting.port, "127.0.0.2")
    assert any("filter holds at most" in r.getMessage() for r in caplog.records)
    warden._gate(listeners, {"127.0.0.2": 1}, 1e6)  # its hold over
    assert warden.gated == frozenset() and not refused(accepting.port, "127.0.0.2")


TCP_MD5SIG = 14
"""linux/tcp.h; Python's socket module does not name it."""


def md5_key(i: int, *, delete: bool = False) -> bytes:
    """struct tcp_md5sig for peer 10.9.x.y (no connection of the tests comes from there)."""
    peer = struct.pack("=HH4s", socket.AF_INET, 0, bytes([10, 9, i // 256, i % 256])).ljust(128, b"\0")
    return peer + struct.pack("=BBHi", 0, 0, 0 if delete else 8, 0) + (b"k" * 8).ljust(80, b"\0")
