import os

# Headless: figures are only written to files. The variable, not matplotlib.use(): matplotlib is
# imported only when a figure is drawn (`--help` loads none of it, issue 77).
os.environ["MPLBACKEND"] = "Agg"

from paper_figures.cli import main  # noqa: E402

raise SystemExit(main())
