import sys
from pathlib import Path

# Tests import the project the way the scripts do: from the repository root.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
