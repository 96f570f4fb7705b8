// A build without CUDA (LibTorch without it, or GRPO_CUDA off): there is no
// CUDA tensor to fuse for, so applies() is false and callers keep the at:: ops.
#include "model/cuda_kernels.h"

namespace grpo::model::gpu {

namespace {
[[noreturn]] void absent(const char* what) {
  TORCH_CHECK(false, what, ": this build has no CUDA kernels (configured without CUDA)");
}
}  // namespace

bool applies(std::initializer_list<at::Tensor>) { return false; }
bool enabled() { return false; }
void set_enabled(bool) {}
at::Tensor rms_norm(const at::Tensor&, const at::Tensor&, double) { absent("rms_norm"); }
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {
  absent("add_rms_norm");
}
at::Tensor silu_mul(const at::Tensor&, const at::Tensor&) { absent("silu_mul"); }
at::Tensor rope(const at::Tensor&, const at::Tensor&, const at::Tensor&) { absent("rope"); }
void rope_into_slots(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                     const at::Tensor&, const at::Tensor&) {
  absent("rope_into_slots");
}

at::Tensor slot_attention(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const at::Tensor&, int64_t, double, const at::Tensor&) {
  absent("slot_attention");
}
bool slot_attention_applies(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&) {
  return false;
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> step_prelude(const at::Tensor&, const at::Tensor&, int64_t,
                                                            at::ScalarType) {
  absent("step_prelude");
}
std::pair<at::Tensor, at::Tensor> sample_rows(const at::Tensor&, double, const at::Tensor&) { absent("sample_rows"); }
void record_step(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                 const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  absent("record_step");
}

}  // namespace grpo::model::gpu
