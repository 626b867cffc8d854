"""The distributed tests spawn their ranks (ranks.py); this folder is on sys.path for them."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
