"""Checks the introspection tests share (introspect-guest.sh,
kernels-introspect.sh, introspect-bymap-check.py): the kernel symbols
introspection decoded against the kernel's own map, and the build-ids a
session stored for a binary."""
import glob
import os
import re
import struct
import subprocess


def kallsyms_vs_map(decoded, system_map, slide):
    """(compared, wrong): each text symbol of vmlinux in the decoded
    kallsyms file (not the modules' lines) against the link-time map plus
    the KASLR slide."""
    truth = {}
    for line in open(system_map):
        a, t, n = line.split()[:3]
        if t in "tTwW":
            truth.setdefault(n, set()).add(int(a, 16) + slide)
    got = wrong = 0
    for line in open(decoded):
        if "\t[" in line:
            continue        # a module's: not in vmlinux's map
        a, t, n = line.split()[:3]
        if n in truth:
            got += 1
            wrong += int(a, 16) not in truth[n]
    return got, wrong


def build_id(path):
    """The GNU build-id of the ELF file at path, or None."""
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True,
                         env=dict(os.environ, LC_ALL="C")).stdout
    g = re.search(r"Build ID: ([0-9a-f]+)", out)
    return g.group(1) if g else None


def stored_build_ids(samples_dir, image):
    """The build-ids in the sample files of image (any process)."""
    ids = set()
    d = image.replace("/", "^")
    for f in glob.glob(os.path.join(glob.escape(samples_dir), "**", d, "*"), recursive=True):
        h = open(f, "rb").read(256)
        if h[:8] == b"OPVMSMP1":
            n = struct.unpack_from("<I", h, 60)[0]
            ids.add(h[128:128 + n].hex())
    return ids
