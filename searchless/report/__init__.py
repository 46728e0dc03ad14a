"""The report of a run: reads the artefacts the steps wrote and renders one page (HTML and Markdown).

* `build` - `build.build(run_dir)` writes ``RUN_DIR/report/`` (``searchless-report``);
* `sample_game` - the step that analyses one match game with the model and
  Stockfish and writes ``RUN_DIR/report/sample_game.json`` (``searchless-analyse-game``);
* `context` - where a run's artefacts are, reading the untyped ones, what sections share;
* `sections` - one module per section; `figures` - the plots and calibration bins;
* `document` - the document model; `render` - Markdown, and HTML through the Jinja2
  template and style sheet in ``templates/`` (package data).
"""
