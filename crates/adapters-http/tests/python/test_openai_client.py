"""The official `openai` Python client against `shepherd-gateway` in front of simulated vLLM
servers (`shepherd-sim serve`).

Driven by `crates/adapters-http/tests/openai_client.rs`, which starts the servers and the
gateways and passes them here through the environment:

- SHEPHERD_GATEWAY_URL        the gateway's OpenAI base URL (http://127.0.0.1:PORT/v1)
- SHEPHERD_GATEWAY_KEY        the client key it accepts
- SHEPHERD_GATEWAY_LIMIT      its gateway.maxConcurrentRequests
- SHEPHERD_EMPTY_GATEWAY_URL  a gateway with no endpoints (every request: 503)
- SHEPHERD_FLOW_GATEWAY_URL   a gateway with flow control in front of one server that one
                              request in flight saturates
- SHEPHERD_FLOW_LONG_TOKENS   output tokens that keep that server busy for about a second
- SHEPHERD_SCALE_GATEWAY_URL  a gateway with flow control and no endpoint until asked
- SHEPHERD_TTL_GATEWAY_URL    a gateway with flow control, no endpoint and a short TTL
- SHEPHERD_TTL                that TTL (a Go duration in ms, e.g. `500ms`)
- SHEPHERD_MODEL              the model the servers serve
- SHEPHERD_E2E_CONTROL        a directory: writing `stop-N` there makes the driver stop
                              simulated server N, and it answers with `stopped-N`; writing
                              `add-endpoint` makes it add a server to the scale gateway's
                              config file, and it answers with `endpoint-added`

Every client is built with `max_retries=0`, so what a test sees is what the gateway did, not
what the client's own retries hid. The test that stops a server runs last.
"""

import concurrent.futures
import os
import pathlib
import time

import openai
import pytest

URL = os.environ["SHEPHERD_GATEWAY_URL"]
KEY = os.environ["SHEPHERD_GATEWAY_KEY"]
LIMIT = int(os.environ["SHEPHERD_GATEWAY_LIMIT"])
EMPTY_URL = os.environ["SHEPHERD_EMPTY_GATEWAY_URL"]
FLOW_URL = os.environ["SHEPHERD_FLOW_GATEWAY_URL"]
LONG_TOKENS = int(os.environ["SHEPHERD_FLOW_LONG_TOKENS"])
SCALE_URL = os.environ["SHEPHERD_SCALE_GATEWAY_URL"]
TTL_URL = os.environ["SHEPHERD_TTL_GATEWAY_URL"]
TTL = int(os.environ["SHEPHERD_TTL"].removesuffix("ms")) / 1000
MODEL = os.environ["SHEPHERD_MODEL"]
CONTROL = pathlib.Path(os.environ["SHEPHERD_E2E_CONTROL"])
SERVER_HEADER = "x-shepherd-sim-server"
DROPPED_HEADER = "x-shepherd-dropped-reason"
SHEDDABLE = {"x-shepherd-priority": "-1"}


def client(base_url=URL, api_key=KEY):
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=30)


def test_completion():
    answer = client().completions.create(model=MODEL, prompt="Hello", max_tokens=4)
    assert answer.object == "text_completion"
    assert answer.choices[0].text == " tok" * 4
    assert answer.usage.completion_tokens == 4
    assert answer.usage.prompt_tokens > 0


def test_completion_streaming():
    stream = client().completions.create(
        model=MODEL, prompt="Stream to me", max_tokens=6, stream=True
    )
    text = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    assert text == " tok" * 6


def test_chat():
    answer = client().chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say something."},
        ],
        max_tokens=5,
    )
    assert answer.object == "chat.completion"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == " tok" * 5
    assert answer.usage.completion_tokens == 5


def test_chat_streaming_with_usage():
    stream = client().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Stream and count."}],
        max_tokens=7,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == " tok" * 7
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 7


