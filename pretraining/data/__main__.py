import sys

from pretraining.data.cli import main

sys.exit(main())
