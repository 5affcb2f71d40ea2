#!/usr/bin/env python3
"""Peak memory of sitemapd while it refuses hostile JSON bodies just under `max_json_bytes` (16 MiB), six at once.

    bench/hostile_json.py [--bin target/debug/sitemapd] [--conc 6] [--kinds zeros,deep,wide,string]

For each kind of body it starts a fresh server on a temporary SQLite file, reads its VmHWM (peak resident set),
sends `conc` such bodies at once to `PUT /api/v1/urls` (application/json), and reads VmHWM and VmRSS again:

    zeros   [0,0,…]: 8,388,607 tiny elements (413: more than max_json_entries)
    deep    elements nested 120 deep, [[[…0…]]], as many as fit (413)
    wide    one object with as many distinct keys as fit (422: unknown fields)
    string  one entry whose loc is a 16 MiB string (422: too long)
    images  one entry whose images are [0,0,…] (422: too large; built only up to the per-entry node budget)
    extdeep 50,000 entries whose images nest 100 deep, [[[…0…]]] (422: each built, refused and dropped in turn)
    valid   50,000 valid entries (max_json_entries) with ~320-byte locs, all stored (200); run it last

Prints one line per kind: statuses, VmHWM before and after, VmRSS after (MB). Standard library only; not run in CI.
"""
import argparse
import http.client
import os
import socket
import subprocess
import tempfile
import threading
import time

LIMIT = 16 * 1024 * 1024


def body(kind):
    if kind == "zeros":
        n = (LIMIT - 1) // 2  # "[" + "0," * (n-1) + "0]"
        return b"[" + b"0," * (n - 1) + b"0]"
    if kind == "deep":
        one = b"[" * 120 + b"0" + b"]" * 120
        n = (LIMIT - 2) // (len(one) + 1)
        return b"[" + b",".join([one] * n) + b"]"
    if kind == "wide":
        parts, size, i = [], 3, 0
        while True:
            p = b'"k%d":0' % i
            if size + len(p) + 1 > LIMIT - 2:
                break
            parts.append(p)
            size += len(p) + 1
            i += 1
        return b"[{" + b",".join(parts) + b"}]"
    if kind == "string":
        head = b'[{"loc":"http://localhost:8080/'
        return head + b"a" * (LIMIT - len(head) - 3) + b'"}]'
    if kind == "images":
        head = b'[{"loc":"http://localhost:8080/","images":['
        n = (LIMIT - len(head) - 3) // 2
        return head + b"0," * (n - 1) + b"0]}]"
    if kind == "extdeep":
        n = 50_000
        head = b'{"loc":"http://localhost:8080/","images":'
        one = head + b"[" * 100 + b"0" + b"]" * 100 + b"}"
        return b"[" + b",".join([one] * n) + b"]"
    if kind == "valid":
        n = 50_000
        pad = (LIMIT - 2) // n - len('{"loc":"http://localhost:8080/00000-"},')
        return b"[" + b",".join(b'{"loc":"http://localhost:8080/%05d-%s"}' % (i, b"a" * pad) for i in range(n)) + b"]"
    raise SystemExit(f"unknown kind {kind}")


def kb(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def put(port, data, statuses, i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("PUT", "/api/v1/urls", body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    statuses[i] = r.status
    c.close()


def run(binary, kind, conc):
    data = body(kind)
    assert len(data) <= LIMIT, len(data)
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = dict(os.environ, DATABASE_URL=f"sqlite://{tmp}/s.db", SITEMAPD_BIND=f"127.0.0.1:{port}",
                   SITEMAPD_PUBLIC_URL="http://localhost:8080", RUST_LOG="warn")
        server = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                    c.request("GET", "/healthz")
                    c.getresponse().read()
                    break
                except OSError:
                    time.sleep(0.05)
            before = kb(server.pid, "VmHWM")
            statuses = [None] * conc
            threads = [threading.Thread(target=put, args=(port, data, statuses, i)) for i in range(conc)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            time.sleep(0.5)
            after, rss = kb(server.pid, "VmHWM"), kb(server.pid, "VmRSS")
        finally:
            server.terminate()
            server.wait()
    print(f"{kind:7} {conc} x {len(data) / 2**20:.1f} MiB  statuses {sorted(set(statuses))}  "
          f"VmHWM {before / 1024:.0f} -> {after / 1024:.0f} MB  VmRSS after {rss / 1024:.0f} MB", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/sitemapd")
    ap.add_argument("--conc", type=int, default=6)
    ap.add_argument("--kinds", default="zeros,deep,wide,string,valid")
    a = ap.parse_args()
    for kind in a.kinds.split(","):
        run(a.bin, kind, a.conc)


if __name__ == "__main__":
    main()
