"""Console scripts: one thin `main()` per command over a typed `run(...)` in the library or a pipeline's `run(argv)`
(`searchless.pipelines`); the demo job, and the shipped models' campaign."""
