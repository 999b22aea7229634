# Three pure-Python functions doing identical work, called 1:3:6 times a
# round (10/30/60 % of the time), from main() from <module>; prints the
# truth for tests (tests/integration/qemu-python313.sh).
import os, sys, time

def f10(n):
    s = 0
    for i in range(n):
        s += (i * i) % 7
    return s

def f30(n):
    s = 0
    for i in range(n):
        s += (i * i) % 7
    return s

def f60(n):
    s = 0
    for i in range(n):
        s += (i * i) % 7
    return s

def main(end):
    # the time each function took, measured here too: under TCG identical
    # work need not take identical time
    clock, spent, rounds = time.perf_counter, [0.0, 0.0, 0.0], 0
    while time.time() < end:
        t = clock()
        f10(20000)
        u = clock()
        for _ in range(3):
            f30(20000)
        v = clock()
        for _ in range(6):
            f60(20000)
        w = clock()
        spent[0] += u - t
        spent[1] += v - u
        spent[2] += w - v
        rounds += 1
    return rounds, spent

print("OPVM-TRUTH py313split pid=%d version=%s" % (os.getpid(), sys.version.split()[0]),
      flush=True)
# two seconds asleep first: without opvm.ko the host learns of a new process
# from its next walk of the guest's process list, which this leaves out
# of the measurement
time.sleep(2)
rounds, spent = main(time.time() + float(sys.argv[1]))
print("OPVM-TRUTH py313split rounds=%d time=%s" % (rounds, ",".join(
      "%s:%.6f" % (f, s) for f, s in zip(("f10", "f30", "f60"), spent))), flush=True)
