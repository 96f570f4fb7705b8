// Values that follow from other values (swift's and TRL's __post_init__), and the rules across flags.
// Each message names the numbers, where each came from and a setting that would work.

#include "config/config_internal.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>

namespace grpo::config::detail {
namespace {

using nlohmann::json;

class Resolver {
 public:
  Resolver(Config& config, Problems& problems) : config_(config), problems_(problems) {}

  void run() {
    reset_derived();
    follow("epsilon_high", "epsilon");
    follow("cosine_max_len", "max_completion_length");
    follow("soft_max_length", "max_completion_length");
    check_soft_overlong();
    check_reward_weights();
    resolve_batch_geometry();
    follow("eval_steps", "save_steps");
    resolve_sampler();
    read_system_file();
  }

 private:
  auto& entry(const std::string& name) { return ConfigAccess::entry(config_, name); }
  const json& value(const std::string& name) { return entry(name).value; }
  int64_t integer(const std::string& name) { return value(name).get<int64_t>(); }
  bool is_set(const std::string& name) { return entry(name).explicit_set; }
  // Set to a value: an explicit null (as args.yaml writes for derived values) leaves it to derivation.
  bool given(const std::string& name) { return entry(name).explicit_set && !entry(name).given.is_null(); }

  // " (configs/x.yaml:3)", " (--flag)", " (default)", " (derived from ...)": where a number came from.
  std::string from(const std::string& name) { return " (" + entry(name).origin + ")"; }
  std::string shown(const std::string& name) { return name + " " + render(value(name)) + from(name); }

  void derive(const std::string& name, json v, const std::string& origin) {
    auto& e = entry(name);
    e.value = std::move(v);
    e.derived = true;
    e.origin = origin;
  }

  // Redo every derivation from scratch, so that set() after parse() sees fresh values.
  void reset_derived() {
    for (const FlagSpec& spec : flag_table()) {
      auto& e = entry(spec.name);
      if (!e.derived) continue;
      e.derived = false;
      if (e.explicit_set) {
        e.value = e.given;
        const auto cut = e.origin.find(" + ");
        if (cut != std::string::npos) e.origin.resize(cut);
      } else {
        e.value = spec.default_value;
        e.origin = "default";
      }
    }
  }

  void follow(const std::string& name, const std::string& source) {
    if (value(name).is_null() && !value(source).is_null()) derive(name, value(source), "derived from " + source);
  }

  // soft_overlong's lengths come from its plugin_args section when there (cli.md), else the flags.
  void check_soft_overlong() {
    const json& funcs = value("reward_funcs");
    if (std::find(funcs.begin(), funcs.end(), json("soft_overlong")) == funcs.end()) return;
    if (problems_.touches({"reward_funcs", "soft_cache_length", "soft_max_length", "max_completion_length",
                           "plugin_args"}))
      return;
    const json& args = value("plugin_args");
    const json section = args.contains("soft_overlong") ? args["soft_overlong"] : json::object();
    auto length = [&](const std::string& key, std::string& shown_as) -> std::optional<int64_t> {
      if (section.is_object() && section.contains(key)) {
        shown_as = "plugin_args.soft_overlong." + key + " " + section[key].dump() + from("plugin_args");
        if (!section[key].is_number_integer()) {
          problems_.add(shown_as + " must be an integer number of tokens", "plugin_args");
          return std::nullopt;
        }
        return section[key].get<int64_t>();
      }
      shown_as = shown(key);
      if (value(key).is_null()) return std::nullopt;
      return integer(key);
    };
    std::string max_shown, cache_shown;
    const std::optional<int64_t> max_length = length("soft_max_length", max_shown);
    const std::optional<int64_t> cache_length = length("soft_cache_length", cache_shown);
    if (!max_length) return;
    const std::string example = std::to_string(std::max<int64_t>(1, *max_length / 4));
    if (!cache_length) {
      if (problems_.touches({"plugin_args"})) return;
      problems_.add("reward_funcs" + from("reward_funcs") +
                        " includes soft_overlong, which needs soft_cache_length: the length of the penalty "
                        "ramp that ends at " + max_shown + "; e.g. --soft_cache_length " + example +
                        " (or plugin_args: {soft_overlong: {soft_cache_length: " + example + "}})",
                    "soft_cache_length");
    } else if (*cache_length >= *max_length) {
      problems_.add(cache_shown + " must be smaller than " + max_shown +
                        ": soft_overlong penalises lengths between soft_max_length - soft_cache_length and "
                        "soft_max_length; e.g. soft_cache_length " + example,
                    "soft_cache_length");
    }
  }

