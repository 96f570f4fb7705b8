// GRPO checkpoints: everything a resumed run needs to continue exactly — the
// weights (the checkpoint's model), AdamW's moments (one file per rank under
// ZeRO), the step, the prompt order, the sampling-seed counter and the
// random state.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>
#include <torch/serialize.h>

#include "model/checkpoint_files.h"
#include "trainer/checkpoint.h"
#include "trainer/grpo_trainer.h"
#include "util/json_input.h"

namespace grpo::trainer {

namespace fs = std::filesystem;

namespace {

// Under ZeRO, rank r's AdamW state: one file per rank, as DeepSpeed keeps them.
std::string shard_file(int rank, int world) {
  return "optimizer_zero_rank" + std::to_string(rank) + "_of_" + std::to_string(world) + ".pt";
}

[[noreturn]] void damaged(const fs::path& file, const std::string& why) {
  throw config::ConfigError("--resume_from_checkpoint: " + file.string() + ": " + why +
                            "; the checkpoint is damaged or was not written by grpo-host: resume from an earlier one");
}

// LibTorch's own messages carry a C++ backtrace; the first line says what failed.
std::string first_line(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  const std::string what = c10_error ? c10_error->what_without_backtrace() : e.what();
  return what.substr(0, what.find('\n'));
}

// LibTorch's archive writer aborts the process when a write comes up short
// (a full disk): it throws from its destructor. So it writes through this
// function, which reports every write as whole, keeps the first error, and
// raises it naming the file once the archive is done.
template <class Value>
void save_archive(const Value& value, const fs::path& file) {
  const std::string name = file.filename().string();
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(file.c_str(), "wb"), &std::fclose);
  if (!out) throw std::runtime_error(name + ": cannot create: " + std::strerror(errno));
  int error = 0;
  const std::function<size_t(const void*, size_t)> writer = [&](const void* data, size_t n) {
    if (error == 0 && std::fwrite(data, 1, n, out.get()) != n) error = errno != 0 ? errno : EIO;
    return n;
  };
  try {
    torch::save(value, writer);
  } catch (const std::exception& e) {
    throw std::runtime_error(name + ": " + first_line(e));
  }
  if (error == 0 && std::fflush(out.get()) != 0) error = errno;
  if (error != 0) throw std::runtime_error(name + ": " + std::strerror(error));
}

// Onto `device`, not the device the tensors were saved from: that GPU may
// not be this process's, or there may be none (a resume with --use_cpu).
template <class Value>
void load_archive(Value& value, const fs::path& file, const char* holds, const at::Device& device = at::kCPU) {
  try {
    torch::load(value, file.string(), device);
  } catch (const std::exception& e) {
    damaged(file, std::string("cannot be read as ") + holds + " (" + first_line(e) + ")");
  }
}

// trainer_state.json, with the fields a resumed run needs checked.
nlohmann::json read_state(const fs::path& path) {
  nlohmann::json state;
  try {
    state = util::parse_json_file(path.string());
  } catch (const util::JsonInputError& e) {
    damaged(path, e.what());
  }
  if (!state.is_object()) damaged(path, "not a JSON object");
  for (const char* key : {"global_step", "generations"}) {
    const auto it = state.find(key);
    if (it == state.end() && std::string(key) == "generations") continue;  // older checkpoints
    if (it == state.end() || !it->is_number_integer() || it->get<int64_t>() < 0)
      damaged(path, std::string("\"") + key + "\" must be an integer >= 0");
  }
  if (!state.contains("prompts") || !state["prompts"].is_object()) damaged(path, "\"prompts\" is missing");
  return state;
}

}  // namespace

void GrpoTrainer::save_checkpoint(bool gather_shards) {
  if (!s_.checkpoint.save) return;  // --save_strategy no, on every rank alike
  // Under ZeRO each rank holds the AdamW state of its own parameters: rank 0
  // writes every rank's.
  const bool sharded = policy_.sync->sharded();
  std::vector<std::string> shards;
  if (sharded) {
    std::ostringstream mine;
    torch::save(*policy_.optimizer, mine);
    shards = gather_shards ? world_.gather_to_main(mine.str(), dist::Channel::Train,
                                                   "the optimizer shards of step " + std::to_string(policy_.global_step))
                           : std::vector<std::string>{mine.str()};
  }
  if (!world_.is_main()) return;  // every rank holds the same weights
  if (rollout_.pending.valid()) spdlog::warn("checkpoint at step {}: the batch being sampled in the background is not part "
                                     "of it; a resumed run samples it again", policy_.global_step);
  if (!rollout_.queue.empty())  // mid generation batch (steps_per_generation > GA or num_iterations > 1)
    spdlog::warn("checkpoint at step {} falls inside a generation batch: a run resumed from it samples a new batch "
                 "instead of finishing this one ({} micro-batches)",
                 policy_.global_step, rollout_.queue.size());
  nlohmann::json state = {{"global_step", policy_.global_step},
                          {"max_steps", max_steps_},
                          {"epoch", prompts_->epoch()},
                          {"generations", rollout_.generations},
                          {"prompts", prompts_->state()}};
  if (sharded) {
    state["zero"] = {{"stage", s_.dist.zero_stage}, {"world_size", world_.size()}, {"shards_saved", shards.size()}};
    if (shards.size() < static_cast<size_t>(world_.size()))
      spdlog::warn("checkpoint at step {} holds rank 0's optimizer shard only: the other ranks' AdamW moments were "
                   "lost with them, and restart from zero when it is resumed", policy_.global_step);
  }
  trainer::save_checkpoint(
      *policy_.policy, s_.checkpoint, policy_.global_step, s_.model.dir, state, [&](const std::string& tmp) {
        if (sharded) {
          for (size_t r = 0; r < shards.size(); ++r)
            model::write_text_atomically((fs::path(tmp) / shard_file(static_cast<int>(r), world_.size())).string(),
                                         shards[r]);
        } else {
          save_archive(*policy_.optimizer, fs::path(tmp) / "optimizer.pt");
        }
        // LoRA dropout draws from the default generator of the weights' device: resume its sequence too.
        save_archive(at::globalContext().defaultGenerator(at::kCPU).get_state(), fs::path(tmp) / "rng_state.pt");
        if (s_.model.device.is_cuda())
          save_archive(at::globalContext().defaultGenerator(s_.model.device).get_state(),
                       fs::path(tmp) / "rng_state_cuda.pt");
      });
}

