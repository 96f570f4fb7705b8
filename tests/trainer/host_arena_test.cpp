// trainer/host_arena.h on the CPU: copies hold their values, share chunks
// whose sizes are powers of two, and a rewound arena puts the same sequence
// of copies in the same places (each step's offload reuses the last one's
// memory). On a GPU the chunks are pinned; the placement is the same.
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/checkpoint.h"
#include "trainer/host_arena.h"
#include "trainer/offload.h"

namespace t = grpo::trainer;

TEST(HostArena, CopiesHoldTheirValuesAndShareChunks) {
  t::HostArena arena(4096, 4096);
  at::manual_seed(3);
  const std::vector<at::Tensor> sources = {at::randn({7, 9}), at::randn({33}).to(at::kBFloat16),
                                           at::randn({6, 4}).t(),  // not contiguous
                                           at::randint(0, 100, {5}, at::kLong), at::randn({3}) > 0};
  std::vector<at::Tensor> copies;
  int64_t bytes = 0;
  for (const at::Tensor& s : sources) {
    copies.push_back(arena.copy_of(s));
    bytes += static_cast<int64_t>(s.nbytes());
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_TRUE(copies[i].is_contiguous()) << i;
    EXPECT_EQ(copies[i].scalar_type(), sources[i].scalar_type()) << i;
    EXPECT_TRUE(at::equal(copies[i], sources[i])) << i;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(copies[i].data_ptr()) % 64, 0u) << i;  // as aligned as any allocation
  }
  EXPECT_EQ(arena.held_bytes(), 4096) << "everything fits one chunk";
  EXPECT_EQ(arena.used_bytes(), bytes);
  // A copy never overlaps another: writing one leaves the rest as they were.
  copies[0].fill_(0);
  for (size_t i = 1; i < sources.size(); ++i) EXPECT_TRUE(at::equal(copies[i], sources[i])) << i;
}

TEST(HostArena, ARewoundArenaPutsTheSameCopiesInTheSamePlaces) {
  t::HostArena arena(1024, 1024);
  const std::vector<int64_t> sizes = {100, 700, 300, 1000, 50};  // floats: 3,000 and 4,000 bytes outgrow a chunk
  std::vector<void*> first;
  int64_t held = 0;
  for (int round = 0; round < 4; ++round) {
    arena.rewind();
    std::vector<void*> places;
    for (int64_t n : sizes) {
      const at::Tensor source = at::full({n}, static_cast<float>(round * 10 + n));
      const at::Tensor copy = arena.copy_of(source);
      ASSERT_TRUE(at::equal(copy, source));
      places.push_back(copy.data_ptr());
    }
    if (round == 0) {
      first = places;
      held = arena.held_bytes();
      // Chunks are powers of two: a copy larger than a chunk gets one of its own, rounded up.
      EXPECT_EQ(held % 1024, 0);
      EXPECT_LE(held, 2 * 4 * (100 + 700 + 300 + 1000 + 50) + 2 * 1024);
    } else {
      EXPECT_EQ(places, first) << "round " << round;
      EXPECT_EQ(arena.held_bytes(), held) << "round " << round << ": nothing more was taken";
    }
  }
}

// Chunks double from the first one's size up to the largest: what a small
// model parks takes little, a large one's takes chunks of the largest size.
TEST(HostArena, ChunksGrowFromTheFirstSizeToTheLargest) {
  t::HostArena arena(1024, 8192);
  for (int i = 0; i < 12; ++i) arena.copy_of(at::zeros({1000}, at::kByte));  // 1,000 bytes each, 1,024 apart
  // Chunks of 1, 2, 4 and 8 KiB take 1, 2, 4 and 8 copies: 12 copies need all four.
  EXPECT_EQ(arena.held_bytes(), 1024 + 2048 + 4096 + 8192);
  arena.copy_of(at::zeros({40000}, at::kByte));  // larger than the largest chunk: one of its own, rounded up
  EXPECT_EQ(arena.held_bytes(), 1024 + 2048 + 4096 + 8192 + 65536);
  arena.copy_of(at::zeros({1000}, at::kByte));  // the big chunk's tail takes it
  EXPECT_EQ(arena.held_bytes(), 1024 + 2048 + 4096 + 8192 + 65536);
}

// Gradients parked inside a step (gradient accumulation) through an arena:
// each park reuses the memory of the one before, and they come back whole.
TEST(HostArena, ParkedGradientsComeBackAndReuseTheirPlaces) {
  at::manual_seed(1);
  std::vector<at::Tensor> ps = {at::randn({37}).requires_grad_(), at::randn({8, 5}).requires_grad_()};
  t::HostArena arena(512, 512);
  int64_t held = 0;
  for (int step = 0; step < 3; ++step) {
    std::vector<at::Tensor> want;
    for (const at::Tensor& p : ps) {
      p.mutable_grad() = at::randn_like(p);
      want.push_back(p.grad().clone());
    }
    t::ParkedGradients parked(ps, /*all_zero=*/false, &arena);
    for (const at::Tensor& p : ps) EXPECT_FALSE(p.grad().defined()) << "freed while parked";
    EXPECT_EQ(arena.used_bytes(), (37 + 40) * 4);
    if (step == 0) held = arena.held_bytes();
    EXPECT_EQ(arena.held_bytes(), held) << "step " << step << ": the last park's memory is reused";
    parked.restore();
    for (size_t i = 0; i < ps.size(); ++i)
      EXPECT_TRUE(at::equal(ps[i].grad(), want[i])) << "step " << step << " parameter " << i;
  }
  // Restored gradients are their own, not the arena's memory: copies into it leave them as they were.
  const at::Tensor kept = ps[0].grad();
  const at::Tensor before = kept.clone();
  arena.rewind();
  arena.copy_of(at::full({37}, 7.0f));
  EXPECT_TRUE(at::equal(kept, before));
}
