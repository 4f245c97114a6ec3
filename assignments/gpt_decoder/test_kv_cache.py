"""Part `kv_cache` (25 points): `KVCache(batch_size, max_len, num_heads, head_dim)` and
`CausalSelfAttention(d_model, num_heads, max_len)` with RoPE, a causal mask with an offset and the cache.

References are computed live in the test: RoPE by complex multiplication (torch.view_as_complex /
torch.polar), and attention written out here (F.linear projections, heads split by reshape + transpose, scores
/ sqrt(head_dim), bool mask comparing absolute positions, torch.softmax), run chunk by chunk with a Python list
of keys and values when a cached decoder is simulated.  Weights are random (std 1.5 / sqrt(d_model), no
biases), so scores are of order 1.

Tolerances (see autograder.judging.checks.reference_tolerance): the reference is evaluated in float64 and
float32 on the same input and weights; allowed absolute error = 30 x its observed float32 error (x 2**-29 for
float64 outputs) + 16 ulps of the largest output magnitude.

Cached and chunked decoding are compared, in float64 and with that float64 tolerance, with the student's OWN
full call (use_cache=False) on the same sequence: the check is that the cache gives the same answer, whatever
the rest of the attention does.  The full call must first match the reference at float32 accuracy, so that
two wrong answers cannot agree (a rotation computed in float32, which is Part 1's business, still passes).
KVCache itself must return exactly (torch.equal) what was written.

The own-parts check (rubric.toml's `own_parts`; no points of its own) composes the attention on the trusted
side around the student's own apply_rope and KVCache, in float64, and compares the student's module with it to
float64 rounding (C.composition_tolerance): when it passes, a RoPE bug, which Part 1 grades, is carried forward
here instead of costing this part's checks again.  Only tensors computed on the trusted side are sent.

Which input amplifies which bug:
  * several calls at increasing start_pos (chunks 3, 1, 1, 2; then a restart at 0): a cache written at the
    wrong offset, returning only the new entries, the whole max_len buffer, or appending on a restart;
  * .to(torch.float64) before writing float64 values: caches kept as plain tensors (not buffers) stay float32;
  * token-by-token decoding: positions not offset by start_pos (every new token rotated as position 0), a
    cache that is written but not read;
  * chunks of several tokens at start_pos > 0 ([4, 3, 1, 2]): a mask that ignores start_pos (a t x s lower
    triangle starting at key 0) or no mask in the cached path;
  * decoding max_len tokens: a cache one position too short;
  * a second sequence with another batch size on the same module: a cache created only once;
  * num_heads in {1, 2, 3, 4} with seq_len up to 12: heads split without a transpose, RoPE applied to the
    whole d_model vector before splitting, scaling by 1/sqrt(d_model), softmax over the queries.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.judging import checks as C

from . import reference

F32, F64 = torch.float32, torch.float64


# --- trusted reference and known mistakes -------------------------------------------------------------------

def _attention(x, state, num_heads, chunks=None, *, offset=True, mask="causal", keys="cached", scale="head",
               rope="qk", rope_whole=False, softmax_dim=-1, split_view=False):
    """Causal self-attention with RoPE, run as a cached decoder over `chunks` (None: one full call), in x's
    dtype.  The options give known-buggy variants:
    offset=False: every call rotates its tokens as positions 0..t-1;  mask="no-offset": the mask is a t x s
    lower triangle starting at key 0; mask="none": no mask;  keys="new": attends to this call's keys only;
    scale="none"/"model";  rope="q"/"qkv";  rope_whole: RoPE on the d_model vector before the heads are
    split;  softmax_dim=-2: over the queries;  split_view: heads split with .view(batch, heads, t, head_dim)
    (no transpose), merged correctly."""
    st = C.cast_floats(state, x.dtype)
    batch, total, d = x.shape
    dh = d // num_heads

    def heads(t):
        if split_view:
            return t.reshape(batch, num_heads, t.shape[1], dh)
        return t.reshape(batch, t.shape[1], num_heads, dh).transpose(1, 2)

    past_k, past_v, outs, start = [], [], [], 0
    for n in chunks or [total]:
        xc = x[:, start:start + n]
        positions = torch.arange(start, start + n) if offset else torch.arange(n)
        q, k, v = (F.linear(xc, st[f"{name}.weight"]) for name in ("Wq", "Wk", "Wv"))
        if rope_whole:
            q, k = reference.rope(q, positions), reference.rope(k, positions)
        q, k, v = heads(q), heads(k), heads(v)
        if not rope_whole:
            q = reference.rope(q, positions)
            k = reference.rope(k, positions) if "k" in rope else k
            v = reference.rope(v, positions) if "v" in rope else v
        past_k.append(k)
        past_v.append(v)
        if keys == "new":
            keys_, values, key_positions = k, v, torch.arange(start, start + n)
        else:
            keys_, values, key_positions = torch.cat(past_k, 2), torch.cat(past_v, 2), torch.arange(start + n)
        query_positions = torch.arange(start, start + n)
        s = keys_.shape[2]
        if mask == "causal":
            allowed = key_positions[None, :] <= query_positions[:, None]
        elif mask == "no-offset":
            allowed = torch.ones(n, s, dtype=torch.bool).tril()
        else:
            allowed = torch.ones(n, s, dtype=torch.bool)
        factor = {"head": 1 / math.sqrt(dh), "model": 1 / math.sqrt(d), "none": 1.0}[scale]
        scores = (q @ keys_.transpose(-2, -1) * factor).masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores, dim=softmax_dim)
        merged = (weights @ values).transpose(1, 2).reshape(batch, n, d)
        outs.append(F.linear(merged, st["Wo.weight"]))
        start += n
    return torch.cat(outs, dim=1)


def _reference(x, state, num_heads):
    return lambda dt: _attention(x.to(dt), state, num_heads)


def _attention_state(d_model, *, seed, dtype):
    return C.mha_state("", d_model, seed=seed, dtype=dtype, bias=False, gain=1.5)


@C.once
def _full_mistakes(x, state, num_heads):
    x = x.double()
    return [
        ("your output matches RoPE applied to the whole d_model vector before the heads are split: rotate q and "
         "k per head, [batch, heads, t, head_dim], so that every head uses the frequencies of head_dim",
         _attention(x, state, num_heads, rope_whole=True)),
        ("your output matches attention without RoPE on the keys: rotate both q and k",
         _attention(x, state, num_heads, rope="q")),
        ("your output matches RoPE applied to the values too: rotate q and k only",
         _attention(x, state, num_heads, rope="qkv")),
        ("your output matches scores without the 1/sqrt(head_dim) scaling",
         _attention(x, state, num_heads, scale="none")),
        ("your output matches scaling the scores by 1/sqrt(d_model): each head uses 1/sqrt(head_dim)",
         _attention(x, state, num_heads, scale="model")),
        ("your output matches a softmax over dimension -2 (the queries): take it over the keys (dim=-1)",
         _attention(x, state, num_heads, softmax_dim=-2)),
        ("your output matches attention WITHOUT the causal mask", _attention(x, state, num_heads, mask="none")),
        ("your output matches splitting the heads with .view(batch, num_heads, t, head_dim), which mixes positions "
         "and features: view as (batch, t, num_heads, head_dim), then .transpose(1, 2)",
         _attention(x, state, num_heads, split_view=True)),
    ]


@C.once
def _cached_mistakes(x, state, num_heads, chunks):
    x = x.double()
    out = [
        ("your cached outputs match rotating every call's tokens as positions 0, 1, ...: in a cached call the "
         "tokens sit at positions start_pos, start_pos + 1, ... (torch.arange(start_pos, start_pos + t))",
         _attention(x, state, num_heads, chunks, offset=False)),
        ("your cached outputs match attending to the keys and values of the current call only: attend over "
         "everything the cache returns (positions 0 .. start_pos + t - 1)",
         _attention(x, state, num_heads, chunks, keys="new")),
        ("your cached outputs match a mask that ignores start_pos (a t x s lower triangle that starts at key "
         "0): query i is at position start_pos + i and may see every key j <= start_pos + i",
         _attention(x, state, num_heads, chunks, mask="no-offset")),
    ]
    if any(n > 1 for n in chunks[1:]):  # with single tokens after the first call, no mask is needed there
        out.append(("your cached outputs match no mask in the cached path: a chunk of several tokens must still "
                    "not see its own later tokens", _attention(x, state, num_heads, chunks, mask="none")))
    return out


@C.once
def _expected(x, state, num_heads):
    return C.reference_tolerance(_reference(x, state, num_heads), x.dtype)


@C.once
def _tolerances(x, state, num_heads):
    """(float64 reference, float64 tolerance, float32 tolerance) for x's values."""
    expected, atol64 = C.reference_tolerance(_reference(x, state, num_heads), F64)
    return expected, atol64, C.reference_tolerance(_reference(x, state, num_heads), F32)[1]


