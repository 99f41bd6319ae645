"""PyTorch reference for `chutney train --model gpt`: the same GPT (GPT-2's
architecture as src/nn/gpt.c builds it: token and learned position
embeddings, pre-LayerNorm blocks with packed-projection causal attention
and an exact-GELU MLP of 4x width, a final LayerNorm, the head tied to the
token embedding; GPT-2's initialisation), the same optimiser (AdamW, betas
0.9/0.95, weight decay on matrices only, gradients clipped to a norm, a
constant learning rate), trained on the very same token ids that
`chutney train --model gpt --save-tokens PREFIX` wrote: windows of --context
tokens at stride --context, shuffled each epoch, batches of --batch (the
last, smaller one kept, as Chutney's loader keeps it). Prints the
validation loss over the same validation windows, and with --json one line
like `chutney train --json`.

    build/chutney train --model gpt --data fortunes.txt --save-tokens /tmp/t --json
    /usr/bin/python3 bench/torch_gpt.py --tokens /tmp/t --vocab 515 --json

The initial weights and the order of batches differ from Chutney's (each
framework draws them from its own generator), so the two validation losses
agree statistically, not to the last digit; docs/benchmarks.md gives the
comparison and its spread over seeds.

tokens_per_sec leaves out the first 20 steps (warm-up; with --compile the
first of them compiles, reported apart as compile_seconds), as `chutney
train --model gpt` does.

With --generate N it trains nothing: it times greedy generation of N new
tokens after a prompt of --prompt-tokens random ids, on random weights (GPT-2's
initialisation; the timing does not depend on the values), with a key/value
cache of its own (one buffer per layer of --context positions, written in
place), as `chutney generate --json --temperature 0` times its own:

    /usr/bin/python3 bench/torch_gpt.py --generate 200 --prompt-tokens 16 \
        --vocab 515 --context 256 --json

Thread counts are set before torch is imported, with a passive OpenMP wait
policy, as bench/torch_train.py does."""
import argparse
import json
import math
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--tokens", help="PREFIX of PREFIX.train.npy and PREFIX.val.npy (training)")
p.add_argument("--generate", type=int, default=0, metavar="N",
               help="time the greedy generation of N tokens instead of training")
p.add_argument("--prompt-tokens", type=int, default=16, help="the prompt's length (--generate)")
p.add_argument("--vocab", type=int, required=True, help="the tokenizer's size (chutney's --json 'vocab')")
p.add_argument("--context", type=int, default=64)
p.add_argument("--precision", default="f32", choices=["f32", "bf16"],
               help="bf16: forward passes under torch.autocast (chutney train --precision bf16)")
p.add_argument("--layers", type=int, default=4)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--embed", type=int, default=128)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--weight-decay", type=float, default=0.1)
p.add_argument("--clip", type=float, default=1.0)
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--omp", type=int, default=0, help="OpenMP threads (default: --threads)")
p.add_argument("--blas", type=int, default=0, help="BLAS threads (default: --threads)")
p.add_argument("--seed", type=int, default=1)
p.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2)")
p.add_argument("--json", action="store_true")
args = p.parse_args()
if not args.generate and not args.tokens:
    p.error("--tokens is required (or --generate N)")
if args.generate and args.prompt_tokens + args.generate > args.context:
    p.error("--prompt-tokens + --generate must fit in --context (%d)" % args.context)

os.environ["OMP_NUM_THREADS"] = str(args.omp or args.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas or args.threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(args.omp or args.threads)
torch.manual_seed(args.seed)
T, E, H = args.context, args.embed, args.heads
SDPA = hasattr(F, "scaled_dot_product_attention")


class Attention(nn.Module):
    """nn.MultiheadAttention's parameters (in_proj_weight [3E, E],
    in_proj_bias, out_proj), causal."""

    def __init__(self):
        super().__init__()
        self.in_proj_weight = nn.Parameter(torch.empty(3 * E, E))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * E))
        self.out_proj = nn.Linear(E, E)

    def forward(self, x, cache=None, pos=0):
        """cache: [k, v] buffers [B, H, T, E/H] holding positions < pos;
        the new keys and values are written at pos."""
        B, L, _ = x.shape
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).split(E, dim=2)
        q, k, v = (t.view(B, L, H, E // H).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            cache[0][:, :, pos : pos + L] = k
            cache[1][:, :, pos : pos + L] = v
            k, v = cache[0][:, :, : pos + L], cache[1][:, :, : pos + L]
        causal = L > 1  # a single new query sees every key before it
        assert not causal or k.shape[2] == L, "a prompt goes in first, then one token at a time"
        if SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        else:
            s = (q @ k.transpose(-2, -1)) / math.sqrt(E // H)
            if causal:
                s = s.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
            y = s.softmax(-1) @ v
        return self.out_proj(y.transpose(1, 2).reshape(B, L, E))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(E)
        self.attn = Attention()
        self.ln_2 = nn.LayerNorm(E)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(E, 4 * E))
        self.mlp.add_module("gelu", nn.GELU())
        self.mlp.add_module("c_proj", nn.Linear(4 * E, E))

    def forward(self, x, cache=None, pos=0):
        x = x + self.attn(self.ln_1(x), cache, pos)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, V):
        super().__init__()
        self.wte = nn.Embedding(V, E)
        self.wpe = nn.Embedding(T, E)
        self.h = nn.ModuleList([Block() for _ in range(args.layers)])
        self.ln_f = nn.LayerNorm(E)
        resid = 0.02 / math.sqrt(2 * args.layers)
        for name, p in self.named_parameters():
            if name.endswith("out_proj.weight") or name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0, resid)
            elif "ln_" in name and name.endswith(".weight"):
                nn.init.ones_(p)
            elif p.dim() >= 2:
                nn.init.normal_(p, 0, 0.02)
            else:
                nn.init.zeros_(p)

    def forward(self, ids, caches=None, pos=0):
        x = self.wte(ids) + self.wpe(torch.arange(pos, pos + ids.shape[1]))
        for i, block in enumerate(self.h):
            x = block(x, caches[i] if caches else None, pos)
        return self.ln_f(x) @ self.wte.weight.t()


