"""N single-event NDJSON POSTs over C keep-alive connections, one session
each: `post.py PORT N C TAG`. With GZIP=1 every request says
`Accept-Encoding: gzip, deflate`, as Python's requests and httpx do."""

import http.client
import os
import sys
import threading

port, n, c = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
tag = sys.argv[4] if len(sys.argv) > 4 else "x"
headers = {"content-type": "application/x-ndjson"}
if os.environ.get("GZIP"):
    headers["accept-encoding"] = "gzip, deflate"


def run(k):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    path = f"/v1/sessions/cg-{tag}-{k}/events"
    for b in range(n // c):
        body = '{"id":"%d-%d","type":"text.delta","runId":"r","payload":{"delta":"token "}}\n' % (k, b)
        conn.request("POST", path, body, headers)
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status


threads = [threading.Thread(target=run, args=(k,)) for k in range(c)]
for t in threads:
    t.start()
for t in threads:
    t.join()
