// grpo-rollout: the rollout server (counterpart of `trl vllm-serve` and
// `swift rollout`). SIGTERM and SIGINT stop it cleanly with exit status 0.
#include <pthread.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <grpo/version.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "dist/nccl_group.h"
#include "hub/hub_cache.h"
#include "model/device.h"
#include "model/device_memory.h"
#include "model/dtype.h"
#include "rollout/comm_group.h"
#include "rollout/replicas.h"
#include "rollout/rollout_server.h"

namespace {

constexpr const char* kUsage = R"(usage: grpo-rollout --model DIR [options]

Serves a model over HTTP with the rollout protocol of `trl vllm-serve` and `swift rollout`
(/generate/, /chat/, /infer/, weight updates); see docs/rollout.md.

  --model DIR|ORG/NAME     Hugging Face model directory (config.json, safetensors, tokenizer.json), or a
                           model in the ModelScope / Hugging Face cache
  --model_revision REV     branch, tag or commit of a model from the Hugging Face cache (default main)
  --use_hf true|false      look ORG/NAME up in the Hugging Face cache first (default false: ModelScope's)
  --host ADDR              address to listen on (default 127.0.0.1; weights can be replaced by any client)
  --port N                 port (default 8000; 0 = any free port, printed at startup)
  --api_key_file FILE      require 'Authorization: Bearer KEY' on every endpoint, KEY being the file's first
                           line (or the environment variable GRPO_ROLLOUT_API_KEY); --api_key KEY also works,
                           but shows the key to every user of the machine (ps)
  --max_body_bytes N       largest request body (default 67108864); larger ones get 413
  --max_prompt_tokens N    longest prompt (default: the context, below); longer ones get 422
  --max_model_len N        the context: prompt and completion together stay within N positions (default and
                           most: the model's max_position_embeddings)
  --max_n N                most completions per prompt in one call (default 256); more get 422. Completions
                           never grow past the context (--max_model_len), whatever max_tokens asks
  --max_sequences_per_call N
                           most sequences (prompts × n) in one call (default 4096); larger calls get 422
  --max_sequences_in_flight N
                           most sequences each engine works on at once over every call (default 4096, and
                           never below --max_sequences_per_call); later calls wait their turn
  --max_connections N      connections open at once (default 256); more are answered 503 and closed
  --max_connections_per_client N
                           connections open at once from one address (default 128)
  --client_timeout_s S     time a client has to send one whole request (line, headers, body) and to take
                           its answer (default 30); slower connections get 408 and are closed
  --device D               cpu, cuda, cuda:N or auto (default: the first visible GPU, else the CPU)
  --data_parallel_size N   copies of the model, each with its own engine, on N consecutive GPUs from --device
                           (or all on the CPU, sharing its cores); a call's prompts are split among them
                           (default 1)
  --torch_dtype T          float32, bfloat16, float16 or auto (default auto: bfloat16 on a GPU, float32 on the
                           CPU)
  --tensor_parallel_size 1 accepted for trl vllm-serve's command lines; a model is never split over GPUs
  --num_threads N          CPU threads for the engine (default: every core)
  --max_num_seqs N         rows decoded at once on a GPU (default 256); more wait for a finished row's slot
  --gpu_memory_utilization F
                           share of the GPU's memory the server may hold once its KV cache is allocated
                           (default 0.9)
  --enforce_eager BOOL     decode without CUDA graphs (default false)
  --max_num_batched_tokens N
                           new prompt tokens (padded) one prefill forward takes at most (default 16384; 0:
                           all at once); a call with more distinct prompts prefills them in batches, a
                           longer prompt in chunks
  --comm_timeout_s S       timeout of each weight-transfer step (default 300)
  --batch_wait_ms MS       how long to gather concurrent requests into one batch (default 2)
  --help, --version

trl vllm-serve's and swift rollout's names work too: --dtype, --revision, --vllm_gpu_memory_utilization,
--vllm_max_num_seqs, --vllm_enforce_eager, --vllm_data_parallel_size, --vllm_tensor_parallel_size,
--vllm_max_model_len; --enforce_eager and --use_hf alone mean true; dashes in names read as underscores.
)";

using Flags = std::map<std::string, std::string>;

Flags parse_flags(int argc, char** argv) {
  static const char* kKnown[] = {"model", "host", "port", "api_key", "max_body_bytes", "max_prompt_tokens",
                                 "device", "torch_dtype", "num_threads", "comm_timeout_s", "batch_wait_ms",
                                 "model_revision",
                                 "use_hf", "api_key_file", "max_n", "max_connections",
                                 "max_connections_per_client", "client_timeout_s", "max_sequences_per_call",
                                 "max_sequences_in_flight", "max_num_seqs", "gpu_memory_utilization", "enforce_eager",
                                 "max_num_batched_tokens", "data_parallel_size", "max_model_len",
                                 "tensor_parallel_size"};
  // The same settings under the names `trl vllm-serve` and `swift rollout`
  // give them, so that their command lines run as they are.
  static const std::map<std::string, std::string> kAliases = {
      {"dtype", "torch_dtype"},
      {"revision", "model_revision"},
      {"vllm_gpu_memory_utilization", "gpu_memory_utilization"},
      {"vllm_max_num_seqs", "max_num_seqs"},
      {"vllm_enforce_eager", "enforce_eager"},
      {"vllm_data_parallel_size", "data_parallel_size"},
      {"vllm_tensor_parallel_size", "tensor_parallel_size"},
      {"vllm_max_model_len", "max_model_len"}};
  // Switches a bare --name turns on, as Hugging Face's argument parser reads them.
  static const char* kSwitches[] = {"enforce_eager", "use_hf"};
  Flags flags;
  std::map<std::string, std::string> spelled;  // setting -> the name it was given as
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "--version") {
      flags[arg] = "";
      continue;
    }
    if (arg.rfind("--", 0) != 0) throw std::invalid_argument(fmt::format("unexpected argument '{}'", arg));
    std::string name = arg.substr(2), value;
    const bool has_value = name.find('=') != std::string::npos;
    if (has_value) {
      value = name.substr(name.find('=') + 1);
      name.resize(name.find('='));
    }
    const std::string given = name;
    std::replace(name.begin(), name.end(), '-', '_');  // --max-model-len, as Hugging Face's parser also reads it
    if (auto alias = kAliases.find(name); alias != kAliases.end()) name = alias->second;
    if (std::none_of(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return name == k; }))
      throw std::invalid_argument(fmt::format("unknown flag --{} (see grpo-rollout --help)", given));
    const bool is_switch = std::any_of(std::begin(kSwitches), std::end(kSwitches), [&](const char* k) { return name == k; });
    if (!has_value) {
      if (is_switch && (i + 1 == argc || std::string(argv[i + 1]).rfind("--", 0) == 0))
        value = "true";
      else if (i + 1 < argc)
        value = argv[++i];
      else
        throw std::invalid_argument(fmt::format("--{} needs a value", given));
    }
    if (auto before = spelled.find(name); before != spelled.end() && before->second != given)
      throw std::invalid_argument(fmt::format("--{} and --{} are the same setting: give one", before->second, given));
    spelled[name] = given;
    if (is_switch) {  // Hugging Face's spellings of a boolean
      std::string lower = value;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      if (lower == "yes" || lower == "y" || lower == "t" || lower == "1") lower = "true";
      if (lower == "no" || lower == "n" || lower == "f" || lower == "0") lower = "false";
      if (lower == "true" || lower == "false") value = lower;
    }
    flags[name] = value;
  }
  return flags;
}

