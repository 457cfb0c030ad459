import matplotlib

matplotlib.use("Agg")  # headless: figures are only written to files

from reproduce.cli import main  # noqa: E402

raise SystemExit(main())
