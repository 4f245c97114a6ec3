"""Part `gpt` (25 points): `Block` and `GPT(vocab_size, d_model, num_heads, d_ff, n_layers, max_len)`.

The reference model is built live in the test from torch.nn modules loaded with the same random weights:
nn.Embedding (tok_emb), per block nn.LayerNorm (ln1, ln2), the suite's own attention (RoPE by complex
multiplication, written-out causal attention, no biases) and nn.Sequential(nn.Linear, nn.GELU, nn.Linear)
(ffn), then nn.LayerNorm (ln_f) and the head: F.linear with the embedding matrix (tied).  Every LayerNorm gets
random weights and biases (never ones/zeros), so a missing, shared or misplaced norm shows.

The student's weights are loaded under the contract's names: tok_emb.weight, blocks.{i}.ln1.weight, ...,
ln_f.bias, and no head.weight (tied to tok_emb.weight, named_parameters lists it once).  A model whose head is
a separate parameter fails the parameter check; everywhere else it gets the embedding's values in its head
too, so that one mistake costs one check.

Tolerances (see autograder.judging.checks.reference_tolerance): reference evaluated in float64 and float32 on
the same tokens and weights; allowed absolute error = 30 x its observed float32 error (x 2**-29 for float64
outputs) + 16 ulps of the largest logit.  Cached and chunked decoding are compared, in float64 and with the
float64 tolerance, with the student's own full call, which must first match the reference at float32 accuracy.

The own-parts check (rubric.toml's `own_parts`; no points of its own) wires the blocks and the model on the
trusted side around the student's own CausalSelfAttention modules, in float64, as the notebook fixes every other
piece (nn.LayerNorm, Linear-GELU-Linear, the tied head), and compares the student's GPT with it to float64
rounding (C.composition_tolerance): when it passes, a bug of Part 1 or 2 is carried forward here instead of
costing this part's checks again.

Which input amplifies which bug:
  * random LayerNorm parameters everywhere: no ln_f, ln1/ln2 swapped or shared, post-norm blocks;
  * logits of order 1 to 5 with random FFN weights: ReLU or tanh-approximated GELU instead of nn.GELU(), a
    missing residual connection, softmax applied to the logits;
  * 1 to 3 layers, 1 to 4 heads, vocab != d_model: blocks kept in a Python list or one block repeated;
  * float64 causality: changing every token after t leaves the logits up to t bit-identical;
  * token-by-token and chunked decoding through 2 and 3 layers: start_pos or use_cache not passed on to every
    block.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.judging import checks as C

from . import reference

F32, F64 = torch.float32, torch.float64

BLOCK_PARAMETERS = ("ln1.weight", "ln1.bias", "attn.Wq.weight", "attn.Wk.weight", "attn.Wv.weight",
                    "attn.Wo.weight", "ln2.weight", "ln2.bias", "ffn.0.weight", "ffn.0.bias", "ffn.2.weight",
                    "ffn.2.bias")


# --- trusted reference and known mistakes -------------------------------------------------------------------

class _Attention:
    """Causal self-attention with RoPE that keeps its past keys and values in Python lists."""

    def __init__(self, state, prefix, num_heads, *, rope=True):
        self.w = {n: state[f"{prefix}{n}.weight"] for n in C.MHA_PROJECTIONS}
        self.num_heads, self.rope = num_heads, rope
        self.keys, self.values = [], []

    def __call__(self, x, start, cached):
        batch, n, d = x.shape
        dh = d // self.num_heads
        positions = torch.arange(start, start + n)

        def heads(t):
            return t.reshape(batch, n, self.num_heads, dh).transpose(1, 2)

        q, k, v = (heads(F.linear(x, self.w[name])) for name in ("Wq", "Wk", "Wv"))
        if self.rope:
            q, k = reference.rope(q, positions), reference.rope(k, positions)
        if cached:
            self.keys.append(k)
            self.values.append(v)
            k, v = torch.cat(self.keys, 2), torch.cat(self.values, 2)
        key_positions = torch.arange(start + n - k.shape[2], start + n)
        allowed = key_positions[None, :] <= positions[:, None]
        scores = (q @ k.transpose(-2, -1) / math.sqrt(dh)).masked_fill(~allowed, float("-inf"))
        merged = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, n, d)
        return F.linear(merged, self.w["Wo"])


def _layer_norm(state, prefix, d, dtype):
    norm = nn.LayerNorm(d, dtype=dtype)
    norm.load_state_dict({"weight": state[f"{prefix}weight"], "bias": state[f"{prefix}bias"]})
    return norm


def _ffn(state, prefix, d, d_ff, dtype, activation):
    ffn = nn.Sequential(nn.Linear(d, d_ff, dtype=dtype), activation, nn.Linear(d_ff, d, dtype=dtype))
    ffn.load_state_dict({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
    return ffn


def _gpt(tokens, state, cfg, dtype, chunks=None, *, final_norm=True, post_norm=False, activation="gelu",
         attn_residual=True, ffn_residual=True, swap_norms=False, rope=True, probabilities=False,
         pass_cache=True):
    """The reference GPT's logits (float `dtype`) for `tokens`, fed in `chunks` with a cache (None: one full
    call).  The options give known-buggy variants."""
    vocab, d, num_heads, d_ff, n_layers = cfg
    st = C.cast_floats(state, dtype)
    embedding = nn.Embedding(vocab, d, dtype=dtype)
    embedding.load_state_dict({"weight": st["tok_emb.weight"]})
    act = {"gelu": nn.GELU(), "tanh": nn.GELU(approximate="tanh"), "relu": nn.ReLU()}[activation]
    blocks = []
    for i in range(n_layers):
        p = f"blocks.{i}."
        ln1, ln2 = _layer_norm(st, p + "ln1.", d, dtype), _layer_norm(st, p + "ln2.", d, dtype)
        blocks.append((ln2 if swap_norms else ln1, _Attention(st, p + "attn.", num_heads, rope=rope),
                       ln1 if swap_norms else ln2, _ffn(st, p + "ffn.", d, d_ff, dtype, act)))
    ln_f = _layer_norm(st, "ln_f.", d, dtype)
    outs, start = [], 0
    with torch.no_grad():
        for n in chunks or [tokens.shape[1]]:
            x = embedding(tokens[:, start:start + n])
            for ln1, attn, ln2, ffn in blocks:
                # without pass_cache every call is a fresh sequence at position 0
                a_start, cached = (start, True) if (pass_cache and chunks) else (0, False)
                if post_norm:
                    x = ln1(x + attn(x, a_start, cached))
                    x = ln2(x + ffn(x))
                else:
                    x = x * attn_residual + attn(ln1(x), a_start, cached)
                    x = x * ffn_residual + ffn(ln2(x))
            logits = F.linear(ln_f(x) if final_norm else x, embedding.weight)
            outs.append(torch.softmax(logits, dim=-1) if probabilities else logits)
            start += n
    return torch.cat(outs, dim=1)


def _reference(tokens, state, cfg):
    return lambda dt: _gpt(tokens, state, cfg, dt)


@C.once
def _mistakes(tokens, state, cfg):
    def variant(**options):
        return _gpt(tokens, state, cfg, F64, **options)

    return [
        ("your logits match the model without the final LayerNorm: apply self.ln_f before the head",
         variant(final_norm=False)),
        ("your logits match post-norm blocks (x = ln1(x + attn(x)), ...): the blocks are pre-norm, x = x + "
         "attn(ln1(x)), then x = x + ffn(ln2(x))", variant(post_norm=True)),
        ("your logits match ReLU in the feed-forward network: use nn.GELU()", variant(activation="relu")),
        ("your logits match GELU with the tanh approximation: use nn.GELU() (the exact, erf-based GELU)",
         variant(activation="tanh")),
        ("your logits match blocks without the residual connection around the attention: x = x + "
         "attn(ln1(x))", variant(attn_residual=False)),
        ("your logits match blocks without the residual connection around the feed-forward network: x = x + "
         "ffn(ln2(x))", variant(ffn_residual=False)),
        ("your logits match blocks with ln1 and ln2 swapped: ln1 goes before the attention, ln2 before the "
         "feed-forward network", variant(swap_norms=True)),
        ("your logits match attention without RoPE: rotate q and k in every attention",
         variant(rope=False)),
        ("your output matches the softmax of the logits: return the logits themselves", variant(probabilities=True)),
    ]


@C.once
def _cached_mistakes(tokens, state, cfg, chunks):
    return [("your cached logits match blocks that do not pass start_pos and use_cache on to their attention: "
             "call self.attn(self.ln1(x), start_pos=start_pos, use_cache=use_cache) in every block",
             _gpt(tokens, state, cfg, F64, list(chunks), pass_cache=False))]


@C.once
def _expected(tokens, state, cfg, dtype):
    return C.reference_tolerance(_reference(tokens, state, cfg), dtype)


@C.once
def _tolerances(tokens, state, cfg):
    expected, atol64 = C.reference_tolerance(_reference(tokens, state, cfg), F64)
    return expected, atol64, C.reference_tolerance(_reference(tokens, state, cfg), F32)[1]


def _expected_shapes(cfg):
    vocab, d, _, d_ff, n_layers = cfg
    shapes = {"tok_emb.weight": (vocab, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for i in range(n_layers):
        for name in BLOCK_PARAMETERS:
            shape = {"ln": (d,), "at": (d, d)}.get(name[:2])
            if name.startswith("ffn.0"):
                shape = (d_ff, d) if name.endswith("weight") else (d_ff,)
            elif name.startswith("ffn.2"):
                shape = (d, d_ff) if name.endswith("weight") else (d,)
            shapes[f"blocks.{i}.{name}"] = shape
    return shapes


def _load(module, state):
    """Load the test's weights; a separate head.weight (an untied head) gets the embedding's values, so that
    only the parameter check judges the tying."""
    params = module.named_parameters()
    if isinstance(params, dict) and "head.weight" in params and "tok_emb.weight" in params:
        state = {**state, "head.weight": state["tok_emb.weight"]}
    module.load_weights(state)


def _build(student, cfg, max_len, state, dtype=F32):
    module = C.new(student, "GPT", *cfg, max_len)
    if dtype != F32:
        module.to(dtype)
    _load(module, state)
    return module


def _compare(module, tokens, state, cfg, dtype, *, what):
    out = module(tokens)
    expected, atol = _expected(tokens, state, cfg, dtype)
    C.assert_close(out, expected, what=what, atol=atol, dtype=dtype,
                   inputs={"tokens": tokens, "weights": "random, LayerNorm weights and biases included"},
                   mistakes=_mistakes(tokens, state, cfg))


def _decode(module, tokens, chunks, vocab, *, what):
    outs, start = [], 0
    for n in chunks:
        with C.student_code(f"running {module.label} forward on tokens[:, {start}:{start + n}] with "
                            f"start_pos={start}, use_cache=True ({what}, chunks of {chunks} tokens)"):
            out = module.handle(tokens[:, start:start + n], start_pos=start, use_cache=True)
        C.expect_tensor(out, what=f"{what}: the call at start_pos={start} with {n} token(s)", dtype=F64,
                        shape=(tokens.shape[0], n, vocab),
                        inputs={"tokens": f"tokens[:, {start}:{start + n}]", "start_pos": start, "use_cache": True})
        outs.append(out)
        start += n
    return torch.cat(outs, dim=1)


def _check_cached(module, tokens, state, cfg, chunks, *, what):
    expected, atol64, atol32 = _tolerances(tokens, state, cfg)
    full = C.expect_tensor(module(tokens), what=f"{module.label} logits (use_cache=False)", dtype=F64,
                           shape=expected.shape, inputs={"tokens": tokens})
    if not C.is_close(full, expected, atol=atol32):
        C.fail(f"{what}: your full call (use_cache=False) on tokens {C.describe_value(tokens)} already differs "
               f"from the reference model (see the other checks of this part), so the cached path cannot be "
               f"judged against it.")
    cached = _decode(module, tokens, chunks, cfg[0], what=what)
    C.assert_close(cached, full, what=f"{what} (the reference here is your own full call)", atol=atol64, dtype=F64,
                   inputs=f"tokens {C.describe_value(tokens)} fed in chunks of {chunks} tokens with use_cache=True, "
                          f"compared with your own call on all the tokens (use_cache=False); float64",
                   mistakes=_cached_mistakes(tokens, state, cfg, tuple(chunks)))


# (vocab_size, d_model, num_heads, d_ff, n_layers), max_len, batch, seq_len
CONFIGS = [((11, 8, 2, 16, 2), 12, 2, 7), ((13, 12, 3, 20, 1), 8, 1, 8), ((10, 16, 4, 24, 3), 16, 2, 10)]


# --- checks -------------------------------------------------------------------------------------------------

def test_gpt_parameter_names_and_shapes(student):
    """GPT(vocab_size, d_model, num_heads, d_ff, n_layers, max_len) has exactly the parameters tok_emb.weight,
    blocks.{i}.{ln1, attn.Wq/Wk/Wv/Wo, ln2, ffn.0, ffn.2}.*, ln_f.weight and ln_f.bias with the right shapes:
    no position table, and no head.weight, because the head's weight IS tok_emb.weight (named_parameters lists
    a shared tensor once)."""
    cfg = (11, 8, 2, 12, 2)
    module = C.new(student, "GPT", *cfg, 16)
    params = module.named_parameters()
    what = f"{module.label}.named_parameters()"
    if isinstance(params, dict) and "head.weight" in params:
        C.fail(f"{what}: head.weight is a parameter of its own, so the output head is not tied to the embedding. "
               f"After creating both, set self.head.weight = self.tok_emb.weight: one shared nn.Parameter, "
               f"listed once, as tok_emb.weight.")
    extra = sorted(n for n in params if n not in _expected_shapes(cfg)) if isinstance(params, dict) else []
    if any("pos" in n for n in extra):
        C.fail(f"{what}: unexpected {extra}. There is no position embedding table in this model: RoPE, inside "
               f"every attention, gives the positions.")
    C.expect_parameters(params, _expected_shapes(cfg), what=what,
                        advice="Create, in this order, self.tok_emb = nn.Embedding(vocab_size, d_model), self.blocks "
                               "= nn.ModuleList([Block(...) for _ in range(n_layers)]) (each block with ln1, attn, "
                               "ln2, ffn), self.ln_f = nn.LayerNorm(d_model) and the tied head.")


def test_gpt_loads_random_state_dict(student):
    """A random state_dict under the contract's names (LayerNorms included, no head.weight) loads into GPT, whose
    parameters then hold exactly the loaded values (so no two blocks or norms share a module)."""
    cfg = (9, 6, 3, 10, 2)
    module = C.new(student, "GPT", *cfg, 8)
    _load(module, reference.gpt_state(cfg, seed=2000, dtype=F32))


def test_gpt_output_shape_and_dtype(student):
    """The forward maps int64 tokens [batch, t] to logits [batch, t, vocab_size] (float32, and float64 after
    .to(torch.float64)), also for a single token.  The forward leaves its input tokens as they were
    (C.forward_leaving_inputs)."""
    cfg, max_len, b, s = CONFIGS[0]
    for dtype in (F32, F64):
        module = _build(student, cfg, max_len, reference.gpt_state(cfg, seed=2100, dtype=dtype), dtype)
        for seq in (s, 1):
            tokens = reference.random_tokens(b, seq, cfg[0], seed=2105 + seq)
            C.expect_tensor(C.forward_leaving_inputs(module, tokens, names=("tokens",)), what=f"{module.label} logits", inputs={"tokens": tokens},
                            shape=(b, seq, cfg[0]), dtype=dtype)


def test_gpt_matches_reference(student):
    """GPT's logits equal the reference model's (embedding, pre-norm blocks with RoPE attention and a GELU
    feed-forward network, ln_f, tied head) with the same random weights (float32; 1 to 3 layers, 1 to 4 heads)."""
    for i, (cfg, max_len, b, s) in enumerate(CONFIGS):
        state = reference.gpt_state(cfg, seed=2200 + 1000 * i, dtype=F32)
        module = _build(student, cfg, max_len, state)
        tokens = reference.random_tokens(b, s, cfg[0], seed=2205 + i)
        _compare(module, tokens, state, cfg, F32, what=f"{module.label} logits")


def test_gpt_float64_matches_reference(student):
    """After .to(torch.float64), GPT's logits match the reference to float64 precision."""
    cfg, max_len, b, s = CONFIGS[0]
    state = reference.gpt_state(cfg, seed=2300, dtype=F64)
    module = _build(student, cfg, max_len, state, F64)
    tokens = reference.random_tokens(b, s, cfg[0], seed=2305)
    _compare(module, tokens, state, cfg, F64, what=f"{module.label} logits (float64)")


