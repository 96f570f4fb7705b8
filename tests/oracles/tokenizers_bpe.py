"""Hugging Face tokenizers' BpeTrainer on a dataset's text, configured as
grpo-host init-model --train_tokenizer learns merges.

Usage: tokenizers_bpe.py TOKENIZER_JSON DATASET_JSONL MERGES OUT_JSON

TOKENIZER_JSON is the tokenizer init-model writes: its normalizer and
pre-tokenizer (Qwen's split, then byte-level) are the ones the merges are
learned under. The texts are every string of every row of DATASET_JSONL, as
init-model collects them (message contents, roles, problems...). The
vocabulary is the 256 byte-level tokens plus MERGES merges; min_frequency 2
because a merge of a pair seen once is not learned by either trainer.

Writes OUT_JSON: {"merges": [[left, right], ...] in rank order,
"vocab": [token, ...] in id order}.
"""
import json
import sys

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

tokenizer_json, dataset, merges, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


with open(dataset, encoding="utf-8") as f:
    texts = [s for line in f if line.strip() for s in strings(json.loads(line))]

# A fresh BPE model with the written tokenizer's normalizer and pre-tokenizer;
# its added (special) tokens are left out, as our trainer never sees them.
written = Tokenizer.from_file(tokenizer_json)
tokenizer = Tokenizer(models.BPE())
tokenizer.normalizer = written.normalizer
tokenizer.pre_tokenizer = written.pre_tokenizer
trainer = trainers.BpeTrainer(vocab_size=256 + merges, min_frequency=2, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tokenizer.train_from_iterator(texts, trainer)

model = json.loads(tokenizer.to_str())["model"]
with open(out, "w", encoding="utf-8") as f:
    json.dump({"merges": [m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"]],
               "vocab": sorted(model["vocab"], key=model["vocab"].get)}, f, ensure_ascii=False)
print(f"{len(texts)} texts, {len(model['merges'])} merges, {len(model['vocab'])} tokens")