  void check_reward_weights() {
    const json& weights = value("reward_weights");
    if (weights.is_null() || problems_.touches({"reward_weights", "reward_funcs", "reward_model"})) return;
    const json& funcs = value("reward_funcs");
    const json& models = value("reward_model");
    const size_t count = funcs.size() + models.size();
    if (weights.size() == count) return;
    std::string names;
    for (const json& f : funcs) names += (names.empty() ? "" : ", ") + f.get<std::string>();
    for (const json& m : models) names += (names.empty() ? "" : ", ") + m.get<std::string>();
    problems_.add("reward_weights" + from("reward_weights") + " has " + std::to_string(weights.size()) +
                      " values but there are " + std::to_string(count) + " reward functions" +
                      (count ? " (" + names + ")" : "") +
                      "; give one weight per reward function, reward models last",
                  "reward_weights");
  }

  // Far past what any machine samples at once, and small enough that products
  // and round-ups of batch sizes cannot overflow int64.
  static constexpr int64_t kMaxBatchCompletions = int64_t(1) << 31;

  static int64_t round_up(int64_t v, int64_t step) { return (v + step - 1) / step * step; }

  // A divisor of `total` near `g` (at least 2, at most 2g), or 0 when there is none.
  static int64_t nearest_divisor(int64_t total, int64_t g) {
    int64_t best = 0;
    for (int64_t d = 2; d <= std::min(total, 2 * g); ++d) {
      if (total % d != 0) continue;
      if (best == 0 || std::llabs(d - g) < std::llabs(best - g)) best = d;
    }
    return best;
  }

  // grpo.md §1: one generation batch is split into steps_per_generation micro-batches of
  // per_device_train_batch_size x world_size completions, and holds whole groups of G.
  void resolve_batch_geometry() {
    const bool check = ConfigAccess::check_batch_geometry(config_);
    if (problems_.touches({"per_device_train_batch_size", "gradient_accumulation_steps", "num_generations",
                           "steps_per_generation", "generation_batch_size", "per_device_eval_batch_size"}))
      return;
    if (given("steps_per_generation") && given("generation_batch_size")) {
      // Exclusive whatever the subcommand: there is no single meaning for both.
      problems_.add("steps_per_generation" + from("steps_per_generation") + " and generation_batch_size" +
                        from("generation_batch_size") +
                        " are mutually exclusive: set one of them (generation_batch_size = "
                        "per_device_train_batch_size x world size x steps_per_generation)",
                    "generation_batch_size");
      return;
    }
    const int64_t world = config_.world_size();
    const int64_t pbs = integer("per_device_train_batch_size");
    const int64_t g = integer("num_generations");
    // Every product below is of these sizes; checked once here, so none of them wraps.
    const int64_t spg_or_1 = given("generation_batch_size")
                                 ? 1
                                 : integer(given("steps_per_generation") ? "steps_per_generation"
                                                                         : "gradient_accumulation_steps");
    for (const char* flag : {"per_device_train_batch_size", "per_device_eval_batch_size"}) {
      const int64_t per_device = integer(flag);
      int64_t total = 0;
      const bool wraps = __builtin_mul_overflow(per_device, world, &total) ||
                         __builtin_mul_overflow(total, std::string(flag) == "per_device_train_batch_size" ? spg_or_1 : 1,
                                                &total);
      if (wraps || total > kMaxBatchCompletions || g > kMaxBatchCompletions) {
        problems_.add(shown(flag) + " x " + "world size " + std::to_string(world) +
                          (spg_or_1 > 1 ? " x steps_per_generation " + std::to_string(spg_or_1) : "") +
                          " (and num_generations " + std::to_string(g) + ") must stay under " +
                          std::to_string(kMaxBatchCompletions) +
                          " completions per batch; these sizes count completions, not bytes or tokens",
                      flag);
        return;
      }
    }
    const int64_t micro = pbs * world;  // completions per micro-batch over all processes
    const std::string world_text = "world size " + std::to_string(world);

    if (given("generation_batch_size")) {
      const int64_t gbs = integer("generation_batch_size");
      if (gbs > kMaxBatchCompletions) {
        problems_.add(shown("generation_batch_size") + " must stay under " + std::to_string(kMaxBatchCompletions) +
                          " completions",
                      "generation_batch_size");
        return;
      }
      const int64_t step = std::lcm(micro, g);
      if (gbs % micro != 0) {
        if (!check) {
          derive("steps_per_generation", std::max<int64_t>(1, gbs / micro),
                 "derived from generation_batch_size / (per_device_train_batch_size x world size)");
          return;
        }
        problems_.add(shown("generation_batch_size") + " is not a multiple of per_device_train_batch_size " +
                          std::to_string(pbs) + " x " + world_text + " = " + std::to_string(micro) +
                          ", so it cannot be split into whole micro-batches; e.g. --generation_batch_size " +
                          std::to_string(round_up(gbs, step)),
                      "generation_batch_size");
        return;
      }
      derive("steps_per_generation", gbs / micro,
             "derived from generation_batch_size / (per_device_train_batch_size x world size)");
      if (check && gbs % g != 0) {
        std::string message = shown("generation_batch_size") + " is not a multiple of " +
                              shown("num_generations") + ": the " + std::to_string(g) +
                              " completions of a prompt must be in one generation batch; e.g. "
                              "--generation_batch_size " + std::to_string(round_up(gbs, step));
        if (int64_t d = nearest_divisor(gbs, g)) message += " or --num_generations " + std::to_string(d);
        problems_.add(message, "generation_batch_size");
      }
    } else {
      const bool spg_set = given("steps_per_generation");
      if (!spg_set)
        derive("steps_per_generation", value("gradient_accumulation_steps"),
               "derived from gradient_accumulation_steps");
      const int64_t spg = integer("steps_per_generation");
      const int64_t gbs = micro * spg;
      derive("generation_batch_size", gbs,
             "derived from per_device_train_batch_size x world size x steps_per_generation");
      if (check && gbs % g != 0) {
        const std::string spg_flag = spg_set ? "steps_per_generation" : "gradient_accumulation_steps";
        const int64_t spg_ok = round_up(spg, g / std::gcd(micro, g));
        const int64_t pbs_ok = round_up(pbs, g / std::gcd(world * spg, g));
        std::string message =
            "generation_batch_size " + std::to_string(gbs) + " is not a multiple of " + shown("num_generations") +
            ": the " + std::to_string(g) + " completions of a prompt must be in one generation batch. "
            "generation_batch_size = per_device_train_batch_size " + std::to_string(pbs) +
            from("per_device_train_batch_size") + " x " + world_text + " x steps_per_generation " +
            std::to_string(spg) + from("steps_per_generation") + ". Valid settings: --" + spg_flag + " " +
            std::to_string(spg_ok) + ", or --per_device_train_batch_size " + std::to_string(pbs_ok);
        if (int64_t d = nearest_divisor(gbs, g)) message += ", or --num_generations " + std::to_string(d);
        problems_.add(message, "generation_batch_size");
      }
    }
    if (check) check_eval_geometry(world, g);
  }