def test_gpt_is_causal(student):
    """The logits at positions 0..t are bit-identical whatever the tokens after t (float64, every t)."""
    cfg, max_len, b, s = (11, 8, 2, 16, 2), 10, 2, 7
    module = _build(student, cfg, max_len, reference.gpt_state(cfg, seed=2400, dtype=F64), F64)
    tokens = reference.random_tokens(b, s, cfg[0], seed=2405)
    what = f"{module.label} logits (float64, tokens [{b}, {s}])"
    base = C.expect_tensor(module(tokens), what=what, shape=(b, s, cfg[0]), dtype=F64)
    for t in range(s - 1):
        changed = tokens.clone()
        shift = 1 + reference.random_tokens(b, s - t - 1, cfg[0] - 1, seed=2410 + t)
        changed[:, t + 1:] = (changed[:, t + 1:] + shift) % cfg[0]
        out = C.expect_tensor(module(changed), what=what, shape=base.shape, dtype=F64)
        if not torch.equal(out[:, :t + 1], base[:, :t + 1]):
            moved = [p for p in range(t + 1) if not torch.equal(out[:, p], base[:, p])]
            C.fail(f"{what}: changing every token after position {t} changed the logits at position(s) {moved}; "
                   f"with causal attention they must stay bit-identical.")


