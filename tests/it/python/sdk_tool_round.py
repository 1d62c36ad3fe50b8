"""One streamed tool round trip through sluice with an official SDK.

Usage: sdk_tool_round.py anthropic|openai BASE_URL

`anthropic`: the `anthropic` SDK streams a Messages turn that ends in a `get_weather`
tool call, sends the tool result back and streams the answer.
`openai`: the same with the `openai` SDK and streamed Chat Completions.
Prints one JSON line: {"tool": {"id", "name", "input"}, "stop1", "text", "stop2"}.
Any SDK error propagates (non-zero exit, traceback on stderr).
"""

import json
import sys

PROMPT = "What is the weather in Paris?"
RESULT = "sunny, 21 C"
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def anthropic_round(base):
    import anthropic

    client = anthropic.Anthropic(base_url=base, api_key="sk-ant-sdk-test", max_retries=0)
    tools = [{"name": "get_weather", "description": "Weather for a city", "input_schema": SCHEMA}]
    messages = [{"role": "user", "content": PROMPT}]
    with client.messages.stream(
        model="sdk-model", max_tokens=256, tools=tools, messages=messages
    ) as s:
        first = s.get_final_message()
    call = next(b for b in first.content if b.type == "tool_use")
    messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": RESULT}],
        }
    )
    with client.messages.stream(
        model="sdk-model", max_tokens=256, tools=tools, messages=messages
    ) as s:
        second = s.get_final_message()
    text = "".join(b.text for b in second.content if b.type == "text")
    return {
        "tool": {"id": call.id, "name": call.name, "input": call.input},
        "stop1": first.stop_reason,
        "text": text,
        "stop2": second.stop_reason,
    }


def openai_stream(client, messages, tools):
    calls, text, finish = {}, "", None
    stream = client.chat.completions.create(
        model="sdk-model", messages=messages, tools=tools, stream=True
    )
    for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text += delta.content
            for tc in delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                if tc.id:
                    entry["id"] = tc.id
                if tc.function and tc.function.name:
                    entry["name"] += tc.function.name
                if tc.function and tc.function.arguments:
                    entry["arguments"] += tc.function.arguments
            if choice.finish_reason:
                finish = choice.finish_reason
    return calls, text, finish


def openai_round(base):
    import openai

    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-sdk-test", max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather for a city", "parameters": SCHEMA},
        }
    ]
    messages = [{"role": "user", "content": PROMPT}]
    calls, _, stop1 = openai_stream(client, messages, tools)
    call = calls[0]
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": RESULT})
    _, text, stop2 = openai_stream(client, messages, tools)
    return {
        "tool": {"id": call["id"], "name": call["name"], "input": json.loads(call["arguments"])},
        "stop1": stop1,
        "text": text,
        "stop2": stop2,
    }


def main():
    mode, base = sys.argv[1], sys.argv[2].rstrip("/")
    out = anthropic_round(base) if mode == "anthropic" else openai_round(base)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