def _build(student, d_model, num_heads, max_len, state, dtype=F32):
    module = C.new(student, "CausalSelfAttention", d_model, num_heads, max_len)
    if dtype != F32:
        module.to(dtype)
    module.load_weights(state)
    return module


def _compare_full(module, x, state, num_heads):
    out = module(x)
    expected, atol = _expected(x, state, num_heads)
    C.assert_close(out, expected, what=f"{module.label} forward (use_cache=False)", atol=atol, dtype=x.dtype,
                   inputs={"x": x, "start_pos": 0, "use_cache": False, "weights": "random"},
                   mistakes=_full_mistakes(x, state, num_heads))


def _decode(module, x, chunks, *, what):
    """The module's outputs when x is fed in `chunks` with the cache, concatenated along the sequence."""
    outs, start = [], 0
    for n in chunks:
        with C.student_code(f"running {module.label} forward on x[:, {start}:{start + n}] with start_pos={start}, "
                            f"use_cache=True ({what}, chunks of {chunks} tokens)"):
            out = module.handle(x[:, start:start + n], start_pos=start, use_cache=True)
        C.expect_tensor(out, what=f"{what}: the call at start_pos={start} with {n} token(s)",
                        shape=(x.shape[0], n, x.shape[2]), dtype=x.dtype,
                        inputs={"x": f"x[:, {start}:{start + n}]", "start_pos": start, "use_cache": True})
        outs.append(out)
        start += n
    return torch.cat(outs, dim=1)