  void check_eval_geometry(int64_t world, int64_t g) {
    const bool evaluates = !value("val_dataset").empty() || value("split_dataset_ratio").get<double>() > 0;
    if (!evaluates) return;
    const int64_t eval_pbs = integer("per_device_eval_batch_size");
    if ((eval_pbs * world) % g == 0) return;
    problems_.add(shown("per_device_eval_batch_size") + " x world size " + std::to_string(world) + " = " +
                      std::to_string(eval_pbs * world) + " completions per evaluation batch is not a multiple of " +
                      shown("num_generations") + "; e.g. --per_device_eval_batch_size " +
                      std::to_string(round_up(eval_pbs, g / std::gcd(world, g))),
                  "per_device_eval_batch_size");
  }

  // The rollout servers' URLs: vllm_server_base_url, else each host with its
  // port (or the one port). Empty when none is given or the lists disagree
  // (then a problem says so).
  std::vector<std::string> server_addresses() {
    std::vector<std::string> urls = value("vllm_server_base_url").get<std::vector<std::string>>();
    if (!urls.empty()) return urls;
    const auto hosts = value("vllm_server_host").get<std::vector<std::string>>();
    const auto ports = value("vllm_server_port").get<std::vector<int64_t>>();
    if (hosts.empty()) return {};
    if (ports.size() != 1 && ports.size() != hosts.size()) {
      problems_.add(shown("vllm_server_port") + " gives " + std::to_string(ports.size()) + " ports for " +
                        std::to_string(hosts.size()) + " hosts: give one port per host, or one for all",
                    "vllm_server_port");
      return {};
    }
    for (size_t i = 0; i < hosts.size(); ++i) {
      const std::string& host = hosts[i];
      const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
      urls.push_back("http://" + (ipv6 ? "[" + host + "]" : host) + ":" +
                     std::to_string(ports[ports.size() == 1 ? 0 : i]));
    }
    return urls;
  }

