"""paper_figures stage of the MLM-vs-CLM reproducibility package: the paper's figures.

- from_cells: Figures 2, 3, 4, 6, 8, 9, 10, 11 from a cells table (published tables or aggregated runs)
- from_runs:  Figures 5 and 7 from raw run records (every LR and seed)
- flops:      parameter counts and 6*N*D training FLOPs (Figure 10)
- output:     PNG/PDF/points CSV/meta JSON, written atomically;  cli: `python -m paper_figures`
Each figure_N returns (matplotlib Figure, points DataFrame); Figure 12 (loss curves) is out of scope.
"""
