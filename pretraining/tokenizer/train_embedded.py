"""Train the embedded default tokenizer: byte-level BPE on the embedded corpus, Llama-3 roles.

    python -m pretraining.tokenizer.train_embedded [--vocab-size 8192] [--out DIR]

Ids 0, 1, 2 are `<|begin_of_text|>` (bos), `<|end_of_text|>` (eos = pad) and `<|mask|>`; like Llama-3,
`add_special_tokens=True` prepends bos. Training is deterministic: same corpus -> same tokenizer.json.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from pretraining.assets import EMBEDDED_CORPUS, EMBEDDED_TOKENIZER_DIR
from pretraining.tokenizer import BOS_TOKEN, EOS_TOKEN, MASK_TOKEN

DEFAULT_VOCAB_SIZE = 8192
MODEL_MAX_LENGTH = 2048


def train_byte_level_bpe(
    texts: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE, split_pattern: str | None = None
) -> PreTrainedTokenizerFast:
    """`split_pattern`: a regex that pre-splits the text instead of GPT-2's byte-level one (e.g.
    Llama-3's, which keeps a space apart from the digits after it)."""
    backend = Tokenizer(models.BPE())
    if split_pattern is None:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split_pattern), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=[BOS_TOKEN, EOS_TOKEN, MASK_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(texts, trainer)
    bos_id = backend.token_to_id(BOS_TOKEN)
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS_TOKEN} $A",
        pair=f"{BOS_TOKEN} $A {BOS_TOKEN}:1 $B:1",
        special_tokens=[(BOS_TOKEN, bos_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        mask_token=MASK_TOKEN,
        model_max_length=MODEL_MAX_LENGTH,
    )


def corpus_texts(path: Path = EMBEDDED_CORPUS) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=["text"]).column("text").to_pylist()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=EMBEDDED_CORPUS)
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)
    parser.add_argument("--out", type=Path, default=EMBEDDED_TOKENIZER_DIR)
    args = parser.parse_args(argv)
    tokenizer = train_byte_level_bpe(corpus_texts(args.corpus), args.vocab_size)
    tokenizer.save_pretrained(args.out)
    print(f"wrote {args.out}: vocab {len(tokenizer)}")


if __name__ == "__main__":
    main()
