// The batch cache's row placement (of_rows, with_lengths + place, gather)
// and the slots' loading of rows, against values written by hand: each
// position of each row must land where the layout says, padding left out.
#include <gtest/gtest.h>

#include <vector>

#include "model/kv_cache.h"
#include "model/slot_cache.h"

using namespace grpo::model;

namespace {

constexpr int64_t kHeads = 2, kDim = 3, kLayers = 2;

// Row r's keys at position t, head h, dim d: a value naming all four (and the layer); values are their negatives.
at::Tensor row_keys(int64_t layer, int64_t row, int64_t n) {
  at::Tensor k = at::empty({kHeads, n, kDim});
  for (int64_t h = 0; h < kHeads; ++h)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t d = 0; d < kDim; ++d) k[h][t][d] = static_cast<float>(10000 * layer + 1000 * row + 100 * t + 10 * h + d);
  return k;
}

std::vector<std::pair<at::Tensor, at::Tensor>> row_kv(int64_t row, int64_t n) {
  std::vector<std::pair<at::Tensor, at::Tensor>> kv;
  for (int64_t l = 0; l < kLayers; ++l) kv.emplace_back(row_keys(l, row, n), -row_keys(l, row, n));
  return kv;
}

ModelConfig config() {
  ModelConfig c;
  c.num_hidden_layers = kLayers;
  c.num_key_value_heads = kHeads;
  c.head_dim = kDim;
  return c;
}

}  // namespace

// Rows of lengths 3, none and 5, right-aligned behind left padding; a part
// of them placed into a cache made for their lengths lands the same; the
// slots take rows of any length and read back exactly their positions,
// whether in one gather or a row at a time.
TEST(KvCache, RowsArePlacedRightAlignedAndSlotsReadThemBack) {
  const auto a = row_kv(0, 3), c = row_kv(2, 5);
  KvCache joined = KvCache::of_rows({&a, nullptr, &c});
  ASSERT_EQ(joined.length(), 5);
  EXPECT_TRUE(at::equal(joined.key_mask, at::tensor({0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, at::kLong).view({3, 5})));
  const auto real = joined.real_positions();
  EXPECT_EQ(real[0], (std::vector<int64_t>{2, 3, 4}));
  EXPECT_TRUE(real[1].empty());
  for (int64_t l = 0; l < kLayers; ++l) {
    auto [k, v] = joined.gather(static_cast<size_t>(l), at::tensor({2, 0}, at::kLong),
                                at::tensor({0, 1, 2, 3, 4, 2, 3, 4, 4, 4}, at::kLong).view({2, 5}));
    EXPECT_TRUE(at::equal(k[0], row_keys(l, 2, 5)));
    EXPECT_TRUE(at::equal(v[0], -row_keys(l, 2, 5)));
    EXPECT_TRUE(at::equal(k[1].narrow(1, 0, 3), row_keys(l, 0, 3)));
  }

  // The same rows placed from a part (rows 0 and 2 of a cache that also holds padding of its own).
  const auto b = row_kv(1, 2);
  KvCache part = KvCache::of_rows({&a, &b, &c});
  KvCache placed = KvCache::with_lengths({3, 2, 5, 4});
  placed.place(part, 0);
  const auto d = row_kv(3, 4);
  placed.place(KvCache::of_rows({&d}), 3);
  EXPECT_TRUE(at::equal(placed.key_mask.narrow(0, 0, 3), part.key_mask));
  const auto same = placed.real_positions();
  for (int64_t r = 0; r < 4; ++r) {
    const int64_t n = static_cast<int64_t>(same[static_cast<size_t>(r)].size());
    ASSERT_EQ(n, std::vector<int64_t>({3, 2, 5, 4})[static_cast<size_t>(r)]);
    at::Tensor where = at::tensor(same[static_cast<size_t>(r)], at::kLong).view({1, n});
    for (int64_t l = 0; l < kLayers; ++l)
      EXPECT_TRUE(at::equal(placed.gather(static_cast<size_t>(l), at::tensor({r}, at::kLong), where).first[0],
                            row_keys(l, r, n)))
          << "row " << r << " layer " << l;
  }
  EXPECT_THROW(placed.place(KvCache::of_rows({&d}), 0), std::logic_error) << "row 0 is 3 long, not 4";

  // Slots 3, 0 and 1 take rows 2, 0 and 0 (two copies of one prompt), in groups of one row and all at once.
  for (int64_t bytes : {int64_t{1}, int64_t{1} << 20}) {
    SlotCache slots(config(), 4, 8, at::TensorOptions().dtype(at::kFloat));
    const at::Tensor positions = at::tensor({0, 1, 2, 3, 4, 2, 3, 4, 4, 4, 2, 3, 4, 4, 4}, at::kLong).view({3, 5});
    slots.load_rows(at::tensor({3, 0, 1}, at::kLong), part, at::tensor({2, 0, 0}, at::kLong), positions.clone(), bytes);
    for (int64_t l = 0; l < kLayers; ++l) {
      const auto kv = slots.read(3, 5);
      EXPECT_TRUE(at::equal(kv[static_cast<size_t>(l)].first, row_keys(l, 2, 5))) << bytes;
      EXPECT_TRUE(at::equal(kv[static_cast<size_t>(l)].second, -row_keys(l, 2, 5))) << bytes;
      for (int64_t s : {0, 1})
        EXPECT_TRUE(at::equal(slots.read(s, 3)[static_cast<size_t>(l)].first, row_keys(l, 0, 3))) << bytes;
    }
  }
}