void GrpoTrainer::resume_from(const std::string& dir) {
  const fs::path state_path = fs::path(dir) / "trainer_state.json";
  if (!fs::exists(state_path))
    throw config::ConfigError("--resume_from_checkpoint " + dir + ": not a training checkpoint (no trainer_state.json)");
  const nlohmann::json state = read_state(state_path);
  // The optimizer state as it was kept: whole, or sharded over the ranks of a ZeRO run.
  const nlohmann::json zero = state.value("zero", nlohmann::json());
  const std::string here = policy_.sync->sharded() ? "ZeRO stage " + std::to_string(s_.dist.zero_stage) + " over " +
                                                         std::to_string(world_.size()) + " processes"
                                                   : "an unsharded optimizer";
  fs::path optimizer_path = fs::path(dir) / "optimizer.pt";
  if (!zero.is_null()) {
    if (!zero.is_object() || !zero.value("stage", nlohmann::json()).is_number_integer() ||
        !zero.value("world_size", nlohmann::json()).is_number_integer())
      damaged(state_path, "\"zero\" must hold the integers \"stage\" and \"world_size\"");
    const int stage = zero.at("stage").get<int>(), world = zero.at("world_size").get<int>();
    if (!policy_.sync->sharded() || stage != s_.dist.zero_stage || world != world_.size())
      throw config::ConfigError("--resume_from_checkpoint " + dir + ": its optimizer state is sharded by ZeRO stage " +
                                std::to_string(stage) + " over " + std::to_string(world) +
                                " processes, and this run has " + here + ": resume with --zero_stage " +
                                std::to_string(stage) + " on " + std::to_string(world) + " processes");
    optimizer_path = fs::path(dir) / shard_file(world_.rank(), world);
  } else if (policy_.sync->sharded()) {
    throw config::ConfigError("--resume_from_checkpoint " + dir + ": its optimizer state is unsharded (optimizer.pt), "
                              "and this run has " + here + ": resume it without --deepspeed / --zero_stage");
  }
  const bool lost_shard = !zero.is_null() && !fs::exists(optimizer_path);
  if (!fs::exists(optimizer_path) && !lost_shard)
    throw config::ConfigError("--resume_from_checkpoint " + dir + ": not a training checkpoint (no " +
                              optimizer_path.filename().string() + ")");
  policy_.global_step = state.at("global_step").get<int64_t>();
  rollout_.generations = state.value("generations", policy_.global_step);
  try {
    prompts_->restore(state.at("prompts"));
  } catch (const nlohmann::json::exception& e) {
    damaged(state_path, std::string("\"prompts\" is not what grpo-host writes (") + e.what() + ")");
  } catch (const data::DataError& e) {
    damaged(state_path, e.what());
  }
  if (lost_shard) {
    spdlog::warn("{} has no optimizer shard of rank {} (lost when the run that saved it failed): this rank's AdamW "
                 "moments restart from zero",
                 dir, world_.rank());
  } else {
    load_archive(*policy_.optimizer, optimizer_path, "AdamW's state for this model", s_.model.device);
    // Onto the parameters' devices, wherever it was saved from (host memory under --offload_optimizer).
    optimizer_state_to_devices(*policy_.optimizer);
  }
  if (fs::exists(fs::path(dir) / "rng_state.pt")) {
    at::Tensor rng;
    load_archive(rng, fs::path(dir) / "rng_state.pt", "a random generator's state");
    at::Generator generator = at::globalContext().defaultGenerator(at::kCPU);  // a handle to the same generator
    try {
      generator.set_state(rng);
    } catch (const std::exception& e) {
      damaged(fs::path(dir) / "rng_state.pt", "not a CPU generator's state (" + first_line(e) + ")");
    }
  }
  // A run resumed on the CPU draws nothing on a GPU: the GPU's state is for a GPU run.
  if (s_.model.device.is_cuda() && fs::exists(fs::path(dir) / "rng_state_cuda.pt")) {
    at::Tensor rng;
    load_archive(rng, fs::path(dir) / "rng_state_cuda.pt", "a random generator's state");
    at::Generator generator = at::globalContext().defaultGenerator(s_.model.device);  // a handle to it
    try {
      generator.set_state(rng);
    } catch (const std::exception& e) {
      damaged(fs::path(dir) / "rng_state_cuda.pt", "not a CUDA generator's state (" + first_line(e) + ")");
    }
  }
  spdlog::info("resumed from {} at step {}", dir, policy_.global_step);
}

}  // namespace grpo::trainer
