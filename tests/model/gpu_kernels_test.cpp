// The fused CUDA kernels (label `gpu`; skipped without a GPU) against the at::
// ops they replace: rope, the slot cache write and the residual add to the
// bit, silu_mul and rms_norm within a rounding step of the dtype, in float32,
// bfloat16 and float16; the sampler draws softmax + cumsum + searchsorted's
// ids; a slot step's record is its row math; the layers' kernels run only
// inside a FusedScope without gradient; and a model's decoding step with
// them gives the logits and greedy ids of the same step on the at:: ops.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>
#include <limits>

#include "model/cuda_kernel_math.h"
#include "model/cuda_kernels.h"
#include "model/engine.h"
#include "model/fused_scope.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/sampling.h"
#include "model/weights.h"
#include "rounding_steps.h"

using namespace grpo::model;
using grpo::testing::expect_within_steps;

namespace {

const std::string kDir = GRPO_TEST_DATA_DIR "/tiny-qwen2";
const at::ScalarType kDtypes[] = {at::kFloat, at::kBFloat16, at::kHalf};

class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
  torch::NoGradGuard no_grad_;
};

TEST_F(GpuKernels, RopeGivesTheAtOpsBitsForEveryLayoutAndDtype) {
  for (at::ScalarType dtype : kDtypes) {
    const at::TensorOptions on = at::TensorOptions().device(at::kCUDA).dtype(dtype);
    // As the model has it: [B, T, H, D] from a projection, seen as [B, H, T, D].
    const at::Tensor x = at::randn({3, 5, 4, 16}, on).transpose(1, 2);
    ModelConfig c;
    c.head_dim = 16;
    c.rope_theta = 10000;
    const at::Tensor positions = at::randint(0, 4000, {3, 5}, at::TensorOptions().device(at::kCUDA).dtype(at::kLong));
    auto [cos, sin] = rope_cos_sin(rope_inv_freq(c), positions, dtype);
    // One position row for every row of the batch: cos/sin [1, T, D] broadcast.
    auto [cos1, sin1] = rope_cos_sin(rope_inv_freq(c), positions.narrow(0, 0, 1), dtype);
    const at::Tensor want = apply_rope(x, cos, sin), broadcast_want = apply_rope(x, cos1, sin1);  // the at:: ops
    FusedScope fused;
    ASSERT_TRUE(gpu::applies({x, cos, sin}));
    const at::Tensor got = gpu::rope(x, cos, sin);
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_TRUE(at::equal(got, want)) << dtype;
    EXPECT_TRUE(at::equal(apply_rope(x, cos, sin), want)) << dtype << ": the model's call inside the scope";
    EXPECT_TRUE(at::equal(gpu::rope(x, cos1, sin1), broadcast_want)) << dtype;
  }
}

TEST_F(GpuKernels, SiluMulIsTheAtOpsWithinARoundingStep) {
  for (at::ScalarType dtype : kDtypes) {
    const at::TensorOptions on = at::TensorOptions().device(at::kCUDA).dtype(dtype);
    const at::Tensor gate = at::randn({7, 3, 1000}, on) * 4, up = at::randn({7, 3, 1000}, on);
    const at::Tensor want = at::silu(gate) * up;
    expect_within_steps(gpu::silu_mul(gate, up), want, 1, "silu_mul " + std::string(c10::toString(dtype)));
  }
}

TEST_F(GpuKernels, RmsNormIsHuggingFacesWithinARoundingStep) {
  for (at::ScalarType dtype : kDtypes) {
    for (int64_t N : {16, 128, 896, 3584, 1000}) {
      const at::TensorOptions on = at::TensorOptions().device(at::kCUDA).dtype(dtype);
      const at::Tensor x = at::randn({2, 9, N}, on) * 3, weight = at::rand({N}, on) + 0.5;
      const at::Tensor xf = x.to(at::kFloat);
      const at::Tensor want = weight * (xf * at::rsqrt(xf.pow(2).mean(-1, true) + 1e-6)).to(dtype);
      expect_within_steps(gpu::rms_norm(x, weight, 1e-6), want, 1,
                          "rms_norm " + std::string(c10::toString(dtype)) + " N " + std::to_string(N));
    }
  }
}

