// Prints CuTe C++ forms of layouts, swizzles and a shared-memory tensor (host only).
#include <cute/tensor.hpp>
#include <cstdio>
using namespace cute;
int main() {
  auto L = make_layout(make_shape(Int<8>{}, Int<64>{}), make_stride(Int<64>{}, Int<1>{}));
  print(L); printf("\n");
  auto D = make_layout(make_shape(8, Int<64>{}), make_stride(Int<64>{}, 1));
  print(D); printf("\n");
  auto S = composition(Swizzle<3,3,3>{}, L);
  print(S); printf("\n");
  auto T = make_tensor(make_smem_ptr<half_t>(static_cast<half_t*>(nullptr)), S);
  print(T.layout()); printf("\n");
  print(T); printf("\n");
  auto G = GMMA::Layout_K_SW128_Atom<half_t>{};
  print(G); printf("\n");
  auto N = make_layout(make_shape(make_shape(Int<16>{}, Int<4>{}), Int<4>{}),
                       make_stride(make_stride(Int<1>{}, Int<64>{}), Int<16>{}));
  print(N); printf("\n");
  return 0;
}
