# Counts the locked (atomic read-modify-write) instructions one hand-off
# executes: gdb single-steps the worker thread of bench_handoff from one call
# of handoff_mark() to the next and counts every instruction with a lock
# prefix, every xchg (always locked with a memory operand) and every mfence
# (a full fence costs about as much), naming the function each was in. x86-64 only (on aarch64 look for ldaxr/stlxr, cas,
# swp and ldadd instead).
#   gdb -q -batch -x bench/micro/count_locked.py --args build/bench_handoff pingpong 50
# Skips the first WARM marks (stacks, caches and timers warm up), then
# reports SAMPLES (COUNT_SAMPLES, default 4) consecutive ones and their mean
# (paths with a periodic slow step, such as the next slot's demotion every
# next_cap runs, need a window longer than that period).
# With COUNT_BY_FUNCTION=1 in the environment it also prints how many
# instructions each function executed; with COUNT_BY_LINE=1, each source line
# (file:line, the 40 busiest; COUNT_LINES=n for another number).
import collections
import os

import gdb

WARM = 40
SAMPLES = int(os.environ.get("COUNT_SAMPLES", "4"))
# A hand-off runs a few thousand instructions; far more means the next mark
# never comes (the run ended: ROUNDS must exceed WARM + SAMPLES + 1, or the
# worker parked) and single-stepping would go on forever.
# COUNT_STEP_LIMIT raises it for long marks (bench_handoff spawn1000: about
# 400,000 instructions a batch).
STEP_LIMIT = int(os.environ.get("COUNT_STEP_LIMIT", "200000"))

gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("break handoff_mark")
gdb.execute("run")  # (run with arguments would replace --args)
for _ in range(WARM):
    gdb.execute("continue")
gdb.execute("set scheduler-locking step")
mark = int(gdb.parse_and_eval("(long)&handoff_mark"))
sum_total = sum_locked = 0
for sample in range(SAMPLES):
    gdb.execute("stepi", to_string=True)  # leave the mark
    total, locked, where, funcs = 0, 0, collections.Counter(), collections.Counter()
    lines = collections.Counter()
    while True:
        frame = gdb.selected_frame()
        pc = frame.pc()
        if pc == mark:
            break
        insn = frame.architecture().disassemble(pc)[0]["asm"]
        op = insn.split()
        if op and (op[0] == "lock" or (op[0].startswith("xchg") and "(" in insn) or op[0] == "mfence"):
            locked += 1
            where[(frame.name() or "?") + ": " + insn.split("  ")[0].strip()] += 1
        total += 1
        funcs[frame.name() or "?"] += 1
        if os.environ.get("COUNT_BY_LINE"):
            sal = gdb.find_pc_line(pc)
            name = os.path.basename(sal.symtab.filename) if sal.symtab else "?"
            lines["%s:%d" % (name, sal.line)] += 1
        if total > STEP_LIMIT:
            gdb.execute("kill")
            raise gdb.GdbError(
                "count_locked: no mark after %d instructions of hand-off %d: the run has fewer than"
                " %d rounds (WARM + SAMPLES + 1), or the worker parked" % (STEP_LIMIT, sample, WARM + SAMPLES + 1))
        gdb.execute("stepi", to_string=True)
    print("hand-off %d: %d instructions, %d locked" % (sample, total, locked))
    sum_total += total
    sum_locked += locked
    for k, n in sorted(where.items()):
        print("  %2d x %s" % (n, k))
    if os.environ.get("COUNT_BY_FUNCTION"):
        for k, n in funcs.most_common():
            print("  %5d in %s" % (n, k))
    for k, n in lines.most_common(int(os.environ.get("COUNT_LINES", "40"))):
        print("  %5d at %s" % (n, k))
print("mean of %d: %.1f instructions, %.2f locked" % (SAMPLES, sum_total / SAMPLES, sum_locked / SAMPLES))
gdb.execute("kill")
