#!/usr/bin/env python3
# bench.py: times a cold `sage-sandbox run` against the podman command of the
# LM Studio plugin it replaces and against a floor, interleaved on the same
# image and code, and measures sage-sandbox's own peak RSS and CPU time.
#
#   (a) plugin: the replaced plugin's exact `podman run` (its flags and
#       defaults, from shared/seeds), the code on stdin, `sage -q` inside;
#   (b) sage-sandbox: `sage-sandbox run`, everything it does included (its
#       rootless check, the launcher, the container's removal);
#   (c) floor: a bare read-only, no-network, non-root `podman run` of
#       python3 that imports sage.all_cmdline, runs the same code and leaves
#       with os._exit(0): what any podman-based sandbox pays at least;
#   (d) with --baseline PATH: another build of sage-sandbox (an earlier
#       commit's), interleaved with the rest, so that a change is measured
#       as a ratio in one run.
#
# Run it as the account with rootless podman and the image (after ./setup.sh:
# `sudo -iu sage-sandbox`, then `cd sage-sandbox && bench/bench.py`).
# Machines are noisy: compare the ratios within one run, not across runs.
# Only python3 and podman are needed.
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKLOADS = {
    "one-line": "print(factor(2^64+1))\n",
    "seed": open(os.path.join(ROOT, "examples", "seed.sage")).read(),
    # About two seconds of Sage's own work on this machine kind.
    "2-second": "print(len(str(factorial(22*10^5))))\n",
}


def plugin_command(podman, image):
    """The replaced plugin's `podman run`, flag for flag, at its defaults."""
    name = "sage-sandbox-bench-plugin-" + uuid.uuid4().hex[:12]
    script = "; ".join([
        "set -euo pipefail", "umask 077", "mkdir -p /tmp/sage-home /tmp/dot-sage",
        "chmod 700 /tmp/sage-home /tmp/dot-sage", "cat > /tmp/user_code.sage",
        "/usr/bin/sage -q /tmp/user_code.sage"])
    return [podman, "run", "--rm", "-i", "--name", name, "--pull=never", "--network=none",
            "--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,size=256m,mode=1777",
            "--workdir", "/tmp", "--env", "HOME=/tmp/sage-home", "--env", "DOT_SAGE=/tmp/dot-sage",
            "--env", "SAGE_NUM_THREADS=1", "--env", "OPENBLAS_NUM_THREADS=1",
            "--env", "OMP_NUM_THREADS=1", "--env", "MKL_NUM_THREADS=1",
            "--env", "PYTHONNOUSERSITE=1", "--user", "sage", "--cap-drop=all",
            "--security-opt", "no-new-privileges", "--pids-limit", "96", "--memory", "1g",
            "--cpus", "1", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=96:96",
            "--ulimit", "fsize=134217728:134217728",
            "--label", "lmstudio.tool=sage_podman_sandbox",
            "--label", "lmstudio.default_timeout_seconds=60",
            "--entrypoint", "/bin/bash", "--", image, "-lc", script]


