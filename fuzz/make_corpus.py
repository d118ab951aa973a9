#!/usr/bin/env python3
"""Regenerates the seed corpora in fuzz/corpus/ from tests/fixtures/ (run from anywhere).

Safetensors seeds keep each fixture's header (names, dtypes, __metadata__) but cut every tensor
down to at most 2 elements per dimension, so the seeds stay a few KB yet are valid files.
The int8_checkpoint seed is not made here: it needs `gattn-cpu quantize`, see fuzz/README.md.
"""
import json, pathlib, struct

FUZZ = pathlib.Path(__file__).resolve().parent
FIXTURES = FUZZ.parent / "tests" / "fixtures"
CORPUS = FUZZ / "corpus"
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I8": 1}


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def shrunk_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out, data, offset = {}, bytearray(), 0
    for name, info in sorted(header.items()):
        if name == "__metadata__":
            out[name] = info
            continue
        shape = [min(d, 2) for d in info["shape"]]
        count = 1
        for d in shape:
            count *= d
        size = count * SIZES.get(info["dtype"], 1)
        start = 8 + n + info["data_offsets"][0]
        data += raw[start:start + size]
        out[name] = {"dtype": info["dtype"], "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(out, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(data)


for case in sorted(FIXTURES.iterdir()):
    for st in sorted(case.glob("*.safetensors")):
        write("safetensors_bytes", f"{case.name}-{st.stem}", shrunk_safetensors(st))
    write("config_json", case.name, (case / "config.json").read_bytes())

index = FIXTURES / "baseline_sharded_f16" / "model.safetensors.index.json"
write("shard_index", "baseline_sharded_f16", index.read_bytes())
write("shard_index", "escaping", b'{"weight_map": {"a": "../outside.safetensors", "b": "/abs.safetensors"}}')
write("shard_index", "minimal", b'{"metadata": {}, "weight_map": {"x": "model-00001-of-00001.safetensors"}}')

prompts = {
    "ascii": "The quick brown fox jumps over the lazy dog. It's 42!",
    "chatml": "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n",
    "cjk": "你好，世界。今日は良い天気ですね。",
    "emoji": "naïve café 👩‍👩‍👧 🎉",
    "combining": "e\u0301 A\u030a \u212b \uac00\u11a8",
    "whitespace": "  \t\r\n\n  line\r\n   trailing   ",
    "specials-glued": "<|endoftext|><|endoftext|>x<|im_end",
}
for name, text in prompts.items():
    write("tokenizer_prompt", name, text.encode())
write("tokenizer_prompt", "invalid-utf8", b"ok \xff\xfe \xc3( \xe2\x82 end")
