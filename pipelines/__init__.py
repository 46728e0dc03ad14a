"""Apache Beam job drivers: `run(argv)` entry points over the transforms in `searchless`."""

import searchless  # noqa: F401  Quiets Beam's import-time GCS warning before the drivers import Beam.
