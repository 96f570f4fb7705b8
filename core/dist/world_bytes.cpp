// The World's collectives of bytes (host-side, over Gloo): every rank's
// message to every rank, or to rank 0.
#include <cstring>

#include "dist/world_impl.h"

namespace grpo::dist {

// Every rank's byte count; then `bytes` padded to the largest, as a tensor.
std::pair<std::vector<int64_t>, at::Tensor> World::padded(const std::string& bytes, Channel channel,
                                                          const char* collective, const std::string& what, double t0) {
  c10d::AllgatherOptions opts;
  opts.timeout = timeout_;
  std::vector<at::Tensor> size_in{at::full({1}, static_cast<int64_t>(bytes.size()), at::kLong)};
  std::vector<std::vector<at::Tensor>> size_out(1);
  for (int r = 0; r < size_; ++r) size_out[0].push_back(at::empty({1}, at::kLong));
  wait(*impl_->group(channel).allgather(size_out, size_in, opts), collective, what, t0);
  std::vector<int64_t> sizes;
  int64_t largest = 1;
  for (const at::Tensor& s : size_out[0]) {
    sizes.push_back(s.item<int64_t>());
    largest = std::max(largest, sizes.back());
  }
  at::Tensor in = at::zeros({largest}, at::kByte);
  std::memcpy(in.data_ptr(), bytes.data(), bytes.size());
  return {sizes, in};
}

namespace {

std::vector<std::string> unpad(const std::vector<at::Tensor>& received, const std::vector<int64_t>& sizes) {
  std::vector<std::string> out;
  for (size_t r = 0; r < received.size(); ++r)
    out.emplace_back(static_cast<const char*>(received[r].data_ptr()), static_cast<size_t>(sizes[r]));
  return out;
}

}  // namespace

std::vector<std::string> World::all_gather(const std::string& bytes, Channel channel, const std::string& what) {
  if (!distributed()) return {bytes};
  const double t0 = util::now_s();
  try {
    auto [sizes, padded_in] = padded(bytes, channel, "all_gather", what, t0);
    std::vector<at::Tensor> in{padded_in};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int r = 0; r < size_; ++r) out[0].push_back(at::empty_like(padded_in));
    c10d::AllgatherOptions opts;
    opts.timeout = timeout_;
    wait(*impl_->group(channel).allgather(out, in, opts), "all_gather", what, t0);
    return unpad(out[0], sizes);
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {
    fail("all_gather", what, t0, impl_->who_stopped(), cause(e));
  }
}

std::vector<std::string> World::gather_to_main(const std::string& bytes, Channel channel, const std::string& what) {
  if (!distributed()) return {bytes};
  const double t0 = util::now_s();
  try {
    auto [sizes, padded_in] = padded(bytes, channel, "gather", what, t0);
    std::vector<at::Tensor> in{padded_in};
    std::vector<std::vector<at::Tensor>> out;  // rank 0 alone receives
    if (is_main()) {
      out.emplace_back();
      for (int r = 0; r < size_; ++r) out[0].push_back(at::empty_like(padded_in));
    }
    c10d::GatherOptions opts;
    opts.rootRank = 0;
    opts.timeout = timeout_;
    wait(*impl_->group(channel).gather(out, in, opts), "gather", what, t0);
    return is_main() ? unpad(out[0], sizes) : std::vector<std::string>{};
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {
    fail("gather", what, t0, impl_->who_stopped(), cause(e));
  }
}

}  // namespace grpo::dist
