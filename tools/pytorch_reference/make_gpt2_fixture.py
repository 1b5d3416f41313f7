#!/usr/bin/python3
"""Writes the PyTorch reference fixture that tests/common/nn/test_gpt2_pytorch.cpp compares against.

A tiny GPT-2 (2 layers, 2 heads, 32 wide, block 16, a 101-token vocabulary that the C++ model pads to 128)
is built here in plain PyTorch with GPT-2's exact semantics and evaluated in float64, so the fixture is the
true answer the float32 C++ model must approach. It records:

  gpt2_tiny_hf.safetensors         the initial weights as Hugging Face stores GPT-2: Conv1D weights [in, out],
                                   a "transformer." prefix on every name, plus the causal-mask buffers HF
                                   exports carry (which an importer must ignore)
  gpt2_tiny_reference.safetensors  param.<name>  the same weights in the C++ model's layout ([out, in])
                                   tokens, targets [B, T]; logits [B, T, V]; loss [1]
                                   grad.<name>   every parameter's gradient of the mean loss
                                   adamw_losses, adamw_grad_norms [10]: 10 AdamW steps (lr 1e-2, betas
                                   (0.9, 0.95), eps 1e-8, weight decay 0.1 on 2-D weights only, global-norm
                                   clipping at 1.0), loss and pre-clip norm before each update
                                   final.<name>  the weights after those 10 steps

Run with Debian's python3-torch (PyTorch 1.13, CPU):  /usr/bin/python3 tools/pytorch_reference/make_gpt2_fixture.py
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=101)
B, T = 2, 12
STEPS = 10
LR, WEIGHT_DECAY, BETAS, EPS, CLIP = 1e-2, 0.1, (0.9, 0.95), 1e-8, 1.0
SEED = 1234
OUT_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "common", "nn",
                                        "fixtures"))


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head = c["n_head"]
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])

    def forward(self, x):
        b, t, ch = x.shape
        q, k, v = self.c_attn(x).split(ch, dim=2)
        shape = (b, t, self.n_head, ch // self.n_head)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, ch)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"])
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"])

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"], eps=1e-5)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"], eps=1e-5)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab_size"], c["n_embd"])
        self.wpe = nn.Embedding(c["block_size"], c["n_embd"])
        self.h = nn.ModuleList(Block(c) for _ in range(c["n_layer"]))
        self.ln_f = nn.LayerNorm(c["n_embd"], eps=1e-5)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # LM head tied to the token embedding
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def init_gpt2(model, n_layer):
    """GPT-2's scheme; the weights are drawn a little larger than 0.02 so every gradient is clearly non-zero."""
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif "ln_" in name:
            nn.init.ones_(p)
        elif name.endswith("c_proj.weight"):
            nn.init.normal_(p, std=0.1 / math.sqrt(2 * n_layer))
        else:
            nn.init.normal_(p, std=0.1)
        if "ln_" in name:  # non-trivial LayerNorm parameters exercise their gradients
            with torch.no_grad():
                p.add_(0.1 * torch.randn_like(p))


def is_conv1d(name):
    return name.endswith(("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"))


def write_safetensors(path, tensors, metadata):
    """Minimal safetensors writer: JSON header (8-byte aligned data start), then the raw little-endian data."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors:
        t = t.detach().contiguous()
        dtype = {torch.float32: "F32", torch.int32: "I32"}[t.dtype]
        data = t.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    torch.manual_seed(SEED)
    torch.set_default_dtype(torch.float64)
    model = GPT2(CONFIG)
    init_gpt2(model, CONFIG["n_layer"])
    tokens = torch.randint(0, CONFIG["vocab_size"], (B, T), dtype=torch.int64)
    targets = torch.randint(0, CONFIG["vocab_size"], (B, T), dtype=torch.int64)
    f32 = lambda t: t.detach().to(torch.float32)
    params = dict(model.named_parameters())

    hf = []
    for name, p in params.items():
        hf.append(("transformer." + name, f32(p.t() if is_conv1d(name) else p)))
    for i in range(CONFIG["n_layer"]):
        mask = torch.tril(torch.ones(CONFIG["block_size"], CONFIG["block_size"])).view(1, 1, CONFIG["block_size"], -1)
        hf.append((f"transformer.h.{i}.attn.bias", f32(mask)))
    # HF GPT-2 files carry no head count (it is in config.json); ours records it since 32 / 64 is no integer.
    meta = {"format": "pt", "generator": "tools/pytorch_reference/make_gpt2_fixture.py",
            "torch": torch.__version__, "n_head": str(CONFIG["n_head"])}
    write_safetensors(os.path.join(OUT_DIR, "gpt2_tiny_hf.safetensors"), hf, meta)

    ref = [("param." + n, f32(p)) for n, p in params.items()]
    ref += [("tokens", tokens.to(torch.int32)), ("targets", targets.to(torch.int32))]
    logits, loss = model(tokens, targets)
    loss.backward()
    ref += [("logits", f32(logits)), ("loss", f32(loss.view(1)))]
    ref += [("grad." + n, f32(p.grad)) for n, p in params.items()]

    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    losses, norms = [], []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        _, loss = model(tokens, targets)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)))
        losses.append(float(loss))
        opt.step()
    ref += [("adamw_losses", torch.tensor(losses, dtype=torch.float32)),
            ("adamw_grad_norms", torch.tensor(norms, dtype=torch.float32))]
    ref += [("final." + n, f32(p)) for n, p in params.items()]
    meta.update({k: str(v) for k, v in CONFIG.items()})
    meta.update({"lr": str(LR), "weight_decay": str(WEIGHT_DECAY), "beta1": str(BETAS[0]), "beta2": str(BETAS[1]),
                 "eps": str(EPS), "grad_clip": str(CLIP), "steps": str(STEPS)})
    write_safetensors(os.path.join(OUT_DIR, "gpt2_tiny_reference.safetensors"), ref, meta)
    print("losses:", " ".join(f"{l:.6f}" for l in losses))


if __name__ == "__main__":
    sys.exit(main())
