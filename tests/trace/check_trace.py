#!/usr/bin/env python3
"""Checks a usched trace file (docs/trace.md) or the SVG timeline drawn from it.

  check_trace.py json TRACE --spawns N --ncpus C [--groups P,L,K] [--name NAME]
  check_trace.py svg OUT.svg --ncpus C
  check_trace.py pb TRACE --ncpus C
  check_trace.py count OUT.json --runs N

json: the file parses as JSON; the "usched" object describes C CPUs; every
event has the fields of its kind; the spawn events number N; every run slice
begins after the wake-up or spawn that made it runnable, and each fiber's
first run after its spawn; every flow ends after it starts; on each CPU the
events are in time order and run slices do not overlap; with --groups, the
topology has P packages, L LLCs and K cores and each CPU's track is in its
LLC's process; with --name, some run slice carries that fiber name.
svg: the file is well-formed XML with one lane per CPU, in topology order.
pb: the trace file itself, decoded here from the protobuf wire format (no
usched code involved): a Trace of TracePackets only; every packet names its
sequence; the header sequence describes a track per CPU; on each CPU's
sequence the first packet clears the incremental state and sets an absolute
timestamp, a clock snapshot and the defaults; every track event's type is
slice begin, end or instant.
count: the JSON conversion of a window holds N run slices.
Prints what it checked; exits 1 with the first violation.
"""
import argparse
import json
import sys
import xml.etree.ElementTree as ET

EPS = 0.0015  # microseconds: the file prints ns with 3 decimals of us


def fail(msg):
    print("check_trace: " + msg, file=sys.stderr)
    sys.exit(1)


