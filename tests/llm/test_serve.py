"""The OpenAI-compatible backend against a real local server process (agents.llm.serve)
serving the local model. Slow: starts a process that loads the model."""

import json
import os
import subprocess
import sys
import threading
import urllib.request

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.agents.knowledge.retrieve import Retriever
from argus_env.agents.llm import planner
from argus_env.agents.llm.backends import BackendError, OpenAIBackend

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(smol):
    """`python -m argus_env.agents.llm.serve` on a free port; `smol` first, so the server loads the
    de-quantized copy it saved (half a second) instead of the gguf."""
    proc = subprocess.Popen([sys.executable, "-m", "argus_env.agents.llm.serve", "--model", "smollm2",
                             "--port", "0", "--max-new-tokens", "32"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ), cwd=os.getcwd())
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout=240)
    if not line or " on http://" not in line[0]:
        proc.kill()
        pytest.fail(f"server did not start: {line} {proc.stderr.read()[-2000:]}")
    url = line[0].split(" on ")[1].strip()
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_models_route_and_a_chat_completion(server):
    with urllib.request.urlopen(server + "/models", timeout=30) as r:
        models = json.loads(r.read())
    name = models["data"][0]["id"]
    assert "SmolLM2" in name
    backend = OpenAIBackend(server, name, max_new_tokens=16)
    answer = backend.generate([{"role": "user", "content": "Name one GPU optimization."}])
    assert isinstance(answer, str) and answer.strip()


def test_bad_requests_are_4xx_errors(server):
    backend = OpenAIBackend(server, "m")
    with pytest.raises(BackendError, match="HTTP 400.*messages"):
        backend._post("/chat/completions", {"messages": []})
    with pytest.raises(BackendError, match="HTTP 404"):
        backend._post("/nowhere", {})
    with pytest.raises(BackendError, match="cannot reach"):
        OpenAIBackend("http://127.0.0.1:9/v1", "m", timeout=5).generate([{"role": "user", "content": "x"}])


def test_planner_in_free_mode_over_http(server):
    env = gym.make("Argus-GEMM-v0", mode="text", max_episode_steps=100)
    args = planner.Args(budget=3, seed=0, shape="decode-16", mode="free", base_url=server,
                        model="served", max_new_tokens=24, prompt_tokens=700, memory=False)
    rec = planner.run(env, args, retriever=Retriever(method="bm25"))
    assert rec.submitted and rec.steps <= 3
    first = rec.transcript[0]
    assert first["mode"] == "free" and isinstance(first["answer"], str)
    assert first["source"] in ("model", "fallback") and (first["source"] == "model" or first["error"])
    assert first["env_error"] is None
