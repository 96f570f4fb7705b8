"""Hugging Face transformers' `generate` at a model's shape: the peer of
`bench_engine --hf`. Builds transformers' own model class from a config.json
(random weights), samples over the whole vocabulary (top_k 0, top_p 1) and
makes every completion exactly --new_tokens long (min_new_tokens), so both
sides do the same work. Prints one JSON line per batch size: the best of
--runs warm calls, and the first call's time.
"""

import argparse
import json
import os
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True, help="a config.json giving the model's shape")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--new_tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    config = AutoConfig.from_pretrained(os.path.dirname(os.path.abspath(args.config)))
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it runs: minutes less for 7B than on the CPU
        model = AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    for batch in [int(b) for b in args.batches.split(",")]:
        prompts = torch.randint(0, config.vocab_size, (batch, args.prompt), device=device)

        def call():
            synchronize(device)
            t0 = time.perf_counter()
            with torch.no_grad():
                model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=True, temperature=1.0,
                               top_k=0, top_p=1.0, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens)
            synchronize(device)
            return time.perf_counter() - t0

        first = call()
        best = min(call() for _ in range(args.runs))
        print(json.dumps({"batch": batch, "tokens_per_s": batch * args.new_tokens / best, "first_s": first,
                          "warm_s": best}), flush=True)


if __name__ == "__main__":
    main()
