#!/usr/bin/env python3
"""step-cost's driver for tracked jobs (scripts/step-cost with KIND=tracked or KIND=batch): the
step function called in a loop on a server step-cost started under callgrind, each call ending
its B slots' tracked jobs ('s1t-' with record.lua's ending spec, as the worker sends it) and
reserving the next ones. Unlike a plain job, each call carries other bytes (the records and ids
of the jobs the last call reserved), so this client sends the calls one by one, as a worker with
B slots whose jobs all end together would, instead of redis-benchmark.

    step-cost-tracked.py PORT FUNCTION B CALLS KIND VALGRIND_PID SETTINGS SLOTS QUEUES TIME...

Every job is a `Noop` with a record of resq's own (`resq_id`, state queued, in `<ns>:resq:unended`
as the enqueue leaves it); KIND=batch makes every job a member of one batch. After 50 calls it
zeroes callgrind's counts and Redis's command counts, runs CALLS calls, dumps the counts and
prints `<jobs> <commands> <command list>`: the jobs ended, the commands Redis ran for them (those
the function ran included), and the busiest ones.
"""
import hashlib
import json
import os
import socket
import subprocess
import sys

WARM = 50


class Con:
    """A minimal RESP client."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(600)
        self.sock.connect(path)
        self.f = self.sock.makefile("rb")

    def reply(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:].rstrip(b"\r\n")
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t in (b"+", b":"):
            return rest
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")

    def send(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))

    def call(self, *args):
        self.send(*args)
        return self.reply()

    def pipeline(self, cmds):
        for i in range(0, len(cmds), 1000):
            part = cmds[i:i + 1000]
            for c in part:
                self.send(*c)
            for _ in part:
                self.reply()


def main():
    sock, fn, b, calls, kind, vpid = sys.argv[1:7]
    settings, slots, queues = sys.argv[7:10]
    times = sys.argv[10:]
    b, calls = int(b), int(calls)
    con = Con(sock)
    now = times[0]
    n = (calls + WARM + 2) * b
    bid = "b" * 32
    cmds = []
    if kind == "batch":
        cmds.append(["HSET", f"bench:resq:batch:{bid}", "total", n, "pending", n,
                     "unsucceeded", n, "failed", 0, "queue", "bench", "created_at", now])
    for i in range(n):
        jid = "%032x" % (i + 1)
        rec = ["HSET", f"bench:resq:job:{jid}", "state", "queued", "class", "Noop", "queue",
               "bench", "enqueued_at", now, "a1.moved", now]
        if kind == "batch":
            rec += ["batch", bid]
        cmds.append(rec)
        cmds.append(["ZADD", "bench:resq:unended", "NX", now, jid])
        cmds.append(["RPUSH", "bench:queue:bench",
                     json.dumps({"class": "Noop", "args": [], "resq_id": jid},
                                separators=(",", ":"))])
    con.pipeline(cmds)
    held = [None] * b  # per slot: (record, spec) of the job it runs

    # A library that names the config by digest gets the texts in its first call only.
    digest = os.environ.get("STEP_DIGEST") == "1"
    config = settings + "\n" + slots
    names = [hashlib.sha1(config.encode()).hexdigest(), hashlib.sha1(queues.encode()).hexdigest()]
    sent = []

    def step(ops):
        if not digest:
            texts = [settings, slots, queues]
        elif not sent:
            texts = names + [config, queues]
            sent.append(True)
        else:
            texts = names + ["", ""]
        args = ["FCALL", fn, 1, "bench:stat:processed", *texts, *times]
        for i in range(b):
            args.append(i + 1)
            if ops and held[i]:
                args += ["s1t-", held[i][0], held[i][1]]
            else:
                args += ["-1--", ""]
        rep = con.call(*args)
        ended = 0
        for i in range(b):
            tag, applied, data, extra = rep[4 * i:4 * i + 4]
            ended += int(applied)
            if tag != b"job":
                raise RuntimeError(f"slot {i + 1}: {tag!r} {data!r}")
            jid = json.loads(data)["payload"]["resq_id"]
            word, attempt, key, _batch = extra.decode().split("\t")
            assert word == "r", extra
            spec = f"r\n{jid}\n{attempt}\n{key}\ncompleted\n86400\n\n"
            held[i] = (data, spec)
        problems = rep[4 * b + 1]
        if problems:
            raise RuntimeError(f"problems: {problems!r}")
        return ended

    step(False)
    for _ in range(WARM):
        step(True)
    subprocess.run(["callgrind_control", "-z", vpid], capture_output=True, check=False)
    con.call("CONFIG", "RESETSTAT")
    ended = 0
    for _ in range(calls):
        ended += step(True)
    subprocess.run(["callgrind_control", "-d", vpid], capture_output=True, check=False)
    stats = con.call("INFO", "commandstats").decode()
    per = {}
    for line in stats.splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[8:].split(":", 1)
            c = int(rest.split("calls=")[1].split(",")[0])
            if not name.startswith(("config", "info")):
                per[name] = c
    total = sum(per.values())
    top = " ".join(f"{k}={v / ended:.2f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))
    print(ended, total, top)


if __name__ == "__main__":
    main()
