import sys

from zbsolve.cli import main

sys.exit(main())
