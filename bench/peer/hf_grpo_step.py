"""The GRPO step as TRL's GRPOTrainer takes it, on Hugging Face transformers' own
model class built from a config.json (random weights): `generate` samples G
completions per prompt (in eval mode, with the KV cache, as TRL generates with
gradient checkpointing off), one forward gives the policy's log-probs of them
(float32 log-softmax over the vocabulary, as TRL's selective_log_softmax),
then the clipped loss (old = the same log-probs detached), backward, gradient
clipping at 1.0 and AdamW (fused on CUDA). With --lora_rank, peft's LoRA on
every linear layer (alpha 32, dropout 0.05: ms-swift's defaults) and AdamW over
the adapters; with --beta, TRL's k3 KL term against the reference (under LoRA
the model with its adapters disabled, else a frozen copy), whose log-probs
count in forward_s. The peer of `bench_step --device cuda`. Prints one JSON line
per timed step (after a warm-up step), with the device's peak memory.

--matmul_peak prints instead the best rate of an N x N x N matmul in --dtype on
--device (N 8192 on a GPU, 1024 on the CPU): the denominator of bench_step's MFU.
"""

import argparse
import contextlib
import copy
import json
import os
import time

import torch


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak(dtype, device):
    n = 8192 if device.type == "cuda" else 1024
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(12):  # the first calls pick cuBLAS's kernel and warm the clocks
        synchronize(device)
        t0 = time.perf_counter()
        torch.matmul(a, b)
        synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best


def completion_logprobs(model, ids, P):
    logits = model(ids).logits[:, P - 1:-1]
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, P:].unsqueeze(-1)).squeeze(-1)


def grpo_step(model, reference, optimizer, params, prompts, generations, new_tokens, beta, device):
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    batch = prompts.repeat_interleave(generations, dim=0)
    model.eval()
    with torch.no_grad():
        # min_new_tokens: every completion as long as ours (a random model rarely
        # ends one), so that both sides do the same work.
        ids = model.generate(batch, attention_mask=torch.ones_like(batch), do_sample=True, temperature=1.0, top_k=0,
                             top_p=1.0, max_new_tokens=new_tokens, min_new_tokens=new_tokens)
    model.train()
    synchronize(device)
    t1 = time.perf_counter()
    P = batch.shape[1]
    ref_logp = None
    if beta > 0:
        with torch.no_grad(), (model.disable_adapter() if reference is None else contextlib.nullcontext()):
            ref_logp = completion_logprobs(model if reference is None else reference, ids, P)
    logp = completion_logprobs(model, ids, P)
    rewards = torch.randn(batch.shape[0], device=device).view(-1, generations)
    advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)).view(-1)
    ratio = torch.exp(logp - logp.detach())
    clip = 0.2
    per_token = -torch.min(ratio * advantages[:, None], ratio.clamp(1 - clip, 1 + clip) * advantages[:, None])
    if ref_logp is not None:
        per_token = per_token + beta * (torch.exp(ref_logp - logp) - (ref_logp - logp) - 1)
    loss = per_token.mean(dim=1).mean()
    synchronize(device)
    t_forward = time.perf_counter()
    loss.backward()
    synchronize(device)
    t_backward = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    synchronize(device)
    t2 = time.perf_counter()
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0
    return {"step_s": t2 - t0, "generate_s": t1 - t0, "train_s": t2 - t1, "forward_s": t_forward - t1,
            "backward_s": t_backward - t_forward, "optimizer_s": t2 - t_backward, "peak_gb": peak,
            "completion_tokens": int(ids[:, P:].numel())}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", help="a config.json giving the model's shape")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=17, help="prompt tokens")
    parser.add_argument("--new_tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    parser.add_argument("--lora_rank", type=int, default=0, help="0: every weight trained")
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument("--gradient_checkpointing", action="store_true")
    parser.add_argument("--matmul_peak", action="store_true")
    args = parser.parse_args()
    if not args.matmul_peak and not args.config:
        parser.error("--config is needed for a step (only --matmul_peak goes without)")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    if args.matmul_peak:
        print(json.dumps({"matmul_tflops": matmul_peak(dtype, device) / 1e12, "dtype": args.dtype}), flush=True)
        return
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(os.path.dirname(os.path.abspath(args.config)))
    torch.manual_seed(0)
    with device:  # the random weights drawn where they are used, not on the CPU first
        model = AutoModelForCausalLM.from_config(config, dtype=dtype).train()
    reference = None
    if args.beta > 0 and args.lora_rank == 0:
        reference = copy.deepcopy(model).eval().requires_grad_(False)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if args.lora_rank > 0:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=args.lora_rank, lora_alpha=32, lora_dropout=0.05,
                                                 target_modules="all-linear"))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-6, fused=device.type == "cuda")
    prompts = torch.randint(0, config.vocab_size, (args.prompts, args.prompt), device=device)
    step = lambda: grpo_step(model, reference, optimizer, params, prompts, args.generations, args.new_tokens,
                             args.beta, device)
    step()  # warm-up
    for _ in range(args.runs):
        print(json.dumps(step()), flush=True)


if __name__ == "__main__":
    main()