def test_gpt_cached_decoding_matches_the_full_call(student):
    """Feeding the tokens one at a time (start_pos=t, use_cache=True) through every layer gives the logits of
    one full call, position by position (float64, 2 and 3 layers, up to max_len tokens)."""
    for i, (cfg, max_len, b, s) in enumerate([((11, 8, 2, 16, 2), 9, 2, 9), ((10, 16, 4, 24, 3), 16, 1, 10)]):
        state = reference.gpt_state(cfg, seed=2500 + 1000 * i, dtype=F64)
        module = _build(student, cfg, max_len, state, F64)
        _check_cached(module, reference.random_tokens(b, s, cfg[0], seed=2505 + i), state, cfg, [1] * s,
                      what=f"{module.label}, token-by-token decoding")


def test_gpt_chunked_prefill_matches_the_full_call(student):
    """Feeding a prompt of 4 tokens, then chunks of 1, 3 and 2 tokens with the cache gives the logits of one
    full call (float64)."""
    cfg, max_len, b, s = (11, 8, 2, 16, 2), 12, 2, 10
    state = reference.gpt_state(cfg, seed=2600, dtype=F64)
    module = _build(student, cfg, max_len, state, F64)
    _check_cached(module, reference.random_tokens(b, s, cfg[0], seed=2605), state, cfg, [4, 1, 3, 2],
                  what=f"{module.label}, chunked decoding")


