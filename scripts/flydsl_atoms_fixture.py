"""Regenerate tests/fixtures/flydsl_atoms.json: the MMA atom TV layouts FlyDSL prints for every
gfx942 dense MFMA instruction it builds, the gfx11 / gfx120x float WMMA atoms, and a few FlyDSL printed types (parser fixtures).

    PYTHONPATH=. python scripts/flydsl_atoms_fixture.py [--out tests/fixtures/flydsl_atoms.json]

Needs FlyDSL (0.5.0 made the committed file).  Only types are built (no kernel, no GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _mlir_type(name, ir):
    return {"f16": ir.F16Type.get, "bf16": ir.BF16Type.get, "f32": ir.F32Type.get,
            "f64": ir.F64Type.get, "i8": lambda: ir.IntegerType.get_signless(8),
            "fp8e4m3fnuz": ir.Float8E4M3FNUZType.get,
            "fp8e5m2fnuz": ir.Float8E5M2FNUZType.get}[name]()


_WMMA_CHILD = """
import json, sys
import flydsl.expr as fx
from flydsl._mlir import ir
import flydsl.expr.rocdl.universal as U
cls, m, n, k, a, b, acc = json.loads(sys.argv[1])
T = {"f16": ir.F16Type.get, "bf16": ir.BF16Type.get, "f32": ir.F32Type.get,
     "fp8e4m3fn": ir.Float8E4M3FNType.get, "fp8e5m2": ir.Float8E5M2Type.get}
with ir.Context(), ir.Location.unknown():
    at = fx.MmaAtomType.get(mma_op=getattr(U, cls).get(m, n, k, T[a](), T[b](), T[acc]()))
    print("JSON" + json.dumps({"mma_op": str(at.mma_op), "shape_mnk": str(at.shape_mnk),
                               "tv_a": str(at.tv_layout_a), "tv_b": str(at.tv_layout_b),
                               "tv_c": str(at.tv_layout_c)}))
"""


def _wmma_child(cls, s):
    """One WMMA atom in a child process: FlyDSL aborts the process on a combination it does
    not support (an MLIR assertion), which must not take the generator down."""
    import subprocess
    arg = json.dumps([cls, s.m, s.n, s.k, s.a_type, s.b_type, s.acc_type])
    p = subprocess.run([sys.executable, "-c", _WMMA_CHILD, arg], capture_output=True,
                       text=True, timeout=120)
    for line in p.stdout.splitlines():
        if line.startswith("JSON"):
            return json.loads(line[4:])
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")] or \
        [ln for ln in p.stderr.splitlines() if ln.strip()]
    return {"error": "FlyDSL aborts the process: " + (err[0] if err else
                                                      f"exit {p.returncode}")[:200]}


def main(argv=None) -> int:
    import flydsl
    import flydsl.expr as fx
    from flydsl._mlir import ir
    from flydsl.expr.rocdl import universal as U
    import mfma_specs as ms
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join("tests", "fixtures", "flydsl_atoms.json"))
    args = ap.parse_args(argv)
    doc = {"flydsl": getattr(flydsl, "__version__", "0.5.0"),
           "command": "PYTHONPATH=. python scripts/flydsl_atoms_fixture.py",
           "atoms": [], "skipped": [], "printed": []}
    with ir.Context(), ir.Location.unknown():
        for s in ms.instructions("gfx942"):
            if s.kind != "mfma" or s.a_type != s.b_type or s.a_type == "xf32":
                doc["skipped"].append({"instruction": s.name, "reason": "mixed/xf32 types: "
                                       "FlyDSL's MFMA() takes one A/B type"})
                continue
            if s.a_type == "f64":
                doc["skipped"].append({"instruction": s.name, "reason": "FlyDSL 0.5.0 aborts "
                                       "the process (assertion: elemTyAcc must be f32)"})
                continue
            acc = _mlir_type("f32" if s.acc_type == "f32" else "f64" if s.acc_type == "f64"
                             else "i8", ir) if s.acc_type != "i32" else \
                ir.IntegerType.get_signless(32)
            try:
                at = fx.MmaAtomType.get(mma_op=U.MFMA(s.m, s.n, s.k,
                                                      _mlir_type(s.a_type, ir), acc))
                doc["atoms"].append({"instruction": s.name, "mma_op": str(at.mma_op),
                                     "shape_mnk": str(at.shape_mnk),
                                     "tv_a": str(at.tv_layout_a), "tv_b": str(at.tv_layout_b),
                                     "tv_c": str(at.tv_layout_c)})
            except Exception as e:   # FlyDSL refuses the type combination
                doc["skipped"].append({"instruction": s.name, "reason": str(e)[:200]})
        for arch, cls in (("gfx1100", "MmaOpGFX11_WMMAType"),
                          ("gfx1200", "MmaOpGFX120X_WMMAType")):
            for s in ms.instructions(arch):
                if s.a_type.startswith("iu"):
                    doc["skipped"].append({"instruction": s.name, "arch": arch, "reason":
                                           "integer WMMA: signedness flags not modelled here"})
                    continue
                got = _wmma_child(cls, s)
                if "error" in got:
                    doc["skipped"].append({"instruction": s.name, "arch": arch,
                                           "reason": got["error"]})
                else:
                    doc["atoms"].append({"instruction": s.name, "arch": arch, **got})
        sw = fx.SwizzleType.get(3, 3, 3)
        lay = fx.LayoutType.parse("!fly.layout<(8,64):(64,1)>")
        dyn = fx.LayoutType.parse("!fly.layout<(4,?):(1,4)>")
        comp = fx.ComposedLayoutType.get(sw, 0, lay)
        doc["printed"] = [str(sw), str(lay), str(dyn), str(comp)]
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(doc['atoms'])} atoms, {len(doc['skipped'])} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
