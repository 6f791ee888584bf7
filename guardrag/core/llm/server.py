"""The bundled model's server process: llama.cpp's own HTTP server from the xllamacpp wheel.

    OMP_WAIT_POLICY=PASSIVE GUARDRAG_LLM_SERVER_KEY=... \\
        python -m guardrag.core.llm.server --model M.gguf --alias NAME --port P [--ctx ...]

`guardrag.core.llm.local` starts it under its supervisor; nothing else should. It serves the
OpenAI protocol (/v1/chat/completions, /v1/completions) and llama.cpp's own routes
(/completion, /tokenize, /apply-template) on 127.0.0.1, with the API key from the
environment (never argv, which other users can read). GET /health is public: 503 while the
model loads, 200 once it answers.

It is its own process, not a `Server()` inside the app: loading holds the GIL for seconds, and
a crash inside llama.cpp must not take the app with it. It exits on SIGTERM/SIGINT/SIGHUP and
by itself when its parent dies, even by SIGKILL (it watches `os.getppid()`; PR_SET_PDEATHSIG
would fire when the *thread* that spawned it ends, and the supervisor restarts it from one).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

HOST = "127.0.0.1"
KEY_ENV = "GUARDRAG_LLM_SERVER_KEY"


def params(args: argparse.Namespace) -> Any:
    """llama.cpp's common_params for our use; every field not set here keeps its default."""
    import xllamacpp  # lazy: the 106 MB library loads in the server process only

    p = xllamacpp.CommonParams()
    p.model.path = args.model
    p.model_alias = [args.alias]  # the model name clients send
    p.hostnames = [HOST]
    p.port = args.port
    # One KV pool shared by the slots: each request may use up to n_ctx tokens of it, and
    # requests beyond `parallel` wait for a slot instead of interrupting one.
    p.n_ctx = args.ctx
    p.n_parallel = args.parallel
    p.kv_unified = True
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.cache_prompt = True  # a slot reuses the longest common prefix of its last prompt
    # Idle slots' prompts kept in host RAM for reuse; llama.cpp's default (8 GiB) would let a
    # long-running app grow by ~28 KiB per distinct prompt token up to that.
    p.cache_ram_mib = args.cache_mib
    key = os.environ.get(KEY_ENV, "")
    if key:
        p.api_keys = [key]  # every route but /health: no web page can use the model
    p.ui = False  # and no agent tools, MCP proxy or model download: those stay unset
    p.verbosity = 2  # warnings and errors, not lines per request (the log is not rotated live)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m guardrag.core.llm.server")
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--cache-mib", type=int, default=512)
    args = parser.parse_args(argv)
    if os.environ.get("OMP_WAIT_POLICY", "").upper() != "PASSIVE":
        # Spinning OpenMP workers collapse generation to ~1 token/s on a busy 2-core machine;
        # the variable must be set before libgomp loads, so the supervisor sets it.
        print("warning: OMP_WAIT_POLICY is not PASSIVE", file=sys.stderr, flush=True)

    import xllamacpp  # lazy: see params()

    parent = os.getppid()
    done = threading.Event()
    try:
        server = xllamacpp.Server(params(args))  # returns once the model is loaded
    except RuntimeError as exc:  # the reason is in llama.cpp's log lines just above
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    # Installed after loading, so a signal during the load just ends the process.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())
    print(f"listening at {server.listening_address}", flush=True)
    while not done.wait(0.5):
        if os.getppid() != parent:
            print("the supervising process died; exiting", file=sys.stderr, flush=True)
            break
    # No orderly teardown: nothing needs flushing, and a request in flight would delay it.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