# --- the model on the student's own attention ---------------------------------------------------------------

def _your_attention(student, state, cfg, max_len):
    """One of the student's own CausalSelfAttention per layer, in float64, holding that block's weights."""
    _, d, num_heads, _, n_layers = cfg
    modules = []
    for i in range(n_layers):
        module = C.new(student, "CausalSelfAttention", d, num_heads, max_len)
        module.to(F64)
        module.load_weights({f"{n}.weight": state[f"blocks.{i}.attn.{n}.weight"] for n in C.MHA_PROJECTIONS})
        modules.append(module)
    return modules


def _from_your_attention(attns, tokens, state, cfg, chunks=None, *, wiring="right"):
    """GPT's logits as the trusted side wires them around the student's own attention modules `attns` (one per
    layer), in float64: the embedding lookup, each pre-norm block's ln1 and ln2 (LayerNorm, eps 1e-5), its
    feed-forward network (Linear, exact GELU, Linear) and residual connections, ln_f and the tied head are
    computed here, as the notebook fixes them; each block's attention is the student's, called on the block's
    ln1(x) with start_pos and use_cache passed on (use_cache=True when decoding in `chunks`).  Other `wiring`s
    are the same pieces wired wrong: "reads-x", the attention reading the residual stream x instead of ln1(x)
    (the wiring the check must be able to tell apart), and "no-cache-arguments", the attention called without
    start_pos and use_cache (cached: every call a fresh sequence)."""
    _, d, _, _, n_layers = cfg

    def norm(prefix, t):
        return F.layer_norm(t, (d,), state[f"{prefix}weight"], state[f"{prefix}bias"], eps=1e-5)

    def attention(i, t, start):
        kwargs = {} if wiring == "no-cache-arguments" else {"start_pos": start, "use_cache": chunks is not None}
        return C.expect_tensor(attns[i](t, **kwargs), what=f"your {attns[i].label} on the block's intermediate "
                               "values (float64)", shape=t.shape, dtype=F64)

    outs, start = [], 0
    for n in chunks or [tokens.shape[1]]:
        x = F.embedding(tokens[:, start:start + n], state["tok_emb.weight"])
        for i in range(n_layers):
            p = f"blocks.{i}."
            x = x + attention(i, x if wiring == "reads-x" else norm(p + "ln1.", x), start)
            hidden = F.gelu(F.linear(norm(p + "ln2.", x), state[p + "ffn.0.weight"], state[p + "ffn.0.bias"]))
            x = x + F.linear(hidden, state[p + "ffn.2.weight"], state[p + "ffn.2.bias"])
        outs.append(F.linear(norm("ln_f.", x), state["tok_emb.weight"]))
        start += n
    return torch.cat(outs, dim=1)


