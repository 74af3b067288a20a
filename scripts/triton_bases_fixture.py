"""Regenerate tests/fixtures/triton_bases.json: the linear-layout bases Triton builds for every
MFMA/WMMA encoding (accumulator and both dot operands) that matches an ``mfma_specs``
instruction, plus a few shared encodings.

    PYTHONPATH=. python scripts/triton_bases_fixture.py [--out tests/fixtures/triton_bases.json]

Needs Triton (3.9.0 made the committed file).  The tests compare the fixture with our lane maps
when Triton is absent and compare Triton's live output with the fixture when it is present, so
the fixture cannot drift silently.  Each instruction Triton cannot build (or that has no Triton
encoding) is listed under ``"skipped"`` with Triton's reason.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any, Dict, List

# (arch, Triton MFMA/WMMA version, layout class): the targets the issue asks for.
TARGETS = (("gfx942", 3, "mfma"), ("gfx950", 4, "mfma"), ("gfx1100", 1, "wmma"),
           ("gfx1200", 2, "wmma"))
SHARED = (  # (vec, per_phase, max_phase, order, shape)
    (8, 2, 4, [1, 0], [64, 64]), (8, 1, 8, [1, 0], [128, 64]), (4, 1, 16, [1, 0], [64, 64]),
    (1, 1, 1, [1, 0], [32, 32]), (8, 4, 2, [0, 1], [64, 32]))
PADDED = (([[32, 4]], [64, 64]), ([[64, 8]], [128, 64]), ([[32, 2], [256, 16]], [64, 64]))


_CHILD = """
import json, sys
from triton._C.libtriton import ir, gluon_ir
from triton.experimental.gluon.language import amd
import triton.experimental.gluon.language as gl
ctx = ir.context(); ir.load_dialects(ctx)
builders = {}
for i, (arch, version, kind, ops) in enumerate(json.loads(sys.argv[1])):
    b = builders.setdefault(arch, gluon_ir.GluonOpBuilder(ctx, arch))
    m, n, k = ops.get('tile', ops['mnk'])
    if kind == 'mfma':
        par = amd.AMDMFMALayout(version=version, instr_shape=[m, n, k],
                                transposed=ops.get('trans', False),
                                warps_per_cta=[1, 1], element_bitwidth=ops.get('bits'))
    else:
        par = amd.AMDWMMALayout(version=version, transposed=False, warp_bases=[],
                                instr_shape=[m, n, k])
    out = {'C': b.to_linear_layout(par._to_ir(b), [m, n])}
    out['A'] = b.to_linear_layout(gl.DotOperandLayout(0, par, ops['kA'])._to_ir(b), [m, k])
    out['B'] = b.to_linear_layout(gl.DotOperandLayout(1, par, ops['kB'])._to_ir(b), [k, n])
    res = {op: {'register': l.reg_bases, 'lane': l.lane_bases, 'warp': l.warp_bases,
                'block': l.block_bases, 'shape': l.shape} for op, l in out.items()}
    sys.stdout.write('JSON%d %s\\n' % (i, json.dumps(res)))
    sys.stdout.flush()
import os; os._exit(0)   # skip nanobind's leak report at exit
"""


def _run_jobs(jobs: List[tuple]) -> List[Dict[str, Any]]:
    """Ask Triton for each job's layouts in a child process; a bad encoding can abort the whole
    process inside LLVM, so after a crash the failed job is recorded and the rest re-run."""
    results: List[Dict[str, Any]] = [None] * len(jobs)
    todo = list(range(len(jobs)))
    while todo:
        batch = [jobs[i] for i in todo]
        p = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(batch)],
                           capture_output=True, text=True, timeout=600)
        done = 0
        for line in p.stdout.splitlines():
            if line.startswith("JSON"):
                k, payload = line[4:].split(" ", 1)
                results[todo[int(k)]] = {"ok": json.loads(payload)}
                done = int(k) + 1
        if done == len(todo):
            break
        err = [ln for ln in (p.stderr or "").splitlines()
               if ln.strip() and "leak" not in ln and not ln.startswith(" - ")]
        results[todo[done]] = {"error": (err[-1] if err else f"exit {p.returncode}")[:300]}
        todo = todo[done + 1:]
    return results


def _shared() -> Dict[str, Any]:
    code = f"""