def image_of(binary):
    """The image sage-sandbox runs with no --image: its default, or what the
    environment or the settings file name (status says which)."""
    done = subprocess.run([binary, "status", "--json"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    return json.loads(done.stdout)["image"]


def floor_command(podman, image):
    code = ("import os, sys\n"
            "from sage.all_cmdline import *\n"
            "from sage.repl.preparse import preparse_file\n"
            "exec(preparse_file(sys.stdin.read()))\n"
            "sys.stdout.flush()\n"
            "os._exit(0)\n")
    return [podman, "run", "--rm", "-i", "--pull=never", "--network=none", "--read-only",
            "--tmpfs", "/tmp:rw,size=256m", "--env", "HOME=/tmp", "--env", "DOT_SAGE=/tmp",
            "--user", "sage", "--entrypoint", "sage", "--", image, "-python", "-c", code]


def own_usage(pid):
    """CPU seconds of pid itself (not of its children), read while it is a
    zombie: schedstat counts nanoseconds (stat's 10 ms ticks round a
    sage-sandbox run to 0); sage-sandbox has one thread."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(argv, stdin_text):
    """Runs argv with stdin_text; returns (seconds, stdout, status, stderr)."""
    start = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    out, err = p.communicate(stdin_text.encode())
    return time.monotonic() - start, out.decode(errors="replace"), p.returncode, err


def timed_self(argv, stdin_text):
    """Like timed(), but reads the CPU time of sage-sandbox itself (not of
    podman, its child) from /proc while it is a zombie, before reaping."""
    start = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def watch():
        while not done.is_set():
            try:
                with open("/proc/%d/status" % p.pid) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak[0] = max(peak[0], int(line.split()[1]))
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
            done.wait(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    p.stdin.write(stdin_text.encode())
    p.stdin.close()
    out_chunks, err_chunks = [], []
    readers = [threading.Thread(target=lambda: out_chunks.append(p.stdout.read())),
               threading.Thread(target=lambda: err_chunks.append(p.stderr.read()))]
    for r in readers:
        r.start()
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    elapsed = time.monotonic() - start
    cpu = own_usage(p.pid)
    done.set()
    watcher.join()
    p.wait()
    for r in readers:
        r.join()
    return elapsed, b"".join(out_chunks).decode(errors="replace"), p.returncode, peak[0], cpu, \
        b"".join(err_chunks)


def row(name, values):
    ms = sorted(v * 1000 for v in values)
    return "| %-12s | %6.0f | %6.0f | %6.0f |" % (name, statistics.median(ms), ms[0], ms[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--image", help="default: the one sage-sandbox runs")
    parser.add_argument("--podman", default="podman")
    parser.add_argument("--sage-sandbox", default=os.path.join(ROOT, "sage-sandbox"))
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated: " + ", ".join(WORKLOADS))
    parser.add_argument("--baseline", metavar="PATH",
                        help="another sage-sandbox build to time interleaved, as (d)")
    parser.add_argument("--concurrent", type=int, default=8,
                        help="seed runs started at once at the end (0: none)")
    args = parser.parse_args()
    podman = shutil.which(args.podman) or sys.exit("bench: podman not found")
    args.image = args.image or image_of(args.sage_sandbox)
    ss = [args.sage_sandbox, "run", "--image", args.image, "--podman", podman]
    variants = {
        "plugin (a)": lambda: plugin_command(podman, args.image),
        "sage-sandbox": lambda: ss,
        "floor (c)": lambda: floor_command(podman, args.image),
    }
    if args.baseline:
        variants["baseline (d)"] = lambda: [args.baseline] + ss[1:]
    print("# sage-sandbox bench: %d interleaved rounds, image %s, %s" %
          (args.runs, args.image, time.strftime("%Y-%m-%d %H:%M")))
    # One warm-up of each, so the page cache holds the image for all three.
    for build in variants.values():
        timed(build(), WORKLOADS["one-line"])
    self_peak, self_cpu, self_wall = [], [], []
    for workload in args.workloads.split(","):
        code = WORKLOADS[workload]
        times = {v: [] for v in variants}
        outputs = {v: set() for v in variants}
        order = list(variants)
        for i in range(args.runs):
            first = i % len(order)
            for v in order[first:] + order[:first]:  # rotate who goes first
                if v == "sage-sandbox":
                    elapsed, out, status, peak, cpu, err = timed_self(variants[v](), code)
                    self_peak.append(peak)
                    self_cpu.append(cpu)
                    self_wall.append(elapsed)
                else:
                    elapsed, out, status, err = timed(variants[v](), code)
                if status != 0:
                    sys.exit("bench: %s failed on %s (status %d): %s" %
                             (v, workload, status, err.decode(errors="replace")[-500:]))
                times[v].append(elapsed)
                outputs[v].add(out)
        if len({frozenset(o) for o in outputs.values()}) != 1:
            print("# warning: the variants printed different output for %s: %r" % (workload, outputs))
        print("\n## %s (ms)\n" % workload)
        print("| variant      | median |    min |    max |")
        print("|--------------|--------|--------|--------|")
        for v in variants:
            print(row(v, times[v]))
        med = {v: statistics.median(times[v]) for v in variants}
        print("\nsage-sandbox / plugin (a): %.2f    sage-sandbox / floor (c): %.2f" %
              (med["sage-sandbox"] / med["plugin (a)"], med["sage-sandbox"] / med["floor (c)"]))
        if args.baseline:
            print("sage-sandbox / baseline (d): %.2f    baseline (d) / floor (c): %.2f" %
                  (med["sage-sandbox"] / med["baseline (d)"], med["baseline (d)"] / med["floor (c)"]))
    print("\n## sage-sandbox's own process (all runs above)\n")
    cpu_share = [c / w for c, w in zip(self_cpu, self_wall)]
    print("peak RSS: max %d KiB, median %d KiB" % (max(self_peak), statistics.median(self_peak)))
    print("CPU time: median %.1f ms, max %.1f ms; share of wall time: median %.2f%%, max %.2f%%" %
          (statistics.median(self_cpu) * 1000, max(self_cpu) * 1000,
           statistics.median(cpu_share) * 100, max(cpu_share) * 100))
    if args.concurrent:
        procs = []
        start = time.monotonic()
        for _ in range(args.concurrent):
            procs.append(subprocess.Popen(ss, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE))
        results = [p.communicate(WORKLOADS["seed"].encode()) + (p.returncode,) for p in procs]
        wall = time.monotonic() - start
        expected = timed(ss, WORKLOADS["seed"])[1]
        good = sum(1 for out, err, status in results if status == 0 and out.decode() == expected)
        print("\n## %d concurrent seed runs\n\n%d of %d succeeded with the right output, "
              "all done in %.0f ms" % (args.concurrent, good, args.concurrent, wall * 1000))


if __name__ == "__main__":
    main()