def check_json(a):
    try:
        with open(a.file) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s does not parse as JSON: %s" % (a.file, e))
    u = d.get("usched")
    if not isinstance(u, dict):
        fail("no \"usched\" object")
    for k in ("version", "policy", "ncpus", "cpus", "dropped"):
        if k not in u:
            fail("\"usched\" lacks %r" % k)
    if u["ncpus"] != a.ncpus or len(u["cpus"]) != a.ncpus:
        fail("ncpus %r, %d cpus listed, expected %d" % (u["ncpus"], len(u["cpus"]), a.ncpus))
    if u["dropped"] != 0:
        fail("%d events dropped in a small workload" % u["dropped"])
    cpus = u["cpus"]
    for i, c in enumerate(cpus):
        for k in ("cpu", "os", "package", "llc", "l2", "core"):
            if not isinstance(c.get(k), int):
                fail("cpu entry %d lacks integer %r: %r" % (i, k, c))
        if c["cpu"] != i:
            fail("cpu entry %d says cpu %d" % (i, c["cpu"]))
    evs = d.get("traceEvents")
    if not isinstance(evs, list) or not evs:
        fail("no traceEvents")

    need = {"X": ("name", "ts", "dur", "pid", "tid", "cat"), "i": ("name", "ts", "pid", "tid", "s"),
            "s": ("id", "ts", "pid", "tid"), "f": ("id", "ts", "pid", "tid", "bp"),
            "C": ("name", "ts", "pid", "args"), "M": ("name", "pid", "args")}
    procs, threads = {}, {}
    spawns, runs, flows_s, flows_f = [], [], {}, []
    per_tid = {}
    for e in evs:
        ph = e.get("ph")
        if ph not in need:
            fail("event with unknown ph: %r" % e)
        for k in need[ph]:
            if k not in e:
                fail("%s event lacks %r: %r" % (ph, k, e))
        if ph == "M":
            if e["pid"] == 0 or e.get("tid") == 0:
                fail("pid or tid 0 (the kernel's idle task in viewers): %r" % e)
            if e["name"] == "process_name":
                procs[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                threads[e["tid"]] = (e["pid"], e["args"]["name"])
            continue
        tid = e.get("tid")
        if ph != "C":
            lst = per_tid.setdefault(tid, [])
            if lst and e["ts"] < lst[-1]["ts"]:
                fail("cpu %s: event at %.3f us after one at %.3f us in the file" % (tid, e["ts"], lst[-1]["ts"]))
            lst.append(e)
        if ph == "i" and e.get("cat") == "spawn":
            spawns.append(e)
        elif ph == "X" and e["cat"] == "run":
            if not isinstance(e.get("args", {}).get("fiber"), int):
                fail("run slice without a fiber id: %r" % e)
            runs.append(e)
        elif ph == "s":
            flows_s[e["id"]] = e
        elif ph == "f":
            flows_f.append(e)

    if len(spawns) != a.spawns:
        fail("%d spawn events, the spawns counters say %d" % (len(spawns), a.spawns))
    spawn_ts = {}
    for e in spawns:
        spawn_ts[e["args"]["fiber"]] = e["ts"]
    if len(spawn_ts) != len(spawns):
        fail("a fiber was spawned twice")

    first_run = {}
    for r in runs:
        ar = r["args"]
        fid = ar["fiber"]
        if "wake_ts" in ar and r["ts"] + EPS < ar["wake_ts"]:
            fail("fiber %d runs at %.3f us before its wake-up at %.3f us" % (fid, r["ts"], ar["wake_ts"]))
        if "wait_ns" in ar and ar["wait_ns"] < 0:
            fail("fiber %d: negative wait" % fid)
        if fid not in first_run:
            first_run[fid] = r
    for fid, r in first_run.items():
        if fid not in spawn_ts:
            fail("fiber %d runs but was never spawned" % fid)
        if r["ts"] + EPS < spawn_ts[fid]:
            fail("fiber %d first runs at %.3f us, before its spawn at %.3f us" % (fid, r["ts"], spawn_ts[fid]))
        if r["args"].get("woken") != "spawn":
            fail("fiber %d: its first run is not marked as woken by its spawn: %r" % (fid, r["args"]))
    for f in flows_f:
        s = flows_s.get(f["id"])
        if s is None:
            fail("flow %r ends without a start" % f["id"])
        if f["ts"] + EPS < s["ts"]:
            fail("flow %r ends at %.3f us before it starts at %.3f us" % (f["id"], f["ts"], s["ts"]))

    # What blocked runs waited for: one of the known kinds, and at least the
    # asked number of each kind (--min-on sleep=8).
    kinds = ("other", "mutex", "cond", "chan", "sem", "wg", "sleep", "join", "io", "offload")
    on = {}
    for r in runs:
        ar = r["args"]
        if ar.get("end") == "block":
            k = ar.get("on")
            if k not in kinds:
                fail("fiber %d blocked on %r, not one of %s" % (ar["fiber"], k, ", ".join(kinds)))
            on[k] = on.get(k, 0) + 1
        elif "on" in ar:
            fail("fiber %d: 'on' in a run that did not block: %r" % (ar["fiber"], ar))
    for spec in a.min_on:
        k, _, n = spec.partition("=")
        if on.get(k, 0) < int(n):
            fail("%d runs ended blocked on %s, expected at least %s (%r)" % (on.get(k, 0), k, n, on))

    nslices = 0
    for tid, lst in per_tid.items():
        end = None
        for e in lst:
            if e["ph"] != "X" or e["cat"] != "run":
                continue
            nslices += 1
            if end is not None and e["ts"] + EPS < end:
                fail("cpu %s: run slice at %.3f us overlaps the previous one ending at %.3f us" % (tid, e["ts"], end))
            end = e["ts"] + e["dur"]
    for r in runs:
        if r["tid"] not in threads:
            fail("run slice on cpu %r, which has no thread_name" % r["tid"])

    for c in cpus:
        pid, name = threads.get(c["cpu"] + 1, (None, None))
        if pid != c["llc"] + 1:
            fail("cpu %d is in process %r, expected its LLC %d + 1" % (c["cpu"], pid, c["llc"]))
        want = "package %d, LLC %d" % (c["package"], c["llc"])
        if procs.get(pid) != want:
            fail("process %r is named %r, expected %r" % (pid, procs.get(pid), want))
    if a.groups:
        p, l, k = (int(x) for x in a.groups.split(","))
        got = (len({c["package"] for c in cpus}), len({c["llc"] for c in cpus}), len({c["core"] for c in cpus}))
        if got != (p, l, k):
            fail("topology groups (packages, LLCs, cores) %r, expected %r" % (got, (p, l, k)))
    if a.name and not any(r["name"] == a.name for r in runs):
        fail("no run slice is named %r" % a.name)
    print("check_trace: %s: %d events, %d spawns, %d run slices, %d flows, %d CPUs: ok"
          % (a.file, len(evs), len(spawns), nslices, len(flows_f), len(cpus)))


def varint(b, i):
    r = sh = 0
    while True:
        if i >= len(b) or sh > 63:
            raise ValueError("truncated varint at %d" % i)
        c = b[i]
        i += 1
        r |= (c & 0x7F) << sh
        sh += 7
        if not c & 0x80:
            return r, i


def fields(b):
    """(number, wire type, value) of each field of message b."""
    i, out = 0, []
    while i < len(b):
        tag, i = varint(b, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            if i + n > len(b):
                raise ValueError("field %d: length %d past the end" % (num, n))
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        out.append((num, wt, v))
    return out


def check_pb(a):
    with open(a.file, "rb") as f:
        data = f.read()
    try:
        top = fields(data)
    except ValueError as e:
        fail("%s: not protobuf: %s" % (a.file, e))
    header, threads, seen, events = 0xFFFF, set(), {}, 0
    for num, wt, pk in top:
        if num != 1 or wt != 2:
            fail("a top-level field %d (a Trace holds packets, field 1, only)" % num)
        try:
            pf = fields(pk)
        except ValueError as e:
            fail("a packet is malformed: %s" % e)
        d = {}
        for n, w, v in pf:
            d.setdefault(n, []).append(v)
        if 10 not in d:
            fail("a packet without trusted_packet_sequence_id: %r" % pf)
        seq = d[10][0]
        if seq == header:
            for td in d.get(60, []):
                t = dict((n, v) for n, w, v in fields(td))
                if 4 in t:
                    threads.add(dict((n, v) for n, w, v in fields(t[4]))[2])
            continue
        if not 1 <= seq <= a.ncpus + 1:
            fail("sequence %d on a trace of %d CPUs" % (seq, a.ncpus))
        if seq not in seen:
            seen[seq] = True
            if d.get(13, [0])[0] & 1 == 0 or 6 not in d or 59 not in d or d.get(58, [0])[0] != 3 or 8 not in d:
                fail("sequence %d: its first packet does not clear the state with an absolute time, clock "
                     "snapshot and defaults: %r" % (seq, sorted(d)))
        for te in d.get(11, []):
            t = dict((n, v) for n, w, v in fields(te))
            if t.get(9) not in (1, 2, 3):
                fail("a track event of type %r" % t.get(9))
            events += 1
    if threads != set(range(1, a.ncpus + 2)):
        fail("thread tracks %r, expected tids 1..%d (the CPUs and the outside threads)" % (sorted(threads), a.ncpus + 1))
    print("check_trace: %s: %d packets, %d track events, %d sequences, %.1f bytes per event: ok"
          % (a.file, len(top), events, len(seen), len(data) / max(events, 1)))


def check_count(a):
    with open(a.file) as f:
        d = json.load(f)
    runs = sum(1 for e in d["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "run")
    if runs != a.runs:
        fail("%s: %d run slices, the summary of the same window says %d" % (a.file, runs, a.runs))
    print("check_trace: %s: %d run slices: ok" % (a.file, runs))


def check_svg(a):
    try:
        root = ET.parse(a.file).getroot()
    except (OSError, ET.ParseError) as e:
        fail("%s is not well-formed XML: %s" % (a.file, e))
    if not root.tag.endswith("svg"):
        fail("root element is %r, not svg" % root.tag)
    lanes = [g for g in root.iter() if g.tag.endswith("g") and g.get("class") == "lane"]
    cpus = sorted(int(g.get("data-cpu")) for g in lanes)
    if cpus != list(range(a.ncpus)):
        fail("lanes for CPUs %r, expected one for each of %d CPUs" % (cpus, a.ncpus))
    ys = [float(next(r for r in g if r.tag.endswith("rect")).get("y")) for g in lanes]
    if ys != sorted(ys):
        fail("lanes are not drawn top to bottom in their listed order")
    runs = [r for g in root.iter() if g.get("id") == "runs" for r in g]
    if not runs:
        fail("no runs drawn")
    print("check_trace: %s: %d lanes, %d run rectangles: ok" % (a.file, len(lanes), len(runs)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=("json", "svg", "pb", "count"))
    p.add_argument("file")
    p.add_argument("--ncpus", type=int)
    p.add_argument("--runs", type=int)
    p.add_argument("--spawns", type=int)
    p.add_argument("--groups")
    p.add_argument("--name")
    p.add_argument("--min-on", action="append", default=[], metavar="KIND=N")
    a = p.parse_args()
    if a.kind == "json":
        if a.spawns is None:
            fail("json needs --spawns")
        check_json(a)
    elif a.kind == "pb":
        check_pb(a)
    elif a.kind == "count":
        check_count(a)
    else:
        check_svg(a)


if __name__ == "__main__":
    main()
