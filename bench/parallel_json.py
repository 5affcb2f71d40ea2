#!/usr/bin/env python3
"""Peak memory of a sitemapd process while 24 clients PUT a 14 MiB JSON array (50,000 entries) each, at once.

    bench/parallel_json.py PORT PID [--retry]

PORT is the server's (on 127.0.0.1, no token, SITEMAPD_PUBLIC_URL=http://localhost:8080), PID its process (fresh,
for a meaningful peak). Prints the answers by status and error code, and the process's resident size before, at
its peak (VmHWM) and after. With --retry each client sends again 0.5 s after a 503 until it is stored. To compare
with no budget, start the server with SITEMAPD_BODY_MEMORY_BYTES=68719476736. Standard library only.
"""
import http.client, json, sys, threading, time

port, pid = int(sys.argv[1]), int(sys.argv[2])
retry = "--retry" in sys.argv

def kb(key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])

entries = [{"loc": f"http://localhost:8080/products/category-{i % 97}/item-{i:06d}-" + "x" * 150,
            "lastmod": "2024-05-01T10:00:00Z", "changefreq": "daily", "priority": 0.5} for i in range(50000)]
body = json.dumps(entries).encode()
print(f"body: {len(body)} bytes ({len(body) / 2**20:.1f} MiB), 50,000 entries")
statuses, lock = [], threading.Lock()

def client(n):
    while True:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            c.request("PUT", "/api/v1/urls", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse(); text = r.read(); c.close()
        except OSError as e:
            with lock:
                statuses.append(type(e).__name__)
            return
        code = json.loads(text).get("error", "") if r.status != 200 else ""
        with lock:
            statuses.append(f"{r.status} {code}".strip())
        if r.status == 503 and retry:
            time.sleep(0.5)
            continue
        return

before = kb("VmRSS")
t0 = time.time()
threads = [threading.Thread(target=client, args=(n,)) for n in range(24)]
for t in threads: t.start()
for t in threads: t.join()
print(f"elapsed {time.time() - t0:.1f} s; statuses: " + ", ".join(f"{s}: {statuses.count(s)}" for s in sorted(set(statuses))))
print(f"RSS before {before / 1024:.0f} MB, peak (VmHWM) {kb('VmHWM') / 1024:.0f} MB, after {kb('VmRSS') / 1024:.0f} MB")
