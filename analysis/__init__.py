"""analysis stage of the MLM-vs-CLM reproducibility package."""