int64_t int_flag(const Flags& flags, const std::string& name, int64_t fallback, int64_t min) {
  auto it = flags.find(name);
  if (it == flags.end()) return fallback;
  try {
    size_t used = 0;
    int64_t v = std::stoll(it->second, &used);
    if (used == it->second.size() && v >= min) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(fmt::format("--{} must be an integer >= {}, got '{}'", name, min, it->second));
}

// --api_key, else --api_key_file's first line, else $GRPO_ROLLOUT_API_KEY; "" for none.
std::string api_key(const Flags& flags) {
  if (flags.count("api_key") && flags.count("api_key_file"))
    throw std::invalid_argument("--api_key and --api_key_file are exclusive: give one");
  if (auto it = flags.find("api_key"); it != flags.end()) return it->second;
  if (auto it = flags.find("api_key_file"); it != flags.end()) {
    std::ifstream in(it->second);
    std::string key;
    if (!in || !std::getline(in, key))
      throw std::invalid_argument(fmt::format("--api_key_file {}: cannot read a key from it", it->second));
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
    if (key.empty()) throw std::invalid_argument(fmt::format("--api_key_file {}: its first line is empty", it->second));
    return key;
  }
  const char* env = std::getenv("GRPO_ROLLOUT_API_KEY");
  return env ? env : "";
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

grpo::rollout::ServerOptions server_options(const Flags& flags) {
  grpo::rollout::ServerOptions o;
  auto get = [&](const std::string& name, const std::string& fallback) {
    auto it = flags.find(name);
    return it == flags.end() ? fallback : it->second;
  };
  const std::string use_hf = get("use_hf", "false");
  if (use_hf != "true" && use_hf != "false") throw std::invalid_argument("--use_hf must be true or false");
  const grpo::hub::Options hub{grpo::hub::use_hf_from(use_hf == "true"), get("model_revision", "")};
  o.model_dir = grpo::hub::resolve_model(get("model", ""), hub, "--model");
  if (o.model_dir.empty()) throw std::invalid_argument("--model DIR is required (a Hugging Face model directory)");
  o.host = get("host", o.host);
  o.port = static_cast<int>(int_flag(flags, "port", o.port, 0));
  if (o.port > 65535) throw std::invalid_argument("--port must be in 0..65535");
  o.api_key = api_key(flags);
  o.max_body_bytes = static_cast<size_t>(int_flag(flags, "max_body_bytes", static_cast<int64_t>(o.max_body_bytes), 1));
  o.max_prompt_tokens = int_flag(flags, "max_prompt_tokens", 0, 1);
  o.max_n = int_flag(flags, "max_n", o.max_n, 1);
  o.max_sequences_per_call = int_flag(flags, "max_sequences_per_call", o.max_sequences_per_call, 1);
  o.max_sequences_in_flight = int_flag(flags, "max_sequences_in_flight",
                                       std::max(o.max_sequences_in_flight, o.max_sequences_per_call), 1);
  if (o.max_sequences_in_flight < o.max_sequences_per_call)
    throw std::invalid_argument(fmt::format(
        "--max_sequences_in_flight {} is below --max_sequences_per_call {}: a call that large could never run; "
        "raise the first or lower the second",
        o.max_sequences_in_flight, o.max_sequences_per_call));
  o.device = grpo::model::parse_device(get("device", "auto"), "--device");
  // "auto" (trl vllm-serve's default): the device's own default.
  std::string dtype = get("torch_dtype", "auto");
  if (dtype == "auto") dtype = o.device.is_cuda() ? "bfloat16" : "float32";
  o.dtype = grpo::model::weight_dtype_from_name(dtype, "--torch_dtype");
  o.data_parallel_size = int_flag(flags, "data_parallel_size", 1, 1);
  if (int_flag(flags, "tensor_parallel_size", 1, 1) != 1)
    throw std::invalid_argument(
        "--tensor_parallel_size " + flags.at("tensor_parallel_size") +
        ": this server does not split a model over GPUs; each copy of the model must fit one GPU. For more GPUs, "
        "run a copy on each with --data_parallel_size");
  o.max_model_len = int_flag(flags, "max_model_len", 0, 1);
  grpo::rollout::replica_devices(o.device, o.data_parallel_size, grpo::model::visible_gpus());  // enough GPUs?
  o.num_threads = static_cast<int>(int_flag(flags, "num_threads", 0, 0));
  o.engine.max_slots = int_flag(flags, "max_num_seqs", o.engine.max_slots, 1);
  o.engine.max_prefill_tokens = int_flag(flags, "max_num_batched_tokens", o.engine.max_prefill_tokens, 0);
  if (auto it = flags.find("gpu_memory_utilization"); it != flags.end()) {
    char* end = nullptr;
    o.engine.memory_fraction = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end || !(o.engine.memory_fraction > 0 && o.engine.memory_fraction <= 1))
      throw std::invalid_argument(fmt::format("--gpu_memory_utilization must be a number in (0, 1], got '{}'", it->second));
  }
  if (auto it = flags.find("enforce_eager"); it != flags.end()) {
    if (it->second != "true" && it->second != "false")
      throw std::invalid_argument(fmt::format("--enforce_eager must be true or false, got '{}'", it->second));
    o.engine.cuda_graphs = it->second == "false";
  }
  o.comm_timeout = std::chrono::seconds(int_flag(flags, "comm_timeout_s", 300, 1));
  o.batch_wait = std::chrono::milliseconds(int_flag(flags, "batch_wait_ms", 2, 0));
  const int64_t max_connections = int_flag(flags, "max_connections", 256, 1);
  if (max_connections > 4096) throw std::invalid_argument("--max_connections must be at most 4096 (one thread each)");
  o.connections.max_connections = static_cast<int>(max_connections);
  o.connections.max_per_client = static_cast<int>(
      std::min<int64_t>(int_flag(flags, "max_connections_per_client", 128, 1), max_connections));
  o.connections.request_time = std::chrono::seconds(std::min<int64_t>(int_flag(flags, "client_timeout_s", 30, 1), 86400));
  return o;
}

// An exception no caller can catch: Gloo's network thread enforces that a
// broadcast is no longer than the receiving buffer, and throws there. A
// receiving buffer holds kReceiveHeadroom times the announced bytes, so this
// is a broadcast longer than that. The process cannot go on; its last words
// say what was being received and why, instead of an abort with a core dump.
[[noreturn]] void on_terminate() {
  std::string what = "an unknown error";
  try {
    if (auto error = std::current_exception()) std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
    what = what.substr(0, what.find('\n'));
  } catch (...) {
  }
  const std::string transfer = grpo::rollout::transfer_in_flight();
  if (!transfer.empty())
    std::fprintf(stderr,
                 "grpo-rollout: error: while receiving %s the trainer sent more than %d times the bytes it "
                 "announced (%s). The tensor a client broadcasts must have the dtype and shape its request names. "
                 "Gloo fails in its own thread here, so the server stops (exit status 3); restart it.\n",
                 transfer.c_str(), static_cast<int>(grpo::rollout::CommGroup::kReceiveHeadroom), what.c_str());
  else
    std::fprintf(stderr, "grpo-rollout: fatal error: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  grpo::dist::default_nccl_error_handling();  // before any thread: it may set an environment variable
  spdlog::set_default_logger(spdlog::stderr_color_mt("grpo-rollout"));  // stdout stays free for what a user pipes
  std::set_terminate(on_terminate);
  // Started by grpo-host (--num_infer_workers): end with it, even when it is killed.
  if (const char* parent = std::getenv("GRPO_ROLLOUT_EXIT_WITH_PARENT")) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (std::to_string(::getppid()) != parent) return 1;  // it died before the line above
  }
  // Block the stop signals in every thread (threads inherit the mask), so
  // one thread below receives them with sigwait and stops the server in order.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  grpo::rollout::ServerOptions options;
  try {
    Flags flags = parse_flags(argc, argv);
    if (flags.count("--help") || flags.count("-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (flags.count("--version")) {
      std::printf("grpo-rollout %d.%d.%d\n", GRPO_SDK_VERSION_MAJOR, GRPO_SDK_VERSION_MINOR, GRPO_SDK_VERSION_PATCH);
      return 0;
    }
    options = server_options(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grpo-rollout: %s\n", e.what());
    return 2;
  }
  if (!is_loopback(options.host) && options.api_key.empty())
    spdlog::warn("listening on {} without an API key: any client that reaches this port can generate and replace the "
                 "model's weights (/update_named_param/); set --api_key_file FILE or GRPO_ROLLOUT_API_KEY",
                 options.host);
  try {
    grpo::model::make_current(options.device);  // --device cuda:N: its GPU, not GPU 0, holds the CUDA context
    grpo::rollout::RolloutServer server(options);
    const int port = server.bind();
    std::printf("grpo-rollout listening on http://%s:%d/\n", options.host.c_str(), port);
    std::fflush(stdout);
    std::thread watcher([&] {
      int received = 0;
      sigwait(&stop_signals, &received);
      spdlog::info("grpo-rollout: signal {} received, stopping", received);
      server.stop();
    });
    server.serve();
    // serve() returns after stop(); a return for another reason must still release the watcher.
    pthread_kill(watcher.native_handle(), SIGTERM);
    watcher.join();
    // Destroying the server would wait for a weight-transfer step in flight (a communicator
    // waiting for its trainer: up to --comm_timeout_s); nothing is left to save, so end here.
    spdlog::shutdown();
    std::fflush(nullptr);
    std::_Exit(0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grpo-rollout: %s\n", e.what());
    return 1;
  }
}
