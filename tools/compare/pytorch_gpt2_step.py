#!/usr/bin/python3
"""The GPT-2 training step of gpt2_step_bench, in PyTorch: the anchor our step is measured against.

The same model (GPT-2 of the same names and sizes, the vocabulary padded to 50304 as ours, the LM head tied to the
token embedding), the same step (forward, cross-entropy over the 50257 real columns, backward, global-norm clipping at
1.0, AdamW with lr 1e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on the 2-D weights), the same random batch
sizes and the same FLOP formula (6 N + 12 L C T per token, N the matmul parameters), timed the same way (the device
synchronised between forward, backward and the optimizer). It writes the same bench JSON as gpt2_step_bench --json
(bench "gpt2_step", one row labelled by the model), so that bench_diff puts the two side by side:

    build/bin/gpt2_step_bench --model small --device cpu --batch 4 --seq 64 --json ours.json
    tools/compare/pytorch_gpt2_step.py --model small --device cpu --batch 4 --seq 64 --json pytorch.json
    build/bin/bench_diff pytorch.json ours.json

The model is written here in the manner of nanoGPT (read, not copied): attention through
torch.nn.functional.scaled_dot_product_attention where PyTorch has it (2.0 and later: flash or memory-efficient
kernels on a GPU), else the materialised softmax; AdamW fused on a GPU where PyTorch offers it. --dtype bf16 and
fp16 run under torch.autocast (fp16 with a GradScaler), tf32 switches TF32 on for the GPU's matmuls. --compile
wraps the model in torch.compile (PyTorch 2 only). On Debian's PyTorch 1.13 (CPU) it runs eager, as a smoke test.

Exit status 0; 1 with one line on stderr for a bad flag, an unknown model, a missing PyTorch or a destination that
holds something other than a bench result.
"""
import argparse
import datetime
import json
import math
import os
import platform
import resource
import shlex
import socket
import statistics
import sys
import time

# name: (layers, heads, width, block size), as common/nn/config.cpp
MODELS = {
    "d12": (12, 12, 768, 1024),
    "d24": (24, 16, 1024, 1024),
    "d36": (36, 20, 1280, 1024),
    "d48": (48, 25, 1600, 1024),
    "small": (4, 4, 128, 256),
    "tiny": (2, 2, 64, 64),
}
VOCAB, PADDED_VOCAB = 50257, 50304
LR, BETAS, EPS, WEIGHT_DECAY, CLIP = 1e-4, (0.9, 0.95), 1e-8, 0.1, 1.0


def fail(message):
    print(f"pytorch_gpt2_step: error: {message}", file=sys.stderr)
    sys.exit(1)


def flops_per_token(layers, width, seq):
    """gpt2_flops_per_token (common/nn/gpt2.cpp): 6 N + 12 L C T."""
    matmul_params = layers * 12.0 * width * width + PADDED_VOCAB * width
    return 6.0 * matmul_params + 12.0 * layers * width * seq


def build_model(torch, layers, heads, width, block_size):
    nn, F = torch.nn, torch.nn.functional
    has_sdpa = hasattr(F, "scaled_dot_product_attention")

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(width, 3 * width)
            self.c_proj = nn.Linear(width, width)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            if has_sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # PyTorch 1.13: the softmax matrix materialised, as our reference attention
                scores = (q @ k.transpose(-2, -1)) / math.sqrt(C // heads)
                mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
                y = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(width), Attention(), nn.LayerNorm(width)
            self.c_fc, self.c_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(PADDED_VOCAB, width), nn.Embedding(block_size, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(width)
            for name, p in self.named_parameters():  # GPT-2's initialisation (the time does not depend on it)
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, tokens, targets):
            T = tokens.shape[1]
            x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
            for block in self.blocks:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.t()  # the LM head tied to the token embedding
            return F.cross_entropy(logits[..., :VOCAB].float().reshape(-1, VOCAB), targets.reshape(-1))

    return GPT(), ("sdpa" if has_sdpa else "materialized")


def summary(samples, unit, better):
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "unit": unit,
            "better": better, "count": len(samples), "mean": statistics.fmean(samples),
            "stddev": statistics.pstdev(samples)}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_bytes():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def machine(torch, cuda):
    gpu = torch.cuda.get_device_properties(0) if cuda else None
    return {"hostname": socket.gethostname(), "os": f"{platform.system()} {platform.release()} {platform.machine()}",
            "cpu_model": cpu_model(), "cpu_cores": len(os.sched_getaffinity(0)), "threads": torch.get_num_threads(),
            "memory_bytes": memory_bytes(), "compiler": f"PyTorch {torch.__version__}, Python {platform.python_version()}",
            "build_type": "optimized", "features": ["pytorch"] + (["cuda"] if cuda else []),
            "gpu_count": torch.cuda.device_count() if cuda else 0, "gpu_name": gpu.name if gpu else "",
            "gpu_driver": (torch.version.cuda or "") if cuda else "",
            "gpu_memory_bytes": gpu.total_memory if gpu else 0}