def _check_cached(module, x, state, num_heads, chunks, *, what):
    """Cached decoding in `chunks` equals the module's own full call, which must itself be right at float32
    accuracy (float64 inputs)."""
    expected, atol64, atol32 = _tolerances(x, state, num_heads)
    full = C.expect_tensor(module(x), what=f"{module.label} forward (use_cache=False)", shape=x.shape, dtype=F64,
                           inputs={"x": x})
    if not C.is_close(full, expected, atol=atol32):
        C.fail(f"{what}: your full call (use_cache=False) on x {C.describe_value(x)} already differs from the "
               f"reference attention (see the other checks of this part), so the cached path cannot be judged "
               f"against it.")
    cached = _decode(module, x, chunks, what=what)
    C.assert_close(cached, full, what=f"{what} (the reference here is your own full call)", atol=atol64, dtype=F64,
                   inputs=f"x {C.describe_value(x)} fed in chunks of {chunks} tokens with use_cache=True, "
                          f"compared with your own call on the whole x (use_cache=False); float64",
                   mistakes=_cached_mistakes(x, state, num_heads, tuple(chunks)))


# --- KVCache ------------------------------------------------------------------------------------------------

def test_kvcache_has_no_parameters_and_no_persistent_state(student):
    """KVCache(batch_size, max_len, num_heads, head_dim) has no parameters, and nothing in its state_dict:
    its caches are buffers registered with persistent=False (scratch memory, not weights)."""
    module = C.new(student, "KVCache", 2, 8, 3, 4)
    params = module.named_parameters()
    if params:
        C.fail(f"{module.label}: it has parameters {sorted(params)}; the cache holds no weights: keep the keys and "
               f"values in buffers (self.register_buffer(name, tensor, persistent=False)), not nn.Parameter.")
    state = module.state_dict()
    if state:
        C.fail(f"{module.label}.state_dict() holds {sorted(state)}; register the caches with persistent=False, "
               f"so that they are not saved with the model's weights.")


