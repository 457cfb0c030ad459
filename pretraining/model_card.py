"""The model card (README.md) of an exported checkpoint: what it is, how it was pretrained, how
to load it and how to cite it (docs/export.md lists its contents)."""

from __future__ import annotations

from pathlib import Path

import yaml

from contracts.bounded import LARGE, BoundedReadError, read_json_object
from contracts.citation import bibtex
from contracts.paper import PAPER_CITATION

_OBJECTIVES = {
    "clm": "causal language modeling (CLM): next-token prediction with a causal mask, loss on all positions",
    "mlm": "masked language modeling (MLM) with a masking ratio of {mlm_ratio:.0%}, bidirectional attention",
    "clm_then_mlm": "CLM for the first {switch_at} steps, then MLM with a masking ratio of {mlm_ratio:.0%} "
    "(biphasic, one schedule over the run)",
}


def objective_text(objective: dict) -> str:
    text = _OBJECTIVES[objective["kind"]].format(**objective)
    if objective["kind"] != "clm" and tuple(objective.get("replace", (1.0,))) != (1.0, 0.0, 0.0):
        text += "; selected tokens replaced by (mask, random, unchanged) with probabilities {}".format(
            tuple(objective["replace"])
        )
    return text


def data_text(data: dict) -> str:
    """The prepared data folder, and what it was prepared from when its manifest is readable here."""
    windows = (
        f"each split at a random point into two windows of at least {data.get('min_window', 12)} tokens"
        if data.get("windows", "fixed") == "random_split"
        else "each one window"
    )
    text = f"prepared data `{data['path']}` (blocks of {data['seq_len']} tokens of packed documents, {windows})"
    manifest_file = Path(data["path"]) / "manifest.json"
    if "://" in data["path"] or not manifest_file.is_file():
        return text
    try:
        manifest = read_json_object(manifest_file, LARGE)  # it lists the input files
    except BoundedReadError:  # not readable here (a link to a device, garbage): the folder alone
        return text
    prepared = manifest.get("config", {})
    if prepared.get("hf_dataset"):
        source = f"Hugging Face dataset `{prepared['hf_dataset']}`" + (
            f" (config `{prepared['hf_config']}`, split `{prepared.get('hf_split', 'train')}`)"
            if prepared.get("hf_config")
            else ""
        )
    else:
        source = "the files " + ", ".join(f"`{p}`" for p in prepared.get("inputs", []))
    tokens = manifest.get("counts", {}).get("tokens")
    return text + f", prepared from {source}" + (f": {tokens:,} tokens" if tokens else "")


def _pretraining_section(step: int, cfg: dict) -> list[str]:
    t, s, o = cfg["train"], cfg["schedule"], cfg["optimizer"]
    lines = [
        f"- Objective: {objective_text(cfg['objective'])}.",
        f"- Steps: {step:,} of a {t['max_steps']:,}-step run; WSD schedule ({s['warmup']:,} warmup steps, "
        f"constant learning rate {o['lr']:g}, {s['decay']:,} {s['decay_shape']} decay steps at the end).",
        f"- Batch: {t['global_batch_size']:,} sequences of {cfg['data']['seq_len']:,} tokens per step; "
        f"AdamW betas {tuple(o['betas'])}, eps {o['eps']:g}, weight decay {o['weight_decay']:g}, "
        f"gradient clipping {o['grad_clip_norm']:g}.",
        f"- Data: {data_text(cfg['data'])}.",
        f"- Tokenizer: `{cfg['tokenizer']}`; model preset `{cfg['model']['preset']}`.",
    ]
    if step < t["max_steps"] - s["decay"]:
        lines.append("- An intermediate checkpoint: taken before the learning-rate decay.")
    if cfg.get("init", {}).get("path"):
        lines.append(f"- Initial weights: `{cfg['init']['path']}` ({cfg['init']['kind']}), i.e. continued pretraining.")
    return lines


def model_card(metadata: dict, parameters: int, config: dict) -> str:
    """README.md text; `metadata` is pretraining.json's content, `config` the exported config.json."""
    run = metadata.get("run_config")
    step = metadata.get("step")
    name = metadata.get("name") or (run or {}).get("name") or "mlm-vs-clm checkpoint"
    objective = (run or {}).get("objective", {}).get("kind", "unknown")
    front = {
        "library_name": "transformers",
        "pipeline_tag": "fill-mask",
        "tags": ["mlm-vs-clm", "encoder", objective, "custom_code"],
    }
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False).strip(),
        "---",
        "",
        f"# {name}" + (f" (step {step:,})" if step is not None else ""),
        "",
        f"A {parameters / 1e6:,.1f}M-parameter Llama-style transformer (EuroBERT architecture: "
        f"{config['num_hidden_layers']} layers, hidden size {config['hidden_size']}, "
        f"{config['num_attention_heads']} attention heads / {config['num_key_value_heads']} KV heads, "
        "SwiGLU, RMSNorm, RoPE, untied LM head) pretrained with the mlm-vs-clm reproducibility "
        f"package of {PAPER_CITATION}.",
        "",
        "## Use",
        "",
        "The model code ships in this folder (`modeling_mlmclm.py`, listed in config.json's "
        "`auto_map`), so plain transformers loads it with `trust_remote_code=True`; with the "
        "mlm-vs-clm package imported, it also loads without. Attention is bidirectional by "
        "default (`is_causal: false` in config.json); pass `is_causal=True` to `from_pretrained` "
        "or to a forward call for causal attention.",
        "",
        "```python",
        "from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer",
        "",
        'path = "path/to/this/folder"',
        "tokenizer = AutoTokenizer.from_pretrained(path)",
        "encoder = AutoModel.from_pretrained(path, trust_remote_code=True)  # hidden states",
        "mlm = AutoModelForMaskedLM.from_pretrained(path, trust_remote_code=True)  # bidirectional",
        "clm = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True, is_causal=True)",
        "```",
        "",
        "## Pretraining",
        "",
    ]
    if metadata.get("random_init"):
        init = metadata["random_init"]
        lines.append(
            f"Not pretrained: the random initialisation (seed {init['seed']}) that a pretraining run of preset "
            f"`{init['preset']}` starts from, the reference that shows what pretraining adds."
        )
    elif run is None:
        lines.append(
            "The run config was not available at export time (exported with an explicit "
            "preset): objective, steps and data are unknown."
        )
    else:
        lines += _pretraining_section(step if step is not None else run["train"]["max_steps"], run)
        lines += ["", "The resolved run config:", "", "```yaml", yaml.safe_dump(run, sort_keys=False).strip(), "```"]
    if metadata.get("git_sha"):
        lines += ["", f"Code: mlm-vs-clm at git commit `{metadata['git_sha']}`."]
    lines += [
        "",
        "## Citation",
        "",
        "Please cite the paper whose setup this checkpoint reproduces, and the software that "
        "trained it (its CITATION.cff):",
        "",
        "```bibtex",
        bibtex(),
        "```",
        "",
    ]
    return "\n".join(lines)
