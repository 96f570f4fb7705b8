// The external_server sampler: generation by rollout servers over HTTP
// (grpo-rollout, `trl vllm-serve`, anything speaking the rollout protocol),
// new weights pushed to them over one weight-transfer group after each
// update. With several servers, each generation batch is spread over them.
// It runs apart from the trainer, so it never takes weights as views: each
// load_weights() sends the tensors' current values.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpo/sdk.hpp>
#include <nlohmann/json.hpp>

#include "dlpack_alias.h"
#include "completion_cut.h"
#include "rollout/weight_sender.h"
#include "rollout_http.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;
using grpo::external::RolloutHttp;

struct ExternalSampler {
  grpo::Host host;
  std::vector<std::unique_ptr<RolloutHttp>> servers;  // request i of call c goes to servers[(c + i) % size]
  std::atomic<size_t> calls{0};
  std::unique_ptr<grpo::tok::Tokenizer> tokenizer;
  std::unique_ptr<grpo::rollout::WeightSender> sender;  // connected at the first load_weights
  std::string group_host;
  int group_port = 51216;
  int64_t bucket_bytes = 0;  // 0: one tensor per call
  double comm_timeout_s = 300;
  std::optional<grpo::rollout::Backend> weight_backend;  // sampler_args weight_backend; unset: auto
  int max_concurrency = 16;  // per server

  std::vector<std::string> urls() const {
    std::vector<std::string> out;
    for (const auto& server : servers) out.push_back(server->options().base_url);
    return out;
  }
  std::string named_urls() const {
    std::string out;
    for (const std::string& url : urls()) out += (out.empty() ? "" : ", ") + url;
    return out;
  }
};

// "http://10.0.0.2:8000" -> "10.0.0.2": where the server (and so the group's store) runs.
std::string host_of(const std::string& url) {
  std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  if (!rest.empty() && rest[0] == '[') return rest.substr(1, rest.find(']') - 1);  // [::1]:8000
  return rest.substr(0, rest.find_first_of(":/"));
}

std::string with_scheme(const std::string& url) { return url.find("://") == std::string::npos ? "http://" + url : url; }

// base_urls (a list), else base_url, else host and port.
std::vector<std::string> base_urls_of(const grpo::Options& o, const json& config) {
  std::vector<std::string> urls;
  if (auto list = config.find("base_urls"); list != config.end() && !list->is_null()) {
    if (!list->is_array()) throw grpo::Error("sampler_args base_urls must be a list of URLs");
    for (const json& url : *list) {
      if (!url.is_string() || url.get<std::string>().empty())
        throw grpo::Error("sampler_args base_urls must be a list of URLs (http://HOST:PORT), got " + url.dump());
      urls.push_back(with_scheme(url.get<std::string>()));
    }
  }
  if (!urls.empty()) return urls;
  const std::string url = o.get_string("base_url", "");
  if (!url.empty()) return {with_scheme(url)};
  const std::string host = o.get_string("host", "");
  if (host.empty())
    throw grpo::Error("the external_server sampler needs the rollout server's address: sampler_args base_url "
                      "(http://HOST:PORT), base_urls or host and port, or --vllm_server_host HOST --vllm_server_port "
                      "PORT");
  return {"http://" + host + ":" + std::to_string(o.get_int("port", 8000))};
}

