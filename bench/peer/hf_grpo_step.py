"""The GRPO step as TRL's GRPOTrainer takes it, on Hugging Face transformers' own
model class built from a config.json (random weights): `generate` samples G
completions per prompt, one forward gives the policy's log-probs of them
(float32 log-softmax over the vocabulary, as TRL's selective_log_softmax),
then the clipped loss (old = the same log-probs detached, beta 0), backward,
gradient clipping at 1.0 and AdamW (fused on CUDA). The peer of
`bench_step --device cuda`. Prints one JSON line per timed step (after a
warm-up step), with the device's peak memory.
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


def grpo_step(model, optimizer, prompts, generations, new_tokens, device):
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    batch = prompts.repeat_interleave(generations, dim=0)
    with torch.no_grad():
        # min_new_tokens: every completion as long as ours (a random model rarely
        # ends one), so that both sides do the same work.
        ids = model.generate(batch, attention_mask=torch.ones_like(batch), do_sample=True, temperature=1.0, top_k=0,
                             top_p=1.0, max_new_tokens=new_tokens, min_new_tokens=new_tokens)
    synchronize(device)
    t1 = time.perf_counter()
    P = batch.shape[1]
    completions = ids[:, P:]
    logits = model(ids).logits[:, P - 1:-1]
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, completions.unsqueeze(-1)).squeeze(-1)
    rewards = torch.randn(batch.shape[0], device=device).view(-1, generations)
    advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)).view(-1)
    ratio = torch.exp(logp - logp.detach())
    clip = 0.2
    per_token = -torch.min(ratio * advantages[:, None], ratio.clamp(1 - clip, 1 + clip) * advantages[:, None])
    loss = per_token.mean(dim=1).mean()
    synchronize(device)
    t_forward = time.perf_counter()
    loss.backward()
    synchronize(device)
    t_backward = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    synchronize(device)
    t2 = time.perf_counter()
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0
    return {"step_s": t2 - t0, "generate_s": t1 - t0, "train_s": t2 - t1, "forward_s": t_forward - t1,
            "backward_s": t_backward - t_forward, "optimizer_s": t2 - t_backward, "peak_gb": peak,
            "completion_tokens": int(completions.numel())}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True, help="a config.json giving the model's shape")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=17, help="prompt tokens")
    parser.add_argument("--new_tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    config = AutoConfig.from_pretrained(os.path.dirname(os.path.abspath(args.config)))
    torch.manual_seed(0)
    with device:  # the random weights drawn where they are used, not on the CPU first
        model = AutoModelForCausalLM.from_config(config, dtype=dtype).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=device.type == "cuda")
    prompts = torch.randint(0, config.vocab_size, (args.prompts, args.prompt), device=device)
    grpo_step(model, optimizer, prompts, args.generations, args.new_tokens, device)  # warm-up
    for _ in range(args.runs):
        print(json.dumps(grpo_step(model, optimizer, prompts, args.generations, args.new_tokens, device)), flush=True)


if __name__ == "__main__":
    main()
