"""Part `generate` (15 points): `generate(model, prompt, max_new_tokens)`, greedy decoding with the cache.

The suite builds the student's own GPT (C.new, float64, random weights under the contract's names) and hands
that object to the student's `generate`.  Two references:
  * the trusted reference model (built here from torch.nn modules and the suite's RoPE attention, with the
    same weights) decoding greedily by recomputing the whole sequence at every step;
  * the student's own model, driven by the test as the notebook's generate drives it (a prefill call with
    the cache, then each new token alone at its own position), argmax of the last position taken by the test.
    This one isolates `generate` from the model: a wrong model (a wrong cache included) decoded faithfully
    still matches it.  It is the part's own-parts check (rubric.toml): it carries no points, and when it
    passes the points lost to an earlier part's bug are carried forward from there.  It takes the student's
    model as it is: built after the same seed for every copy, loaded with the test's weights wherever a
    parameter has the contract's name and shape (a position table, blocks in a Python list or one block
    repeated keep their own), in float64, else in float32 (a cache that does not follow .to()); a case on
    which the model itself raises is skipped, and the check fails when none can be judged.

Tokens are compared exactly.  In float64 and with these weights the two largest logits of every step of the
reference's greedy decoding differ by more than 0.01 (checked when the seeds were picked), far above any
rounding difference between a cached and a recomputed forward, so a correct implementation cannot lose a tie.

Which input amplifies which bug: prompts of 1, 5 and 6 tokens, batch 1 to 3, up to 9 new tokens, and one case
where prompt_len + max_new_tokens == max_len (a cache written one position too far overflows).  Sampling
instead of argmax, argmax over the wrong dimension or of the wrong position, a wrong start_pos, feeding the
whole sequence again with the cache, dropping the prompt, one token too few: all change the tokens or the shape.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.judging import checks as C

from . import reference

F64 = torch.float64


# --- trusted reference model (as in test_gpt.py) -----------------------------------------------------------

def _attention(x, w, num_heads):
    batch, n, d = x.shape
    dh = d // num_heads
    positions = torch.arange(n)

    def heads(t):
        return t.reshape(batch, n, num_heads, dh).transpose(1, 2)

    q, k, v = (heads(F.linear(x, w[name])) for name in ("Wq", "Wk", "Wv"))
    q, k = reference.rope(q, positions), reference.rope(k, positions)
    allowed = positions[None, :] <= positions[:, None]
    scores = (q @ k.transpose(-2, -1) / math.sqrt(dh)).masked_fill(~allowed, float("-inf"))
    return F.linear((torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, n, d), w["Wo"])


def _reference_logits(tokens, state, cfg):
    """The reference GPT (float64): embedding, pre-norm blocks, ln_f, tied head."""
    vocab, d, num_heads, d_ff, n_layers = cfg
    embedding = nn.Embedding(vocab, d, dtype=F64)
    embedding.load_state_dict({"weight": state["tok_emb.weight"]})

    def norm(prefix):
        ln = nn.LayerNorm(d, dtype=F64)
        ln.load_state_dict({"weight": state[f"{prefix}weight"], "bias": state[f"{prefix}bias"]})
        return ln

    with torch.no_grad():
        x = embedding(tokens)
        for i in range(n_layers):
            p = f"blocks.{i}."
            ffn = nn.Sequential(nn.Linear(d, d_ff, dtype=F64), nn.GELU(), nn.Linear(d_ff, d, dtype=F64))
            ffn.load_state_dict({k[len(p) + 4:]: v for k, v in state.items() if k.startswith(p + "ffn.")})
            w = {n: state[f"{p}attn.{n}.weight"] for n in C.MHA_PROJECTIONS}
            x = x + _attention(norm(p + "ln1.")(x), w, num_heads)
            x = x + ffn(norm(p + "ln2.")(x))
        return F.linear(norm("ln_f.")(x), embedding.weight)


def _gpt_state(cfg, *, seed):
    """Random weights in float64; the embedding has std 0.5 (with std 1 the tied head mostly predicts the
    current token again, and random models decode into runs of one token)."""
    return reference.gpt_state(cfg, seed=seed, dtype=F64, embedding_std=0.5)


@C.once
def _reference_greedy(prompt, state, cfg, n):
    tokens = prompt
    for _ in range(n):
        next_token = _reference_logits(tokens, state, cfg)[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens


# --- the student's side -------------------------------------------------------------------------------------

def _model(student, cfg, max_len, state):
    """The student's GPT in float64 with the test's weights (an untied head gets the embedding's values too:
    tying is judged in the gpt part)."""
    module = C.new(student, "GPT", *cfg, max_len)
    module.to(F64)
    params = module.named_parameters()
    if isinstance(params, dict) and "head.weight" in params and "tok_emb.weight" in params:
        state = {**state, "head.weight": state["tok_emb.weight"]}
    module.load_weights(state)
    return module


def _generate(student, model, prompt, n, call=C.call):
    out = call(student, "generate", model, prompt, n)
    what = f"generate({model.label}, prompt {C.describe_value(prompt)}, {n})"
    batch, length = prompt.shape
    if isinstance(out, torch.Tensor) and out.dim() == 2 and tuple(out.shape) == (batch, n):
        C.fail(f"{what}: expected shape [{batch}, {length + n}] (the prompt followed by the {n} new tokens), got "
               f"[{batch}, {n}]: return the prompt too, torch.cat([prompt, new_tokens], dim=1).")
    if isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[0] == batch and out.shape[1] != length + n:
        C.fail(f"{what}: expected shape [{batch}, {length + n}], got {list(out.shape)}: the output holds the "
               f"{length} prompt tokens and then exactly max_new_tokens = {n} new ones.")
    C.expect_tensor(out, what=what, shape=(batch, length + n), inputs={"prompt": prompt})
    if out.dtype != torch.int64:
        C.fail(f"{what}: expected token ids of dtype int64, got {str(out.dtype).replace('torch.', '')}")
    if not torch.equal(out[:, :length], prompt):
        C.fail(f"{what}: the first {length} tokens of the output are not the prompt: return the prompt followed "
               f"by the new tokens.")
    return out


def _first_difference(out, expected):
    """(row, position) of the first position at which the two token tensors differ, in any row."""
    rows, cols = (out != expected).nonzero(as_tuple=True)
    first = int(cols.min())
    return int(rows[cols == first][0]), first


# (vocab, d_model, num_heads, d_ff, n_layers), max_len, prompt batch and length, max_new_tokens, weight seed,
# prompt seed: seeds picked so that the greedy tokens change often and the top-2 logit gap stays above 0.01
CASES = [((13, 16, 2, 32, 2), 14, (2, 5), 9, 28928, 7312), ((11, 8, 2, 16, 1), 10, (3, 1), 7, 9985, 7065),
         ((17, 12, 3, 24, 3), 16, (1, 6), 8, 22946, 7234)]

_GREEDY = ("Greedy decoding appends, at every step, the argmax over the vocabulary of the logits at the LAST "
           "position, after a prefill call model(prompt, start_pos=0, use_cache=True), then feeds only the new "
           "token, at start_pos = its own position.")


def test_generate_output_shape_dtype_and_prompt(student):
    """generate returns int64 tokens [batch, prompt_len + max_new_tokens] that start with the prompt (also for
    a one-token prompt and one new token).  The prompt it is given is left as it was (C.call_leaving_inputs)."""
    cfg = (13, 16, 2, 32, 2)
    for i, (prompt_shape, n) in enumerate((((2, 5), 6), ((1, 1), 1))):
        model = _model(student, cfg, 14, _gpt_state(cfg, seed=28928))
        _generate(student, model, reference.random_tokens(*prompt_shape, cfg[0], seed=7312 + i), n,
                  call=C.call_leaving_inputs)


def test_generate_matches_greedy_decoding_of_the_reference(student):
    """generate gives exactly the tokens of greedy decoding with the reference model and the same weights,
    recomputing the whole sequence at every step (1 to 3 layers, batch 1 to 3, prompts of 1 to 6 tokens, and
    a case that fills max_len)."""
    for cfg, max_len, prompt_shape, n, weight_seed, prompt_seed in CASES:
        state = _gpt_state(cfg, seed=weight_seed)
        model = _model(student, cfg, max_len, state)
        prompt = reference.random_tokens(*prompt_shape, cfg[0], seed=prompt_seed)
        out = _generate(student, model, prompt, n)
        expected = _reference_greedy(prompt, state, cfg, n)
        if torch.equal(out, expected):
            continue
        row, col = _first_difference(out, expected)
        C.fail(f"generate({model.label}, prompt {C.describe_value(prompt)}, {n}) with random weights: the new "
               f"token at position {col} (row {row}) differs from greedy decoding with the reference model (the "
               f"tokens before it agree). {_GREEDY} If your model itself differs from the reference, the gpt "
               f"part's checks say so.")


def _greedy_with_your_model(model, alone, prompt, n, vocab, dtype=F64):
    """Greedy decoding of `n` tokens driven by the trusted side through the student's own model, as the
    notebook's generate drives it: one prefill call model(prompt, start_pos=0, use_cache=True), then each new
    token alone at its own position with the cache; the argmax over the vocabulary of the last position's
    logits is taken here.  Returns the tokens, each step's last-position logits [batch, vocab], and whether the
    model's choice ever differs from the one it makes when it sees the newest token alone, without the prompt
    or the cache (`alone`, a second copy of the model, called with use_cache=False): a generate that never gives
    the model its context, the wiring the check must be able to tell apart."""
    batch = prompt.shape[0]

    def last_logits(m, tokens, **kwargs):
        out = C.expect_tensor(m(tokens, **kwargs), what=f"{m.label} logits", dtype=dtype, inputs={"tokens": tokens},
                              shape=(batch, tokens.shape[1], vocab))
        return out[:, -1]

    tokens, steps, told_apart = prompt, [], False
    logits = last_logits(model, prompt, start_pos=0, use_cache=True)
    for step in range(n):
        steps.append(logits)
        told_apart |= not torch.equal(last_logits(alone, tokens[:, -1:]).argmax(dim=-1), logits.argmax(dim=-1))
        tokens = torch.cat([tokens, logits.argmax(dim=-1, keepdim=True)], dim=1)
        if step < n - 1:
            logits = last_logits(model, tokens[:, -1:], start_pos=tokens.shape[1] - 1, use_cache=True)
    return tokens, steps, told_apart


def _your_model(student, cfg, max_len, state, dtype):
    """The student's GPT as it is, in `dtype`: built right after torch.manual_seed(0), so that every copy starts
    from the same weights (those it does not register included), then loaded with the test's weights wherever
    a parameter has the contract's name and shape (strict=False: a model that names or holds its parameters
    otherwise is judged on its own weights for the rest, and its parameters are the gpt part's to judge)."""
    C.rng(student, 0)
    module = C.new(student, "GPT", *cfg, max_len)
    if dtype != torch.float32:
        module.to(dtype)
    params = module.named_parameters()
    if not isinstance(params, dict):
        C.fail(f"{module.label}: its parameters could not be listed")
    if "head.weight" in params and "tok_emb.weight" in params:
        state = {**state, "head.weight": state["tok_emb.weight"]}
    module.load_state_dict({k: v.to(dtype) for k, v in state.items()
                            if k in params and tuple(params[k].shape) == tuple(v.shape)}, strict=False)
    return module