def _writes(batch, heads, head_dim, chunks, *, seed, dtype):
    return [(C.randn(batch, heads, n, head_dim, seed=seed + 2 * i, dtype=dtype),
             C.randn(batch, heads, n, head_dim, seed=seed + 2 * i + 1, dtype=dtype)) for i, n in enumerate(chunks)]


def _check_writes(module, writes, max_len, *, note=""):
    """Write each (k, v) in turn from position 0; after each call the returned pair must be exactly everything
    written so far, in order.  `note` says what is special about this sequence."""
    written_k, written_v, start = [], [], 0
    for k, v in writes:
        n = k.shape[2]
        got = module(k, v, start)
        call = f"{module.label}{note} forward(k {C.describe_value(k)}, v, start_pos={start})"
        if not isinstance(got, (list, tuple)) or len(got) != 2:
            C.fail(f"{call}: expected a pair (k_all, v_all), got {C.kind_of(got)}")
        written_k.append(k)
        written_v.append(v)
        want_k, want_v = torch.cat(written_k, 2), torch.cat(written_v, 2)
        end = start + n
        for name, value, want, new, other in (("k_all", got[0], want_k, k, want_v), ("v_all", got[1], want_v, v,
                                                                                      want_k)):
            if isinstance(value, torch.Tensor) and value.dim() == 4 and value.shape[2] == max_len != end:
                C.fail(f"{call} returned a {name} with {value.shape[2]} positions, the whole buffer; return "
                       f"only positions 0 .. start_pos + t - 1 = {end - 1} (slice [:, :, :start_pos + t]).")
            if isinstance(value, torch.Tensor) and value.dim() == 4 and value.shape[2] > end:
                C.fail(f"{call} returned a {name} with {value.shape[2]} positions, but the writes so far "
                       f"cover positions 0 .. {end - 1}: write at start_pos (a write at start_pos=0 starts a new "
                       f"sequence) and return positions 0 .. start_pos + t - 1.")
            if isinstance(value, torch.Tensor) and value.shape == new.shape != want.shape and torch.equal(value, new):
                C.fail(f"{call} returned a {name} that holds only what this call wrote; return everything "
                       f"cached so far, positions 0 .. start_pos + t - 1 = {end - 1}.")
            C.expect_tensor(value, what=f"{call}: {name}", shape=want.shape, dtype=want.dtype)
            if torch.equal(value, want):
                continue
            if torch.equal(value, other):
                hint = " It holds the other tensor: return (k_all, v_all) in that order."
            else:
                wrong = sorted({int(p) for p in (value != want).nonzero()[:, 2].tolist()})
                hint = f" Positions {wrong} differ from what was written there."
            C.fail(f"{call} returned a {name} that is not exactly the values written at positions 0 .. "
                   f"{end - 1}, in order.{hint}")
        start = end


def test_kvcache_returns_what_was_written(student):
    """Written in several calls (3, 1, 1 and 2 positions at start_pos 0, 3, 4, 5), KVCache returns after each
    call exactly the keys and values of positions 0 .. start_pos + t - 1, in order (float32)."""
    module = C.new(student, "KVCache", 2, 9, 3, 4)
    _check_writes(module, _writes(2, 3, 4, [3, 1, 1, 2], seed=1000, dtype=F32), 9)


