"""03 - tiled MMA: one MFMA atom tiled over four waves, operand copies from its TV layouts.

One block of 256 threads computes C(64,64) = A(64,8) B(64,8)^T in fp32 (FlyDSL's tiledMma
shape) with v_mfma_f32_16x16x4_f32: its lane layouts (``spec.tv_layout``) are embedded in the
block's tiles, tiled over 2x2 waves and repeated 2x2 over C and twice along k.  Every load and
store offset is one of those TV layouts evaluated on ``tid``; lane correctness is proven per
wave by the verifier and, from the kernel's spec (C = A B^T over k), on the IR and the printed
kernel by the same ``verify`` every kernel family uses; drawn, compiled, emulated.

    python3 examples/03_tiled_mma.py [--out examples_out/03_tiled_mma]
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import sympy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout as well
import layoutalg as la
import mfma_specs
import visualize as viz
from kernels import Access, Frag, Kernel, Mfma, Param, ZeroFrag, compile_hip
from kernels.verify.spec import Contraction, Dim, KernelSpec, TensorSpec
from kernels.verify.verifier import verify
from kernels.emit import emit
from kernels.emulator import run
from layoutalg.verify import lane_correctness

BM, BN, BK, IK = 64, 64, 8, 4           # block tile; the atom's k


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="examples_out/03_tiled_mma")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ok = True
    spec = mfma_specs.lookup("gfx942", "v_mfma_f32_16x16x4_f32")

    # 1. Tiled MMA: embed the atom's (lane, item) -> operand-tile layouts in the block tiles
    #    (column-major tile index), add the wave mode (2x2 waves: +16 rows / +16 columns) and
    #    the value repeats (2x over the wave's rows or columns, 2 k steps).
    def tiled(op, atom_shape, tile_rows, waves, repeats):
        atom = la.composition(la.Layout(atom_shape, (1, tile_rows)), spec.tv_layout(op))
        return la.make_layout(la.make_layout(atom[0], la.Layout((2, 2), waves)),
                              la.make_layout(atom[1], la.Layout((2, 2), repeats)))

    A_tv = tiled("A", (16, 4), BM, (16, 0), (32, IK * BM))          # -> m + 64 k   (rm, ks)
    B_tv = tiled("B", (4, 16), BK, (0, 16 * BK), (32 * BK, IK))     # -> k + 8 n    (rn, ks)
    C_tv = tiled("C", (16, 16), BM, (16, 16 * BM), (32, 32 * BM))   # -> m + 64 n   (rm, rn)
    print(f"atom {spec.name}: A {spec.tv_layout('A')}, B {spec.tv_layout('B')}, "
          f"C {spec.tv_layout('C')}")
    print(f"tiled over 2x2 waves, repeated 2x2 and 2 k steps:\n  A {A_tv}\n  B {B_tv}\n  C {C_tv}")

    # 2. Where each operand lives: A (m, k) and B (n, k) row-major fp32 (B is N x K), C (m, n).
    gA, gC = la.Layout((BM, BK), (BK, 1)), la.Layout((BM, BN), (BN, 1))
    gB = la.Layout((BN, BK), (BK, 1))                  # B[n][k]
    gB_kn = la.Layout((BK, BN), (1, BK))               # the same memory as the MFMA's B[k][n]

    # 3. Lane correctness per wave w: every lane, item and repeat s holds the element the spec
    #    expects; a repeat is a "step" that moves the atom by (rows, cols).
    wm, wn = lambda w: 16 * (w % 2), lambda w: 16 * (w // 2)
    for op, tv, mem, items, step in (
            ("A", A_tv, gA, 1, lambda w, s: (wm(w) + 32 * (s % 2), IK * (s // 2))),
            ("B", B_tv, gB_kn, 1, lambda w, s: (IK * (s // 2), wn(w) + 32 * (s % 2))),
            ("C", C_tv, gC, 4, lambda w, s: (wm(w) + 32 * (s % 2), wn(w) + 32 * (s // 2)))):
        arr = tv.values().reshape((64, 4, items, 4), order="F")      # lane, wave, item, step
        res = [lane_correctness(spec, op, arr[:, w], lds=mem, memory=mem, steps=4,
                                step=lambda s, w=w: step(w, s)) for w in range(4)]
        good = all(r.holds for r in res)
        ok &= good
        print(f"{'PROVED' if good else 'FAILED'} lane correctness of {op} for 4 waves: "
              f"{sum(r.checked for r in res)} register items  [{res[0].method}]")
        if not good:
            print(next(str(r) for r in res if not r.holds))

    # 4. The kernel as IR: each access offset is a layout evaluated at (tid, value).
    tid = la.index_symbol("tid")

    def coords(tv, shape, v):     # (row, col) of value v of thread tid in a column-major tile
        return tuple(la.composition(la.Layout(shape, s), tv)((tid, v)) for s in ((1, 0), (0, 1)))

    a, b, acc = Frag("a", "f32", 4), Frag("b", "f32", 4), Frag("acc", "f32", 16, 4)
    body = [ZeroFrag(acc)]
    for v in range(4):
        m, k = coords(A_tv, (BM, BK), v)
        body.append(Access("load", "global", "A", sympy.expand(gA((m, k))), 1, a.regs([v]),
                           tag="A.frag.load", origin=gA, coords=((m, k),)))
        k, n = coords(B_tv, (BK, BN), v)
        body.append(Access("load", "global", "B", sympy.expand(gB((n, k))), 1, b.regs([v]),
                           tag="B.frag.load", origin=gB, coords=((n, k),)))
    for ks, rm, rn in np.ndindex(2, 2, 2):       # acc(rm, rn) += A(rm, ks) * B(rn, ks)
        i = rm + 2 * rn
        body.append(Mfma(spec, acc.regs(range(4 * i, 4 * i + 4)), a.regs([rm + 2 * ks]),
                         b.regs([rn + 2 * ks]), tag=f"mfma(m{rm},n{rn},k{ks})"))
    for v in range(16):
        m, n = coords(C_tv, (BM, BN), v)
        body.append(Access("store", "global", "C", sympy.expand(gC((m, n))), 1, acc.regs([v]),
                           tag="C.store", origin=gC, coords=((m, n),)))
    # 5. What it must compute, as a spec: the verifier reads tensors, dimensions, roles and
    #    the contraction from it (the coordinates of B's accesses are (n, k)); no gate code.
    kspec = KernelSpec(
        name="tiled_mma", dims=(Dim("m", BM), Dim("n", BN), Dim("k", BK)),
        tensors=(TensorSpec("A", ("m", "k"), "input", "f32"),
                 TensorSpec("B", ("n", "k"), "input", "f32"),
                 TensorSpec("C", ("m", "n"), "output", "f32")),
        contractions=(Contraction("C", "A", "B", ("k",), span=BK),))
    kern = Kernel("tiled_mma", [Param("A", "f32"), Param("B", "f32"), Param("C", "f32", False)],
                  [], [a, b, acc], body, 256, (1, 1, 1),
                  header=[f"A {A_tv}", f"B {B_tv}", f"C {C_tv}"], spec=kspec)

    # 6. The verifier proves the kernel against its spec (index math, bounds, coverage of C,
    #    MFMA operands lane by lane, accumulator write-back over every k) and the printed text
    #    itself: read back, index math evaluated as C, declarations, every int expression
    #    within int range.
    src = emit(kern)
    gate = verify(kern, kspec, "gfx942", source=src)
    ok &= gate.holds
    held = [k for k, r in gate.checks.items() if r.holds]
    print(f"{'PROVED' if gate.holds else 'FAILED'} gate on the printed kernel: {len(held)}/"
          f"{len(gate.checks)} checks hold ({', '.join(held)})\n  MFMA operands and write-back "
          f"over {gate.checks['lane_mfma_operands'].domain.split('iterations, ')[-1]}")
    print("".join(f"FAILED gate {k}: {r.counterexample}\n" for k, r in gate.checks.items()
                  if not r.holds), end="")
    (out / "tiled_mma.hip").write_text(src)

    # 7. Diagrams: the atom, and the tiled A, B and C (T<thread> over V<value>).
    viz.draw_mma(spec, arch="gfx942").save(out / "mma_atom.svg")
    viz.draw_tv(A_tv, tile_shape=(BM, BK), title="A: 64x8, 4 waves").save(out / "tiled_A.svg")
    viz.draw_tv(B_tv, tile_shape=(BK, BN), title="B (k x n): 8x64").save(out / "tiled_B.svg")
    viz.draw_tv(C_tv, tile_shape=(BM, BN), title="C: 64x64").save(out / "tiled_C.svg")

    # 8. Compile for gfx942 and emulate against A @ B^T.
    co = compile_hip(src, "gfx942", name="tiled_mma.hip")
    (out / "tiled_mma.co").write_bytes(co.binary)
    rep = co.report("tiled_mma", block_threads=256)
    print(f"gfx942 code object: {rep.summary()}")
    if rep.mfma_count != 8:
        print(f"FAILED: expected 8 MFMAs per wave, the code object has {rep.mfma_count}")
        ok = False
    rng = np.random.default_rng(0)
    A = rng.standard_normal((BM, BK)).astype(np.float32)
    B = rng.standard_normal((BN, BK)).astype(np.float32)
    C = np.zeros((BM, BN), np.float32)
    res = run(src, "tiled_mma", 1, 256, [A, B, C], name="tiled_mma.hip")
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    err = float(np.abs(res.outputs[2] - ref).max())
    good = err <= 1e-5 * float(np.abs(ref).max())
    ok &= good
    print(f"{'OK' if good else 'MISMATCH'}: emulated 1 block x 256 threads in {res.seconds:.2f} s;"
          f" max |C - A @ B^T| = {err:.2e}")
    print(f"wrote {out}/tiled_mma.hip, tiled_mma.co, mma_atom.svg, tiled_[ABC].svg")
    print("ALL PROOFS AND THE EMULATED RUN PASSED" if ok else "SOMETHING FAILED (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
