import sys

from delaybound.cli import main

sys.exit(main())
