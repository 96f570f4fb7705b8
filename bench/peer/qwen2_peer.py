#!/usr/bin/env python3
"""The peer that bench_engine measures grpo's engine against: a plain PyTorch eager
Qwen2 decoder, written from the architecture (RMSNorm, rotary embeddings,
grouped-query attention with q/k/v biases and a preallocated KV cache, SwiGLU MLP,
tied lm_head), sampling with softmax and torch.multinomial over the whole
vocabulary, as a user's own PyTorch loop would. Weights are random (speed does
not depend on their values); no token ends a sequence early.

    .venv/bin/python bench/peer/qwen2_peer.py decode --config config.json --dtype bfloat16 \\
        --batches 1,16,64 --prompt 16 --new_tokens 32 --threads 2

prints one JSON line per batch: {"dtype", "batch", "tokens_per_s"}.

    .venv/bin/python bench/peer/qwen2_peer.py step --config config.json --prompts 2 --generations 8 \
        --prompt 32 --new_tokens 64 --runs 2

times GRPO steps in float32 after a warm-up step (see grpo_step) and prints one
JSON line per step: {"step_s", "generate_s", "train_s"}. Runs on the torch wheel
the project builds against (scripts/setup.sh pins it).
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F


class Layer(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        H, D = c["hidden_size"], c["head_dim"]
        self.heads, self.kv_heads, self.head_dim = c["num_attention_heads"], c["num_key_value_heads"], D
        self.input_norm = torch.nn.Parameter(torch.ones(H))
        self.q = torch.nn.Linear(H, self.heads * D, bias=True)
        self.k = torch.nn.Linear(H, self.kv_heads * D, bias=True)
        self.v = torch.nn.Linear(H, self.kv_heads * D, bias=True)
        self.o = torch.nn.Linear(self.heads * D, H, bias=False)
        self.post_norm = torch.nn.Parameter(torch.ones(H))
        self.gate = torch.nn.Linear(H, c["intermediate_size"], bias=False)
        self.up = torch.nn.Linear(H, c["intermediate_size"], bias=False)
        self.down = torch.nn.Linear(c["intermediate_size"], H, bias=False)
        self.eps = c.get("rms_norm_eps", 1e-6)

    def norm(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * w

    def forward(self, x, cos, sin, cache, start):
        B, T, _ = x.shape
        h = self.norm(x, self.input_norm)
        q = self.q(h).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        cache_k, cache_v = cache
        cache_k[:, :, start:start + T] = k
        cache_v[:, :, start:start + T] = v
        keys = cache_k[:, :, :start + T].repeat_interleave(self.heads // self.kv_heads, dim=1)
        values = cache_v[:, :, :start + T].repeat_interleave(self.heads // self.kv_heads, dim=1)
        scores = (q @ keys.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if T > 1:  # prefill: causal mask
            mask = torch.full((T, start + T), float("-inf"), device=x.device).triu(start + 1)
            scores = scores + mask.to(scores.dtype)
        attn = F.softmax(scores.float(), dim=-1).to(x.dtype) @ values
        x = x + self.o(attn.transpose(1, 2).reshape(B, T, -1))
        h = self.norm(x, self.post_norm)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Qwen2(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        c = dict(c)  # a config.json; absent fields take transformers' Qwen2 defaults
        if c.get("head_dim") is None:
            c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
        self.c = c
        self.embed = torch.nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = torch.nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.final_norm = torch.nn.Parameter(torch.ones(c["hidden_size"]))
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def rope(self, positions, dtype):
        D = self.c["head_dim"]
        inv = 1.0 / (self.c.get("rope_theta", 10000.0) ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
        angles = positions.float()[:, None] * inv[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def new_cache(self, batch, length, dtype):
        shape = (batch, self.c["num_key_value_heads"], length, self.c["head_dim"])
        return [(torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype)) for _ in self.layers]

    def forward(self, ids, cache, start):
        x = self.embed(ids)
        cos, sin = self.rope(torch.arange(start, start + ids.shape[1]), x.dtype)
        for layer, layer_cache in zip(self.layers, cache):
            x = layer(x, cos, sin, layer_cache, start)
        x = self.layers[0].norm(x, self.final_norm)
        return x @ self.embed.weight.t()  # tied lm_head

    @torch.no_grad()
    def generate(self, prompts, new_tokens, temperature=1.0):
        B, P = prompts.shape
        cache = self.new_cache(B, P + new_tokens, self.embed.weight.dtype)
        logits = self(prompts, cache, 0)[:, -1]
        out = []
        for step in range(new_tokens):
            probs = F.softmax(logits.float() / temperature, dim=-1)
            token = torch.multinomial(probs, 1)
            out.append(token)
            if step + 1 < new_tokens:
                logits = self(token, cache, P + step)[:, -1]
        return torch.cat(out, dim=1)


def decode(args):
    with open(args.config) as f:
        config = json.load(f)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    torch.manual_seed(0)
    model = Qwen2(config).to(dtype).eval()
    for batch in [int(b) for b in args.batches.split(",")]:
        prompts = torch.randint(0, config["vocab_size"], (batch, args.prompt))
        model.generate(prompts, args.new_tokens)  # warm-up
        best = math.inf
        for _ in range(args.runs):
            t0 = time.perf_counter()
            model.generate(prompts, args.new_tokens)
            best = min(best, time.perf_counter() - t0)
        print(json.dumps({"dtype": args.dtype, "batch": batch, "tokens_per_s": batch * args.new_tokens / best}),
              flush=True)


def grpo_step(model, optimizer, prompts, generations, new_tokens, clip=0.2):
    """One GRPO step as TRL's GRPOTrainer takes it with num_iterations 1 and beta 0:
    sample G completions per prompt, score them, group-normalise the rewards,
    then policy log-probabilities with grad, the clipped surrogate loss averaged
    per sequence then over the batch, backward, gradient clipping, AdamW."""
    t0 = time.perf_counter()
    batch = prompts.repeat_interleave(generations, dim=0)
    completions = model.generate(batch, new_tokens)
    t1 = time.perf_counter()
    rewards = (completions % 2 == 0).float().mean(dim=1)  # a cheap rule-based reward
    grouped = rewards.view(-1, generations)
    advantages = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).view(-1)
    ids = torch.cat((batch, completions), dim=1)
    P = batch.shape[1]
    cache = model.new_cache(ids.shape[0], ids.shape[1], model.embed.weight.dtype)
    logits = model(ids[:, :-1], cache, 0)[:, P - 1:]
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, completions.unsqueeze(-1)).squeeze(-1)
    ratio = torch.exp(logp - logp.detach())
    per_token = -torch.min(ratio * advantages[:, None], ratio.clamp(1 - clip, 1 + clip) * advantages[:, None])
    loss = per_token.mean(dim=1).mean()
    optimizer.zero_grad(set_to_none=True)
    t_forward = time.perf_counter()
    loss.backward()
    t_backward = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    t2 = time.perf_counter()
    return {"step_s": t2 - t0, "generate_s": t1 - t0, "train_s": t2 - t1, "forward_s": t_forward - t1,
            "backward_s": t_backward - t_forward, "optimizer_s": t2 - t_backward,
            "completion_tokens": int(completions.numel())}


def step(args):
    with open(args.config) as f:
        config = json.load(f)
    torch.manual_seed(0)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    model = Qwen2(config).to(dtype).train()  # bfloat16: weights and AdamW state in it, as a bf16-loaded model trains
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    prompts = torch.randint(0, config["vocab_size"], (args.prompts, args.prompt))
    grpo_step(model, optimizer, prompts, args.generations, args.new_tokens)  # warm-up
    for _ in range(args.runs):
        print(json.dumps(grpo_step(model, optimizer, prompts, args.generations, args.new_tokens)), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["decode", "step"])
    parser.add_argument("--config", required=True, help="a config.json giving the model's shape")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--new_tokens", type=int, default=32)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=2, help="step: prompts per step")
    parser.add_argument("--generations", type=int, default=8, help="step: completions per prompt (G)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    decode(args) if args.mode == "decode" else step(args)


if __name__ == "__main__":
    main()
