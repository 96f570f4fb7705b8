#include "hub/hub_cache.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace grpo::hub {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// As os.path.expanduser: the caches' variables may start with "~".
fs::path expand_home(const std::string& p) {
  if (p.empty() || p[0] != '~') return p;
  return fs::path(env("HOME")) / p.substr(p.size() > 1 && p[1] == '/' ? 2 : 1);
}

fs::path home_cache() {
  const std::string xdg = env("XDG_CACHE_HOME");
  return xdg.empty() ? expand_home("~/.cache") : expand_home(xdg);
}

bool is_commit(const std::string& rev) {
  return rev.size() == 40 && std::all_of(rev.begin(), rev.end(), [](char c) { return std::isxdigit(c) && !std::isupper(c); });
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

// One place looked, and what was (not) there: the lines of the not-found error.
struct Look {
  std::string where, why;
};

std::string hf_download_command(const std::string& id, RepoKind kind, const std::string& revision) {
  return fmt::format("{}{}{}", kind == RepoKind::Dataset ? "--repo-type dataset " : "", id,
                     revision.empty() ? "" : " --revision " + revision);
}

// A cache entry that huggingface_hub left half written (an interrupted
// download, a disk that filled up): refs that name nothing, files whose blob
// never arrived. Not a place that lacks the repository, so not a line of the
// not-found error: the user is told what is broken and that downloading again
// repairs it.
[[noreturn]] void damaged(const std::string& flag, const std::string& id, RepoKind kind, const std::string& revision,
                          const std::string& what) {
  const std::string args = hf_download_command(id, kind, revision);
  throw HubError(fmt::format("{} {}: the Hugging Face cache entry is damaged: {}. Download it again: "
                             "`huggingface-cli download {}` (or `hf download {}`)",
                             flag, id, what, args, args));
}

// Every file of a snapshot that is a link to a missing blob, the first named.
void check_snapshot_links(const fs::path& snapshot, const std::string& flag, const std::string& id, RepoKind kind,
                          const std::string& revision) {
  std::error_code ec;
  size_t count = 0;
  std::string first;
  for (fs::recursive_directory_iterator it(snapshot, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (!it->is_symlink(e2) || fs::exists(it->path(), e2)) continue;
    if (count++ == 0) {
      const fs::path target = fs::read_symlink(it->path(), e2);
      first = fmt::format("{} links to {}, which does not exist", it->path().string(),
                          (target.is_absolute() ? target : it->path().parent_path() / target).lexically_normal().string());
    }
  }
  if (count == 0) return;
  damaged(flag, id, kind, revision,
          count == 1 ? first + " (its download was interrupted)"
                     : fmt::format("{} (and {} more file(s) of the snapshot: their download was interrupted)", first,
                                   count - 1));
}

// huggingface_hub's layout: <cache>/{models,datasets}--ORG--NAME/refs/<revision>
// holds a commit; snapshots/<commit>/ holds the files (symlinks into blobs/).
std::optional<fs::path> find_in_huggingface(const std::string& id, RepoKind kind, const std::string& revision,
                                            const std::string& flag, std::vector<Look>& looks) {
  const std::string prefix = kind == RepoKind::Model ? "models--" : "datasets--";
  const fs::path repo = fs::path(huggingface_cache()) / (prefix + replace_all(id, "/", "--"));
  const std::string rev = revision.empty() ? "main" : revision;
  if (!fs::is_directory(repo)) {
    looks.push_back({repo.string(), "no such directory"});
    return std::nullopt;
  }
  fs::path snapshot;
  if (is_commit(rev) && fs::is_directory(repo / "snapshots" / rev)) {
    snapshot = repo / "snapshots" / rev;
  } else {
    const fs::path ref = repo / "refs" / rev;
    std::ifstream in(ref);
    std::string commit;
    if (!in) {
      looks.push_back({ref.string(), "no such ref: revision '" + rev + "' was not downloaded"});
      return std::nullopt;
    }
    if (!(in >> commit))
      damaged(flag, id, kind, revision, fmt::format("{} is empty, where it should name the snapshot of revision '{}'",
                                                    ref.string(), rev));
    snapshot = repo / "snapshots" / commit;
    if (!fs::is_directory(snapshot))
      damaged(flag, id, kind, revision,
              fmt::format("{} names snapshot {}, which does not exist", ref.string(), snapshot.string()));
  }
  check_snapshot_links(snapshot, flag, id, kind, revision);
  return snapshot;
}

// modelscope's layout: <cache>/{models,datasets}/ORG/NAME with each '.' of NAME
// written '___' (e.g. Qwen/Qwen2___5-0___5B-Instruct); versions before 1.20
// kept models at <cache>/ORG/NAME.
std::optional<fs::path> find_in_modelscope(const std::string& id, RepoKind kind, std::vector<Look>& looks) {
  const fs::path root = modelscope_cache();
  const size_t slash = id.find('/');
  if (slash == std::string::npos) {
    looks.push_back({root.string(), "ModelScope ids are ORG/NAME"});
    return std::nullopt;
  }
  const std::string org = id.substr(0, slash), name = id.substr(slash + 1);
  const std::string escaped = replace_all(name, ".", "___");
  std::vector<fs::path> candidates;
  const fs::path typed = root / (kind == RepoKind::Model ? "models" : "datasets") / org;
  candidates.push_back(typed / escaped);
  if (escaped != name) candidates.push_back(typed / name);
  if (kind == RepoKind::Model) {
    candidates.push_back(root / org / escaped);
    if (escaped != name) candidates.push_back(root / org / name);
  }
  for (const fs::path& c : candidates) {
    if (fs::is_directory(c) && !fs::is_empty(c)) return c;
    looks.push_back({c.string(), fs::is_directory(c) ? "empty directory" : "no such directory"});
  }
  return std::nullopt;
}

std::string download_command(const std::string& id, RepoKind kind, bool use_hf, const std::string& revision) {
  if (use_hf) return "huggingface-cli download " + hf_download_command(id, kind, revision);
  return fmt::format("modelscope download --{} {}", kind == RepoKind::Model ? "model" : "dataset", id);
}

}  // namespace

bool use_hf_from(bool flag) {
  if (flag) return true;
  std::string v = env("USE_HF");
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

bool looks_like_repo_id(const std::string& text) {
  if (text.empty() || text.size() > 200 || std::count(text.begin(), text.end(), '/') > 1) return false;
  if (text.front() == '/' || text.front() == '.' || text.back() == '/' || text.find("..") != std::string::npos) return false;
  return std::all_of(text.begin(), text.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == '/'; });
}

std::string huggingface_cache() {
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
    if (!env(name).empty()) return expand_home(env(name)).string();
  if (!env("HF_HOME").empty()) return (expand_home(env("HF_HOME")) / "hub").string();
  return (home_cache() / "huggingface" / "hub").string();
}

std::string modelscope_cache() {
  if (!env("MODELSCOPE_CACHE").empty()) return expand_home(env("MODELSCOPE_CACHE")).string();
  return (expand_home("~/.cache") / "modelscope" / "hub").string();
}

std::string find_repo(const std::string& id, RepoKind kind, const Options& options, const std::string& flag) {
  std::vector<Look> looks;
  // ModelScope's cache holds one revision, unnamed: it cannot answer for a named one.
  const bool modelscope_usable = options.revision.empty() || options.revision == "master";
  auto in_huggingface = [&]() { return find_in_huggingface(id, kind, options.revision, flag, looks); };
  auto in_modelscope = [&]() -> std::optional<fs::path> {
    if (!modelscope_usable) return std::nullopt;
    return find_in_modelscope(id, kind, looks);
  };
  std::optional<fs::path> found = options.use_hf ? in_huggingface() : in_modelscope();
  const char* hub = options.use_hf ? "Hugging Face" : "ModelScope";
  if (!found) {
    found = options.use_hf ? in_modelscope() : in_huggingface();
    hub = options.use_hf ? "ModelScope" : "Hugging Face";
  }
  if (found) {
    spdlog::info("{} {}: {} cache, {}", flag, id, hub, found->string());
    return found->string();
  }
  std::string msg = fmt::format("{} {}: no such local {}, and the {} is in neither hub cache (grpo-host downloads "
                                "nothing). Looked in:",
                                flag, id, kind == RepoKind::Model ? "directory" : "file or directory",
                                kind == RepoKind::Model ? "model" : "dataset");
  msg += fmt::format("\n  {} (no such path)", (fs::current_path() / id).string());
  for (const Look& l : looks) msg += fmt::format("\n  {} ({})", l.where, l.why);
  if (!modelscope_usable) msg += "\n  (ModelScope's cache keeps no named revisions: not searched for '" + options.revision + "')";
  msg += fmt::format("\nDownload it first: `{}` or `{}`; the caches are found through HF_HUB_CACHE / HF_HOME and "
                     "MODELSCOPE_CACHE",
                     download_command(id, kind, options.use_hf, options.revision),
                     download_command(id, kind, !options.use_hf, options.revision));
  throw HubError(msg);
}

std::string resolve_model(const std::string& path_or_id, const Options& options, const std::string& flag) {
  if (path_or_id.empty() || fs::exists(path_or_id) || !looks_like_repo_id(path_or_id)) return path_or_id;
  return find_repo(path_or_id, RepoKind::Model, options, flag);
}

}  // namespace grpo::hub
