"""Shared test set-up.  Servers used by the tests are started here or in the test modules
themselves, always on 127.0.0.1."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

FIXTURES = os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "kafka-3.9.1")

from botocore_loader import share_botocore_data_loader  # noqa: E402

share_botocore_data_loader()
