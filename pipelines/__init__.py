"""Apache Beam job drivers: `run(argv)` entry points over the transforms in `searchless`."""
