// The run state of decoding: keys and values of every layer, kept apart from
// the model's weights (one model, many caches).
#pragma once

#include <functional>
#include <vector>

#include <ATen/ATen.h>

namespace grpo::model {

// Where an attention layer puts this call's keys and values and finds the
// ones to attend over: the growing batch cache below, or the fixed decoding
// slots of model/slot_cache.h.
class LayerKv {
 public:
  virtual ~LayerKv() = default;
  // Takes this call's keys/values k, v: [B, H_kv, T, D] of `layer` and
  // returns what the queries attend over: [B, H_kv, S, D].
  virtual std::pair<at::Tensor, at::Tensor> append(size_t layer, const at::Tensor& k, const at::Tensor& v) = 0;
  // The same for keys not rotated yet: k's rotary embedding (cos/sin
  // [B, T, D], model/rope.h) is applied on the way in. A cache that can
  // rotate and write in one kernel does.
  virtual std::pair<at::Tensor, at::Tensor> rotate_and_append(size_t layer, const at::Tensor& k, const at::Tensor& v,
                                                              const at::Tensor& cos, const at::Tensor& sin);
  // A cache that knows which of its keys each row sees without a mask (the
  // decoding slots) may attend itself: softmax(q k^T * scale) v for this
  // step's queries q [B, Hq, T, D], not rotated yet (cos/sin as above), over
  // `layer`'s keys after this step's append, as o_proj's input [B, T, Hq D].
  // Undefined: the caller rotates q and attends with its mask.
  virtual at::Tensor rotate_and_attend(size_t layer, const at::Tensor& q, const at::Tensor& cos, const at::Tensor& sin,
                                       double scale);
};

class KvCache : public LayerKv {
 public:
  // Appends k, v to `layer` and returns views of everything cached so far.
  // Rationale: buffers grow geometrically and are written in place, so a
  // decoding step copies one token's keys, not the whole history.
  std::pair<at::Tensor, at::Tensor> append(size_t layer, const at::Tensor& k, const at::Tensor& v) override;

  // Keeps the rows `index` ([B'] int64) in that order: drops finished rows and
  // shares a prompt's cache across its G copies.
  void select_rows(const at::Tensor& index);

  int64_t length() const { return key_mask.defined() ? key_mask.size(1) : 0; }

  // Per layer, the keys and values of row `b`'s real tokens (padding left
  // out): [H_kv, n, D] copies.
  std::vector<std::pair<at::Tensor, at::Tensor>> real_row(int64_t b) const;

  // Per row, the positions of its real tokens (padding left out), read from
  // the device once for every row.
  std::vector<std::vector<int64_t>> real_positions() const;

  // The keys and values of `layer` for rows `rows` ([m] int64) at
  // `positions` ([m, n] int64, one row of positions each): [m, H_kv, n, D],
  // one gather for all of them.
  std::pair<at::Tensor, at::Tensor> gather(size_t layer, const at::Tensor& rows, const at::Tensor& positions) const;
  size_t layer_count() const { return layers_.size(); }

  // A batch cache whose row p holds rows[p] (per layer [H_kv, n_p, D]; null:
  // none), right-aligned behind left padding, as a prefill would have left it.
  static KvCache of_rows(const std::vector<const std::vector<std::pair<at::Tensor, at::Tensor>>*>& rows);

  // A cache of lengths.size() rows, row p to hold lengths[p] positions
  // right-aligned behind left padding (as of_rows lays rows out), filled by
  // place(); its layers are allocated by the first place(), whose part gives
  // their shapes.
  static KvCache with_lengths(std::vector<int64_t> lengths);
  // Rows first_row.. take the real positions of `part`'s rows, in order: one
  // gather and one indexed write per layer, one read of the part's mask.
  // Throws when a row's real positions are not the length it was made for.
  void place(const KvCache& part, int64_t first_row);

  at::Tensor key_mask;  // [B, S] 1 = real token, 0 = padding; kept by the model

 private:
  struct Layer {
    at::Tensor k, v;     // [B, H_kv, capacity, D]
    int64_t used = 0;
  };
  // Rows first_row.. (lengths_, right-aligned) from values(layer): [N, H_kv,
  // D], row after row, each row's positions in order; allocates the layers
  // and the mask at the first write.
  void write_rows(int64_t first_row, size_t layer_count,
                  const std::function<std::pair<at::Tensor, at::Tensor>(size_t)>& values, at::Device device);
  std::vector<Layer> layers_;
  std::vector<int64_t> lengths_;  // with_lengths: the rows' lengths, until place() allocates
};

}  // namespace grpo::model