grpo_status create(const grpo_host_api* host_api, grpo_str config, grpo_sampler_instance** out, grpo_error* err) {
  return grpo::detail::guarded(err, [&] {
    grpo::Options o{grpo::view(config)};
    auto s = std::make_unique<ExternalSampler>();
    s->host = grpo::Host(host_api);
    grpo::external::ServerOptions so;
    const std::string text(grpo::view(config));  // Options reads scalars; base_urls is a list
    const std::vector<std::string> urls = base_urls_of(o, json::parse(text.empty() ? "{}" : text));
    so.base_url = urls.front();
    // The environment keeps the key out of args.yaml and ps, as the server's own variable does.
    const char* env_key = std::getenv("GRPO_ROLLOUT_API_KEY");
    so.api_key = o.get_string("api_key", env_key ? env_key : "");
    so.request_timeout_s = o.get_double("request_timeout_s", 600);
    so.retries = static_cast<int>(o.get_int("retries", 3));
    so.backoff_s = o.get_double("backoff_s", 1.0);
    so.retry_generate = o.get_bool("retry_generate", false);
    if (so.request_timeout_s <= 0 || so.retries < 0 || so.backoff_s < 0)
      throw grpo::Error("request_timeout_s must be > 0, retries and backoff_s >= 0");
    s->group_host = o.get_string("group_host", host_of(so.base_url));
    s->group_port = static_cast<int>(o.get_int("group_port", 51216));
    s->bucket_bytes = static_cast<int64_t>(o.get_double("bucket_mb", 256) * 1024 * 1024);
    s->comm_timeout_s = o.get_double("comm_timeout_s", 300);
    if (const std::string b = o.get_string("weight_backend", "auto"); b != "auto") {
      s->weight_backend = grpo::rollout::backend_from_name(b);
      if (!s->weight_backend) throw grpo::Error("weight_backend must be auto, gloo or nccl, got '" + b + "'");
    }
    s->max_concurrency = std::max<int>(1, static_cast<int>(o.get_int("max_concurrency", 16)));
    // /generate/ answers token ids only: the model's tokenizer gives the text rewards read.
    const std::string tok_path = o.get_string("tokenizer", o.get_string("model", ""));
    if (tok_path.empty())
      throw grpo::Error("the external_server sampler needs 'model' (or 'tokenizer'): the model directory whose "
                        "tokenizer decodes the server's completion ids");
    s->tokenizer = std::make_unique<grpo::tok::Tokenizer>(
        tok_path.size() > 5 && tok_path.compare(tok_path.size() - 5, 5, ".json") == 0
            ? grpo::tok::Tokenizer::from_file(tok_path)
            : grpo::tok::Tokenizer::from_dir(tok_path));
    const double wait_s = o.get_double("timeout_s", 240);
    for (const std::string& url : urls) {
      so.base_url = url;
      s->servers.push_back(std::make_unique<RolloutHttp>(so));
      s->host.info("waiting up to " + std::to_string(static_cast<int64_t>(wait_s)) + " s for the rollout server at " +
                   url);
      s->servers.back()->wait_until_healthy(wait_s);
      s->host.info("rollout server at " + url + " is up (" + std::to_string(s->servers.back()->world_size()) +
                   " worker(s))");
    }
    *out = reinterpret_cast<grpo_sampler_instance*>(s.release());
  });
}

// The request's own token budget (a multi-turn conversation near its total), else the params'.
int32_t request_budget(const grpo_generate_request& r, const grpo_sampling_params& p) {
  const bool own = GRPO_HAS_FIELD(&r, grpo_generate_request, max_new_tokens) && r.max_new_tokens > 0;
  return own ? std::min(r.max_new_tokens, p.max_new_tokens) : p.max_new_tokens;
}

// One /generate/ call per request: each carries its own seed and stop ids, and
// the server batches calls that arrive together into one engine step.
json request_body(const grpo_generate_request& r, const grpo_sampling_params& p) {
  json kwargs = {{"seed", static_cast<int64_t>(r.seed & static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))},
                 {"stop_token_ids", std::vector<int32_t>(r.stop_ids, r.stop_ids + r.n_stop_ids)}};
  if (p.n_stop_strings > 0) {  // lets the server stop early; the cut below makes it exact either way
    std::vector<std::string> stops;
    for (size_t i = 0; i < p.n_stop_strings; ++i) stops.emplace_back(grpo::view(p.stop_strings[i]));
    kwargs["stop"] = stops;
  }
  return json{{"prompts", json::array({std::vector<int32_t>(r.prompt_ids, r.prompt_ids + r.n_prompt_ids)})},
              {"n", r.n},
              {"temperature", p.temperature},
              {"top_p", p.top_p},
              {"top_k", p.top_k > 0 ? p.top_k : -1},
              {"min_p", p.min_p},
              {"repetition_penalty", p.repetition_penalty},
              {"max_tokens", request_budget(r, p)},
              {"logprobs", p.return_logprobs ? json(0) : json(nullptr)},
              {"generation_kwargs", kwargs}};
}

// The sampled token's logprob at each position ([tok][k], k = 0); null (-inf) kept as -inf.
std::vector<float> sampled_logprobs(const json& seq, size_t n, const std::string& where) {
  if (!seq.is_array() || seq.size() < n) throw grpo::Error(where + ": logprobs are missing or shorter than the ids");
  std::vector<float> out(n);
  for (size_t t = 0; t < n; ++t) {
    const json& v = seq[t].is_array() && !seq[t].empty() ? seq[t][0] : seq[t];
    out[t] = v.is_number() ? v.get<float>() : -std::numeric_limits<float>::infinity();
  }
  return out;
}