def test_kvcache_restarts_at_position_zero(student):
    """After a first sequence, writing again at start_pos=0 starts a new sequence: the cache then returns only
    the new sequence's entries (2, then 1 and 3 more)."""
    module = C.new(student, "KVCache", 1, 8, 2, 6)
    _check_writes(module, _writes(1, 2, 6, [4, 1, 2], seed=1100, dtype=F32), 8)
    _check_writes(module, _writes(1, 2, 6, [2, 1, 3], seed=1110, dtype=F32), 8,
                  note=" (a second sequence, written from start_pos=0 again)")


def test_kvcache_follows_the_module_to_float64(student):
    """After .to(torch.float64), KVCache stores and returns float64 keys and values exactly, up to max_len
    positions: its caches are registered buffers, which .to() converts."""
    module = C.new(student, "KVCache", 2, 6, 2, 4)
    module.to(F64)
    _check_writes(module, _writes(2, 2, 4, [2, 3, 1], seed=1200, dtype=F64), 6,
                  note=" after .to(torch.float64) (a cache kept in a plain tensor attribute, not a registered "
                       "buffer, stays float32 and rounds the values)")


# --- CausalSelfAttention ------------------------------------------------------------------------------------

def test_attention_parameter_names_and_shapes(student):
    """CausalSelfAttention(d_model, num_heads, max_len) has exactly the parameters Wq.weight, Wk.weight,
    Wv.weight and Wo.weight, each [d_model, d_model] (nn.Linear without bias).  Buffers are fine."""
    module = C.new(student, "CausalSelfAttention", 8, 2, 16)
    C.expect_parameters(module.named_parameters(), {f"{n}.weight": (8, 8) for n in C.MHA_PROJECTIONS},
                        what=f"{module.label}.named_parameters()",
                        advice="Create self.Wq, self.Wk, self.Wv, self.Wo = nn.Linear(d_model, d_model, bias=False).")


def test_attention_output_shape_and_dtype(student):
    """The forward maps x [batch, t, d_model] to the same shape and dtype, without and with the cache (float32,
    and float64 after .to(torch.float64)).  The forward leaves its input x as it was (C.forward_leaving_inputs)."""
    for dtype in (F32, F64):
        state = _attention_state(8, seed=1300, dtype=dtype)
        module = _build(student, 8, 2, 10, state, dtype)
        x = C.randn(2, 5, 8, seed=1305, dtype=dtype)
        C.expect_tensor(C.forward_leaving_inputs(module, x, names=("x",)), what=f"{module.label} forward", inputs={"x": x}, shape=(2, 5, 8), dtype=dtype)
        _decode(module, x, [3, 1, 1], what=f"{module.label} forward with use_cache=True")


# (d_model, num_heads, batch, seq_len, max_len)
CONFIGS = [(8, 2, 2, 6, 8), (12, 3, 1, 7, 16), (8, 1, 2, 5, 8), (16, 4, 2, 9, 12), (16, 2, 1, 12, 12)]


def test_attention_matches_reference(student):
    """The full call (use_cache=False) equals causal attention with RoPE on q and k (positions 0..t-1),
    scores / sqrt(head_dim), softmax over the keys, heads merged and Wo (float32; one to four heads, batch 1
    and 2, up to 12 positions)."""
    for i, (d, h, b, s, max_len) in enumerate(CONFIGS):
        state = _attention_state(d, seed=1400 + 10 * i, dtype=F32)
        module = _build(student, d, h, max_len, state)
        x = C.randn(b, s, d, seed=1405 + 10 * i, dtype=F32)
        _compare_full(module, x, state, h)


