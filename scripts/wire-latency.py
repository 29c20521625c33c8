#!/usr/bin/env python3
"""Act -> action latency as the wire sees it, from a loopback capture.

For each `act` frame a client sends to a pitboss port, the time until the
server's `action` event for that hand reaches the same connection: what the
server (its sessions, tables and sockets) adds, without the client's own
scheduling. Compare it with what the clients measured over the same window.

    tcpdump -i lo -s 0 -B 65536 -w play.pcap "tcp port $PORT"   # while bots play
    python3 scripts/wire-latency.py play.pcap $PORT

Needs the dpkt package (pip install dpkt). Plain WebSocket only (no TLS).
A capture started mid-run begins at a packet boundary, which is a frame
boundary for pitboss's writes; a stream that cannot be parsed is skipped
until its next packet.
"""
import json
import sys
from collections import defaultdict

import dpkt


class Stream:
    """One direction of one connection: bytes in order, cut into frames."""

    def __init__(self):
        self.next_seq = None
        self.buf = b""

    def feed(self, seq, data):
        if self.next_seq is None:
            self.next_seq = seq
        if seq < self.next_seq:  # a retransmission
            skip = self.next_seq - seq
            if skip >= len(data):
                return
            data, seq = data[skip:], self.next_seq
        if seq > self.next_seq:  # a gap: start again at this packet
            self.buf = b""
        self.buf += data
        self.next_seq = seq + len(data)

    def frames(self):
        out, b, i = [], self.buf, 0
        while len(b) - i >= 2:
            op, masked, n = b[i] & 0x0F, b[i + 1] & 0x80, b[i + 1] & 0x7F
            j = i + 2
            if n >= 126:
                width = 2 if n == 126 else 8
                if len(b) - j < width:
                    break
                n = int.from_bytes(b[j:j + width], "big")
                j += width
            key = None
            if masked:
                if len(b) - j < 4:
                    break
                key, j = b[j:j + 4], j + 4
            if len(b) - j < n:
                break
            payload = b[j:j + n]
            if key:
                payload = bytes(c ^ key[k % 4] for k, c in enumerate(payload))
            out.append((op, payload))
            i = j + n
        self.buf = b[i:]
        return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, port = sys.argv[1], int(sys.argv[2])
    streams = defaultdict(Stream)
    acts = defaultdict(list)  # client port -> [(t, hand, action)]
    answers = defaultdict(list)  # client port -> [(t, hand, action)]
    with open(path, "rb") as f:
        for ts, raw in dpkt.pcap.Reader(f):
            try:
                tcp = dpkt.ethernet.Ethernet(raw).data.data
            except Exception:
                continue
            if not isinstance(tcp, dpkt.tcp.TCP) or not tcp.data:
                continue
            to_server = tcp.dport == port
            conn = tcp.sport if to_server else tcp.dport
            s = streams[(conn, to_server)]
            s.feed(tcp.seq, bytes(tcp.data))
            for op, payload in s.frames():
                if op != 1:
                    continue
                try:
                    v = json.loads(payload)
                except ValueError:
                    continue
                if to_server and v.get("type") == "act":
                    acts[conn].append((ts, v.get("hand"), v.get("action")))
                elif not to_server and v.get("kind") == "action":
                    answers[conn].append((ts, v.get("hand"), v.get("action")))

    lat, unmatched = [], 0
    for conn, sent in acts.items():
        got, k = answers[conn], 0
        for t, hand, action in sent:
            while k < len(got) and got[k][0] < t:
                k += 1
            # It is our turn: the hand's next action is ours (or the clock's).
            m = next((a for a in got[k:] if a[1] == hand), None)
            if m is None or m[2] != action:
                unmatched += 1
                continue
            lat.append((m[0] - t) * 1000.0)
    lat.sort()
    if not lat:
        sys.exit("no act answered in the capture")

    def q(p):
        return lat[min(len(lat) - 1, int(round((len(lat) - 1) * p)))]

    print(f"acts answered on the wire: {len(lat)} (not matched: {unmatched})")
    print(
        f"act -> action on the wire: p50 {q(0.5):.2f} ms  p99 {q(0.99):.2f} ms  "
        f"p99.9 {q(0.999):.2f} ms  max {lat[-1]:.2f} ms"
    )


if __name__ == "__main__":
    main()