grpo_status generate(grpo_sampler_instance* self, const grpo_generate_request* requests, size_t n_requests,
                     size_t stride, const grpo_sampling_params* params, grpo_completion_sink sink, void* sink_ctx,
                     grpo_error* err) {
  return grpo::detail::guarded(err, [&] {
    auto* s = reinterpret_cast<ExternalSampler*>(self);
    auto request = [&](size_t i) {
      return reinterpret_cast<const grpo_generate_request*>(reinterpret_cast<const char*>(requests) + i * stride);
    };
    std::vector<json> answers(n_requests);
    std::atomic<size_t> next{0};
    // Calls start on the servers in turn: a call of one request (one prompt) uses each server as often.
    const size_t first = s->calls++;
    std::mutex failure_mutex;
    std::string failure;
    grpo_status failure_code = GRPO_OK;
    auto worker = [&] {
      for (size_t i = next++; i < n_requests; i = next++) {
        try {
          answers[i] = s->servers[(first + i) % s->servers.size()]->generate(request_body(*request(i), *params));
        } catch (const std::exception& e) {  // nothing may escape a thread
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (failure.empty()) {
            failure = e.what();
            const auto* ge = dynamic_cast<const grpo::Error*>(&e);
            failure_code = ge ? ge->code() : GRPO_INTERNAL;
          }
          next = n_requests;  // the step fails anyway: send nothing more
        }
      }
    };
    std::vector<std::thread> pool;
    const size_t threads = std::min<size_t>(n_requests, static_cast<size_t>(s->max_concurrency) * s->servers.size());
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
    if (!failure.empty()) throw grpo::Error(failure, failure_code);

    std::vector<std::string> stop_strings;
    for (size_t i = 0; i < params->n_stop_strings; ++i) stop_strings.emplace_back(grpo::view(params->stop_strings[i]));
    for (size_t i = 0; i < n_requests; ++i) {
      const grpo_generate_request& r = *request(i);
      const json& ids_of = answers[i]["completion_ids"];
      const std::string where = "the rollout server's /generate/ answer for request " + std::to_string(r.request_id);
      if (ids_of.size() != r.n)
        throw grpo::Error(where + " has " + std::to_string(ids_of.size()) + " completions, " + std::to_string(r.n) +
                          " were asked for");
      const std::vector<int32_t> stop_ids(r.stop_ids, r.stop_ids + r.n_stop_ids);
      for (uint32_t k = 0; k < r.n; ++k) {
        std::vector<int32_t> ids = ids_of[k].get<std::vector<int32_t>>();
        const grpo::external::Cut cut = grpo::external::cut_completion(ids, stop_ids, stop_strings, s->tokenizer.get());
        std::vector<float> logprobs;
        if (params->return_logprobs) logprobs = sampled_logprobs(answers[i]["logprobs"][k], cut.length, where);
        ids.resize(cut.length);
        const std::string text = s->tokenizer->decode_sampled(ids, /*skip_special_tokens=*/true);
        grpo_completion c{};
        c.struct_size = GRPO_COMPLETION_STRUCT_SIZE;
        c.request_id = r.request_id;
        c.index = k;
        c.ids = ids.data();
        c.n_ids = ids.size();
        c.logprobs = params->return_logprobs ? logprobs.data() : nullptr;
        c.text = grpo::str(text);
        // A server that stopped short of max_tokens on a stop id of its own (its eos) stopped, too.
        const bool full = static_cast<int64_t>(ids.size()) >= request_budget(r, *params);
        c.finish_reason = cut.stopped || !full ? GRPO_FINISH_STOP : GRPO_FINISH_LENGTH;
        sink(sink_ctx, &c);
      }
    }
  });
}

