"""Reads the harness plugin's records in the grading container, as root, outside the tests.

Started in the background by the grader's staging (``python3 -I -S collector.py DIR FIFO``), before
any test runs. ``DIR`` (root's, 0700) holds ``key`` (the HMAC key the plugin was given) and
``end`` (a token only root knows). It opens the FIFO the plugin writes to for reading and
writing (so it never sees an end of file while no test process has it open), keeps every line
whose HMAC verifies in ``DIR/records.jsonl`` and counts those that do not. It stops at the line
``END <token>``, which the grader writes after every process of the tests' user has ended:
everything written before it was read by then.

Standard library only, Python 3.6 and later.
"""

import hashlib
import hmac
import json
import os
import sys

FIFO = "/opt/repogym-grade/rec.fifo"
MAX_BYTES = 64 << 20  # what a run may send, at most; more is dropped and counted
MAX_LINE = 1 << 20


def main(folder, fifo=FIFO):
    with open(os.path.join(folder, "key"), "rb") as f:
        key = f.read()
    with open(os.path.join(folder, "end"), "rb") as f:
        end = b"END " + f.read().strip()
    fd = os.open(fifo, os.O_RDWR)
    with open(os.path.join(folder, "ready"), "w"):
        pass
    out = open(os.path.join(folder, "records.jsonl"), "w", buffering=1)
    bad = total = 0
    pending = b""
    while True:
        chunk = os.read(fd, 65536)
        total += len(chunk)
        pending += chunk
        lines = pending.split(b"\n")
        pending = lines.pop()
        if len(pending) > MAX_LINE:
            pending, bad = b"", bad + 1
        for line in lines:
            if line == end:
                out.write(json.dumps({"end": True, "bad": bad, "bytes": total}) + "\n")
                out.close()
                return
            mac, _, body = line.partition(b" ")
            good = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
            if line and total <= MAX_BYTES and hmac.compare_digest(mac, good):
                out.write(body.decode("utf-8", "replace") + "\n")
            elif line:
                bad += 1


if __name__ == "__main__":
    main(*sys.argv[1:3])
