"""The data pipelines, one driver module each, read top to bottom as Beam's examples are: the flags, ``main`` (the
console script), ``run(argv)`` and the job around its graph.

* `annotate`: Lichess PGN games -> Stockfish labels -> ChessBench bags and board records (Beam);
* `import_labels`: Lichess's own evaluations -> ChessBench records, no engine (Beam);
* `convert`: ChessBench bags <-> board records (Beam);
* `selfplay`: Stockfish self-play games -> a PGN file (one engine; the sample games).

They build their job graphs from the library's transforms (`searchless.data`); the console scripts
(``searchless-annotate``, ``-import``, ``-convert``, ``-selfplay``) are their ``main``. In the repository they live
in ``pipelines/``; the wheel installs them as ``searchless.pipelines``.
"""
