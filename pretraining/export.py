"""Checkpoints in and out: initial weights for CPT, and export to Hugging Face directories.

An exported directory is self-contained (docs/export.md): config.json + model.safetensors, the
tokenizer, `modeling_mlmclm.py` (a verbatim copy of pretraining/modeling.py) named by config.json's
`auto_map` so that plain transformers loads it with `trust_remote_code=True`, like the paper's
released checkpoints, a model card (README.md) and pretraining.json (the run's metadata).

Sources of initial weights (`init.path` with kind "weights"):
- a Composer checkpoint of ours (`.pt`; the model's keys carry a `model.` prefix),
- an exported directory of ours (`model_type: mlmclm_llama`),
- a Hugging Face Llama-architecture decoder (`model_type: llama`), e.g. a Llama-style CLM model.
  Our module names follow transformers' Llama, so the key map is the identity on
  `model.embed_tokens`, `model.layers.<i>.{input_layernorm, self_attn.{q,k,v,o}_proj,
  post_attention_layernorm, mlp.{gate,up,down}_proj}`, `model.norm` and `lm_head` (copied from
  the embedding when the source ties them). The source must have our architecture: no biases,
  SiLU, no RoPE scaling, the same shapes as the run's preset; anything else is an error.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from contracts.bounded import LARGE, BoundedReadError, read_json_object_or, read_yaml, short_repr
from contracts.config import CONFIG_BYTES_LIMIT
from contracts.layout import RUN_CONFIG_FILE, latest_checkpoint
from contracts.provenance import atomic_write_json, atomic_write_text, give_usual_modes
from pretraining import modeling
from pretraining.modeling import MODEL_TYPE, MlmClmConfig, MlmClmForLM, MlmClmModel
from pretraining.presets import config_from_preset

REMOTE_CODE_FILE = "modeling_mlmclm.py"
_MODULE = REMOTE_CODE_FILE.removesuffix(".py")
# The Auto classes a user loads an export with -> class in the shipped modeling file.
AUTO_MAP = {
    "AutoConfig": f"{_MODULE}.{MlmClmConfig.__name__}",
    "AutoModel": f"{_MODULE}.{MlmClmModel.__name__}",
    "AutoModelForMaskedLM": f"{_MODULE}.{MlmClmForLM.__name__}",
    "AutoModelForCausalLM": f"{_MODULE}.{MlmClmForLM.__name__}",
    # the task heads (EuroBERT-style), so that `head: own` means something for our exports
    **{auto.__name__: f"{_MODULE}.{head.__name__}" for auto, head in modeling.HEAD_CLASSES.items()},
}


class CheckpointError(ValueError):
    """A checkpoint that cannot be read into / written from our model; names the path and fix."""


def _read_config_json(path: Path) -> dict:
    """A model folder's config.json, bounded (issue 56); CheckpointError in one line naming it."""
    return read_json_object_or(path, CheckpointError, LARGE)


def llama_key_map(num_layers: int) -> dict[str, str]:
    """Hugging Face LlamaForCausalLM parameter name -> ours (identity by construction)."""
    names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    per_layer = [
        "input_layernorm.weight",
        "post_attention_layernorm.weight",
        "self_attn.q_proj.weight",
        "self_attn.k_proj.weight",
        "self_attn.v_proj.weight",
        "self_attn.o_proj.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "mlp.down_proj.weight",
    ]
    names += [f"model.layers.{i}.{p}" for i in range(num_layers) for p in per_layer]
    return {name: name for name in names}


def config_from_llama(llama: dict) -> MlmClmConfig:
    """Our config for a Llama config.json, or an error naming what does not map."""
    problems = []
    if llama.get("attention_bias") or llama.get("mlp_bias"):
        problems.append("it has biases")
    if llama.get("hidden_act", "silu") != "silu":
        problems.append(f"hidden_act is {llama['hidden_act']}")
    if llama.get("rope_scaling"):
        problems.append("it uses rope_scaling")
    head_dim = llama.get("head_dim")
    if head_dim and head_dim * llama["num_attention_heads"] != llama["hidden_size"]:
        problems.append("head_dim * heads != hidden size")
    if problems:
        raise CheckpointError("this Llama checkpoint does not map onto our model: " + "; ".join(problems))
    return MlmClmConfig(
        vocab_size=llama["vocab_size"],
        hidden_size=llama["hidden_size"],
        intermediate_size=llama["intermediate_size"],
        num_hidden_layers=llama["num_hidden_layers"],
        num_attention_heads=llama["num_attention_heads"],
        num_key_value_heads=llama.get("num_key_value_heads") or llama["num_attention_heads"],
        max_position_embeddings=llama.get("max_position_embeddings", 2048),
        rms_norm_eps=llama.get("rms_norm_eps", 1e-5),
        rope_theta=llama.get("rope_theta", 10000.0),
    )


