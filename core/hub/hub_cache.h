// `--model ORG/NAME` and `--dataset ORG/NAME`: repositories found offline in the
// caches that huggingface_hub (`huggingface-cli download`) and modelscope
// (`modelscope download`) fill, laid out exactly as those libraries lay them out.
// grpo-host downloads nothing: a name that is in neither cache is an error that
// lists every place looked and the command that would download it.
#pragma once

#include <string>

#include "util/user_error.h"

namespace grpo::hub {

class HubError : public ::grpo::UserError {
 public:
  using UserError::UserError;
};

enum class RepoKind { Model, Dataset };

struct Options {
  // ms-swift's --use_hf: false (its default) looks in ModelScope's cache first,
  // true in Hugging Face's first; the other cache is tried next either way.
  bool use_hf = false;
  // A branch, tag or commit of a Hugging Face repository (refs/<revision> →
  // snapshots/<commit>); empty means main. ModelScope's cache keeps a single
  // revision per repository, so it is not consulted for other revisions.
  std::string revision;
};

// --use_hf as ms-swift reads it: the flag, or the USE_HF environment variable (1/true).
bool use_hf_from(bool flag);

// A repository id rather than a path: NAME or ORG/NAME made of letters, digits, '.', '-' and '_'.
bool looks_like_repo_id(const std::string& text);

// The Hugging Face hub cache: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub,
// XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::string huggingface_cache();
// ModelScope's: MODELSCOPE_CACHE, else ~/.cache/modelscope/hub.
std::string modelscope_cache();

// The local directory holding repository `id`: the snapshot directory of the
// requested revision. Throws HubError naming `flag`, every place looked and the
// download command.
std::string find_repo(const std::string& id, RepoKind kind, const Options& options, const std::string& flag);

// What --model / --ref_model / --reward_model / grpo-rollout --model take: an
// existing directory as it is, else a repository id through find_repo.
std::string resolve_model(const std::string& path_or_id, const Options& options, const std::string& flag);

}  // namespace grpo::hub