grpo_status load_weights(grpo_sampler_instance* self, const grpo_named_tensor* tensors, size_t n, uint32_t flags,
                         grpo_error* err) {
  return grpo::detail::guarded(err, [&] {
    auto* s = reinterpret_cast<ExternalSampler*>(self);
    const std::string url = s->named_urls();
    try {
      if (!s->sender) {
        grpo::rollout::WeightSenderOptions wo;
        wo.base_urls = s->urls();
        wo.api_key = s->servers.front()->options().api_key;
        wo.backend = s->weight_backend;
        s->sender = std::make_unique<grpo::rollout::WeightSender>(wo);
      }
      grpo::rollout::NamedTensors named;
      named.reserve(n);
      for (size_t i = 0; i < n; ++i) named.emplace_back(std::string(grpo::view(tensors[i].name)), grpo::samplers::alias_of(tensors[i].tensor));
      if (!s->sender->connected()) {
        s->host.info("joining the weight-transfer group of " + url + " at " + s->group_host + ":" +
                     std::to_string(s->group_port));
        // The weights' device, with the servers', picks NCCL or Gloo.
        const at::Device weights = named.empty() ? at::Device(at::kCPU) : named.front().second.device();
        s->sender->connect(s->group_host, s->group_port,
                           std::chrono::milliseconds(static_cast<int64_t>(s->comm_timeout_s * 1000)), weights);
        const grpo::rollout::BackendChoice& choice = s->sender->backend();
        s->host.info(std::string("weights go to ") + url + " over " + grpo::rollout::backend_name(choice.backend) +
                     " (" + choice.why + ")");
      }
      if (s->bucket_bytes > 0) {
        s->sender->send_all(named, s->bucket_bytes);
      } else {
        for (const auto& [name, t] : named) s->sender->send(name, t);
      }
      // The server loads what it received when asked to reset: a failure there surfaces now.
      if (flags & GRPO_WEIGHTS_LAST_BUCKET) s->sender->reset_prefix_cache();
    } catch (const std::exception& e) {  // TransferError, or a malformed answer
      s->sender.reset();  // the group is broken: a later call starts a fresh one
      throw grpo::Error(std::string("pushing weights to the rollout server") + (s->servers.size() > 1 ? "s" : "") +
                            " at " + url + " failed: " + e.what() +
                            ": is the server still running, and can it reach " + s->group_host + ":" +
                            std::to_string(s->group_port) + " (sampler_args group_host / group_port)?",
                        GRPO_UNAVAILABLE);
    }
  });
}

void destroy(grpo_sampler_instance* self) { delete reinterpret_cast<ExternalSampler*>(self); }

const grpo_sampler_api kApi = {GRPO_SAMPLER_API_STRUCT_SIZE, 0u, &create, &generate, &load_weights,
                               nullptr, nullptr, &destroy};

const char* kOptions = R"json([
  {"name": "base_url", "type": "string", "default": null, "help": "rollout server URL, e.g. http://127.0.0.1:8000"},
  {"name": "base_urls", "type": "strings", "default": null, "help": "several rollout servers' URLs: each generation batch is spread over them and the weights pushed to all in one group"},
  {"name": "host", "type": "string", "default": null, "help": "rollout server host (with port; instead of base_url)"},
  {"name": "port", "type": "int", "default": 8000, "help": "rollout server port (with host)"},
  {"name": "timeout_s", "type": "float", "default": 240, "help": "how long to wait for /health/ at start (vllm_server_timeout)"},
  {"name": "request_timeout_s", "type": "float", "default": 600, "help": "limit of one HTTP call, a whole /generate/ answer included"},
  {"name": "retries", "type": "int", "default": 3, "help": "extra attempts of idempotent calls that got no answer or a 5xx"},
  {"name": "backoff_s", "type": "float", "default": 1.0, "help": "wait before the first retry, doubled after each"},
  {"name": "retry_generate", "type": "bool", "default": false, "help": "retry /generate/ too (seeded calls repeat exactly)"},
  {"name": "api_key", "type": "string", "default": null, "help": "sent as Authorization: Bearer (the server's key; unset: $GRPO_ROLLOUT_API_KEY)"},
  {"name": "group_host", "type": "string", "default": null, "help": "address of the weight-transfer store (default: the first server's host)"},
  {"name": "group_port", "type": "int", "default": 51216, "help": "port of the weight-transfer store the server hosts"},
  {"name": "bucket_mb", "type": "float", "default": 256, "help": "weights per broadcast in MiB (0: one call per parameter)"},
  {"name": "comm_timeout_s", "type": "float", "default": 300, "help": "limit of each weight-transfer step"},
  {"name": "weight_backend", "type": "string", "default": "auto", "help": "what carries pushed weights: auto (NCCL when every server has a GPU of its own, else Gloo), gloo or nccl"},
  {"name": "max_concurrency", "type": "int", "default": 16, "help": "/generate/ calls in flight at once, per server"},
  {"name": "model", "type": "string", "default": null, "help": "model directory whose tokenizer decodes completions"},
  {"name": "tokenizer", "type": "string", "default": null, "help": "tokenizer directory or tokenizer.json (default: the model's)"}])json";

}  // namespace

GRPO_EXPORT_PLUGINS(::grpo::detail::PluginRecord{"external_server", GRPO_SAMPLER_INTERFACE, "1.0.0",
                                                 "a rollout server over HTTP (grpo-rollout, trl vllm-serve)",
                                                 kOptions, &kApi, {}})
