"""Tokenizers with the special-token roles of the paper's Llama-3 setup (Table 1).

Roles: bos `<|begin_of_text|>`, eos = pad `<|end_of_text|>`, mask `<|mask|>`. The Llama-3 tokenizer
has no mask token: like EuroBERT, we give its first reserved special token (id 128002) the content
`<|mask|>`, so the vocabulary keeps its 128,256 entries. `load_tokenizer("embedded")` returns the
small byte-level BPE trained on the embedded corpus (pretraining/assets/tokenizer).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from transformers import AutoTokenizer, PreTrainedTokenizerFast

from pretraining.assets import EMBEDDED_TOKENIZER_DIR

BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|end_of_text|>"
MASK_TOKEN = "<|mask|>"
# The Llama-3 special token that EuroBERT (whose setup the paper follows) turns into the mask token (id 128002).
LLAMA3_MASK_SLOT = "<|reserved_special_token_0|>"
EMBEDDED = "embedded"


class TokenizerError(ValueError):
    """A tokenizer that cannot serve pretraining; the message names it and the fix."""


@dataclass(frozen=True)
class SpecialTokens:
    bos: int
    eos: int
    pad: int
    mask: int
    vocab_size: int  # len(tokenizer): the embedding rows a model needs, added tokens included

    def to_dict(self) -> dict:
        return asdict(self)


def resolve_tokenizer_path(name_or_path: str) -> str:
    """`embedded` -> the shipped tokenizer folder; anything else is returned unchanged."""
    return str(EMBEDDED_TOKENIZER_DIR) if name_or_path == EMBEDDED else name_or_path


def _rename_added_token(tokenizer: PreTrainedTokenizerFast, old: str, new: str) -> PreTrainedTokenizerFast:
    """Copy of `tokenizer` whose added token `old` is called `new`, keeping its id."""
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    for entry in state["added_tokens"]:
        if entry["content"] == old:
            entry["content"] = new
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(json.dumps(state))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        name_or_path=tokenizer.name_or_path,
        bos_token=tokenizer.bos_token,
        eos_token=tokenizer.eos_token,
        model_max_length=tokenizer.model_max_length,
        clean_up_tokenization_spaces=tokenizer.clean_up_tokenization_spaces,
    )


def load_tokenizer(name_or_path: str = EMBEDDED) -> PreTrainedTokenizerFast:
    """A fast tokenizer from a local folder or hub id (`embedded` = the shipped one), roles resolved.

    - mask: the tokenizer's own mask token; else `<|mask|>` when the vocabulary has it; else, for a
      Llama-3 tokenizer, `<|reserved_special_token_0|>` renamed to `<|mask|>` (id 128002).
    - pad: the tokenizer's pad token, else eos.
    A tokenizer still lacking a role loads, and `special_token_ids` then names what is missing.
    """
    source = resolve_tokenizer_path(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, use_fast=True)
    except (OSError, ValueError) as exc:
        raise TokenizerError(
            f"cannot load tokenizer {name_or_path!r} ({exc}); pass a local folder with tokenizer.json, "
            f"a hub id available offline, or {EMBEDDED!r}"
        ) from None
    if not isinstance(tokenizer, PreTrainedTokenizerFast):
        raise TokenizerError(
            f"tokenizer {name_or_path!r} is not a fast (Rust) tokenizer; convert it and save tokenizer.json"
        )
    vocab = tokenizer.get_vocab()
    if tokenizer.mask_token is None:
        if MASK_TOKEN in vocab:
            tokenizer.mask_token = MASK_TOKEN
        elif LLAMA3_MASK_SLOT in vocab and tokenizer.bos_token == BOS_TOKEN:
            tokenizer = _rename_added_token(tokenizer, LLAMA3_MASK_SLOT, MASK_TOKEN)
            tokenizer.mask_token = MASK_TOKEN
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def special_token_ids(tokenizer: PreTrainedTokenizerFast) -> SpecialTokens:
    """The ids of the roles pretraining needs; a missing role is an error that says how to fix it."""
    name = tokenizer.name_or_path or type(tokenizer).__name__
    roles = {
        "bos": tokenizer.bos_token_id,
        "eos": tokenizer.eos_token_id,
        "pad": tokenizer.pad_token_id,
        "mask": tokenizer.mask_token_id,
    }
    missing = [role for role, token_id in roles.items() if token_id is None]
    if missing:
        fixes = {
            "mask": f"MLM needs a mask token: use a tokenizer that has one (EuroBERT's, a Llama-3 "
            f"tokenizer through load_tokenizer, or {EMBEDDED!r}), or add it with "
            f"tokenizer.add_special_tokens({{'mask_token': '{MASK_TOKEN}'}}) and save_pretrained "
            "(this adds an embedding row)",
            "bos": "set bos_token in tokenizer_config.json",
            "eos": "set eos_token in tokenizer_config.json (documents are separated by eos)",
            "pad": "set pad_token (or eos_token, which load_tokenizer then uses as pad)",
        }
        raise TokenizerError(
            f"tokenizer {name!r} has no {', '.join(missing)} token: " + "; ".join(fixes[m] for m in missing)
        )
    return SpecialTokens(**roles, vocab_size=len(tokenizer))
