"""``python -m kafka_tiered_source.cli``."""
import sys

from . import main

sys.exit(main())
