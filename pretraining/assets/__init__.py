"""Files shipped with the package: the embedded corpus and tokenizer (provenance in README.md)."""

from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent
EMBEDDED_CORPUS = ASSETS_DIR / "embedded_corpus" / "train-00000-of-00001.parquet"
EMBEDDED_TOKENIZER_DIR = ASSETS_DIR / "tokenizer"
