import matplotlib

matplotlib.use("Agg")  # headless: figures are only written to files

from paper_figures.cli import main  # noqa: E402

raise SystemExit(main())
