"""Hugging Face transformers and peft as oracles for the model code (tests/model/hf_*_test.cpp).

Commands (every output path is given by the caller, a temporary folder):
  make <dir> [<name>...]          one tiny random checkpoint per architecture (or those named),
                                  <dir>/<name>/, each with transformers' logits beside it (oracle.safetensors)
  logits <model> <out>            logits of a checkpoint as transformers loads it
  logits <model> <out> --adapter <adapter>
                                  ... with a PEFT adapter directory on top (peft.PeftModel)
  peft <model> <adapter>          a LoRA adapter with non-zero factors saved by peft for <model>, and
                                  the adapted model's logits (<adapter>/oracle.safetensors)
Several commands joined by "+" run in order in one process.

Each oracle.safetensors holds input_ids [B, T], attention_mask [B, T] (left, none and right padding)
and logits [B, T, V] in float32. Position ids are counted from the mask, as generate() counts them:
transformers' forward would otherwise give left padding positions, and padded positions' logits
mean nothing (compare where the mask is 1).
"""
import json
import os
import sys

try:
    import safetensors.torch
    import torch
    import transformers
except ImportError as e:  # the test prints this: it names the fix
    sys.exit(f"{e}: run scripts/setup.sh, which installs the pinned transformers, peft and torch into .venv")

transformers.utils.logging.disable_progress_bar()
SCALE = 0.2  # weights ten times transformers' 0.02, so a wrong term changes the logits visibly
ADAPTER_SCALE = 0.1  # LoRA factors: the adapter moves logits by a few units, activations stay the base's size


# Qwen2.5-0.5B-Instruct's config.json as released (transformers 4.43 wrote it), shrunk: the keys sit
# where old files have them (rope_theta at the top, torch_dtype), not where transformers 5 saves them.
def qwen25_released_config(vocab):
    return {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "attention_dropout": 0.0,
        "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 64,
        "initializer_range": 0.02, "intermediate_size": 160, "max_position_embeddings": 32768,
        "max_window_layers": 21, "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": False,
        "torch_dtype": "float32", "transformers_version": "4.43.1", "use_cache": True,
        "use_sliding_window": False, "vocab_size": vocab,
    }


def configs(vocab=300):
    """name -> transformers config: every architecture the C++ model supports, as released models set it."""
    small = dict(vocab_size=vocab, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6)
    return {
        # Qwen2 (Qwen2-0.5B): tied embeddings, q/k/v biases, RoPE base 10^6 as transformers 5 writes it.
        "qwen2": transformers.Qwen2Config(**small, tie_word_embeddings=True, rope_theta=1e6),
        # Qwen2.5 (the same class): untied lm_head, a released file's keys (written over after saving).
        "qwen2.5": transformers.Qwen2Config(**small, tie_word_embeddings=False, rope_theta=1e6,
                                            use_sliding_window=False, sliding_window=131072, max_window_layers=21,
                                            bos_token_id=1, eos_token_id=2),
        # Qwen3: q/k RMSNorm, head_dim wider than hidden / heads, tied embeddings, no biases.
        "qwen3": transformers.Qwen3Config(**small, head_dim=32, tie_word_embeddings=True, rope_theta=1e6,
                                          attention_bias=False),
        # Llama 3.x: llama3 RoPE scaling (a short original context so every band of frequencies occurs),
        # untied lm_head, RoPE base 500000.
        "llama3": transformers.LlamaConfig(**small, tie_word_embeddings=False, rope_theta=500000.0,
                                           rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                         "original_max_position_embeddings": 64},
                                           attention_bias=False, mlp_bias=False, bos_token_id=1,
                                           eos_token_id=[2, 3]),
        # Llama with attention_bias: q/k/v and o_proj biases (no released Llama 3 has them; the code allows it).
        "llama-bias": transformers.LlamaConfig(**small, tie_word_embeddings=True, attention_bias=True, mlp_bias=False),
    }


def randomize(model, seed):
    """Every parameter drawn, biases and norm weights included, so that none can be dropped unseen."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(SCALE * torch.randn(p.shape, generator=g))


def inputs(vocab):
    """Three rows: left padding, none, right padding. 70 positions: grouped-query attention takes both of the
    C++ model's ways (query rows grouped per key head while that copies less than repeating keys and values,
    here for head_dim 32; keys and values repeated beyond, here for head_dim 16)."""
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, vocab, (3, 70), generator=g)
    mask = torch.ones_like(ids)
    mask[0, :4] = 0
    mask[2, 40:] = 0
    ids[mask == 0] = 0
    return ids, mask


def logits_of(model, vocab):
    ids, mask = inputs(vocab)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    return {"input_ids": ids, "attention_mask": mask, "logits": out.float().contiguous()}


def load(model_dir):
    return transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                             attn_implementation="eager").eval()


def make(out_dir, names):
    for seed, (name, config) in enumerate(configs().items()):
        if names and name not in names:
            continue
        torch.manual_seed(seed)
        config._attn_implementation = "eager"
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
        randomize(model, 100 + seed)
        model_dir = os.path.join(out_dir, name)
        model.save_pretrained(model_dir, safe_serialization=True)
        if name == "qwen2.5":
            with open(os.path.join(model_dir, "config.json"), "w") as f:
                json.dump(qwen25_released_config(config.vocab_size), f, indent=2)
        # Read back from the files: the logits are those of what the C++ side loads, and must be the
        # model's (the rewritten Qwen2.5 config included).
        expected = logits_of(load(model_dir), config.vocab_size)
        drift = (expected["logits"] - logits_of(model, config.vocab_size)["logits"]).abs().max().item()
        if drift > 1e-6:
            sys.exit(f"{name}: the saved checkpoint's logits differ from the model's by {drift}")
        safetensors.torch.save_file(expected, os.path.join(model_dir, "oracle.safetensors"))


def logits(model_dir, out, adapter=None):
    model = load(model_dir)
    if adapter is not None:
        import peft
        model = peft.PeftModel.from_pretrained(model, adapter).eval()
    safetensors.torch.save_file(logits_of(model, model.config.vocab_size), out)


def make_peft(model_dir, adapter_dir):
    import peft
    model = load(model_dir)
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
    adapted = peft.get_peft_model(model, config)
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for name, p in adapted.named_parameters():
            if "lora_" in name:  # B is zero after PEFT's init: draw both so the adapter changes the output
                p.copy_(ADAPTER_SCALE * torch.randn(p.shape, generator=g))
    adapted.save_pretrained(adapter_dir)
    adapted.eval()
    out = os.path.join(adapter_dir, "oracle.safetensors")
    safetensors.torch.save_file(logits_of(adapted, model.config.vocab_size), out)


def run(argv):
    if len(argv) >= 2 and argv[0] == "make":
        unknown = set(argv[2:]) - set(configs())
        if unknown:
            sys.exit(f"unknown architecture {sorted(unknown)}; choose among {list(configs())}")
        make(argv[1], argv[2:])
    elif len(argv) == 3 and argv[0] == "logits":
        logits(argv[1], argv[2])
    elif len(argv) == 5 and argv[0] == "logits" and argv[3] == "--adapter":
        logits(argv[1], argv[2], argv[4])
    elif len(argv) == 3 and argv[0] == "peft":
        make_peft(argv[1], argv[2])
    else:
        sys.exit(__doc__)


def main(argv):
    # Commands joined by "+" run in one process: importing transformers takes most of a call's time.
    command = []
    for arg in argv + ["+"]:
        if arg != "+":
            command.append(arg)
            continue
        run(command)
        command = []
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    main(sys.argv[1:])
