#!/usr/bin/env python3
"""hostmem.py: what a command takes of the host's memory, seen from outside.

Usage: tests/hostmem.py [--idle SECONDS] -- COMMAND [ARGS...]

Samples /proc/meminfo every 20 ms for --idle seconds before the command (the
baseline is the median of those samples), then while it runs and for 2 s
after, and prints one line of JSON on stderr's last line:
  {"status": N, "baseline_mib": ..., "available_drop_mib": ...,
   "slab_growth_mib": ..., "unreclaimable_growth_mib": ..., "seconds": ...}
available_drop_mib is the worst fall of MemAvailable below the baseline;
slab_growth_mib the worst rise of Slab, unreclaimable_growth_mib of
SUnreclaim, page_tables_growth_mib of PageTables. The command's stdout and stderr pass through. Exits with the
command's status.
"""
import json
import os
import statistics
import subprocess
import sys
import time

FIELDS = ("MemAvailable", "Slab", "SUnreclaim", "PageTables")


def sample():
    values = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, rest = line.split(":", 1)
            if name in FIELDS:
                values[name] = int(rest.split()[0]) * 1024
    return values


def main(argv):
    idle = 1.0
    if argv[:1] == ["--idle"]:
        idle = float(argv[1])
        argv = argv[2:]
    if argv[:1] != ["--"] or len(argv) < 2:
        sys.exit(__doc__)
    samples = []
    end = time.monotonic() + idle
    while time.monotonic() < end:
        samples.append(sample())
        time.sleep(0.02)
    base = {k: statistics.median(s[k] for s in samples) for k in FIELDS}
    worst = dict(base)
    started = time.monotonic()
    child = subprocess.Popen(argv[1:])
    after = None
    trace = open(os.environ["HOSTMEM_TRACE"], "w") if os.environ.get("HOSTMEM_TRACE") else None
    while True:
        s = sample()
        if trace:
            print("%.3f %d %d" % (time.time(), s["MemAvailable"] >> 20, s["Slab"] >> 20),
                  file=trace)
        worst["MemAvailable"] = min(worst["MemAvailable"], s["MemAvailable"])
        worst["Slab"] = max(worst["Slab"], s["Slab"])
        worst["SUnreclaim"] = max(worst["SUnreclaim"], s["SUnreclaim"])
        worst["PageTables"] = max(worst["PageTables"], s["PageTables"])
        if after is None and child.poll() is not None:
            after = time.monotonic() + 2
        if after is not None and time.monotonic() >= after:
            break
        time.sleep(0.02)
    mib = 1 << 20
    report = {
        "status": child.returncode,
        "baseline_mib": round(base["MemAvailable"] / mib),
        "available_drop_mib": round((base["MemAvailable"] - worst["MemAvailable"]) / mib),
        "slab_growth_mib": round((worst["Slab"] - base["Slab"]) / mib),
        "unreclaimable_growth_mib": round((worst["SUnreclaim"] - base["SUnreclaim"]) / mib),
        "page_tables_growth_mib": round((worst["PageTables"] - base["PageTables"]) / mib),
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(report), file=sys.stderr)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
