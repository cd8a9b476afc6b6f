"""`python -m vk_provider` runs the same command line as the `vk-provider` script."""

import sys

from vk_provider.cli import main

sys.exit(main())