def test_attention_float64_matches_reference(student):
    """After .to(torch.float64), the full call matches the reference to float64 precision."""
    for i, (d, h, b, s, max_len) in enumerate(CONFIGS[:2]):
        state = _attention_state(d, seed=1500 + 10 * i, dtype=F64)
        module = _build(student, d, h, max_len, state, F64)
        x = C.randn(b, s, d, seed=1505 + 10 * i, dtype=F64)
        _compare_full(module, x, state, h)


def test_attention_is_causal(student):
    """Output position t does not depend AT ALL on input positions j > t (gradient exactly 0, output
    bit-identical when they change) and depends on every j <= t (float64)."""
    d, h, b, s = 8, 2, 2, 6
    module = _build(student, d, h, 8, _attention_state(d, seed=1600, dtype=F64), F64)
    x = C.randn(b, s, d, seed=1605, dtype=F64)
    what = f"{module.label} forward (float64, x [{b}, {s}, {d}])"

    def vjp_fn(cots):
        out, grads = module.vjp([x], {}, cots)
        C.expect_tensor(out, what=what, shape=(b, s, d), dtype=F64)
        return grads

    C.check_causal_jacobian(vjp_fn, [x], ["x"], (b, s, d), must_matter=["x"], what=what, seed=1610)
    C.check_causal_perturbation(lambda xs: module(xs[0]), [x], what=what, seed=1620)


def test_cached_decoding_matches_the_full_call(student):
    """Feeding x one token at a time (x[:, t:t+1], start_pos=t, use_cache=True) gives, position by position,
    the output of one full call on x (float64, to float64 precision), also when the sequence fills max_len."""
    for i, (d, h, b, s, max_len) in enumerate([(8, 2, 2, 7, 10), (16, 4, 1, 12, 12)]):
        state = _attention_state(d, seed=1700 + 10 * i, dtype=F64)
        module = _build(student, d, h, max_len, state, F64)
        x = C.randn(b, s, d, seed=1705 + 10 * i, dtype=F64)
        _check_cached(module, x, state, h, [1] * s, what=f"{module.label}, token-by-token decoding")


def test_chunked_prefill_matches_the_full_call(student):
    """Feeding x in chunks (a prompt of 4, then 3 tokens at once, then single tokens, ...) with the cache gives
    the output of one full call (float64): the mask of a chunk at start_pos lets query i see keys 0 ..
    start_pos + i."""
    for i, ((d, h, b, s, max_len), chunks) in enumerate((((8, 2, 2, 10, 12), [4, 3, 1, 2]),
                                                         ((12, 3, 1, 9, 9), [2, 1, 4, 2]))):
        state = _attention_state(d, seed=1800 + 10 * i, dtype=F64)
        module = _build(student, d, h, max_len, state, F64)
        x = C.randn(b, s, d, seed=1805 + 10 * i, dtype=F64)
        _check_cached(module, x, state, h, chunks, what=f"{module.label}, chunked decoding")


def test_cache_restarts_for_a_new_sequence(student):
    """One module decodes two sequences one after the other, the second with another batch size: a call with
    start_pos=0 and use_cache=True starts a fresh cache for x's batch size (float64)."""
    d, h, max_len = 8, 2, 10
    state = _attention_state(d, seed=1900, dtype=F64)
    module = _build(student, d, h, max_len, state, F64)
    first = C.randn(2, 6, d, seed=1905, dtype=F64)
    second = C.randn(3, 5, d, seed=1906, dtype=F64)
    _check_cached(module, first, state, h, [3, 1, 1, 1], what=f"{module.label}, a first sequence (batch 2)")
    _check_cached(module, second, state, h, [2, 1, 1, 1],
                  what=f"{module.label}, then a second sequence with batch 3 (a cache created only once, for "
                       f"the first batch size, does not fit)")


# --- the attention on the student's own RoPE and KVCache ----------------------------------------------------

