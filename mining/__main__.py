import sys

from mining.cli import main

sys.exit(main())
