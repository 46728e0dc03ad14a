"""The data pipelines, one module each, laid out as Beam's examples are: ``run(argv)`` builds and runs one job.

* `annotate`: Lichess PGN games -> Stockfish labels -> ChessBench bags and board records (Beam);
* `import_labels`: Lichess's own evaluations -> ChessBench records, no engine (Beam);
* `convert`: ChessBench bags <-> board records (Beam);
* `selfplay`: Stockfish self-play games -> a PGN file (one engine; the sample games).

They build their job graphs from the library's transforms (`searchless.data`); the
console scripts (`searchless.commands`) call them. In the repository they live in
``pipelines/``; the wheel installs them as ``searchless.pipelines``.
"""
