#include "trainer/batch_exchange.h"

#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>

namespace grpo::trainer {

namespace {

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    out_.append(s);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  template <typename T>
  std::vector<T> get_vector() {
    const auto n = get<uint64_t>();
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), take(n * sizeof(T)), n * sizeof(T));
    return v;
  }
  std::string get_string() {
    const auto n = get<uint64_t>();
    return std::string(take(n), n);
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  const char* take(size_t n) {
    if (n > in_.size() - pos_) throw std::runtime_error("a rank's share of the generation batch arrived cut short");
    const char* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  const std::string& in_;
  size_t pos_ = 0;
};

}  // namespace

Share share_of(size_t n, int rank, int world) {
  const auto r = static_cast<size_t>(rank), w = static_cast<size_t>(world);
  return {n * r / w, n * (r + 1) / w};
}

std::string pack_share(const GenerationBatch& share, const std::vector<const Prompt*>& prompts) {
  std::unordered_map<const Prompt*, uint64_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) index.emplace(prompts[i], i);
  Writer w;
  w.put<uint64_t>(share.size());
  w.put<uint64_t>(share.rewards.by_fn.size());
  for (size_t i = 0; i < share.size(); ++i) {
    const Sample& s = share.samples[i];
    w.put<uint64_t>(s.prompt ? index.at(s.prompt) : UINT64_MAX);
    w.put<uint64_t>(s.request);
    w.put<uint32_t>(s.index);
    w.put_vector(s.ids);
    w.put_vector(s.logprobs);
    w.put_string(s.text);
    w.put<int32_t>(static_cast<int32_t>(s.finish));
    w.put_vector(s.sampled);
    w.put<uint64_t>(s.last_turn_begin);
    w.put_string(s.conversation_json);
    w.put<uint32_t>(s.turns);
    w.put<uint32_t>(s.tool_calls);
    w.put<uint32_t>(s.tool_failures);
    w.put<double>(s.environment_reward);
    w.put<uint8_t>(s.handler_failed ? 1 : 0);
    for (const auto& column : share.rewards.by_fn) w.put<double>(column[i]);
    w.put<double>(share.rewards.total[i]);
  }
  return w.take();
}

GenerationBatch unpack_shares(const std::vector<std::string>& shares, const std::vector<const Prompt*>& prompts) {
  GenerationBatch out;
  for (const std::string& bytes : shares) {
    Reader r(bytes);
    const auto n = r.get<uint64_t>();
    const auto F = r.get<uint64_t>();
    if (out.rewards.by_fn.empty()) out.rewards.by_fn.resize(F);
    if (out.rewards.by_fn.size() != F) throw std::runtime_error("the ranks scored with different numbers of rewards");
    for (uint64_t i = 0; i < n; ++i) {
      Sample s;
      const auto p = r.get<uint64_t>();
      if (p != UINT64_MAX && p >= prompts.size())
        throw std::runtime_error("a rank's sample names a prompt outside the generation batch");
      s.prompt = p == UINT64_MAX ? nullptr : prompts[p];
      s.request = r.get<uint64_t>();
      s.index = r.get<uint32_t>();
      s.ids = r.get_vector<int32_t>();
      s.logprobs = r.get_vector<float>();
      s.text = r.get_string();
      s.finish = static_cast<FinishReason>(r.get<int32_t>());
      s.sampled = r.get_vector<uint8_t>();
      s.last_turn_begin = r.get<uint64_t>();
      s.conversation_json = r.get_string();
      s.turns = r.get<uint32_t>();
      s.tool_calls = r.get<uint32_t>();
      s.tool_failures = r.get<uint32_t>();
      s.environment_reward = r.get<double>();
      s.handler_failed = r.get<uint8_t>() != 0;
      for (auto& column : out.rewards.by_fn) column.push_back(r.get<double>());
      out.rewards.total.push_back(r.get<double>());
      out.samples.push_back(std::move(s));
    }
    if (!r.done()) throw std::runtime_error("a rank's share of the generation batch has trailing bytes");
  }
  return out;
}

}  // namespace grpo::trainer
