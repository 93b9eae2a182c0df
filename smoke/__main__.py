"""`python3.13 -m smoke --url URL --token TOKEN` (or SMOKE_URL / SMOKE_TOKEN): see smoke/__init__.py."""

import sys

from smoke import main

sys.exit(main())
