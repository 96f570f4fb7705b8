// Hub caches laid out as huggingface_hub and modelscope lay them out, for tests.
#pragma once

#include <map>
#include <string>

namespace grpo::testing {

// Adds repository `id` ("models" or "datasets") to the Hugging Face cache at
// `cache` as `huggingface-cli download` leaves it: each file's content in
// blobs/<hash>, snapshots/<commit>/<path> a relative symlink to it, and
// refs/<revision> holding <commit>. `files` maps repository paths to local files.
void add_hf_repo(const std::string& cache, const std::string& kind, const std::string& id, const std::string& commit,
                 const std::map<std::string, std::string>& files, const std::string& revision = "main");

// Adds repository `id` to ModelScope's cache at `cache` as `modelscope download`
// (1.20 and later) leaves it: plain files in <kind>/ORG/NAME, '.' in NAME written '___'.
void add_modelscope_repo(const std::string& cache, const std::string& kind, const std::string& id,
                         const std::map<std::string, std::string>& files);

// The tiny test model's files (tests/data/tiny-qwen2), by repository path.
std::map<std::string, std::string> tiny_model_files();

}  // namespace grpo::testing
