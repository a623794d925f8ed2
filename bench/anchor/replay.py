import socket, sys, time, subprocess, re, os, json, urllib.request
n = int(sys.argv[1])
p = subprocess.Popen(["node", "server.mjs"], cwd=os.path.dirname(os.path.abspath(__file__)), stdout=subprocess.PIPE, env=dict(os.environ, PORT="0"), text=True)
for line in p.stdout:
    m = re.search(r"listening on http://([0-9.:]+)", line)
    if m: addr = m.group(1); break
host, port = addr.split(":"); port = int(port)
for b in range(n // 1000):
    body = "".join(json.dumps({"type": "text.delta", "payload": {"delta": "token "}}) + "\n" for _ in range(1000)).encode()
    req = urllib.request.Request(f"http://{addr}/v1/sessions/replay/events", data=body, headers={"content-type": "application/x-ndjson"})
    urllib.request.urlopen(req).read()
t0 = time.time()
s = socket.create_connection((host, port)); s.sendall(b"GET /v1/sessions/replay/stream HTTP/1.1\r\nHost: x\r\n\r\n")
count = 0; tail = b""
while count < n:
    d = s.recv(1 << 20)
    if not d: break
    buf = tail + d
    count += buf.count(b'"text-delta"') - tail.count(b'"text-delta"')
    tail = buf[-32:]
dt = time.time() - t0
print(f"anchor replay of {n} chunks to one new subscriber: {count/dt:.0f} chunks/s ({dt:.2f} s, got {count})")
p.kill()
