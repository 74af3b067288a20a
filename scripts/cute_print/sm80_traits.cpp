// CuTe's SM80 mma.sync m16n8k16 traits: thread layout and A/B/C TV layouts as CuTe prints them.
#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm80.hpp>
#include <cstdio>
using namespace cute;
int main() {
  using Tr = MMA_Traits<SM80_16x8x16_F32F16F16F32_TN>;
  print(typename Tr::Shape_MNK{}); printf("\n");
  print(typename Tr::ALayout{}); printf("\n");
  print(typename Tr::BLayout{}); printf("\n");
  print(typename Tr::CLayout{}); printf("\n");
  return 0;
}
