"""Console scripts: one thin `main()` per command over a typed `run(...)` in the library; the demo job."""
