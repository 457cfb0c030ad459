"""paper_figures stage of the MLM-vs-CLM reproducibility package."""
