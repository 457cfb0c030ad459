"""Tokenizer roles: the embedded default, a Llama-3-style tokenizer, and one without a mask token."""

import hashlib

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from pretraining.assets import EMBEDDED_TOKENIZER_DIR
from pretraining.tokenizer import (
    BOS_TOKEN,
    EOS_TOKEN,
    LLAMA3_MASK_SLOT,
    MASK_TOKEN,
    SpecialTokens,
    TokenizerError,
    load_tokenizer,
    special_token_ids,
)
from pretraining.tokenizer.train_embedded import train_byte_level_bpe


def save_word_level(tmp_path, specials, **roles):
    """A tiny WordLevel tokenizer with `specials` as added special tokens after a 5-word vocab."""
    vocab = {w: i for i, w in enumerate(["[UNK]", "the", "cat", "sat", "mat"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", **roles)
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    tokenizer.save_pretrained(tmp_path)
    return str(tmp_path)


def test_embedded_tokenizer_roles():
    tokenizer = load_tokenizer("embedded")
    ids = special_token_ids(tokenizer)
    assert ids == SpecialTokens(bos=0, eos=1, pad=1, mask=2, vocab_size=8192)
    roles = (tokenizer.bos_token, tokenizer.eos_token, tokenizer.mask_token)
    assert roles == (BOS_TOKEN, EOS_TOKEN, MASK_TOKEN)
    encoded = tokenizer("The cat sat on the mat.")["input_ids"]
    assert encoded[0] == ids.bos and ids.mask not in encoded  # like Llama-3: bos prepended
    assert tokenizer.decode(encoded, skip_special_tokens=True) == "The cat sat on the mat."
    with pytest.raises(AttributeError):
        ids.mask = 5  # frozen


def test_llama3_style_tokenizer_gets_mask_in_reserved_slot(tmp_path):
    path = save_word_level(
        tmp_path,
        [BOS_TOKEN, EOS_TOKEN, LLAMA3_MASK_SLOT, "<|reserved_special_token_1|>"],
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
    )
    before = PreTrainedTokenizerFast.from_pretrained(path)
    slot = before.convert_tokens_to_ids(LLAMA3_MASK_SLOT)
    assert before.mask_token is None and before.pad_token is None

    tokenizer = load_tokenizer(path)
    ids = special_token_ids(tokenizer)
    assert ids.mask == slot and tokenizer.mask_token == MASK_TOKEN
    assert ids.pad == ids.eos == before.eos_token_id and ids.bos == before.bos_token_id
    assert ids.vocab_size == len(before)  # renamed in place, no new embedding row
    assert tokenizer.convert_ids_to_tokens(slot) == MASK_TOKEN
    assert tokenizer(f"the cat {MASK_TOKEN} mat", add_special_tokens=False)["input_ids"] == [1, 2, slot, 4]
    tokenizer.save_pretrained(tmp_path / "saved")  # what a checkpoint export writes
    assert special_token_ids(PreTrainedTokenizerFast.from_pretrained(tmp_path / "saved")) == ids


def test_tokenizer_with_mask_token_in_vocab_resolves_it(tmp_path):
    path = save_word_level(tmp_path, [BOS_TOKEN, EOS_TOKEN, MASK_TOKEN], bos_token=BOS_TOKEN, eos_token=EOS_TOKEN)
    ids = special_token_ids(load_tokenizer(path))
    assert ids.mask == load_tokenizer(path).convert_tokens_to_ids(MASK_TOKEN)


def test_tokenizer_without_mask_token_is_a_clear_error(tmp_path):
    path = save_word_level(tmp_path, ["<s>", "</s>"], bos_token="<s>", eos_token="</s>")
    tokenizer = load_tokenizer(path)
    with pytest.raises(TokenizerError) as info:
        special_token_ids(tokenizer)
    message = str(info.value)
    assert path in message and "no mask token" in message
    assert "add_special_tokens" in message and MASK_TOKEN in message  # names the fix


def test_missing_tokenizer_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerError, match="cannot load tokenizer"):
        load_tokenizer(str(tmp_path / "nowhere"))


def test_embedded_training_is_deterministic_and_matches_the_shipped_recipe():
    texts = ["The quick brown fox jumps over the lazy dog. " * 3, "Packing keeps document boundaries."] * 20
    a = train_byte_level_bpe(texts, vocab_size=300).backend_tokenizer.to_str()
    b = train_byte_level_bpe(texts, vocab_size=300).backend_tokenizer.to_str()
    assert hashlib.sha256(a.encode()).digest() == hashlib.sha256(b.encode()).digest()
    trained = train_byte_level_bpe(texts, vocab_size=300)
    assert [trained.convert_tokens_to_ids(t) for t in (BOS_TOKEN, EOS_TOKEN, MASK_TOKEN)] == [0, 1, 2]
    assert (EMBEDDED_TOKENIZER_DIR / "tokenizer.json").is_file()
