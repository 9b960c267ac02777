#!/usr/bin/env python3
"""Greedy decode speed of Hugging Face transformers on a Qwen3 shape with random bf16 weights.

The PyTorch side of `scripts/device-check`'s side-by-side: the same shape as
`tokenmeter speed --synthetic qwen3-0.6b`, on the same GPU. Two figures per batch size:

- `step_ms`: median time of one decode step — one forward of one token per sequence over the KV
  cache, then the greedy ids copied to the host (what tokenmeter's `speed` times: a step ends when
  its tokens reach the CPU). `tok_s` = batch / step time.
- `generate_tok_s`: `model.generate(greedy, exactly N new tokens)` end to end, prefill included.

Eager PyTorch (no torch.compile, no CUDA graphs), transformers' default attention (sdpa) and
DynamicCache; the prompt is `--prompt` random ids. With `--compiled`, instead, what a PyTorch
user would deploy: a StaticCache and the decode step under `torch.compile(mode="reduce-overhead")`
(CUDA graphs), timed as above after its compilation, which is reported apart (`compile_s`); a
batch's failure there (an older transformers, a compiler missing) is reported in its JSON entry,
not raised. Prints one JSON object.
"""
import argparse
import json
import statistics
import sys
import time


def shape(name):
    shapes = {
        "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                           num_attention_heads=16, num_key_value_heads=8, tie_word_embeddings=True),
        "qwen3-8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                         num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False),
    }
    return dict(vocab_size=151936, head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
                rope_theta=1000000.0, **shapes[name])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="qwen3-0.6b")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--compiled", action="store_true",
                    help="time the decode step with a StaticCache under torch.compile (reduce-overhead) instead")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(**shape(args.shape))
    t0 = time.perf_counter()
    with torch.device("cuda"):
        model = Qwen3ForCausalLM(cfg).to(torch.bfloat16).eval()
    torch.cuda.synchronize()
    out = {
        "shape": args.shape,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(0),
        "attention": getattr(model.config, "_attn_implementation", None),
        "init_s": time.perf_counter() - t0,
        "prompt": args.prompt,
        "steps": args.steps,
        "mode": "compiled" if args.compiled else "eager",
        "batches": [],
    }
    with torch.inference_mode():
        for b in [int(x) for x in args.batches.split(",")]:
            if args.compiled:
                try:
                    c = compiled_steps(model, b, args.prompt, args.steps)
                except Exception as e:  # reported, so the other batch sizes still run
                    c = {"error": f"{type(e).__name__}: {e}"[:300]}
                out["batches"].append({"batch": b, **c})
                print(f"transformers compiled batch {b}: {json.dumps(c)}", file=sys.stderr)
                continue
            ids = torch.randint(0, 151643, (b, args.prompt), device="cuda")
            step_ms = []
            for _ in range(2):  # the first pass warms up kernels and the allocator
                step_ms = []
                res = model(input_ids=ids, use_cache=True, logits_to_keep=1)
                past = res.past_key_values
                nxt = res.logits[:, -1].argmax(-1, keepdim=True)
                nxt.cpu()
                for _ in range(args.steps):
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    res = model(input_ids=nxt, past_key_values=past, use_cache=True)
                    past = res.past_key_values
                    nxt = res.logits[:, -1].argmax(-1, keepdim=True)
                    nxt.cpu()
                    step_ms.append(1e3 * (time.perf_counter() - t))
            med = statistics.median(step_ms)
            torch.cuda.synchronize()
            t = time.perf_counter()
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.steps,
                           min_new_tokens=args.steps, do_sample=False, pad_token_id=0)
            torch.cuda.synchronize()
            gen_s = time.perf_counter() - t
            out["batches"].append({
                "batch": b,
                "step_ms": med,
                "tok_s": b / (med / 1e3),
                "generate_tok_s": b * args.steps / gen_s,
            })
            print(f"transformers batch {b}: {med:.2f} ms/step, {b / (med / 1e3):.1f} tok/s; "
                  f"generate {b * args.steps / gen_s:.1f} tok/s", file=sys.stderr)
    print(json.dumps(out, indent=2))


def static_cache(model, batch, length):
    """A StaticCache for `batch` sequences of up to `length` tokens, across the constructor's
    versions (`max_batch_size` before transformers 4.56, none after: it sizes itself on first use)."""
    import inspect
    import torch
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": model.config, "max_cache_len": length}
    if "max_batch_size" in params:
        kwargs["max_batch_size"] = batch
    elif "batch_size" in params:
        kwargs["batch_size"] = batch
    if "device" in params:
        kwargs["device"] = "cuda"
    if "dtype" in params:
        kwargs["dtype"] = torch.bfloat16
    return StaticCache(**kwargs)


def compiled_steps(model, batch, prompt, steps):
    """The decode step with a StaticCache under torch.compile(mode="reduce-overhead"): the prompt's
    prefill (eager), then calls of the compiled step until two in a row are steady (compilation and
    CUDA graph capture: `compile_s`), then `steps` timed calls, each ending with the ids on the host."""
    import torch

    def decode_step(token, cache_position, cache):
        logits = model(input_ids=token, cache_position=cache_position, past_key_values=cache,
                       use_cache=True, return_dict=False)[0]
        return logits[:, -1].argmax(-1, keepdim=True)

    step = torch.compile(decode_step, mode="reduce-overhead", fullgraph=True)
    warm = 4
    cache = static_cache(model, batch, prompt + warm + steps + 1)
    ids = torch.randint(0, 151643, (batch, prompt), device="cuda")
    logits = model(input_ids=ids, cache_position=torch.arange(prompt, device="cuda"), past_key_values=cache,
                   use_cache=True, return_dict=False)[0]
    nxt = logits[:, -1].argmax(-1, keepdim=True)
    position = torch.tensor([prompt], device="cuda")
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(warm):
        nxt = step(nxt.clone(), position, cache)
        nxt.cpu()
        position += 1
    compile_s = time.perf_counter() - t
    step_ms = []
    for _ in range(steps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        nxt = step(nxt.clone(), position, cache)
        nxt.cpu()
        step_ms.append(1e3 * (time.perf_counter() - t))
        position += 1
    med = statistics.median(step_ms)
    return {"step_ms": med, "tok_s": batch / (med / 1e3), "compile_s": compile_s,
            "spread": (max(step_ms) - min(step_ms)) / med}


if __name__ == "__main__":
    main()
