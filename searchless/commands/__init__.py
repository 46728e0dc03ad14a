"""Console scripts: one thin `main()` per command over a typed `run(...)` in the library, and the demo job (`make
run`). The data pipelines' console scripts are their own drivers' `main` (`searchless.pipelines`). How the shipped
models are made is the repository's campaign (campaign/ beside the package), not a command."""
