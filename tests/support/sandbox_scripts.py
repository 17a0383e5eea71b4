"""Python scripts the sandbox tests run confined (each prints what it could do)."""

WRITE = """
import sys
for path in sys.argv[1:]:
    try:
        with open(path, "w") as f:
            f.write("x")
    except OSError as error:
        print(path, "denied", type(error).__name__)
    else:
        print(path, "written")
"""

READ = """
import os, sys
for path in sys.argv[1:3]:
    try:
        with open(path) as f:
            print(path, "read", f.read().strip())
    except OSError as error:
        print(path, "denied", type(error).__name__)
"""

CONNECT = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
except OSError as error:
    print("blocked", type(error).__name__)
else:
    print("connected")
"""

FORK_BOMB = """
import os
r, w = os.pipe()
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            os.close(w)
            os.read(r, 1)  # every child lives until the bomb's parent is gone
            os._exit(0)
        n += 1
except OSError as error:
    print(n, error.errno, flush=True)
else:
    print(n, 0, flush=True)
"""

# The run's main process forks a child that forks a grandchild; the grandchild leaves the
# session (setsid) and is orphaned, so neither the process group nor the parent chain reach it.
ESCAPEE = """
import os, signal, sys
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        sys.stdout.write("ready\\n")
        sys.stdout.flush()
        while True:
            signal.pause()
    os._exit(0)
os.wait()
while True:
    signal.pause()
"""

ENVIRONMENT = """
import json, os, sys
print(json.dumps({"env": dict(os.environ), "stdin": sys.stdin.read()}))
"""

RLIMITS = """
import resource
names = ["RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CORE"]
print(*[resource.getrlimit(getattr(resource, name))[0] for name in names])
try:
    with open("big.bin", "wb") as f:
        f.write(b"x" * (2 * 1024 * 1024))
except OSError as error:
    print("write failed", error.errno)
else:
    print("wrote")
"""

LIST = """
for path in sys.argv[3:]:
    try:
        print("list", path, sorted(os.listdir(path)))
    except OSError as error:
        print("list", path, "denied", type(error).__name__)
"""

# Reaches for the host process: its environment (API keys live there) and a signal to it.
HOST = """
import os, sys
host = int(sys.argv[1])
try:
    with open(f"/proc/{host}/environ", "rb") as f:
        print("environ read", len(f.read()))
except OSError as error:
    print("environ denied", type(error).__name__)
try:
    os.kill(host, 0)
except OSError as error:
    print("signal denied", type(error).__name__)
else:
    print("signal delivered")
"""

# Leaves a child behind that keeps the run's stdout open, then exits at once.
LEAVER = """
import subprocess, sys
subprocess.Popen(["sleep", sys.argv[1]])
print("left", flush=True)
"""
