"""The `openai` package against `gattn-cpu serve`: a completion, a streamed chat completion and
a logprobs request. Usage: python openai_client.py BASE_URL API_KEY. Prints the greedy
completion's text as JSON; any failed check raises."""

import json
import sys

import openai

base, key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=60)
model = client.models.list().data[0].id

completion = client.completions.create(
    model=model, prompt="It is a truth universally acknowledged", max_tokens=24, temperature=0
)
choice = completion.choices[0]
assert choice.finish_reason in ("stop", "length"), choice
assert completion.usage.completion_tokens > 0, completion.usage

messages = [{"role": "user", "content": "Who is there?"}]
whole = client.chat.completions.create(model=model, messages=messages, max_tokens=20, temperature=0)
stream = client.chat.completions.create(
    model=model, messages=messages, max_tokens=20, temperature=0, stream=True
)
pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
assert len(pieces) > 2, pieces
assert "".join(pieces) == whole.choices[0].message.content, (pieces, whole)

scored = client.completions.create(
    model=model, prompt="It is a truth", max_tokens=1, temperature=0, echo=True, logprobs=2
)
logprobs = scored.choices[0].logprobs
assert logprobs.token_logprobs[0] is None, logprobs
assert all(lp <= 0 for lp in logprobs.token_logprobs[1:]), logprobs
assert len(logprobs.tokens) == scored.usage.prompt_tokens + 1, (logprobs, scored.usage)
assert all(len(top) <= 2 for top in logprobs.top_logprobs[1:]), logprobs

try:
    client.completions.create(model=model, prompt=[99999], max_tokens=1)
    raise AssertionError("an out-of-vocabulary id was accepted")
except openai.BadRequestError as error:
    assert "out of the vocabulary" in str(error), error

print(json.dumps({"completion": choice.text}))
