// `grpo-host --help`: the flags in the groups of cli.md, each with its default.

#include "config/config_internal.h"

#include <sstream>

namespace grpo::config {
namespace {

std::string default_text(const FlagSpec& spec) {
  const nlohmann::json& d = spec.default_value;
  if (d.is_null()) return "";
  if ((d.is_array() || d.is_object()) && d.empty()) return "";
  return "default: " + detail::render(d);
}

std::string aliases_text(const FlagSpec& spec) {
  std::string out;
  for (const std::string& a : spec.aliases) out += (out.empty() ? "also --" : ", --") + a;
  return out;
}

}  // namespace

std::string help_text() {
  std::ostringstream out;
  out << "Usage: grpo-host <command> [--config FILE.yaml] [--flag VALUE ...]\n"
         "\n"
         "Flags carry the names, meanings and defaults of ms-swift's `swift rlhf --rlhf_type grpo`. Each is\n"
         "also a key of the YAML file given with --config; the command line wins over the file. Lists take\n"
         "several values (--reward_funcs accuracy format), maps take JSON (--sampler_args '{\"base_url\":\n"
         "\"http://127.0.0.1:8000\"}'), booleans take true/false/yes/no/1/0, optional values take null.\n"
         "The resolved values are written to <output_dir>/args.yaml.\n";

  constexpr size_t kFlagColumn = 42;
  bool first = true;
  FlagGroup group = FlagGroup::ModelData;
  for (const FlagSpec& spec : flag_table()) {
    if (first || spec.group != group) {
      out << "\n" << group_title(spec.group) << ":\n";
      group = spec.group;
      first = false;
    }
    std::string left = "  --" + spec.name + " " + spec.value_hint;
    left += left.size() < kFlagColumn ? std::string(kFlagColumn - left.size(), ' ') : "  ";

    std::string notes;
    auto note = [&notes](const std::string& n) {
      if (!n.empty()) notes += (notes.empty() ? "" : "; ") + n;
    };
    if (spec.group != FlagGroup::Compat || spec.availability == Availability::Available)
      note(default_text(spec));
    note(aliases_text(spec));
    std::string help = spec.help;
    if (spec.availability == Availability::NotBuilt) {
      help = spec.group == FlagGroup::Compat ? spec.reason
                                             : help + " [not built yet; only the default is accepted]";
    } else if (spec.availability == Availability::Refused) {
      help = "refused: " + spec.reason;
    }
    out << left << help;
    if (!notes.empty()) out << " (" << notes << ")";
    out << "\n";
  }
  out << "\nDistributed runs read the environment, as torchrun and ms-swift do: NPROC_PER_NODE, NNODES,\n"
         "NODE_RANK, MASTER_ADDR, MASTER_PORT, CUDA_VISIBLE_DEVICES (and RANK, WORLD_SIZE, LOCAL_RANK\n"
         "when an outside launcher started the processes).\n";
  return out.str();
}

}  // namespace grpo::config