import json, sys
from triton._C.libtriton import ir, gluon_ir
import triton.experimental.gluon.language as gl
ctx = ir.context(); ir.load_dialects(ctx)
b = gluon_ir.GluonOpBuilder(ctx, 'gfx942')
res = {{'swizzled': [], 'padded': []}}
for vec, pp, mp, order, shape in {SHARED!r}:
    l = b.to_linear_layout(gl.SwizzledSharedLayout(vec, pp, mp, order)._to_ir(b), shape)
    res['swizzled'].append({{'vec': vec, 'per_phase': pp, 'max_phase': mp, 'order': order,
                             'offset': l.offset_bases, 'shape': shape}})
for pairs, shape in {PADDED!r}:
    l = gl.PaddedSharedLayout.with_identity_for(pairs, shape, [1, 0])
    res['padded'].append({{'offset': l.offset_bases, 'padding': l.interval_padding_pairs,
                           'shape': shape}})
sys.stdout.write('JSON' + json.dumps(res)); sys.stdout.flush()
import os; os._exit(0)
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    for line in p.stdout.splitlines():
        if line.startswith("JSON"):
            return json.loads(line[4:])
    raise SystemExit(f"shared layouts failed: {p.stderr[-2000:]}")


def main(argv: List[str] = None) -> int:
    import mfma_specs as ms
    import triton
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join("tests", "fixtures", "triton_bases.json"))
    args = ap.parse_args(argv)
    doc: Dict[str, Any] = {"triton": triton.__version__,
                           "command": "PYTHONPATH=. python scripts/triton_bases_fixture.py",
                           "encodings": [], "skipped": []}
    jobs, entries = [], []
    for arch, version, kind in TARGETS:
        for s in ms.instructions(arch):
            if kind == "mfma" and s.blocks == 16 and (s.m, s.n) == (4, 4):
                # Triton lays the 16 blocks of a 4x4 MFMA side by side: a 4x64 tile (blocks
                # along N) or, transposed, a 64x4 tile (blocks along M)
                for tile, trans in (([4, 64, s.k], False), ([64, 4, s.k], True)):
                    v = {"mnk": [s.m, s.n, s.k], "kA": s.items("A"), "kB": s.items("B"),
                         "tile": tile, "trans": trans}
                    jobs.append((arch, version, kind, v))
                    entries.append({"arch": arch, "instruction": s.name, "version": version,
                                    "kind": kind, "k_width": [v["kA"], v["kB"]],
                                    "tile": tile, "transposed": trans})
                continue
            if s.kind == "smfmac" or s.blocks != 1:
                doc["skipped"].append({"arch": arch, "instruction": s.name, "reason":
                                       "not compared: sparse (Triton has no sparse "
                                       "encoding) or 2/4-block (Triton's 32x32 and 16x16 "
                                       "encodings are compared with the single-block "
                                       "instructions)"})
                continue
            ops = {"mnk": [s.m, s.n, s.k], "kA": s.items("A"), "kB": s.items("B")}
            if s.a_type == "f64":
                ops["bits"] = 64
            variants = [ops]
            if kind == "wmma" and version == 2:
                # gfx12 interleaves K in 4-element groups (mfma_specs.wmma); kWidth = 4 is the
                # encoding whose register order is the instruction's own
                variants.append({**ops, "kA": 4, "kB": 4})
            for v in variants:
                jobs.append((arch, version, kind, v))
                entries.append({"arch": arch, "instruction": s.name, "version": version,
                                "kind": kind, "k_width": [v["kA"], v["kB"]]})
    for entry, got in zip(entries, _run_jobs(jobs)):
        if "ok" in got:
            doc["encodings"].append({**entry, "layouts": got["ok"]})
        else:
            doc["skipped"].append({**entry, "reason": got["error"]})
    doc["shared"] = _shared()
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {args.out}: {len(doc['encodings'])} encodings, {len(doc['skipped'])} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