def test_gpt_is_right_on_your_own_attention(student):
    """Block's and GPT's own logic, judged on the student's own CausalSelfAttention (no points of its own: when
    it passes and Part 1 or 2 lost points, this part's failed checks are carried forward from there).  The
    logits equal the trusted side's embedding, pre-norm blocks (LayerNorms, GELU feed-forward networks,
    residual connections), ln_f and tied head around the student's own attention modules holding the same
    weights (float64): one full call with 1 to 3 layers, then decoding token by token up to max_len and in
    chunks of 4, 1, 3 and 2 tokens.  The check fails, instead of passing vacuously, when on none of these inputs
    the student's attention makes feeding it x or ln1(x) differ (an attention whose output is NaN everywhere,
    for one).  An input on which the student's attention itself raises (a cache that does not follow the module
    to float64, say) is skipped: Part 2's checks judge that; the check fails when no input can be judged."""
    own = C.OwnParts("GPT")
    cases = [(cfg, max_len, b, s, None) for cfg, max_len, b, s in CONFIGS]
    cases += [((11, 8, 2, 16, 2), 9, 2, 9, [1] * 9), ((11, 8, 2, 16, 2), 12, 2, 10, [4, 1, 3, 2])]
    for i, (cfg, max_len, b, s, chunks) in enumerate(cases):
        state = reference.gpt_state(cfg, seed=3000 + 1000 * i, dtype=F64)
        module = _build(student, cfg, max_len, state, F64)
        tokens = reference.random_tokens(b, s, cfg[0], seed=3005 + i)
        label = f"{module.label} on tokens {C.describe_value(tokens)}" + (f" in chunks of {chunks}" if chunks else "")
        # each wiring on attention modules of its own, so that no two share a cache
        wired = own.compose(label, lambda: {
            w: _from_your_attention(_your_attention(student, state, cfg, max_len), tokens, state, cfg, chunks, wiring=w)
            for w in ("right", "reads-x", *(("no-cache-arguments",) if chunks else ()))})
        if wired is None:  # the attention's own failure, which Part 2 judges (the module may differ: a cache
            continue       # that follows .to(float64) in the model and not alone, say), so no expect_fails_too
        expected = wired["right"]
        atol = C.composition_tolerance(expected)
        mistakes = [("your logits match blocks whose attention reads x instead of ln1(x): x = x + "
                     "self.attn(self.ln1(x), start_pos=start_pos, use_cache=use_cache)", wired["reads-x"])]
        if chunks is None:
            what = f"{module.label} logits"
            out, inputs = module(tokens), {"tokens": tokens, "weights": "random, LayerNorm weights and biases included"}
        else:
            what = f"{module.label}, decoding in chunks of {chunks} tokens"
            out = _decode(module, tokens, chunks, cfg[0], what=what)
            inputs = f"tokens {C.describe_value(tokens)} fed in chunks of {chunks} tokens with use_cache=True; float64"
            # a hint only: with an attention whose cache returns only the new entries (Part 2's bug) it is the
            # right wiring too
            mistakes.append(("your cached logits match blocks that do not pass start_pos and use_cache on to their "
                             "attention: call self.attn(self.ln1(x), start_pos=start_pos, use_cache=use_cache) in "
                             "every block", wired["no-cache-arguments"]))
        C.assert_close(out, expected, atol=atol, dtype=F64, inputs=inputs, mistakes=mistakes,
                       what=f"{what} against the same wiring of your own CausalSelfAttention")
        own.judged(label, discriminating=not C.is_close(wired["reads-x"], expected, atol=100 * atol),
                   degenerate="your CausalSelfAttention gives the same logits on the residual stream x as on ln1(x)")
    own.finish()
