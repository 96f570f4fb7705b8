#include "rollout_http.h"

#include <httplib.h>

#include <memory>
#include <thread>

#include <grpo/sdk.hpp>

#include "util/json_input.h"

namespace grpo::external {

using nlohmann::json;

namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

// One client per call: httplib clients are not meant for concurrent use, and
// generate() issues calls from several threads.
std::unique_ptr<httplib::Client> client_for(const ServerOptions& o) {
  auto c = std::make_unique<httplib::Client>(o.base_url);
  if (!c->is_valid())
    throw grpo::Error("'" + o.base_url + "' is not a valid rollout server URL: give base_url as http://HOST:PORT");
  if (!o.api_key.empty()) c->set_bearer_token_auth(o.api_key);
  c->set_connection_timeout(millis(o.connect_timeout_s));
  c->set_read_timeout(millis(o.request_timeout_s));
  c->set_write_timeout(millis(o.request_timeout_s));
  return c;
}

Reply to_reply(const httplib::Result& res) {
  Reply r;
  if (!res) {
    switch (res.error()) {  // httplib's own names ("Connection", "Read") say little on their own
      case httplib::Error::Connection: r.failure = "could not connect: nothing listening, or unreachable"; break;
      case httplib::Error::ConnectionTimeout: r.failure = "connecting timed out"; break;
      case httplib::Error::Read: r.failure = "the connection closed or timed out before an answer"; break;
      case httplib::Error::Write: r.failure = "the connection closed while sending"; break;
      default: r.failure = httplib::to_string(res.error());
    }
    return r;
  }
  r.status = res->status;
  r.body = res->body;
  return r;
}

bool worth_retrying(const Reply& r) { return r.status == 0 || r.status >= 500; }

}  // namespace

std::string describe(const Reply& reply) {
  if (reply.status == 0) return "no answer (" + reply.failure + ")";
  json body = util::try_parse_json(reply.body);
  if (body.is_object() && body.contains("error") && body["error"].is_string())
    return "HTTP " + std::to_string(reply.status) + ": " + body["error"].get<std::string>();
  return "HTTP " + std::to_string(reply.status) + ": " + reply.body.substr(0, 300);
}

RolloutHttp::RolloutHttp(ServerOptions options) : options_(std::move(options)) {
  while (!options_.base_url.empty() && options_.base_url.back() == '/') options_.base_url.pop_back();
  client_for(options_);  // a malformed URL fails here, before any waiting
}

Reply RolloutHttp::get(const std::string& path, std::chrono::milliseconds read_timeout) const {
  auto c = client_for(options_);
  c->set_read_timeout(read_timeout);
  return to_reply(c->Get(path.c_str()));
}

Reply RolloutHttp::post(const std::string& path, const std::string& body) const {
  return to_reply(client_for(options_)->Post(path.c_str(), body, "application/json"));
}

template <class F>
Reply RolloutHttp::with_retries(int retries, F attempt) const {
  Reply r = attempt();
  double wait = options_.backoff_s;
  for (int i = 0; i < retries && worth_retrying(r); ++i) {
    std::this_thread::sleep_for(millis(wait));
    wait *= 2;
    r = attempt();
  }
  return r;
}

void RolloutHttp::wait_until_healthy(double timeout_s) const {
  const auto deadline = std::chrono::steady_clock::now() + millis(timeout_s);
  const auto poll = std::chrono::milliseconds(250);
  Reply last;
  while (true) {
    // A health check that takes longer than the poll interval is as good as no answer.
    last = get("/health/", std::max(poll, millis(std::min(timeout_s, 10.0))));
    if (last.status == 200) return;
    if (last.status == 401 || last.status == 403)
      throw grpo::Error("the rollout server at " + options_.base_url + " refused the API key (" + describe(last) +
                        "): set sampler_args api_key to the server's --api_key");
    if (std::chrono::steady_clock::now() + poll >= deadline) break;
    std::this_thread::sleep_for(poll);
  }
  throw grpo::Error("no rollout server answered at " + options_.base_url + "/health/ within " +
                    std::to_string(static_cast<int64_t>(timeout_s)) + " s (last try: " + describe(last) +
                    "): start it first (grpo-rollout --model DIR --port PORT, or trl vllm-serve), check "
                    "--vllm_server_host/--vllm_server_port or sampler_args base_url, or raise "
                    "--vllm_server_timeout");
}

int RolloutHttp::world_size() const {
  Reply r = with_retries(options_.retries, [&] { return get("/get_world_size/", millis(options_.request_timeout_s)); });
  if (r.status != 200)
    throw grpo::Error("GET " + options_.base_url + "/get_world_size/ failed: " + describe(r) +
                      ": is the rollout server still running?");
  json body = util::try_parse_json(r.body);
  if (!body.is_object() || !body.contains("world_size") || !body["world_size"].is_number_integer())
    throw grpo::Error("GET " + options_.base_url + "/get_world_size/ gave no integer world_size: " + r.body.substr(0, 200));
  return body["world_size"].get<int>();
}

json RolloutHttp::generate(const json& body) const {
  const std::string text = body.dump();
  Reply r = with_retries(options_.retry_generate ? options_.retries : 0, [&] { return post("/generate/", text); });
  if (r.status != 200) {
    const std::string hint = r.status == 0 ? ": is the rollout server still running? (a run that stopped here "
                                             "resumes from its last checkpoint with --resume_from_checkpoint)"
                                           : "";
    throw grpo::Error("POST " + options_.base_url + "/generate/ failed: " + describe(r) + hint,
                      r.status == 0 ? GRPO_UNAVAILABLE : GRPO_INTERNAL);
  }
  json answer = util::try_parse_json(r.body);
  if (!answer.is_object() || !answer.contains("completion_ids") || !answer["completion_ids"].is_array())
    throw grpo::Error("POST " + options_.base_url + "/generate/ answered without completion_ids: " +
                      r.body.substr(0, 200));
  return answer;
}

}  // namespace grpo::external
