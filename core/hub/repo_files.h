// Which files of a dataset repository (or of a local directory laid out like
// one) hold a split, chosen as the `datasets` library chooses them: the
// `configs` of README.md's YAML header when it declares them, else file and
// directory names (data/train-00000-of-00002.parquet, train.jsonl, train/…).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace grpo::hub {

// Files of `split` of `subset` ("" for the default one) under `root`, sorted as
// the shards are numbered. Throws HubError naming `label`, what was found and
// what to write instead (the subsets or splits there are).
std::vector<std::string> split_files(const std::string& root, const std::string& subset, const std::string& split,
                                     const std::string& label);

// fsspec's glob on '/'-separated relative paths: '*' and '?' stop at '/',
// '**' crosses it ("**/" also matching no directory), [abc] and [!abc] classes.
bool glob_match(std::string_view pattern, std::string_view path);

}  // namespace grpo::hub
