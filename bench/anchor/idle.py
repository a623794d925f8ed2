import socket, sys, time, subprocess, re, os
n = int(sys.argv[1])
p = subprocess.Popen(["node", "server.mjs"], cwd=os.path.dirname(os.path.abspath(__file__)), stdout=subprocess.PIPE, env=dict(os.environ, PORT="0"), text=True)
addr = None
for line in p.stdout:
    m = re.search(r"listening on http://([0-9.:]+)", line)
    if m: addr = m.group(1); break
host, port = addr.split(":"); port = int(port)
def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])*1024
socks = []
def open_one(i):
    s = socket.create_connection((host, port)); s.sendall(f"GET /v1/sessions/idle-{i%10}/stream HTTP/1.1\r\nHost: x\r\n\r\n".encode()); return s
for i in range(50):
    s = open_one(i); s.recv(65536); socks.append(s)
time.sleep(1)
r0 = rss()
for i in range(n):
    socks.append(open_one(i))
    if i % 200 == 199:
        for s in socks[-200:]: s.settimeout(30); s.recv(65536)
time.sleep(2)
r1 = rss()
print(f"anchor {n} idle SSE: {(r1-r0)/n:.0f} bytes/conn (rss {r0/1e6:.1f}MB -> {r1/1e6:.1f}MB)")
p.kill()