  // cli.md: use_vllm selects the fast path, external_server when a server address is given.
  void resolve_sampler() {
    if (problems_.touches({"use_vllm", "vllm_mode", "sampler", "sampler_args", "vllm_server_base_url",
                           "vllm_server_host", "vllm_server_port", "vllm_server_timeout", "num_infer_workers"}))
      return;
    const std::vector<std::string> addresses = server_addresses();
    if (problems_.touches({"vllm_server_port"})) return;
    const json& given_args = value("sampler_args");
    const bool args_have_url = given_args.contains("base_url") || given_args.contains("base_urls");
    // num_infer_workers: the host starts its own servers, so they have no address yet.
    // One worker elsewhere is what ms-swift's default always meant: sampling beside training.
    const json& workers = value("num_infer_workers");
    const bool server_mode = value("use_vllm").get<bool>() && value("vllm_mode").get<std::string>() == "server";
    const bool given_address = !addresses.empty() || args_have_url;
    const bool starts_servers = !workers.is_null() && server_mode && !given_address;
    if (!workers.is_null() && !starts_servers && workers.get<int64_t>() > 1) {
      problems_.add(shown("num_infer_workers") +
                        (given_address
                             ? " starts its own rollout servers, and a server address is given too; keep one of them"
                             : " starts rollout servers to sample on: it needs --use_vllm true --vllm_mode server"),
                    "num_infer_workers");
      return;
    }
    if (value("use_vllm").get<bool>()) {
      const std::string mode = value("vllm_mode").get<std::string>();
      std::string wanted = "native";
      if (mode == "server" || !addresses.empty()) {
        if (addresses.empty() && !args_have_url && !starts_servers) {
          problems_.add("use_vllm with vllm_mode server" + from("vllm_mode") +
                            " needs the rollout server's address: set --vllm_server_host HOST (and "
                            "--vllm_server_port) or --vllm_server_base_url URL, or have grpo-host start servers "
                            "with --num_infer_workers N",
                        "vllm_mode");
          return;
        }
        wanted = "external_server";
      }
      const std::string sampler = value("sampler").get<std::string>();
      if (is_set("sampler") && sampler != wanted) {
        problems_.add("sampler " + sampler + from("sampler") + " conflicts with use_vllm" + from("use_vllm") +
                          ", which selects " + wanted + " here; keep one of them",
                      "sampler");
        return;
      }
      if (!is_set("sampler") && sampler != wanted) derive("sampler", wanted, "derived from use_vllm");
    }
    if (value("sampler").get<std::string>() != "external_server") return;
    json args = given_args;
    std::vector<std::string> added;
    if (!args_have_url && !starts_servers) {
      if (addresses.empty()) {
        problems_.add("sampler external_server" + from("sampler") +
                          " needs the rollout server's address: set sampler_args '{\"base_url\": "
                          "\"http://HOST:8000\"}' or --vllm_server_host HOST",
                      "sampler_args");
        return;
      }
      if (addresses.size() == 1) args["base_url"] = addresses[0];
      else args["base_urls"] = addresses;
      added.push_back(value("vllm_server_base_url").empty() ? "vllm_server_host/port" : "vllm_server_base_url");
    }
    if (!args.contains("timeout_s")) {
      args["timeout_s"] = value("vllm_server_timeout");
      added.push_back("vllm_server_timeout");
    }
    if (added.empty()) return;
    std::string origin = is_set("sampler_args") ? entry("sampler_args").origin + " + " : std::string();
    origin += "derived from ";
    for (size_t i = 0; i < added.size(); ++i) origin += (i ? " and " : "") + added[i];
    derive("sampler_args", args, origin);
  }

  // `system` naming a file: args.yaml records the file's text, as ms-swift's args.json does, so the run
  // can be repeated from it after the file changed. A `.txt` value that is no file is refused, as
  // ms-swift refuses it: run from another directory, the path itself would become the prompt.
  void read_system_file() {
    const json& v = value("system");
    if (!v.is_string() || problems_.touches({"system"})) return;
    const std::string path = v.get<std::string>();
    if (path.empty() || path.size() > 4096 || path.find('\n') != std::string::npos) return;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      const bool txt = path.size() > 4 && path.compare(path.size() - 4, 4, ".txt") == 0;
      if (txt)
        problems_.add(shown("system") + " names a .txt file that does not exist here (the working directory is " +
                          std::filesystem::current_path(ec).string() + "); give the file's path, or the prompt text",
                      "system");
      return;
    }
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.bad()) derive("system", text, "read from " + path);
  }

  Config& config_;
  Problems& problems_;
};

}  // namespace

void resolve(Config& config, Problems& problems) { Resolver(config, problems).run(); }

}  // namespace grpo::config::detail