def test_models_list_and_retrieve():
    ids = [model.id for model in client().models.list()]
    assert ids == [MODEL]
    assert client().models.retrieve(MODEL).id == MODEL


def test_bad_request_is_a_bad_request_error():
    with pytest.raises(openai.BadRequestError) as raised:
        client().chat.completions.create(model=MODEL, messages=[])
    assert raised.value.status_code == 400
    assert raised.value.code == "empty_prompt"


def test_a_wrong_key_is_an_authentication_error():
    with pytest.raises(openai.AuthenticationError) as raised:
        client(api_key="sk-wrong").completions.create(model=MODEL, prompt="Hi", max_tokens=1)
    assert raised.value.status_code == 401
    assert raised.value.code == "invalid_api_key"


def test_an_unknown_model_is_a_not_found_error():
    client().models.list()  # the gateway knows the pool's models from here on
    with pytest.raises(openai.NotFoundError) as raised:
        client().completions.create(model="no-such-model", prompt="Hi", max_tokens=1)
    assert raised.value.status_code == 404
    assert raised.value.code == "model_not_found"


def test_over_the_limit_is_a_rate_limit_error():
    held = []
    try:
        for _ in range(LIMIT):
            stream = client().completions.create(
                model=MODEL, prompt="Hold the line", max_tokens=4000, stream=True
            )
            next(iter(stream))  # the request is in flight
            held.append(stream)
        with pytest.raises(openai.RateLimitError) as raised:
            client().completions.create(model=MODEL, prompt="One more", max_tokens=1)
        assert raised.value.status_code == 429
        assert raised.value.response.headers["retry-after"] == "1"
    finally:
        for stream in held:
            stream.close()
    # Closing the streams gave the places back.
    deadline = time.monotonic() + 5
    while True:
        try:
            client().completions.create(model=MODEL, prompt="Room again", max_tokens=1)
            break
        except openai.RateLimitError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_no_endpoint_is_a_503():
    with pytest.raises(openai.InternalServerError) as raised:
        client(base_url=EMPTY_URL).completions.create(model=MODEL, prompt="Hi", max_tokens=1)
    assert isinstance(raised.value, openai.APIStatusError)
    assert raised.value.status_code == 503
    assert raised.value.response.headers["retry-after"] == "1"


def ask_driver(request, answer, timeout=10):
    (CONTROL / request).write_text("")
    deadline = time.monotonic() + timeout
    while not (CONTROL / answer).exists():
        assert time.monotonic() < deadline, f"the driver did not answer {request}"
        time.sleep(0.01)


def timed_completion(base_url, prompt, max_tokens=4, **options):
    """A completion; returns it with the time.monotonic() at which it ended."""
    answer = client(base_url=base_url).completions.create(
        model=MODEL, prompt=prompt, max_tokens=max_tokens, **options
    )
    return answer, time.monotonic()


def test_flow_control_holds_standard_requests_and_sheds_sheddable_ones():
    flow = client(base_url=FLOW_URL)
    started = time.monotonic()
    long = flow.completions.create(
        model=MODEL, prompt="Fill the pool", max_tokens=LONG_TOKENS, stream=True
    )
    chunks = iter(long)
    text = next(chunks).choices[0].text  # in flight: the only server is saturated
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        waiting = [
            pool.submit(timed_completion, FLOW_URL, f"Standard {n}") for n in range(2)
        ]

        # A sheddable request is refused at once.
        shed_at = time.monotonic()
        with pytest.raises(openai.RateLimitError) as raised:
            flow.completions.create(
                model=MODEL, prompt="Sheddable", max_tokens=4, extra_headers=SHEDDABLE
            )
        assert time.monotonic() - shed_at < 0.5
        assert raised.value.status_code == 429
        assert raised.value.code == "shed"
        assert raised.value.type == "rate_limit_error"
        assert raised.value.response.headers[DROPPED_HEADER] == "shed"
        assert raised.value.response.headers["retry-after"] == "1"

        # The standard ones wait for the long request ...
        time.sleep(0.2)
        assert not any(f.done() for f in waiting), "standard requests did not wait"
        text += "".join(chunk.choices[0].text for chunk in chunks if chunk.choices)
        long_took = time.monotonic() - started
        assert text == " tok" * LONG_TOKENS
        # ... and then complete, one after the other.
        answers = [f.result(timeout=10) for f in waiting]
    assert long_took > 0.5, f"the long request took only {long_took:.2f} s"
    for answer, ended in answers:
        assert answer.choices[0].text == " tok" * 4
        assert ended - started >= 0.9 * long_took, (ended - started, long_took)

    # With the pool free, a sheddable request goes through.
    answer = flow.completions.create(
        model=MODEL, prompt="Sheddable, idle", max_tokens=2, extra_headers=SHEDDABLE
    )
    assert answer.choices[0].text == " tok" * 2