def check_destination(path):
    """As BenchResult::check_destination: never overwrite a file that is not an earlier bench result."""
    if not os.path.exists(path):
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            fail(f"--json {path}: the directory {directory} does not exist")
        return
    try:
        with open(path) as f:
            earlier = json.load(f)
        if not isinstance(earlier, dict) or "bench" not in earlier:
            raise ValueError
    except (OSError, ValueError):
        fail(f"--json {path}: the file exists and is not a bench result; not overwriting it")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="d12", help="d12, d24, d36, d48, small, tiny (as gpt2_step_bench)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (a GPU when PyTorch sees one)")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "tf32", "bf16", "fp16"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores, as gpt2_step_bench)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2 only)")
    parser.add_argument("--json", help="write the result here (bench JSON, as gpt2_step_bench --json)")
    args = parser.parse_args()
    if args.model not in MODELS:
        fail(f"unknown model '{args.model}' (expected one of {', '.join(MODELS)})")
    if args.batch < 1 or args.seq < 1 or args.steps < 1 or args.warmup < 0 or args.threads < 0:
        fail("--batch, --seq and --steps must be positive, --warmup and --threads not negative")
    if args.seq > MODELS[args.model][3]:
        fail(f"--seq {args.seq} exceeds the model's block size {MODELS[args.model][3]}")
    if args.json:
        check_destination(args.json)
    return args


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        fail("PyTorch is not installed (Debian: apt-get install python3-torch)")
    torch.set_num_threads(args.threads or len(os.sched_getaffinity(0)))
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if args.device not in ("cpu", "cuda", "auto"):
        fail(f"--device '{args.device}' is not one of cpu|cuda|auto")
    if cuda and not torch.cuda.is_available():
        fail("--device cuda: PyTorch sees no CUDA GPU")
    if args.dtype == "tf32" and not cuda:
        fail("--dtype tf32 needs a GPU")
    if args.compile and not hasattr(torch, "compile"):
        fail(f"--compile needs PyTorch 2 (this is {torch.__version__})")
    device = torch.device("cuda" if cuda else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    torch.backends.cudnn.allow_tf32 = args.dtype == "tf32"

    layers, heads, width, block_size = MODELS[args.model]
    torch.manual_seed(1)
    model, attention = build_model(torch, layers, heads, width, block_size)
    model = model.to(device)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]
    fused = cuda and "fused" in torch.optim.AdamW.__init__.__code__.co_varnames
    optimizer = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, **({"fused": True} if fused else {}))
    step_model = torch.compile(model) if args.compile else model
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.dtype)
    scaler = torch.cuda.amp.GradScaler() if args.dtype == "fp16" and cuda else None
    if args.dtype == "fp16" and not cuda:
        fail("--dtype fp16 runs on a GPU here (PyTorch's CPU autocast is bf16)")
    generator = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, VOCAB, (args.batch, args.seq), generator=generator).to(device)
    targets = torch.randint(0, VOCAB, (args.batch, args.seq), generator=generator).to(device)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def step():
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = step_model(tokens, targets)
        sync()
        t1 = time.perf_counter()
        (scaler.scale(loss) if scaler else loss).backward()
        sync()
        t2 = time.perf_counter()
        if scaler:
            scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        (scaler.step(optimizer), scaler.update()) if scaler else optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, float(loss)

    implementation = f"pytorch {'compile' if args.compile else 'eager'}"
    print(f"pytorch_gpt2_step: {args.model} ({layers} layers, {heads} heads, {width} wide) on {device} "
          f"(PyTorch {torch.__version__}, {attention} attention), B={args.batch} T={args.seq}, {args.dtype}, "
          f"{implementation}, {torch.get_num_threads()} threads", flush=True)
    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    forward, backward, optim, total = [], [], [], []
    for i in range(args.steps):
        f, b, o, loss = step()
        forward.append(f * 1e3), backward.append(b * 1e3), optim.append(o * 1e3), total.append((f + b + o) * 1e3)
        print(f"  step {i + 1}: {total[-1]:.1f} ms (loss {loss:.4f})", flush=True)
    tokens_per_step = args.batch * args.seq
    median = statistics.median(total)
    model_flops = flops_per_token(layers, width, args.seq) * tokens_per_step
    print(f"step: median {median:.1f} ms (min {min(total):.1f}, max {max(total):.1f}) = forward "
          f"{statistics.median(forward):.1f} + backward {statistics.median(backward):.1f} + optimizer "
          f"{statistics.median(optim):.1f} ms")
    print(f"throughput: {tokens_per_step / median * 1e3:.0f} tokens/s, {model_flops / median / 1e6:.1f} model GFLOP/s")
    if not args.json:
        return 0
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    row = {"model": args.model, "device": device.type, "dtype": args.dtype, "kernels": implementation,
           "attention": attention, "batch": args.batch, "seq": args.seq, "ms_median": median, "ms_min": min(total),
           "ms_max": max(total), "forward_ms": statistics.median(forward), "backward_ms": statistics.median(backward),
           "optimizer_ms": statistics.median(optim), "tokens_per_s": tokens_per_step / median * 1e3,
           "model_gflops_per_step": model_flops / 1e9, "mfu": None, "peak_name": None,
           "mem_peak_bytes": torch.cuda.max_memory_allocated() if cuda else None, "peak_rss_bytes": peak_rss}
    lower, higher = "lower", "higher"
    result = {
        "bench": "gpt2_step", "machine": machine(torch, cuda),
        "command": shlex.join([sys.executable] + sys.argv),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "metrics": {"step_ms": summary(total, "ms", lower), "forward_ms": summary(forward, "ms", lower),
                    "backward_ms": summary(backward, "ms", lower), "optimizer_ms": summary(optim, "ms", lower),
                    "tokens_per_s": summary([tokens_per_step / t * 1e3 for t in total], "tokens/s", higher)},
        "columns": {name: {"unit": unit, "better": better} for name, unit, better in [
            ("ms_median", "ms", lower), ("ms_min", "ms", lower), ("ms_max", "ms", lower),
            ("forward_ms", "ms", lower), ("backward_ms", "ms", lower), ("optimizer_ms", "ms", lower),
            ("tokens_per_s", "tokens/s", higher), ("mem_peak_bytes", "bytes", lower),
            ("peak_rss_bytes", "bytes", lower)]},
        "rows": [row],
    }
    temporary = args.json + ".tmp"
    with open(temporary, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(temporary, args.json)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
