#include "rollout/rollout_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/engine.h"
#include "model/stop_ids.h"
#include "model/threads.h"
#include "model/weights.h"
#include "model/device.h"
#include "rollout/replicas.h"
#include "rollout/weight_receiver.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "util/json_input.h"

namespace grpo::rollout {

using nlohmann::json;

namespace {

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  // Text decoded from sampled ids may end inside a UTF-8 sequence: replaced (U+FFFD), never a failed reply.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void reply_error(httplib::Response& res, int status, const std::string& error, const std::string& field = "") {
  json body{{"error", error}};
  if (!field.empty()) body["field"] = field;
  reply(res, status, body);
}

}  // namespace

RolloutServer::RolloutServer(ServerOptions options) : options_(std::move(options)) {
  model::configure_cpu_threads(options_.num_threads);
  model_name_ = std::filesystem::path(options_.model_dir).lexically_normal().filename().string();
  if (model_name_.empty()) model_name_ = std::filesystem::path(options_.model_dir).parent_path().filename().string();
  tokenizer_ = std::make_unique<tok::Tokenizer>(tok::Tokenizer::from_dir(options_.model_dir));
  // Checked before the weights load: a large model takes minutes to.
  const int64_t positions =
      model::ModelConfig::load((std::filesystem::path(options_.model_dir) / "config.json").string()).max_position_embeddings;
  if (options_.max_model_len > positions)
    throw std::invalid_argument(fmt::format("--max_model_len {} is above the model's max_position_embeddings ({}, "
                                            "config.json): give at most that",
                                            options_.max_model_len, positions));
  replicas_ = std::make_unique<Replicas>(
      options_.model_dir, options_.dtype,
      replica_devices(options_.device, options_.data_parallel_size, model::visible_gpus()), tokenizer_.get(),
      options_.engine, options_.batch_wait, options_.num_threads, options_.max_sequences_in_flight);
  for (const auto& item : replicas_->first().model()->named_parameters())
    param_shapes_[item.key()] = item.value().sizes().vec();

  const model::ModelConfig& config = replicas_->first().model()->config();
  prompt_context_.tokenizer = tokenizer_.get();
  try {
    prompt_context_.chat_family = tok::chat_family_for(*tokenizer_, "");
  } catch (const tok::ChatTemplateError& e) {
    spdlog::warn("/chat/ and /infer/ are off: {}", e.what());
  }
  prompt_context_.eos_ids = model::stop_token_ids(*tokenizer_, config, options_.model_dir);
  prompt_context_.vocab_size = config.vocab_size;
  const int64_t context = options_.max_model_len > 0 ? options_.max_model_len : config.max_position_embeddings;
  prompt_context_.max_model_len = context;
  prompt_context_.max_n = options_.max_n;
  prompt_context_.max_sequences_per_call = options_.max_sequences_per_call;
  prompt_context_.max_prompt_tokens =
      options_.max_prompt_tokens > 0 ? std::min(options_.max_prompt_tokens, context) : context;

  receiver_ = std::make_unique<WeightReceiver>(
      [this](const std::vector<TensorSpec>& specs, const std::vector<at::Tensor>& tensors) {
        apply_weights(specs, tensors);
      },
      options_.comm_timeout, options_.host, options_.device);

  http_ = std::make_unique<GuardedHttpServer>(options_.connections);
  http_->set_payload_max_length(options_.max_body_bytes);
  // Bodies are JSON whatever their Content-Type: curl's -d sends
  // application/x-www-form-urlencoded, which httplib would otherwise parse as
  // a form and refuse past 8 KiB with a 413, and a multipart body would be
  // taken apart into files, leaving no body to read.
  // A request with neither a length nor chunks has no body (RFC 9112, 6.3),
  // as `curl -X POST` sends it; httplib would read one until the client
  // closes, past --max_body_bytes, and answer 408 when the client waits instead.
  http_->set_request_setup([](httplib::Request& req) {
    if (req.has_header("Content-Type")) {
      req.headers.erase("Content-Type");
      req.headers.emplace("Content-Type", "application/json");
    }
    if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))
      req.headers.emplace("Content-Length", "0");
  });
  const std::string api_key = options_.api_key;
  // Runs once the headers are in, before any body is read.
  http_->set_pre_routing_handler([api_key](const httplib::Request& req, httplib::Response& res) {
    if (!api_key.empty() && req.get_header_value("Authorization") != "Bearer " + api_key) {
      reply_error(res, 401, "missing or wrong API key: send the header 'Authorization: Bearer <key>' (the server's key)");
      return httplib::Server::HandlerResponse::Handled;
    }
    // A chunked body announces no length, so --max_body_bytes could not refuse it before reading it all.
    if (req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
      reply_error(res, 411, "chunked request bodies are not accepted: send the body with a Content-Length", "body");
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Statuses httplib sets itself (404, 413, 400 for a broken request line) get a JSON body too.
  const size_t max_body = options_.max_body_bytes;
  const double client_timeout_s = static_cast<double>(options_.connections.request_time.count()) / 1000.0;
  http_->set_error_handler(httplib::Server::HandlerWithResponse([max_body, client_timeout_s](
                                                                    const httplib::Request& req,
                                                                    httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (GuardedHttpServer::request_timed_out()) {
      reply_error(res, 408,
                  fmt::format("the request did not arrive whole within {:g} s (the server's --client_timeout_s); "
                              "the connection is closed",
                              client_timeout_s));
      res.set_header("Connection", "close");
    } else if (res.status == 413)
      reply_error(res, 413,
                  fmt::format("{}, over the server's limit of {} bytes (--max_body_bytes)",
                              req.has_header("Content-Length")
                                  ? "request body of " + req.get_header_value("Content-Length") + " bytes"
                                  : std::string("chunked request body"),
                              max_body),
                  "body");
    else if (res.status == 404)
      reply_error(res, 404, fmt::format("no endpoint {} {} (paths end with a slash, e.g. /generate/)", req.method,
                                        req.path));
    else
      reply_error(res, res.status, fmt::format("the request was refused with HTTP {}", res.status));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_->set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr error) {
    std::string what = "unknown";
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("{} {}: {}", req.method, req.path, what);
    reply_error(res, 500, "internal error while handling the request: " + what);
  });
  add_generation_routes();
  add_weight_routes();
}

RolloutServer::~RolloutServer() {
  stop();
  receiver_.reset();
  replicas_.reset();
}

namespace {

// Runs a JSON handler: schema errors -> 422 naming the field, transfer and
// engine failures -> 500 with their message. Never lets an exception drop
// the connection.
void run_handler(const std::function<json(const json&)>& handler, const httplib::Request& req,
                 httplib::Response& res, bool has_body) {
  try {
    json body = json::object();
    if (has_body && !req.body.empty()) body = util::parse_json(req.body, "the request body");
    reply(res, 200, handler(body));
  } catch (const CallCancelled& e) {
    // 503 tells a retrying client (TRL's retries 503) that another try may
    // succeed; a client that went away reads nothing.
    reply_error(res, 503, e.what());
    if (e.shutting_down()) res.set_header("Connection", "close");
  } catch (const util::JsonInputError& e) {
    reply_error(res, 422, e.what(), "body");
  } catch (const RequestError& e) {
    reply_error(res, 422, e.what(), e.field());
  } catch (const json::type_error& e) {
    reply_error(res, 422, fmt::format("a field has the wrong type: {}", e.what()), "body");
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", req.method, req.path, e.what());
    reply_error(res, 500, e.what());
  }
}

}  // namespace

void RolloutServer::route_get(const std::string& path, Handler handler) {
  http_->Get(path, [handler](const httplib::Request& req, httplib::Response& res) {
    run_handler(handler, req, res, /*has_body=*/false);
  });
}

void RolloutServer::route_post(const std::string& path, Handler handler) {
  http_->Post(path, [handler](const httplib::Request& req, httplib::Response& res) {
    run_handler(handler, req, res, /*has_body=*/true);
  });
}

int RolloutServer::bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                      : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0)
    throw std::runtime_error(fmt::format("cannot listen on {}:{}: is the port in use? Choose another with --port",
                                         options_.host, options_.port));
  options_.port = port;
  return port;
}

void RolloutServer::serve() {
  spdlog::info("grpo-rollout: serving {} on http://{}:{}/{}", model_name_, options_.host, options_.port,
               options_.api_key.empty() ? "" : " (API key required)");
  http_->listen_after_bind();
}

void RolloutServer::stop() {
  if (!http_) return;
  // Calls in flight are cancelled (their sequences leave the engine at its
  // next step) and answer 503 at once, rather than holding the stop until
  // their batch is done.
  replicas_->shut_down();
  http_->stop();
  // Idle keep-alive and slow clients would otherwise hold the workers' join;
  // connections whose call is being cancelled get a moment to send the 503.
  http_->close_connections(std::chrono::seconds(2));
}

void RolloutServer::apply_weights(const std::vector<TensorSpec>& specs, const std::vector<at::Tensor>& tensors) {
  // Replicas on other GPUs take the weights in their own dtype, converted
  // once here: a converting copy across GPUs would allocate on each.
  std::vector<at::Tensor> values = tensors;
  if (replicas_->size() > 1)
    for (at::Tensor& v : values) v = v.to(options_.dtype);
  replicas_->exclusive([&](model::Engine& engine) {
    torch::NoGradGuard no_grad;
    auto params = engine.model()->named_parameters();
    for (size_t i = 0; i < specs.size(); ++i) params[specs[i].name].copy_(values[i]);  // converts the dtype
  });
}

}  // namespace grpo::rollout
