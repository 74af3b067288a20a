"""Print CuTe DSL's forms of layouts, swizzles, dynamic extents and an SM80 MMA atom (parser and
atom fixtures in tests/fixtures/dialect_strings.json, section "cute-dsl").

    python scripts/cute_dsl_forms.py      # needs nvidia-cutlass-dsl (4.8.1 made the fixture)

Runs at trace time only: no NVIDIA GPU is needed.  Installed for this in a separate virtual
environment (python -m venv /tmp/cdsl && /tmp/cdsl/bin/pip install nvidia-cutlass-dsl), not in
the project's.
"""

import cutlass
import cutlass.cute as cute


@cute.jit
def show(n: cutlass.Int32):
    layout = cute.make_layout((8, 64), stride=(64, 1))
    print(layout)
    sw = cute.make_swizzle(3, 3, 3)
    print(sw)
    print(cute.make_composed_layout(sw, 0, layout))
    print(cute.make_layout((8, n), stride=(n, 1)))
    m = cute.assume(n, divby=16)
    print(cute.make_layout((8, m), stride=(m, 1)))
    print(cute.make_layout(((16, 4), 4), stride=((1, 64), 16)))
    # cutlass #3177: CuTe DSL answers this inadmissible composition
    print(cute.composition(cute.make_layout((6, 4), stride=(1, 10)),
                           cute.make_layout(4, stride=4)))
    atom = cute.make_mma_atom(cute.nvgpu.warp.MmaF16BF16Op(cutlass.Float16, cutlass.Float32,
                                                           (16, 8, 16)))
    print(atom.tv_layout_A)
    print(atom.tv_layout_B)
    print(atom.tv_layout_C)


if __name__ == "__main__":
    show(cutlass.Int32(64))