def _read_hf_weights(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(directory.glob("*.safetensors")) or sorted(directory.glob("pytorch_model*.bin"))
    if not files:
        raise CheckpointError(f"{directory}: no *.safetensors or pytorch_model*.bin weights")
    weights = {}
    for file in files:
        weights.update(
            load_file(file)
            if file.suffix == ".safetensors"
            else torch.load(file, map_location="cpu", weights_only=True)
        )
    return weights


def check_complete_checkpoint(path: Path) -> None:
    """A `torch.save` file (Composer's checkpoints) is a zip archive whose directory is written
    last: a file cut short by a kill, a crash or a full disk lacks it."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
        size = Path(path).stat().st_size
    except (zipfile.BadZipFile, OSError) as exc:
        raise CheckpointError(f"{path}: truncated or not a checkpoint ({exc}); it was not written completely") from None
    # torch.save stores its records uncompressed; torch's reader allocates a record's declared size
    # before the unpickler sees anything (issue 78: a 6.6 MB file asked for 4 GiB). So every entry
    # must be stored, its declared size its size in the archive, and all of them fit in the file.
    for entry in entries:
        if entry.compress_type != zipfile.ZIP_STORED or entry.file_size != entry.compress_size:
            raise CheckpointError(
                f"{path}: entry {entry.filename[:80]!r} is compressed or declares {entry.file_size:,} bytes in "
                f"{entry.compress_size:,}: not a torch.save archive (refused before anything is allocated)"
            )
    if sum(entry.file_size for entry in entries) > size:
        raise CheckpointError(
            f"{path}: its entries declare more bytes than the file's {size:,}: not a torch.save archive "
            "(refused before anything is allocated)"
        )


def _checkpoint_globals() -> list:
    """What unpickling a Composer checkpoint of ours may construct besides tensors and plain
    containers (torch's weights-only set): the RNG states (numpy arrays), Composer's run
    timestamps (timedelta) and the torch version it records. Nothing here runs code."""
    import datetime

    import numpy as np
    from torch.torch_version import TorchVersion

    numeric_dtypes = [type(np.dtype(t)) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16")]
    numeric_dtypes += [type(np.dtype(t)) for t in ("uint32", "uint64", "float16", "float32", "float64")]
    return [np.ndarray, np.dtype, *numeric_dtypes, np._core.multiarray._reconstruct, TorchVersion, datetime.timedelta]


def _global_name(obj) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


TRUST_HINT = "if you trust whoever wrote the file, pass --trust-checkpoint (it may then run code)"


def load_checkpoint_file(path: str | Path, *, trust: bool = False, mmap: bool = False) -> dict:
    """`torch.load` of a Composer checkpoint that refuses to run code: weights-only unpickling
    with the classes of `_checkpoint_globals` allowed (docs/pretraining.md, "Checkpoints from
    elsewhere"). Any other class is a CheckpointError naming the file and the class. `trust`:
    plain unpickling, for a file whose writer you trust."""
    import pickle

    path = Path(path)
    check_complete_checkpoint(path)
    if trust:
        return torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)
    named = f"{path} (-> {path.resolve()})" if path.is_symlink() else str(path)
    allowed = _checkpoint_globals()
    # Name the refused classes first (a scan of the pickle, nothing constructed) ...
    refused = sorted(set(torch.serialization.get_unsafe_globals_in_checkpoint(path)) - set(map(_global_name, allowed)))
    if refused:
        raise CheckpointError(
            f"{named}: refused to unpickle class {', '.join(refused)}: not one that our Composer checkpoints "
            f"hold, and unpickling it could run code; {TRUST_HINT}"
        )
    try:  # ... then load with the weights-only unpickler, which also refuses every other construct.
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as exc:
        lines = [line.strip() for line in str(exc).splitlines()]
        reason = next((line for line in lines if "WeightsUnpickler error" in line), lines[0] if lines else "")
        raise CheckpointError(f"{named}: refused by the weights-only unpickler ({reason}); {TRUST_HINT}") from None


def validate_composer_checkpoint(path, specs=None) -> bool:
    """Composer's checkpoint validation seam (its CHECKPOINT_VALIDATION_FUNCTION environment variable
    names this function): Composer unpickles resume and `load_path` checkpoints with
    `weights_only=False`; it first calls this, which raises a CheckpointError for a file that is
    incomplete or would run code (every rank checks the file it loads)."""
    load_checkpoint_file(path, mmap=True)
    return True


COMPOSER_VALIDATION_VARIABLE = "CHECKPOINT_VALIDATION_FUNCTION"


def guard_composer_loads(trust: bool) -> None:
    """Make Composer's own checkpoint loads in this process go through `validate_composer_checkpoint`
    (not when the user trusts the checkpoints)."""
    import os

    if trust:
        os.environ.pop(COMPOSER_VALIDATION_VARIABLE, None)
    else:
        os.environ[COMPOSER_VALIDATION_VARIABLE] = f"{__name__}.{validate_composer_checkpoint.__name__}"


NOT_OURS_FIX = "give a checkpoint that `python -m pretraining train` wrote (RUN/checkpoints/*.pt)"


def read_composer_checkpoint(path: Path, *, trust: bool = False) -> tuple[dict[str, torch.Tensor], int]:
    """(model weights with the prefix removed, optimizer step) of a Composer checkpoint written
    by pretraining.train. Any other `torch.save` file is a CheckpointError naming what it lacks
    (issue 88: `torch.save({"state": {"model": ...}})` was a `KeyError: 'timestamp'` traceback)."""
    state = load_checkpoint_file(path, trust=trust)
    inner = state.get("state") if isinstance(state, dict) else None
    model_state = inner.get("model") if isinstance(inner, dict) else None
    if not isinstance(model_state, dict) or not model_state:
        raise CheckpointError(f"{path}: not a Composer checkpoint (no state.model); {NOT_OURS_FIX}")
    odd = next((k for k, v in model_state.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)), None)
    if odd is not None:
        what = f"of type {type(model_state[odd]).__name__}" if isinstance(odd, str) else "a key that is not a name"
        raise CheckpointError(
            f"{path}: not a Composer checkpoint (state.model[{short_repr(odd, 80)}] is {what}, not a tensor of "
            f"weights); {NOT_OURS_FIX}"
        )
    try:  # Composer's Timestamp state dict
        step = int(inner["timestamp"]["Timestamp"]["batch"])
    except (KeyError, TypeError, ValueError, OverflowError, RuntimeError):  # absent, not a number, a tensor of 2
        raise CheckpointError(
            f"{path}: not a Composer checkpoint (no state.timestamp.Timestamp.batch, the step it was saved at); "
            f"{NOT_OURS_FIX}"
        ) from None
    return {k.removeprefix("model."): v for k, v in model_state.items()}, step


def check_weights_fit(path: Path, weights: dict[str, torch.Tensor], model: torch.nn.Module, preset: str) -> None:
    """CheckpointError in one line when `weights` are not `model`'s (another preset, or no model of
    ours), before load_state_dict's many-line RuntimeError."""
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    missing = sorted(ours.keys() - weights.keys())
    unexpected = sorted(weights.keys() - ours.keys())
    differ = sorted(k for k in ours.keys() & weights.keys() if tuple(weights[k].shape) != ours[k])
    if not (missing or unexpected or differ):
        return
    problems = [f"{len(missing)} of its {len(ours)} weights missing ({', '.join(missing[:2])}, ...)"] if missing else []
    problems += [f"{len(unexpected)} not its own ({', '.join(unexpected[:2])}, ...)"] if unexpected else []
    problems += [f"{k} {tuple(weights[k].shape)} in the file, {ours[k]} in the model" for k in differ[:2]]
    raise CheckpointError(
        f"{path}: its weights are not those of model preset {preset!r}: {'; '.join(problems)}; pass the preset "
        f"it was trained with (--preset), or {NOT_OURS_FIX}"
    )


def check_checkpoint_fits(path: str | Path, model: torch.nn.Module, model_fields: dict, *, trust: bool = False) -> None:
    """CheckpointError naming the file and the field when the Composer checkpoint `path` holds
    weights of another model (another model.preset or tokenizer) than `model`, whose config
    section is `model_fields`. Reads shapes only (memory-mapped), before Composer loads it."""
    state = load_checkpoint_file(path, trust=trust, mmap=True)
    try:
        saved = {k.removeprefix("model."): tuple(v.shape) for k, v in state["state"]["model"].items()}
    except (KeyError, TypeError):
        raise CheckpointError(f"{path}: not a Composer checkpoint (no state.model)") from None
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    differ = sorted(k for k in saved.keys() & ours.keys() if saved[k] != ours[k])
    if not differ and saved.keys() == ours.keys():
        return
    detail = (
        f"shapes (checkpoint, this run) {[(k, saved[k], ours[k]) for k in differ[:2]]}"
        if differ
        else f"keys differ: {sorted(saved.keys() ^ ours.keys())[:3]}"
    )
    written_by = Path(path).resolve().parent.parent / "config.yaml"  # <run>/checkpoints/<file>.pt
    if written_by.is_file():
        try:
            theirs = (read_yaml(written_by, CONFIG_BYTES_LIMIT).get("config") or {}).get("model", {})
        except BoundedReadError:  # unreadable (too big, not YAML): the error below names the shapes alone
            theirs = dict(model_fields)
        fields = [
            f"model.{k} is {theirs.get(k)!r} there, {v!r} here" for k, v in model_fields.items() if theirs.get(k) != v
        ]
        if fields:
            detail = "; ".join(fields) + f" ({written_by}); " + detail
    raise CheckpointError(
        f"{path}: written by another model config: {detail}; load it with that run's "
        "model.preset and tokenizer, or start from a checkpoint of this model"
    )


def read_source_weights(
    path: str | Path, *, trust: bool = False
) -> tuple[dict[str, torch.Tensor], MlmClmConfig | None]:
    """(weights in our naming, config when the source carries one) from any supported source."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint")
    if path.is_file():
        return read_composer_checkpoint(path, trust=trust)[0], None
    config_file = path / "config.json"
    if not config_file.exists():
        raise CheckpointError(f"{path}: a directory without config.json is not a HF checkpoint")
    hf = _read_config_json(config_file)
    weights = _read_hf_weights(path)
    if hf.get("model_type") == MODEL_TYPE:
        return weights, MlmClmConfig.from_dict(hf)
    if hf.get("model_type") == "llama":
        cfg = config_from_llama(hf)
        if "lm_head.weight" not in weights:  # tied source: our head is untied, start from a copy
            weights["lm_head.weight"] = weights["model.embed_tokens.weight"].clone()
        key_map = llama_key_map(cfg.num_hidden_layers)
        missing = set(key_map) - set(weights)
        if missing:
            raise CheckpointError(f"{path}: Llama weights lack {sorted(missing)[:3]}...")
        return {key_map[k]: weights[k] for k in key_map}, cfg
    raise CheckpointError(f"{path}: model_type {hf.get('model_type')!r} is neither {MODEL_TYPE!r} nor 'llama'")


_SHAPE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
)


def load_initial_weights(model: MlmClmForLM, path: str | Path, *, trust: bool = False) -> None:
    """Load a source's weights into `model` (same shapes required; every key must match)."""
    weights, source_cfg = read_source_weights(path, trust=trust)
    if source_cfg is not None:
        diff = {
            f: (getattr(source_cfg, f), getattr(model.config, f))
            for f in _SHAPE_FIELDS
            if getattr(source_cfg, f) != getattr(model.config, f)
        }
        if diff:
            raise CheckpointError(
                f"{path}: shapes differ from the run's model (source, run): {diff}; "
                "pick the model.preset (and tokenizer) of the source"
            )
    result = model.load_state_dict(weights, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise CheckpointError(
            f"{path}: keys do not match our model: missing {result.missing_keys[:3]}, "
            f"unexpected {result.unexpected_keys[:3]}"
        )


def add_remote_code(directory: Path) -> None:
    """Make a saved `mlmclm_llama` directory load without this package: copy the model code in
    and name its classes in config.json's `auto_map` (transformers' remote-code convention)."""
    directory = Path(directory)
    config = _read_config_json(directory / "config.json")
    if config.get("model_type") != MODEL_TYPE:
        raise CheckpointError(f"{directory}: model_type {config.get('model_type')!r} is not {MODEL_TYPE!r}")
    shutil.copyfile(modeling.__file__, directory / REMOTE_CODE_FILE)
    config["auto_map"] = AUTO_MAP
    atomic_write_json(directory / "config.json", config)


def save_hf_directory(model: MlmClmForLM, state_dict: dict | None, target: Path, tokenizer, metadata: dict) -> Path:
    """config.json + model.safetensors + modeling_mlmclm.py (+ tokenizer files) + pretraining.json
    + README.md (model card), written aside and renamed into place."""
    from pretraining.model_card import model_card

    target = Path(target)
    tmp = target.with_name(target.name + ".tmp")
    trained_causal = model.config.is_causal
    model.config.is_causal = False  # exported models default to bidirectional (encoder) use
    try:
        model.save_pretrained(tmp, state_dict=state_dict, safe_serialization=True)
    finally:
        model.config.is_causal = trained_causal
    add_remote_code(tmp)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    atomic_write_json(tmp / "pretraining.json", metadata)
    parameters = sum(v.numel() for v in (state_dict or model.state_dict()).values())
    config = _read_config_json(tmp / "config.json")
    atomic_write_text(tmp / "README.md", model_card(metadata, parameters, config))
    give_usual_modes(tmp)  # save_pretrained's weights are 0600: the group reads them in a team's study
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return target


def _latest_checkpoint(run_dir: Path) -> Path:
    latest = latest_checkpoint(run_dir)
    if not latest.exists():
        raise CheckpointError(f"{latest}: no such checkpoint; pass a checkpoint file")
    return latest.resolve()


def export_checkpoint(
    checkpoint: str | Path,
    out: str | Path,
    tokenizer: str | None = None,
    preset: str | None = None,
    *,
    trust_checkpoint: bool = False,
) -> Path:
    """Composer checkpoint (or run directory: its latest one) -> HF directory.

    The model shape comes from the run's saved config.yaml (run_dir/checkpoints/<file>.pt), or
    from `preset`; the vocabulary size from the weights; the tokenizer from the config or argument.
    """
    checkpoint, out = Path(checkpoint), Path(out)
    if checkpoint.is_dir():
        checkpoint = _latest_checkpoint(checkpoint)
    if not checkpoint.exists():
        raise CheckpointError(f"{checkpoint}: no such checkpoint")
    if out.exists():
        raise CheckpointError(f"{out} exists; refusing to overwrite an export")
    run_config = checkpoint.parent.parent / RUN_CONFIG_FILE
    try:
        document = read_yaml(run_config, CONFIG_BYTES_LIMIT) if run_config.exists() else {}
    except BoundedReadError as exc:
        raise CheckpointError(f"{exc} (the run config beside {checkpoint.name})") from None
    saved = document.get("config", {})
    preset = preset or saved.get("model", {}).get("preset")
    tokenizer = tokenizer or saved.get("tokenizer")
    if preset is None:
        raise CheckpointError(f"{checkpoint}: no run config.yaml beside it; pass --preset")
    weights, step = read_composer_checkpoint(checkpoint, trust=trust_checkpoint)
    embeddings = weights.get("model.embed_tokens.weight")
    if embeddings is None or embeddings.dim() != 2:  # the vocabulary size comes from its rows
        raise CheckpointError(
            f"{checkpoint}: no model.embed_tokens.weight matrix in state.model: not a checkpoint of this "
            f"project's model; {NOT_OURS_FIX}"
        )
    cfg = config_from_preset(preset, vocab_size=embeddings.shape[0])
    model = MlmClmForLM(cfg)
    check_weights_fit(checkpoint, weights, model, preset)
    model.load_state_dict(weights, strict=True)
    tok = None
    if tokenizer is not None:
        from pretraining.tokenizer import load_tokenizer

        tok = load_tokenizer(tokenizer)
    metadata = {
        "name": saved.get("name"),
        "step": step,
        "source_checkpoint": str(checkpoint),
        "run_config": saved or None,
        "git_sha": document.get("git_sha"),
    }
    return save_hf_directory(model, None, out, tok, metadata)


def untrained_model(preset: str, vocab_size: int, seed: int, **overrides) -> MlmClmForLM:
    """The seeded initial weights of a run of `preset` (toy presets take the tokenizer's `vocab_size`)."""
    from pretraining.presets import PRESETS

    torch.manual_seed(seed)
    return MlmClmForLM(config_from_preset(preset, vocab_size=PRESETS[preset].vocab or vocab_size, **overrides))


def export_random_init(preset: str, out: str | Path, tokenizer: str = "embedded", seed: int = 17) -> Path:
    """The untrained model of `preset` as an export: the weights a pretraining run of that preset
    starts from (`untrained_model`, as `pretraining.train.build_model` draws them), fine-tuned as the
    "random initialisation" reference (docs/reproduce.md, "Toy learning")."""
    from contracts.provenance import git_sha
    from pretraining.presets import PRESETS
    from pretraining.tokenizer import load_tokenizer

    out = Path(out)
    if preset not in PRESETS:
        raise CheckpointError(f"preset {preset!r} is not one of {', '.join(PRESETS)}")
    if out.exists():
        raise CheckpointError(f"{out} exists; refusing to overwrite an export")
    tok = load_tokenizer(tokenizer)
    model = untrained_model(preset, len(tok), seed)
    metadata = {
        "name": f"{preset}-random-init",
        "step": 0,
        "random_init": {"preset": preset, "seed": seed, "tokenizer": tokenizer},
        "run_config": None,
        "git_sha": git_sha(),
    }
    return save_hf_directory(model, None, out, tok, metadata)


RANDOM_TWIN_FILE = "random_init.json"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".ot", ".gguf")
_TWIN_FILE_BYTES = 64 << 20  # a tokenizer.json or vocabulary is a few MB; weights never travel


def export_random_twin(like: str | Path, out: str | Path, seed: int = 17, trust_remote_code: bool = False) -> Path:
    """The untrained twin of any Hugging Face checkpoint folder `like`: its config and tokenizer,
    weights drawn by the model class's own initialisation (transformers' `_init_weights`) after
    `torch.manual_seed(seed)`, and its sentence-transformers files (pooling, normalisation, max
    length), so that "pretrained vs random init" compares one architecture, tokenizer and pooling
    (issue 67). Written aside and renamed into place; `random_init.json` says what it is."""
    import transformers

    from contracts.provenance import git_sha

    like, out = Path(like), Path(out)
    if out.exists():
        raise CheckpointError(f"{out} exists; refusing to overwrite an export")
    if not (like / "config.json").is_file():
        raise CheckpointError(
            f"--like {like}: no config.json; pass a Hugging Face model folder (fetch-model writes one)"
        )
    if "auto_map" in _read_config_json(like / "config.json") and not trust_remote_code:
        raise CheckpointError(
            f"--like {like}: its config.json names shipped model code (auto_map), which runs only with "
            "--trust-remote-code; pass it if you trust that code"
        )
    config = transformers.AutoConfig.from_pretrained(like, trust_remote_code=trust_remote_code)
    tokenizer = transformers.AutoTokenizer.from_pretrained(like, trust_remote_code=trust_remote_code)
    named = (getattr(config, "architectures", None) or [None])[0]
    model_class = getattr(transformers, named, None) if named else None
    torch.manual_seed(seed)
    if model_class is not None:  # the checkpoint's own class (an MLM head stays an MLM head)
        model = model_class(config)
    else:
        model = transformers.AutoModel.from_config(config, trust_remote_code=trust_remote_code)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    copied = _copy_model_side_files(like, tmp)
    atomic_write_json(
        tmp / RANDOM_TWIN_FILE,
        {
            "name": f"{like.name}-random-init",
            "random_init": {"like": str(like.resolve()), "seed": seed, "class": type(model).__name__},
            "copied_files": copied,
            "git_sha": git_sha(),
        },
    )
    give_usual_modes(tmp)
    tmp.rename(out)
    return out


def _copy_model_side_files(source: Path, target: Path) -> list[str]:
    """The sentence-transformers files of `source` (modules.json, sentence_bert_config.json, the
    `<n>_<Module>/` folders' configs): regular files only (links are not followed), weights never."""
    copied = []
    candidates = [
        p
        for p in source.iterdir()
        if p.name in ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
    ]
    for folder in source.iterdir():
        if folder.is_dir() and not folder.is_symlink() and folder.name[:1].isdigit() and "_" in folder.name:
            candidates += [p for p in folder.iterdir() if p.suffix == ".json"]
    for path in sorted(candidates):
        if path.is_symlink() or not path.is_file() or path.name.endswith(_WEIGHT_SUFFIXES):
            continue
        if path.stat().st_size > _TWIN_FILE_BYTES:
            raise CheckpointError(f"{path}: {path.stat().st_size:,} bytes, too large for a configuration file")
        relative = path.relative_to(source)
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / relative, follow_symlinks=False)
        copied.append(str(relative))
    return copied
