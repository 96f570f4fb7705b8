"""Hugging Face tokenizers' BpeTrainer on a corpus file (one text per line),
byte-level as grpo-host init-model --train_tokenizer learns: prints one JSON
line with the seconds training took and the number of merges learned."""
import json
import sys
import time

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

path, vocab_size = sys.argv[1], int(sys.argv[2])
with open(path, encoding="utf-8") as f:
    texts = [line.rstrip("\n") for line in f]
tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
start = time.perf_counter()
tokenizer.train_from_iterator(texts, trainer)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "merges": tokenizer.get_vocab_size() - 256}))
