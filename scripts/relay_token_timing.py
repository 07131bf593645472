#!/usr/bin/env python3
"""Timing of the shuffle relay's device-token check, over loopback.

Usage: relay_token_timing.py PORT TOKEN COLLECTION_ID [ROUNDS]

Against `harmony shuffle --device-token TOKEN` listening on 127.0.0.1:PORT: ROUNDS (default
1500) rounds of one `POST /v1/collections/ID/reports` each with a wrong token that shares all
but its last character with TOKEN, a random one of the same length, a 1-character one, and no
token, in a random order per round over one kept-alive connection. Prints each class's median,
p10 and p90 in microseconds and the largest difference between the wrong-token medians. A
comparison that stops at the first differing byte would make the prefix-match class slower than
the others by the time of the bytes compared; the relay compares SHA-256 digests in constant
time, so the medians should differ by noise only.
"""
import http.client
import json
import random
import sys
import time

port, token, cid = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 1500
last = "x" if token[-1] != "x" else "y"
cands = {
    "prefix match (all but the last char)": token[:-1] + last,
    "random, same length": "".join(random.choice("abcdef0123456789") for _ in token),
    "1 char": "a",
    "no token": None,
}
body = json.dumps({"collection": cid, "config_version": 1, "reports": [{"id": "t1", "report": "0102"}]})
conn = http.client.HTTPConnection("127.0.0.1", port)
times = {k: [] for k in cands}
for _ in range(rounds):
    for name, tok in random.sample(list(cands.items()), len(cands)):
        headers = {"Content-Type": "application/json"}
        if tok is not None:
            headers["Authorization"] = "Bearer " + tok
        t = time.perf_counter_ns()
        conn.request("POST", f"/v1/collections/{cid}/reports", body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        times[name].append(time.perf_counter_ns() - t)
        assert r.status == 401, (name, r.status)
medians = {}
for name, v in times.items():
    v.sort()
    medians[name] = v[len(v) // 2] / 1e3
    print("%-38s median %7.1f us  p10 %7.1f  p90 %7.1f" % (name, medians[name], v[len(v) // 10] / 1e3, v[9 * len(v) // 10] / 1e3))
wrong = [medians[k] for k in cands if cands[k] is not None]
print("largest difference between the wrong-token medians: %.1f us" % (max(wrong) - min(wrong)))
