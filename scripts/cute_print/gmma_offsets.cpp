// Element offsets of CuTe's GMMA K-major 128B-swizzle atom for half_t, through a smem tensor.
#include <cute/tensor.hpp>
#include <cstdio>
using namespace cute;
int main() {
  auto G = GMMA::Layout_K_SW128_Atom<half_t>{};
  half_t* base = reinterpret_cast<half_t*>(1024);   // 1024-byte aligned, as GMMA needs
  auto T = make_tensor(make_smem_ptr(base), G);
  print(G); printf("\n");
  for (int i = 0; i < size<0>(G); ++i)
    for (int j = 0; j < size<1>(G); ++j)
      printf("%d ", int(&T(i, j) - base));
  printf("\n");
  return 0;
}
