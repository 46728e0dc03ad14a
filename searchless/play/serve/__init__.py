"""The model as an HTTP service: ``searchless-serve``, a JSON API that batches concurrent queries, and a page.

`server.run` (what `searchless.commands.serve` runs) loads a checkpoint, binds
127.0.0.1:8000 (``--host``, ``--port``), compiles every batch shape the model
will be called with, and serves (Starlette on uvicorn) until SIGTERM or Ctrl-C,
which answer the requests in flight first. A request goes: uvicorn (`connections`) ->
`app.Gate` (`guard`) -> the router -> `app.api_endpoint` (`inputs`) -> `service.Service`
-> `batcher.Batcher` -> the policy, and back. The modules:

* `inputs`: the request bodies, read and checked (one sentence naming the field at fault);
* `parser`: /v1/pgn's parse, in a process of its own (off the server's interpreter lock);
* `batcher`: the dynamic batcher: positions of concurrent requests go into one model call, run on a thread of
  its own, from a bounded queue;
* `service`: the model, its warm-up, and the answers (every legal move's win probability, best first), with the
  search agent (``/v1/play``) and Stockfish (``/v1/stockfish``) where the server was given them;
* `metrics`: the Prometheus metrics of one server;
* `guard`: who may ask what (``Host``, ``Origin``, the token, the content type) and every answer's headers;
* `app`: the routes (one Starlette router) behind one middleware (`guard`'s checks, the metrics), the body's
  bounds, a request cancelled when its client leaves, the JSON errors;
* `connections`: the bounds uvicorn's HTTP protocol lacks (open connections, a request head's time);
* `server`: `run`;
* ``page/``: the analysis page at ``/`` (package data: HTML, script, style and the vendored board widget,
  cm-chessboard, with its licence).

The API, its limits and curl examples are in docs/serve.md.
"""