TEST_F(GpuKernels, AddRmsNormIsTheAddAndTheNormAfterIt) {
  for (at::ScalarType dtype : kDtypes) {
    const at::TensorOptions on = at::TensorOptions().device(at::kCUDA).dtype(dtype);
    const at::Tensor x = at::randn({3, 5, 896}, on) * 3, residual = at::randn({3, 5, 896}, on),
                     weight = at::rand({896}, on) + 0.5;
    const at::Tensor h = x + residual, hf = h.to(at::kFloat);
    auto [sum, normed] = gpu::add_rms_norm(x, residual, weight, 1e-6);
    EXPECT_TRUE(at::equal(sum, h)) << dtype;
    expect_within_steps(normed, weight * (hf * at::rsqrt(hf.pow(2).mean(-1, true) + 1e-6)).to(dtype), 1,
                        "add_rms_norm " + std::string(c10::toString(dtype)));
  }
}

// Keys rotated and written with values at each slot's position in one kernel,
// as the at:: path (rope, then two scatters) writes them.
TEST_F(GpuKernels, RopeIntoSlotsIsTheRotationAndTheScatterToTheBit) {
  for (at::ScalarType dtype : kDtypes) {
    const at::TensorOptions on = at::TensorOptions().device(at::kCUDA).dtype(dtype);
    const int64_t b = 3, H = 2, D = 64, capacity = 40;
    ModelConfig c;
    c.head_dim = D;
    const at::Tensor positions = at::tensor(std::vector<int64_t>{17, 0, 39}).to(at::kCUDA);
    auto [cos, sin] = rope_cos_sin(rope_inv_freq(c), positions.view({b, 1}), dtype);
    const at::Tensor k = at::randn({b, 1, H, D}, on).transpose(1, 2), v = at::randn({b, 1, H, D}, on).transpose(1, 2);
    const at::Tensor keys = at::randn({5, H, capacity, D}, on), values = at::randn({5, H, capacity, D}, on);
    at::Tensor want_k = keys.clone(), want_v = values.clone();
    const at::Tensor where = positions.view({b, 1, 1, 1}).expand({b, H, 1, D});
    want_k.narrow(0, 0, b).scatter_(2, where, apply_rope(k, cos, sin));
    want_v.narrow(0, 0, b).scatter_(2, where, v);
    gpu::rope_into_slots(k, v, cos, sin, positions, keys, values);
    EXPECT_TRUE(at::equal(keys, want_k)) << dtype;
    EXPECT_TRUE(at::equal(values, want_v)) << dtype;
  }
}

// A decoding step's prelude against rope_cos_sin and the model's additive
// mask on the GPU's own ops: the same bits, positions up to and past the span.
TEST_F(GpuKernels, StepPreludeGivesTheAtOpsBits) {
  ModelConfig c;
  c.head_dim = 64;
  const at::Tensor inv_freq = rope_inv_freq(c).cuda();
  const at::Tensor positions = at::tensor({0, 5, 77, 127, 128, 4095, 30001}, at::kLong).cuda();
  const int64_t b = positions.size(0), span = 128;
  for (at::ScalarType dtype : kDtypes) {
    auto [cos, sin] = rope_cos_sin(inv_freq, positions.view({b, 1}), dtype);
    const double masked = dtype == at::kFloat ? std::numeric_limits<float>::lowest() : -1e4;
    const at::Tensor allowed = at::arange(span, positions.options()).view({1, span}) <= positions.view({b, 1});
    const at::Tensor mask = at::zeros({b, 1, 1, span}, positions.options().dtype(dtype))
                                .masked_fill_(allowed.logical_not().view({b, 1, 1, span}), masked);
    auto [got_cos, got_sin, got_mask] = gpu::step_prelude(positions, inv_freq, span, dtype);
    EXPECT_TRUE(at::equal(got_cos, cos)) << dtype;
    EXPECT_TRUE(at::equal(got_sin, sin)) << dtype;
    EXPECT_TRUE(at::equal(got_mask, mask)) << dtype;
  }
}

// The halves of a packed gate/up product are read in place: the bits of the
// same halves copied out first.
TEST_F(GpuKernels, SiluMulReadsThePackedHalvesInPlace) {
  for (at::ScalarType dtype : kDtypes) {
    const at::Tensor both = (at::randn({5, 3, 2 * 4864}, at::kCUDA) * 4).to(dtype);
    const at::Tensor gate = both.narrow(-1, 0, 4864), up = both.narrow(-1, 4864, 4864);
    EXPECT_TRUE(at::equal(gpu::silu_mul(gate, up), gpu::silu_mul(gate.contiguous(), up.contiguous()))) << dtype;
  }
}