def generate():
    """Greedy generation with the cache: the prompt in one pass, then one
    token a pass."""
    model = GPT(args.vocab).eval()
    g = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, args.vocab, (1, args.prompt_tokens), generator=g)
    with torch.no_grad():
        t0, c0 = time.perf_counter(), time.process_time()
        caches = [[torch.empty(1, H, T, E // H) for _ in range(2)] for _ in range(args.layers)]
        logits = model(ids, caches, 0)
        pos, out = args.prompt_tokens, []
        for _ in range(args.generate):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            out.append(int(nxt))
            if len(out) == args.generate:
                break
            logits = model(nxt, caches, pos)
            pos += 1
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    res = {"framework": "pytorch " + torch.__version__, "model": "gpt", "mode": "generate",
           "prompt_tokens": args.prompt_tokens, "new_tokens": len(out), "seconds": round(dt, 4),
           "tokens_per_sec": round(len(out) / dt, 1),
           "tokens_per_cpu_sec": round(len(out) / cpu, 1) if cpu > 0 else 0, "threads": args.threads,
           "weights": "random"}
    print(json.dumps(res) if args.json else "%d tokens in %.3f s: %.0f tokens/s"
          % (len(out), dt, res["tokens_per_sec"]))
    sys.exit(0)


if args.generate:
    generate()


def windows(tokens):
    n = (len(tokens) - 1) // T
    x = torch.from_numpy(tokens[: n * T].reshape(n, T).astype(np.int64))
    y = torch.from_numpy(tokens[1 : n * T + 1].reshape(n, T).astype(np.int64))
    return x, y


train_x, train_y = windows(np.load(args.tokens + ".train.npy"))
val_x, val_y = windows(np.load(args.tokens + ".val.npy"))
model = GPT(args.vocab)
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                         {"params": no_decay, "weight_decay": 0.0}],
                        lr=args.lr, betas=(0.9, 0.95))
step_model = torch.compile(model) if args.compile else model


def evaluate():
    model.eval()
    total = 0.0
    with torch.no_grad():
        for b in range(0, len(val_x), args.batch):
            logits = model(val_x[b : b + args.batch])
            total += F.cross_entropy(logits.reshape(-1, args.vocab),
                                     val_y[b : b + args.batch].reshape(-1), reduction="sum").item()
    model.train()
    return total / val_x.numel()


WARMUP = 20
g = torch.Generator().manual_seed(args.seed)
steps, tokens, train_time, compile_s, loss = 0, 0, 0.0, 0.0, float("nan")
all_time, all_tokens, cpu_time = 0.0, 0, 0.0
start = time.perf_counter()
for epoch in range(args.epochs):
    order = torch.randperm(len(train_x), generator=g)
    for b in range(0, len(order), args.batch):
        idx = order[b : b + args.batch]
        t0, c0 = time.perf_counter(), time.process_time()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16,
                            enabled=args.precision == "bf16"):
            logits = step_model(train_x[idx])
        l = F.cross_entropy(logits.float().reshape(-1, args.vocab), train_y[idx].reshape(-1))
        opt.zero_grad(set_to_none=True)
        l.backward()
        if args.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        loss = l.item()
        dt = time.perf_counter() - t0
        if steps == 0:
            compile_s = dt if args.compile else 0.0  # the first step compiles
        if steps >= WARMUP:
            train_time += dt
            cpu_time += time.process_time() - c0
            tokens += idx.numel() * T
        all_time += dt
        all_tokens += idx.numel() * T
        steps += 1
val = evaluate()
out = {"framework": "pytorch " + torch.__version__, "model": "gpt", "compile": args.compile,
       "epochs": args.epochs, "steps": steps, "vocab": args.vocab,
       "parameters": sum(p.numel() for p in model.parameters()),
       "val_loss": round(val, 6), "val_perplexity": round(math.exp(val), 4),
       # a run too short for the warm-up is timed whole
       "tokens_per_sec": round(tokens / train_time if train_time > 0 else
                               all_tokens / all_time if all_time > 0 else 0, 1),
       # CPU seconds of every thread: what a busy machine does not inflate
       "tokens_per_cpu_sec": round(tokens / cpu_time, 1) if cpu_time > 0 else 0,
       "compile_seconds": round(compile_s, 2), "seconds": round(time.perf_counter() - start, 2),
       "final_loss": loss, "threads": args.threads}
if args.json:
    print(json.dumps(out))
else:
    print("validation loss: %.4f (perplexity %.2f); %d steps, %.0f tokens/s"
          % (val, math.exp(val), steps, out["tokens_per_sec"]))
sys.exit(0 if math.isfinite(val) else 1)
