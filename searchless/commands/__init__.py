"""Console scripts: one thin `main()` per command over a typed `run(...)` in the library or a pipeline's `run(argv)`
(`searchless.pipelines`), and the demo job (`make run`). How the shipped models are made is the repository's
campaign (campaign/ beside the package), not a command."""