def _your_rope(student, t, positions):
    """The student's apply_rope on heads the trusted side projected (float64)."""
    return C.expect_tensor(C.call(student, "apply_rope", t, positions),
                           what="your apply_rope on the attention's heads (float64)",
                           inputs={"x": t, "positions": f"{positions.tolist()}"}, shape=t.shape, dtype=F64)


def _your_cache(cache, k, v, start, written):
    """The student's KVCache written as the notebook's attention writes it.  It must return exactly what was
    written so far (`written`: the keys and values of the earlier calls; this call's are appended here), or the
    attention cannot be judged on it."""
    written[0].append(k)
    written[1].append(v)
    got = cache(k, v, start)
    if not (isinstance(got, (list, tuple)) and len(got) == 2
            and all(isinstance(g, torch.Tensor) and g.dtype == F64 for g in got)
            and torch.equal(got[0], torch.cat(written[0], 2)) and torch.equal(got[1], torch.cat(written[1], 2))):
        C.fail(f"{cache.label}: written at start_pos={start} (float64, after .to(torch.float64)), it does not return "
               f"exactly the keys and values written at positions 0 .. {start + k.shape[2] - 1}, so the attention "
               f"cannot be judged on it; this part's KVCache checks say what differs: fix that first.")
    return got


def _from_your_parts(student, x, state, num_heads, max_len, chunks=None):
    """CausalSelfAttention as the trusted side composes it from the student's own apply_rope and KVCache, in
    float64.  The projections, the head split, the scores / sqrt(head_dim), the causal mask on absolute
    positions, the softmax, the merge and Wo are computed here; q and k are rotated by the student's apply_rope
    at positions start_pos .. start_pos + t - 1, and with `chunks` (a cached decoder) the rotated keys and the
    values go through the student's KVCache, created afresh at start_pos=0 and moved to float64, as the
    notebook's attention uses it.  Returns that; the same pieces with RoPE not applied to the keys, the wiring
    the check must be able to tell apart; and, when cached, with every call rotated as positions 0 .. t - 1
    (None otherwise), a mistake a failure names."""
    batch, total, d = x.shape
    dh = d // num_heads
    right, unrotated, not_offset, written, raw_keys, local_keys, cache, start = [], [], [], ([], []), [], [], None, 0

    def heads(t):
        return t.reshape(batch, t.shape[1], num_heads, dh).transpose(1, 2)

    def attend(q, keys, values, start):
        n = q.shape[2]
        allowed = torch.arange(keys.shape[2])[None, :] <= torch.arange(start, start + n)[:, None]
        scores = (q @ keys.transpose(-2, -1) / math.sqrt(dh)).masked_fill(~allowed, float("-inf"))
        merged = (torch.softmax(scores, dim=-1) @ values).transpose(1, 2).reshape(batch, n, d)
        return F.linear(merged, state["Wo.weight"])

    for n in chunks or [total]:
        q, k, v = (heads(F.linear(x[:, start:start + n], state[f"{name}.weight"])) for name in ("Wq", "Wk", "Wv"))
        positions = torch.arange(start, start + n)
        rq, rk = _your_rope(student, q, positions), _your_rope(student, k, positions)
        if chunks is None:
            keys, values = rk, v
        else:
            if start == 0:
                cache = C.new(student, "KVCache", batch, max_len, num_heads, dh)
                cache.to(F64)
            keys, values = _your_cache(cache, rk, v, start, written)
            # at start_pos 0 the positions are 0 .. t - 1 either way
            local = torch.arange(n)
            wq, wk = (rq, rk) if start == 0 else (_your_rope(student, q, local), _your_rope(student, k, local))
            local_keys.append(wk)
            not_offset.append(attend(wq, torch.cat(local_keys, 2), values, start))
        raw_keys.append(k)
        right.append(attend(rq, keys, values, start))
        unrotated.append(attend(rq, torch.cat(raw_keys, 2), values, start))
        start += n
    return torch.cat(right, 1), torch.cat(unrotated, 1), torch.cat(not_offset, 1) if chunks else None