# each case is judged on the first of these where the student's model runs: float64 first (the greedy tokens of
# the reference weights have top-2 gaps above 0.01), float32 for a model whose cache does not follow .to()
DTYPES = (F64, torch.float32)


def test_generate_matches_greedy_decoding_with_your_own_model(student):
    """generate's own logic, judged on the student's own model (no points of its own: when it passes and Part
    1, 2 or 3 lost points, this part's failed checks are carried forward from there).  generate gives exactly
    the tokens that YOUR model gives when the test drives it as the notebook says (a prefill call
    model(prompt, start_pos=0, use_cache=True), then each new token alone at its own position with the cache)
    and takes the argmax of the last position itself: the same cases as the reference check, on your GPT as it
    is (the test's weights loaded where your parameters have the contract's names and shapes), in float64, or
    in float32 where your model does not run in float64.  A case on which your model itself raises is skipped
    (the earlier parts' checks judge that); the check fails when no case can be judged, or when on every case
    your model picks the same next token from the newest token alone as from the whole sequence."""
    own = C.OwnParts("generate")
    for cfg, max_len, prompt_shape, n, weight_seed, prompt_seed in CASES:
        state = _gpt_state(cfg, seed=weight_seed)
        prompt = reference.random_tokens(*prompt_shape, cfg[0], seed=prompt_seed)
        for dtype in DTYPES:
            label = f"your GPT{cfg} on prompt {C.describe_value(prompt)} ({C.describe_value(dtype)})"
            # fresh copies of the model: the test's calls never share a cache with generate's
            greedy = own.compose(label, lambda: _greedy_with_your_model(
                _your_model(student, cfg, max_len, state, dtype), _your_model(student, cfg, max_len, state, dtype),
                prompt, n, cfg[0], dtype))
            if greedy is not None:
                break
        else:
            continue  # the model itself raises on this case: the earlier parts' checks judge that
        tokens, steps, apart = greedy
        model = _your_model(student, cfg, max_len, state, dtype)
        out = _generate(student, model, prompt, n)
        if not torch.equal(out, tokens):
            row, position = _first_difference(out, tokens)
            logits, chosen = steps[position - prompt_shape[1]][row], int(out[row, position])
            rank = int((logits > logits[chosen]).sum()) + 1 if 0 <= chosen < cfg[0] else None
            detail = (f" Your token is number {rank} in your own model's ranking of that step's logits." if rank
                      else f" Your token {chosen} is not a token id of a vocabulary of {cfg[0]}.")
            C.fail(f"generate({model.label}, prompt {C.describe_value(prompt)}, {n}): at position {position} (row "
                   f"{row}) your generate chose another token than your own model's most likely next token, computed "
                   f"by the test feeding your model the tokens before it through the cache.{detail} {_GREEDY}")
        own.judged(label, discriminating=apart,
                   degenerate="your model chooses the same next token from the newest token alone, without the "
                              "prompt or the cache, as from the whole sequence, at every step")
    own.finish()