// The fused sampler against softmax, cumsum and searchsorted (the kernels
// off) on the same logits and draws: the same ids (a flip needs a draw within
// rounding of a boundary: about 1e-6 of a chance per row), log-probabilities
// within float32 rounding; masked (-inf) ids never drawn; a draw of 0 takes
// the first id of nonzero probability. (A draw within float32's spacing of 1
// falls where the cumulative sums' own rounding decides: there only a valid
// id is asked for.)
TEST_F(GpuKernels, SampleRowsDrawsTheIdsOfSoftmaxCumsumAndSearchsorted) {
  for (at::ScalarType dtype : kDtypes) {
    for (int64_t V : {int64_t{151936}, int64_t{37}}) {
      for (double temperature : {1.0, 0.7}) {
        const int64_t B = 64;
        at::Tensor logits = (at::randn({B, V}, at::kCUDA) * 3).to(dtype);
        logits.narrow(0, 0, 9).narrow(1, 0, V / 2).fill_(-std::numeric_limits<float>::infinity());
        at::Tensor draws = at::rand({B}, at::kCUDA);
        draws[8] = 0.0f;
        draws[9] = 0.99999994f;
        SamplingParams p;
        p.temperature = temperature;
        gpu::set_enabled(false);
        const Sampled want = sample_with_draws(logits, {}, p, draws);
        gpu::set_enabled(true);
        auto [tokens, logprobs] = gpu::sample_rows(logits, temperature, draws);
        const std::string what = std::string(c10::toString(dtype)) + ", V " + std::to_string(V) + ", temperature " +
                                 std::to_string(temperature);
        at::Tensor same = tokens == want.tokens;
        same[9] = true;
        EXPECT_TRUE(same.all().item<bool>()) << what << ": " << (~same).sum().item<int64_t>() << " rows differ";
        same[9] = (tokens[9] == want.tokens[9]).item<bool>();
        const int64_t last = tokens[9].item<int64_t>();
        EXPECT_TRUE(last >= 0 && last < V && std::isfinite(logits[9][last].item<float>())) << what << ": " << last;
        EXPECT_LT((logprobs - want.logprobs).abs().masked_select(same).max().item<double>(), 1e-4) << what;
        EXPECT_TRUE((tokens.narrow(0, 0, 9) >= V / 2).all().item<bool>()) << what << ": a masked id was drawn";
        EXPECT_EQ(tokens[8].item<int64_t>(), V / 2) << what << ": a draw of 0";
        // Through sample_with_draws, which takes the kernel for these settings.
        const Sampled fused = sample_with_draws(logits, {}, p, draws);
        EXPECT_TRUE(at::equal(fused.tokens, tokens)) << what;
      }
    }
  }
}

TEST_F(GpuKernels, OnlyInsideAFusedScopeWithoutGradientOnOneCudaDevice) {
  const at::Tensor a = at::randn({4}, at::kCUDA), b = at::randn({4}, at::kCUDA);
  EXPECT_FALSE(gpu::applies({a, b})) << "outside a FusedScope";
  FusedScope fused;
  EXPECT_TRUE(gpu::applies({a, b}));
  EXPECT_FALSE(gpu::applies({a, b.cpu()})) << "a CPU tensor";
  EXPECT_FALSE(gpu::applies({a, b.to(at::kBFloat16)})) << "mixed dtypes";
  EXPECT_FALSE(gpu::applies({a.to(at::kLong), b.to(at::kLong)})) << "integers";
  gpu::set_enabled(false);
  EXPECT_FALSE(gpu::applies({a, b})) << "turned off";
  gpu::set_enabled(true);
  at::Tensor w = at::randn({4}, at::kCUDA).requires_grad_();
  torch::AutoGradMode grad(true);
  EXPECT_FALSE(gpu::applies({a, w})) << "a gradient is wanted";
}

