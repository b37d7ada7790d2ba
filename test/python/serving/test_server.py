"""sits-runtime serve, tested with the official `openai` client (offline, on
127.0.0.1): completions and chat, streaming and not, stop strings and stop
token ids, n=2, logprobs, a disconnect mid-stream (its KV blocks freed),
overload (429 with Retry-After, every admitted request completes, no block
left in use), bad JSON and bad fields (400 in OpenAI's error shape), the
API key, /health (also when the engine stalls) and /metrics. Greedy text is
transformers' greedy `generate` decoded with the same tokenizer."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from server_helpers import metric, running_server  # noqa: E402

MODEL = "tiny-llama"  # the served artifact's file name
PROMPTS = ["Hello world", "def main():\n    return", "Le café est très"]


@pytest.fixture(scope="module")
def server(served_artifact):
    with running_server(served_artifact, batch_size=4, max_seq_len=128, max_queue=32) as s:
        yield s


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0,
                       timeout=60) as c:
        yield c


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


class SlowSteps:
    """The server's engine with a pause before each step, so that a
    generation is still running when the test acts on it."""

    def __init__(self, server, pause_s: float = 0.02):
        self.worker, self.pause_s = server.state.worker, pause_s

    def __getattr__(self, name):
        return getattr(self.real, name)

    def step(self):
        time.sleep(self.pause_s)
        self.real.step()

    def __enter__(self):
        self.real = self.worker.engine
        self.worker.engine = self
        return self

    def __exit__(self, *exc):
        self.worker.engine = self.real


def assert_idle(server):
    snap = server.wait_idle()
    assert snap["kv_blocks_used"] == 0 and snap["sequences"] == 0 and snap["in_flight"] == 0, snap


# --------------------------------------------------------------------- text
def test_completions_greedy_equals_transformers(client, server, hf_reference):
    for prompt in PROMPTS:
        r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0)
        ids = hf_reference.tokenizer(prompt)["input_ids"]
        expected = hf_reference.greedy_ids(ids, 12)
        assert r.choices[0].text == hf_reference.tokenizer.decode(expected,
                                                                  skip_special_tokens=True)
        assert r.choices[0].finish_reason == ("stop" if expected[-1] in (1, 4) else "length")
        assert r.usage.prompt_tokens == len(ids)
        assert r.usage.completion_tokens == len(expected)
        assert r.usage.total_tokens == len(ids) + len(expected)
        assert r.object == "text_completion" and r.model == MODEL and r.id.startswith("cmpl-")
    assert_idle(server)


def test_chat_greedy_equals_transformers(client, hf_reference):
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Name a colour."}]
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10,
                                       temperature=0)
    ids = hf_reference.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                     tokenize=True, return_dict=False)
    expected = hf_reference.greedy_ids(list(ids), 10)
    msg = r.choices[0].message
    assert msg.role == "assistant"
    assert msg.content == hf_reference.tokenizer.decode(expected, skip_special_tokens=True)
    assert r.usage.prompt_tokens == len(ids) and r.usage.completion_tokens == len(expected)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")


def test_streaming_equals_non_streaming(client, server):
    args = dict(model=MODEL, prompt=PROMPTS[1], max_tokens=20, temperature=0)
    whole = client.completions.create(**args)
    chunks = list(client.completions.create(**args, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert reasons[-1] == whole.choices[0].finish_reason and set(reasons[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == \
        whole.usage.completion_tokens

    messages = [{"role": "user", "content": "Tell me about café au lait ☕"}]
    whole = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=16,
                                           temperature=0)
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=16,
                                                 temperature=0, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == \
        whole.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert_idle(server)


def test_raw_sse_format(http):
    with http.stream("POST", "/v1/completions", json={
            "model": MODEL, "prompt": "Hello", "max_tokens": 4, "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        body = r.read().decode()
    events = body.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    for e in events[:-2]:
        assert e.startswith("data: ") and json.loads(e[6:])["object"] == "text_completion"


# --------------------------------------------------------------------- stops, n, logprobs
def test_stop_strings_cut_the_text_and_end_the_sample(client, server):
    prompt = PROMPTS[0]
    full = client.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0,
                                     extra_body={"ignore_eos": True})
    text = full.choices[0].text
    assert full.choices[0].finish_reason == "length" and len(text) > 8, text
    stop = text[5:8]
    cut = text[:text.find(stop)]
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0,
                                  stop=[stop, "never-in-the-text-\u2603"],
                                  extra_body={"ignore_eos": True})
    assert r.choices[0].text == cut and r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens < full.usage.completion_tokens
    chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=24,
                                            temperature=0, stop=stop, stream=True,
                                            extra_body={"ignore_eos": True}))
    assert "".join(c.choices[0].text for c in chunks) == cut
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert_idle(server)


def test_stop_token_ids(client, server):
    args = dict(model=MODEL, prompt=PROMPTS[2], max_tokens=16, temperature=0)
    full = client.completions.create(**args, extra_body={"ignore_eos": True,
                                                         "return_token_ids": True})
    ids = full.choices[0].model_extra["token_ids"]
    assert len(ids) == 16
    stop_id = ids[3]
    first = ids.index(stop_id)
    r = client.completions.create(**args, extra_body={"ignore_eos": True,
                                                      "stop_token_ids": [stop_id],
                                                      "return_token_ids": True})
    assert r.choices[0].model_extra["token_ids"] == ids[:first + 1]
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens == first + 1
    # The stop token's text is not part of the output.
    assert full.choices[0].text.startswith(r.choices[0].text)
    assert_idle(server)


def test_n_samples_are_seeded_and_share_the_prompt(client, server):
    args = dict(model=MODEL, prompt=PROMPTS[0], max_tokens=10, n=2, temperature=1.0, seed=7,
                extra_body={"ignore_eos": True})
    a = client.completions.create(**args)
    b = client.completions.create(**args)
    assert [c.index for c in a.choices] == [0, 1]
    assert [c.text for c in a.choices] == [c.text for c in b.choices]
    assert a.choices[0].text != a.choices[1].text  # two draws, not one twice
    assert a.usage.completion_tokens == 20
    chunks = list(client.completions.create(**args, stream=True))
    texts = ["", ""]
    for c in chunks:
        for choice in c.choices:
            texts[choice.index] += choice.text
    assert texts == [c.text for c in a.choices]
    greedy = client.chat.completions.create(model=MODEL, n=2, temperature=0, max_tokens=8,
                                            messages=[{"role": "user", "content": "Hi"}])
    assert greedy.choices[0].message.content == greedy.choices[1].message.content
    assert_idle(server)


def test_logprobs(client):
    r = client.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=6, temperature=0,
                                  logprobs=2, extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 6
    for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert value <= 0 and 2 <= len(top) <= 3
        # Greedy draws the most likely token: its log-probability is the top one.
        assert value == pytest.approx(max(top.values()), abs=1e-6)
        assert top[token] == pytest.approx(value, abs=1e-6)
    assert "".join(lp.tokens).startswith(r.choices[0].text[:1])
    c = client.chat.completions.create(model=MODEL, max_tokens=4, temperature=0, logprobs=True,
                                       top_logprobs=3, extra_body={"ignore_eos": True},
                                       messages=[{"role": "user", "content": "Hi"}])
    content = c.choices[0].logprobs.content
    assert len(content) == 4
    assert all(len(t.top_logprobs) == 3 and t.top_logprobs[0].logprob >= t.top_logprobs[2].logprob
               for t in content)
    assert all(t.logprob == pytest.approx(t.top_logprobs[0].logprob, abs=1e-6) for t in content)


# --------------------------------------------------------------------- cancellation
def test_disconnect_mid_stream_aborts_and_frees_the_blocks(server, http):
    before = http.get("/metrics").text
    cancelled = metric(before, 'sits_requests_total{outcome="cancelled"}') \
        if 'outcome="cancelled"' in before else 0.0
    with SlowSteps(server), http.stream("POST", "/v1/completions", json={
            "model": MODEL, "prompt": PROMPTS[1] * 2, "max_tokens": 80, "stream": True,
            "ignore_eos": True, "temperature": 0}) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        got = 0
        for line in lines:
            if line.startswith("data: "):
                got += 1
                if got == 3:
                    break
        assert server.snapshot()["kv_blocks_used"] > 0
        steps = server.snapshot()["steps"]
    # Leaving the block closed the connection: the request is aborted before
    # the engine's next steps and its blocks are free.
    assert_idle(server)
    # Not generated to the end (80 tokens); how many steps ran before the
    # disconnect was seen depends on the machine's load.
    assert server.snapshot()["steps"] - steps < 80 - got
    text = http.get("/metrics").text
    assert metric(text, 'sits_requests_total{outcome="cancelled"}') == cancelled + 1
    assert metric(text, "sits_abort_to_free_seconds_count") >= 1
    assert metric(text, "sits_kv_blocks_used") == 0


def test_disconnect_while_waiting_for_a_non_streamed_answer(server):
    with SlowSteps(server), httpx.Client(base_url=server.url, timeout=0.3) as c:
        with pytest.raises(httpx.TimeoutException):
            c.post("/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 100,
                                             "ignore_eos": True, "temperature": 0})
    assert_idle(server)


# --------------------------------------------------------------------- errors
def test_bad_json_and_bad_fields_are_400_with_a_message(http, client):
    r = http.post("/v1/completions", content=b'{"model": ', headers={
        "content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert "not valid JSON" in err["message"] and err["type"] == "invalid_request_error"
    assert set(err) == {"message", "type", "param", "code"}
    assert http.post("/v1/completions", content=b"[1, 2]").status_code == 400
    assert http.post("/v1/completions", content=b"\xff\xfe").status_code == 400
    nested = b"[" * 100000 + b"]" * 100000
    assert http.post("/v1/chat/completions", content=nested).status_code == 400
    bad = [({"prompt": "x", "max_tokens": "ten"}, "max_tokens"),
           ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
           ({"prompt": "x", "temperature": 7}, "temperature"),
           ({"prompt": "x", "temperature": "hot"}, "temperature"),
           ({"prompt": "x", "top_p": 0}, "top_p"),
           ({"prompt": "x", "n": 0}, "n"),
           ({"prompt": "x", "n": 99}, "n"),
           ({"prompt": "x", "stream": "yes"}, "stream"),
           ({"prompt": "x", "stop": [1.5]}, "stop"),
           ({"prompt": "x", "stop": ["a"] * 40}, "stop"),
           ({"prompt": "x", "logprobs": 50}, "logprobs"),
           ({"prompt": "x", "seed": "s"}, "seed"),
           ({"prompt": [], "max_tokens": 2}, "prompt"),
           ({"prompt": [1, 99999]}, "prompt"),
           ({"prompt": {"text": "x"}}, "prompt"),
           ({"max_tokens": 2}, "prompt"),
           ({"prompt": "x", "echo": True}, "echo"),
           ({"prompt": "x", "stream_options": {"include_usage": True}}, "stream_options"),
           ({"prompt": "x", "max_tokens": 127}, "max_tokens")]
    for fields, param in bad:
        r = http.post("/v1/completions", json={"model": MODEL, **fields})
        assert r.status_code == 400, (fields, r.text)
        assert r.json()["error"]["param"] == param, (fields, r.json())
        assert r.json()["error"]["message"], fields
    for fields in ({"messages": "hi"}, {"messages": []}, {"messages": [{"content": "x"}]},
                   {"messages": [{"role": "user", "content": 5}]},
                   {"messages": [{"role": "robot", "content": "x"}]},
                   {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}):
        r = http.post("/v1/chat/completions", json={"model": MODEL, **fields})
        assert r.status_code == 400, (fields, r.text)
    # A prompt longer than --max-seq-len: the reason is given.
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="word " * 200, max_tokens=4)
    assert e.value.status_code == 400 and "--max-seq-len 128" in e.value.message
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-4", prompt="x")
    r = http.get("/v1/nowhere")
    assert r.status_code == 404 and "error" in r.json()
    assert http.get("/v1/completions").status_code == 405


def test_api_key(served_artifact, monkeypatch):
    with running_server(served_artifact, max_seq_len=64, api_key="s3cret") as s:
        for key in ("wrong", ""):
            with openai.OpenAI(base_url=s.base_url, api_key=key or "x", max_retries=0) as c:
                with pytest.raises(openai.AuthenticationError) as e:
                    c.completions.create(model=MODEL, prompt="x", max_tokens=2)
                assert e.value.status_code == 401
        assert httpx.get(s.url + "/v1/models").status_code == 401
        assert httpx.get(s.url + "/health").status_code == 200  # probes need no key
        with openai.OpenAI(base_url=s.base_url, api_key="s3cret", max_retries=0) as c:
            assert c.models.list().data[0].id == MODEL
            assert c.completions.create(model=MODEL, prompt="x", max_tokens=2).choices
    monkeypatch.setenv("SITS_API_KEY", "from-env")
    with running_server(served_artifact, max_seq_len=64) as s:
        assert httpx.get(s.url + "/v1/models").status_code == 401
        assert httpx.get(s.url + "/v1/models", headers={
            "Authorization": "Bearer from-env"}).status_code == 200


def test_token_eviction_under_a_kv_budget(served_artifact):
    # `sits-runtime serve --kv-budget 16 --kv-eviction window`: every request
    # keeps at most 16 tokens (and the block being filled) and completes.
    with running_server(served_artifact, max_seq_len=128, kv_budget=16,
                        kv_eviction="window") as s:
        with openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0) as c:
            r = c.completions.create(model=MODEL, prompt="a prompt of some length",
                                     max_tokens=40, temperature=0,
                                     extra_body={"ignore_eos": True})
        assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 40
        assert s.state.worker.engine.metrics["evicted_tokens"] > 0
        snap = s.wait_idle()
        assert snap["kv_blocks_used"] == 0, snap


def test_a_request_sets_its_own_kv_budget(client, server, http):
    # "kv_budget" / "kv_eviction" (extensions, in extra_body): the request's
    # own eviction; a budget the engine cannot keep is a 400 with the reason.
    before = server.state.worker.engine.metrics["evicted_tokens"]
    r = client.completions.create(model=MODEL, prompt="a prompt of some length", max_tokens=40,
                                  temperature=0, extra_body={"ignore_eos": True, "kv_budget": 16,
                                                             "kv_eviction": "window"})
    assert r.usage.completion_tokens == 40
    assert server.state.worker.engine.metrics["evicted_tokens"] > before
    for body, why in [({"kv_budget": 2}, "kv_budget = 2: must be in"),
                      ({"kv_budget": 16, "kv_eviction": "h2o"}, "'kv_eviction' must be"),
                      ({"kv_eviction": "window"}, "'kv_eviction' needs 'kv_budget'"),
                      ({"kv_budget": "16"}, "'kv_budget' must be an integer")]:
        resp = http.post("/v1/completions", json={"model": MODEL, "prompt": "x",
                                                  "max_tokens": 2, **body})
        assert resp.status_code == 400, (body, resp.text)
        assert why in resp.json()["error"]["message"], resp.text


# --------------------------------------------------------------------- overload
def test_overload_is_429_with_retry_after_and_every_admitted_request_completes(served_artifact):
    requests = 24
    with running_server(served_artifact, batch_size=2, max_seq_len=64, max_queue=2) as s, \
            SlowSteps(s, 0.005):
        barrier = threading.Barrier(requests)

        def one(i):
            with openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0,
                               timeout=120) as c:
                barrier.wait()
                try:
                    r = c.completions.with_raw_response.create(
                        model=MODEL, prompt=f"request {i}", max_tokens=24, temperature=0,
                        extra_body={"ignore_eos": True})
                    return "ok", r.parse()
                except openai.RateLimitError as e:
                    return "429", e.response.headers.get("retry-after")

        with concurrent.futures.ThreadPoolExecutor(requests) as pool:
            results = list(pool.map(one, range(requests)))
        done = [r for kind, r in results if kind == "ok"]
        retry = [r for kind, r in results if kind == "429"]
        assert len(done) + len(retry) == requests
        assert retry, "no request was refused"
        assert all(r is not None and int(r) >= 1 for r in retry)
        assert len(done) >= 4  # at least the batch and the queue
        for r in done:
            assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 24
        snap = s.wait_idle()
        assert snap["kv_blocks_used"] == 0 and snap["in_flight"] == 0, snap
        text = httpx.get(s.url + "/metrics").text
        assert metric(text, 'sits_requests_total{outcome="rejected"}') == len(retry)
        assert metric(text, 'sits_requests_total{outcome="completed"}') == len(done)
        assert httpx.get(s.url + "/health").status_code == 200


# --------------------------------------------------------------------- health, metrics
def test_health_and_metrics(http, client):
    assert http.get("/health").json() == {"status": "ok", "reason": "ok"}
    client.completions.create(model=MODEL, prompt="Hello", max_tokens=3)
    client.completions.create(model=MODEL, prompt="Hello", max_tokens=3)  # a prefix hit
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    for name in ("sits_queue_depth", "sits_running_sequences", "sits_kv_blocks_used",
                 "sits_kv_blocks_total", "sits_time_to_first_token_seconds_count",
                 "sits_inter_token_latency_seconds_count", "sits_prefix_cache_hit_tokens_total"):
        assert metric(text, name) >= 0, name
    assert metric(text, "sits_time_to_first_token_seconds_count") >= 2
    assert metric(text, "sits_inter_token_latency_seconds_count") >= 4
    assert metric(text, "sits_kv_blocks_total") > 0


def test_health_is_503_while_the_engine_stalls(served_artifact):
    with running_server(served_artifact, max_seq_len=64, stall_timeout=0.3) as s:
        gate = threading.Event()

        class Stalling(SlowSteps):  # a step waits for the gate
            def step(self):
                gate.wait(20)
                self.real.step()

        with Stalling(s), concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(httpx.post, s.url + "/v1/completions", timeout=30,
                                 json={"model": MODEL, "prompt": "x", "max_tokens": 3})
            deadline = time.monotonic() + 10
            while True:
                r = httpx.get(s.url + "/health")
                if r.status_code == 503 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert r.status_code == 503 and "no engine step completed" in r.json()["reason"]
            gate.set()
            assert future.result().status_code == 200
        assert httpx.get(s.url + "/health").status_code == 200


def test_shutdown_ends_streams_and_frees_everything(served_artifact):
    with running_server(served_artifact, max_seq_len=128, shutdown_timeout=0.5) as s, \
            SlowSteps(s):
        events: list[str] = []

        def stream():
            with httpx.stream("POST", s.url + "/v1/completions", timeout=30, json={
                    "model": MODEL, "prompt": "x", "max_tokens": 120, "stream": True,
                    "ignore_eos": True}) as r:
                try:
                    for line in r.iter_lines():
                        events.append(line)
                except httpx.HTTPError:
                    events.append("closed")

        t = threading.Thread(target=stream)
        t.start()
        deadline = time.monotonic() + 10
        while len(events) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        worker = s.state.worker
    # running_server's exit shut it down (as SIGTERM does): the stream ended
    # one way or another, the engine thread stopped, and no block is held.
    t.join(10)
    assert not t.is_alive() and events
    assert worker.snapshot["kv_blocks_used"] == 0 and worker.snapshot["sequences"] == 0
    assert worker.health()[0] is False


# --------------------------------------------------------------------- pieces
def test_stop_string_hold_back():
    from sits_mlir.serving.server import _SampleState

    s = _SampleState(None, ["END", "xyz"])
    out = [s.feed(t, False) for t in ["ab", "cE", "N", "x", "D and more"]]
    assert out == [("ab", False), ("c", False), ("", False), ("EN", False),
                   ("xD and more", False)]
    s = _SampleState(None, ["END"])
    assert s.feed("abE", False) == ("ab", False)
    assert s.feed("N", False) == ("", False)
    assert s.feed("Dzz", False) == ("", True)
    s = _SampleState(None, ["END"])
    assert s.feed("abEN", True) == ("abEN", False)  # the end: nothing held back
    s = _SampleState(None, [])
    assert s.feed("abc", False) == ("abc", False)