def test_a_request_waits_for_the_first_endpoint_and_then_completes():
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        started = time.monotonic()
        pending = pool.submit(timed_completion, SCALE_URL, "Anyone there?", 3)
        time.sleep(1.0)
        assert not pending.done(), f"answered with no endpoint: {pending.exception()}"
        ask_driver("add-endpoint", "endpoint-added")
        added = time.monotonic()
        answer, ended = pending.result(timeout=10)
    assert answer.choices[0].text == " tok" * 3
    assert ended - started >= 1.0
    # The config file is read every 50 ms: the request left the queue soon after.
    assert ended - added < 2.0, f"{ended - added:.2f} s after the endpoint was added"


def test_a_request_that_waits_its_whole_ttl_is_a_503():
    started = time.monotonic()
    with pytest.raises(openai.InternalServerError) as raised:
        client(base_url=TTL_URL).completions.create(model=MODEL, prompt="Hi", max_tokens=1)
    waited = time.monotonic() - started
    assert TTL <= waited < TTL + 2, waited
    assert raised.value.status_code == 503
    assert raised.value.code == "ttl_expired"
    assert raised.value.response.headers[DROPPED_HEADER] == "ttl_expired"
    assert raised.value.response.headers["retry-after"] == "1"


def converse(number, turns=4):
    """One multi-turn chat; returns the server of every turn."""
    system = f"You are assistant {number}. " + f"Conversation {number} has long instructions. " * 40
    messages = [{"role": "system", "content": system}]
    servers = []
    gateway = client()
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Question {turn} of conversation {number}?"})
        raw = gateway.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, max_tokens=8
        )
        servers.append(raw.headers[SERVER_HEADER])
        answer = raw.parse()
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    return servers


def test_a_conversation_stays_on_one_server_while_several_run():
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        conversations = list(pool.map(converse, range(6)))
    for number, servers in enumerate(conversations):
        assert len(set(servers)) == 1, f"conversation {number} moved: {conversations}"
    assert len({servers[0] for servers in conversations}) >= 2, conversations


def stop_server(index):
    ask_driver(f"stop-{index}", f"stopped-{index}")


def long_completion(number):
    raw = client().completions.with_raw_response.create(
        model=MODEL, prompt=f"Long question number {number}", max_tokens=400
    )
    return raw.headers[SERVER_HEADER], raw.parse()


def test_a_server_killed_mid_run_costs_no_request_that_had_not_started_streaming():
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        running = [pool.submit(long_completion, n) for n in range(12)]
        time.sleep(0.3)
        assert not any(f.done() for f in running), "requests ended before the kill"
        stop_server(0)
        answers = [f.result() for f in running]
    for server, answer in answers:
        assert server != "0"
        assert answer.usage.completion_tokens == 400
    # New requests keep working with one server gone.
    for n in range(6):
        answer = client().completions.create(model=MODEL, prompt=f"After {n}", max_tokens=2)
        assert answer.choices[0].text == " tok" * 2