// The step's record kernel over 300 rows (three blocks) in random states,
// against its per-row math (cuda_kernel_math.h, checked on the CPU) run on
// the host over the same state.
TEST_F(GpuKernels, RecordStepIsItsRowMathOverEveryRow) {
  const int64_t b = 300, max_new = 6, width = 3;
  const at::TensorOptions longs = at::TensorOptions().dtype(at::kLong);
  const at::Tensor sampled = at::randint(0, 8, {b}, longs), budget = at::randint(1, 9, {b}, longs);
  const at::Tensor stops = at::randint(-1, 8, {b, width}, longs), logprob = -at::rand({b});
  const at::Tensor done = at::rand({b}) < 0.3, generated = at::randint(0, max_new + 2, {b}, longs);
  const at::Tensor positions = at::randint(0, 100, {b}, longs), tokens = at::randint(0, 8, {b}, longs);
  const at::Tensor out_ids = at::randint(0, 8, {b, max_new}, longs), out_logprobs = at::rand({b, max_new});
  std::vector<at::Tensor> want{done.clone(), generated.clone(), positions.clone(), tokens.clone(), out_ids.clone(),
                               out_logprobs.clone()};
  const grpo::model::gpu::math::StepBooks books{max_new, max_new, width, width};
  for (int64_t r = 0; r < b; ++r)
    grpo::model::gpu::math::record_step_row(
        r, sampled.const_data_ptr<int64_t>(), logprob.const_data_ptr<float>(), budget.const_data_ptr<int64_t>(),
        stops.const_data_ptr<int64_t>(), want[0].data_ptr<bool>(), want[1].data_ptr<int64_t>(),
        want[2].data_ptr<int64_t>(), want[3].data_ptr<int64_t>(), want[4].data_ptr<int64_t>(),
        want[5].data_ptr<float>(), books);
  std::vector<at::Tensor> got;
  for (const at::Tensor& t : {done, generated, positions, tokens, out_ids, out_logprobs}) got.push_back(t.cuda());
  gpu::record_step(sampled.cuda(), logprob.cuda(), budget.cuda(), stops.cuda(), got[0], got[1], got[2], got[3],
                   got[4], got[5]);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(at::equal(got[i].cpu(), want[i])) << "tensor " << i;
  EXPECT_GT((want[0] != done).sum().item<int64_t>(), 0) << "some rows must finish in this step";
}

// A prefill and a decoding step of the tiny model with a KV cache (the fused
// path) against the same with the kernels off: logits within the dtype's
// precision of the at:: path's, and the same greedy ids from the engine.
TEST_F(GpuKernels, ADecodingStepWithThemIsTheAtOpsStep) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CausalLM lm = load_model(kDir);
    lm->to(at::kCUDA, dtype);
    const at::Tensor ids = at::randint(0, 300, {2, 11}, at::TensorOptions().device(at::kCUDA).dtype(at::kLong));
    const at::Tensor next = at::randint(0, 300, {2, 1}, at::TensorOptions().device(at::kCUDA).dtype(at::kLong));
    auto run = [&](bool fused) {
      gpu::set_enabled(fused);
      KvCache cache = lm->new_cache();
      lm->hidden_states(ids, {}, {}, &cache);
      const at::Tensor h = lm->hidden_states(next, {}, {}, &cache);
      gpu::set_enabled(true);
      return lm->logits(h.select(1, 0)).to(at::kFloat);
    };
    const at::Tensor want = run(false), got = run(true);
    const double tolerance = dtype == at::kFloat ? 1e-4 : 0.05;
    EXPECT_LT(((got - want).norm() / want.norm()).item<double>(), tolerance) << dtype;
  }
  // Greedy ids of engines of their own (a slot engine replays the graphs it
  // captured, whatever the switch says later), eager and in slots.
  SamplingParams p;
  p.max_new_tokens = 16;
  p.top_k = 1;
  CausalLM lm = load_model(kDir);
  lm->to(at::kCUDA);
  const std::vector<int32_t> prompt = {93, 283, 208, 107, 40, 235, 119, 177, 185, 88, 109};
  for (EngineOptions::Decode decode : {EngineOptions::Decode::Eager, EngineOptions::Decode::Slots}) {
    EngineOptions o;
    o.decode = decode;
    auto greedy = [&](bool fused) {
      gpu::set_enabled(fused);
      Engine engine(lm, nullptr, o);
      std::vector<int32_t> ids = engine.generate({{prompt, 2, 1, {}}}, p)[0].ids;
      gpu::set_enabled(true);
      return ids;
    };
    const std::vector<int32_t> want = greedy(false);
    EXPECT_EQ(want.size(), 16u);
    EXPECT_EQ(greedy(true), want) << (decode == EngineOptions::Decode::Eager ? "eager" : "slots");
  }
}

}  // namespace
