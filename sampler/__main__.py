import sys

from sampler.cli import main

sys.exit(main())
