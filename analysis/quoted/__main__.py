"""python -m analysis.quoted: print every quote that is missing or stale (exit 1 if any)."""

import sys

from analysis.quoted import main

if __name__ == "__main__":
    sys.exit(main())