def _compare_with_your_parts(student, module, x, state, num_heads, max_len, chunks=None, *, what):
    """The module's output (one full call, or decoding in `chunks`) against the composition of the student's
    own parts; whether this input told the right wiring apart from keys left unrotated."""
    expected, unrotated, not_offset = _from_your_parts(student, x, state, num_heads, max_len, chunks)
    atol = C.composition_tolerance(expected)
    mistakes = [("your output matches the same computation without RoPE on the keys: rotate both q and k with "
                 "apply_rope, per head", unrotated)]
    if chunks is None:
        out, inputs = module(x), {"x": x, "start_pos": 0, "use_cache": False, "weights": "random"}
    else:
        out = _decode(module, x, chunks, what=what)
        inputs = f"x {C.describe_value(x)} fed in chunks of {chunks} tokens with use_cache=True; float64"
        # a hint only: with a RoPE that ignores its positions argument (Part 1's bug) it is the right wiring too
        mistakes.append(("your cached outputs match rotating every call's tokens as positions 0, 1, ...: in a "
                         "cached call the tokens sit at positions start_pos, start_pos + 1, ...", not_offset))
    C.assert_close(out, expected, atol=atol, dtype=F64, inputs=inputs, mistakes=mistakes,
                   what=f"{what} against the same computation around your own apply_rope and KVCache")
    return not C.is_close(unrotated, expected, atol=100 * atol)


def test_attention_is_right_on_your_own_rope_and_cache(student):
    """CausalSelfAttention's own logic, judged on the student's own apply_rope and KVCache (no points of its
    own: when it passes and Part 1 lost points, this part's failed checks are carried forward from Part 1).
    Its output equals the trusted side's projections, head split, scaling, causal mask with the offset, softmax,
    merge and Wo around the student's own apply_rope (on q and k, at positions start_pos ..) and KVCache
    (float64): one full call with one, two, three and four heads; one module decoding a sequence in chunks of
    4, 3, 1 and 2 tokens, then a second sequence with another batch size token by token; a sequence that fills
    max_len.  The check fails, instead of passing vacuously, when on none of these inputs the student's
    apply_rope makes rotating the keys or not differ (the attention's code is the same for every input; a RoPE
    that ignores its positions is the identity on single tokens, which are all at position 0 for it)."""
    told_apart = False
    for i, (d, h, b, s, max_len) in enumerate([CONFIGS[2], CONFIGS[0], CONFIGS[1], CONFIGS[3]]):
        state = _attention_state(d, seed=2000 + 10 * i, dtype=F64)
        module = _build(student, d, h, max_len, state, F64)
        x = C.randn(b, s, d, seed=2005 + 10 * i, dtype=F64)
        told_apart |= _compare_with_your_parts(student, module, x, state, h, max_len, what=f"{module.label} forward")
    for i, (d, h, max_len, sequences) in enumerate([(8, 2, 12, [(2, [4, 3, 1, 2]), (3, [1] * 7)]),
                                                    (16, 4, 12, [(1, [6, 1, 1, 1, 1, 2])])]):
        state = _attention_state(d, seed=2100 + 10 * i, dtype=F64)
        module = _build(student, d, h, max_len, state, F64)
        for j, (b, chunks) in enumerate(sequences):
            x = C.randn(b, sum(chunks), d, seed=2105 + 10 * i + j, dtype=F64)
            what = f"{module.label}, {'a second sequence, ' if j else ''}decoding in chunks of {chunks} tokens"
            told_apart |= _compare_with_your_parts(student, module, x, state, h, max_len, chunks, what=what)
    if not told_apart:
        C.fail("CausalSelfAttention: with your apply_rope, rotating the keys or not gives the same outputs on every "
               "input of this check, so how the attention applies RoPE cannot be judged on it; fix Part 1 first.")
