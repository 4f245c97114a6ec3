"""Known mistakes: each entry is the reference with ONE realistic bug (sometimes spread over two lines), the
part in which it must lose points and, where the suite can recognise it from outputs alone, the hint text
the student must see.  See the package docstring for the format."""
from __future__ import annotations

import json

from autograder.authoring.assignment import (BEGIN_MARKER, END_MARKER, Assignment, is_solution_code, nbgrader_meta,
                                             source_text)
from autograder.authoring.catalogue import Entry, EveryPart, M

ROPE = "rope"
KV = "kv_cache"
GPT = "gpt"
GEN = "generate"
TRAIN = "training"

# --- lines of the reference solution cells ------------------------------------------------------------------
_EXPONENTS = "exponents = torch.arange(0, head_dim, 2, dtype=x.dtype, device=x.device) / head_dim  # 2i / head_dim"
_ANGLES = "angles = positions.to(x.dtype)[:, None] * base ** (-exponents)  # [seq, head_dim / 2]"
_PAIRS = "x_even, x_odd = x[..., 0::2], x[..., 1::2]"
_ROTATED = "rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)"
_FLATTEN = "return rotated.flatten(-2)"

_K_BUFFER = 'self.register_buffer("k_cache", torch.zeros(shape), persistent=False)'
_V_BUFFER = 'self.register_buffer("v_cache", torch.zeros(shape), persistent=False)'
_WRITE_K = "self.k_cache[:, :, start_pos:end] = k"
_WRITE_V = "self.v_cache[:, :, start_pos:end] = v"
_READ = "return self.k_cache[:, :, :end], self.v_cache[:, :, :end]"

_SPLIT = ("q, k, v = (W(x).view(batch, t, self.num_heads, self.head_dim).transpose(1, 2)\n"
          "                   for W in (self.Wq, self.Wk, self.Wv))")
_POSITIONS = "positions = torch.arange(start_pos, start_pos + t, device=x.device)"
_ROPE_QK = "q, k = apply_rope(q, positions), apply_rope(k, positions)"
_NEW_CACHE = "if start_pos == 0:"
_ALLOWED = "allowed = key_positions[None, :] <= positions[:, None]  # [t, s]: key j at or before query i"
_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)"
_FILL = 'scores = scores.masked_fill(~allowed, float("-inf"))'
_SOFTMAX = "heads = torch.softmax(scores, dim=-1) @ v"

_FFN = "self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))"
_ATTN_RESIDUAL = "x = x + self.attn(self.ln1(x), start_pos=start_pos, use_cache=use_cache)"
_FFN_RESIDUAL = "return x + self.ffn(self.ln2(x))"
_BLOCKS = "self.blocks = nn.ModuleList([Block(d_model, num_heads, d_ff, max_len) for _ in range(n_layers)])"
_TIE = "self.head.weight = self.tok_emb.weight  # tied: one shared Parameter\n        "
_EMBED = "x = self.tok_emb(tokens)"
_HEAD = "return self.head(self.ln_f(x))"

_PREFILL = "logits = model(prompt, start_pos=0, use_cache=True)"
_ARGMAX = "next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)  # [batch, 1]"
_STEP = "logits = model(next_token, start_pos=tokens.shape[1] - 1, use_cache=True)"
_RETURN_TOKENS = "return tokens"
_LOOP = "for _ in range(max_new_tokens):"

_SEED = "torch.manual_seed(seed)\n    "
_MODEL = "model = GPT(vocab_size=16, d_model=32, num_heads=2, d_ff=64, n_layers=1, max_len=32)\n    "
_ADAM = "optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)"
_LOGITS = "logits = model(tokens[:, :-1])"
_LOSS = "loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))"
_ZERO_GRAD = "optimizer.zero_grad()\n        "
_OPT_STEP = "optimizer.step()\n        "
_APPEND = "losses.append(loss.item())"


def _stubs(keep_constructors: bool = False) -> dict[str, str]:
    """grade_id -> each solution cell as nbgrader releases it: every solution region replaced by
    `# YOUR CODE HERE` / `raise NotImplementedError()` (with keep_constructors, the regions inside __init__ are
    kept: a submission that only wrote its constructors).  Built from the source notebook, as nbgrader's
    generate_assignment builds the release (which need not exist yet when the catalogue is imported)."""
    cells = {}
    source = Assignment("gpt_decoder").source_notebook
    for cell in json.loads(source.read_text(encoding="utf-8"))["cells"]:
        if not is_solution_code(cell):  # a written answer is a solution cell too, but text
            continue
        out, inside, keep, last_def = [], False, False, ""
        for line in source_text(cell).split("\n"):
            stripped = line.strip()
            if stripped.startswith("def "):
                last_def = stripped
            if stripped == BEGIN_MARKER:
                inside, keep = True, keep_constructors and last_def.startswith("def __init__(")
                if not keep:
                    indent = line[: len(line) - len(line.lstrip())]
                    out += [f"{indent}# YOUR CODE HERE", f"{indent}raise NotImplementedError()"]
            elif stripped == END_MARKER:
                inside = False
            elif not inside or keep:
                out.append(line)
        cells[nbgrader_meta(cell)["grade_id"]] = "\n".join(out)
    return cells


MISTAKES: list[Entry] = [
    # --- rope ------------------------------------------------------------------------------------------------
    Entry("rope-rotates-x-in-place", "writes the rotated pairs back into x (x[..., 0::2] = ...) and returns x: "
          "right values, the caller's x changed", ROPE,
          (M(_PAIRS, "x_even, x_odd = x[..., 0::2].clone(), x[..., 1::2].clone()"),
           M(_ROTATED, "x[..., 0::2] = x_even * cos - x_odd * sin\n    x[..., 1::2] = x_even * sin + x_odd * cos"),
           M(_FLATTEN, "return x")),
          hint="changed its argument 1"),
    Entry("rope-half-split", "pairs feature i with i + head_dim/2 (GPT-NeoX's rotate_half layout)", ROPE,
          (M(_PAIRS, "half = x.shape[-1] // 2\n    x_even, x_odd = x[..., :half], x[..., half:]"),
           M(_ROTATED, _ROTATED.replace("torch.stack(", "torch.cat(")), M(_FLATTEN, "return rotated")),
          hint="rotate_half"),
    Entry("rope-concatenated-not-interleaved", "rotates the interleaved pairs but returns [evens, odds]", ROPE,
          (M(_ROTATED, _ROTATED.replace("torch.stack(", "torch.cat(")), M(_FLATTEN, "return rotated")),
          hint="concatenated"),
    Entry("rope-exponent-i-over-d", "frequencies base**(-i/d): arange(head_dim // 2) / head_dim", ROPE,
          (M(_EXPONENTS, "exponents = torch.arange(head_dim // 2, dtype=x.dtype) / head_dim"),),
          hint="base**(-i/head_dim)"),
    Entry("rope-growing-frequencies", "base ** (+2i/d): the minus sign of the exponent forgotten", ROPE,
          (M("base ** (-exponents)", "base ** exponents"),), hint="which grow with i"),
    Entry("rope-rotates-backwards", "rotation by minus the angle (the transposed rotation matrix)", ROPE,
          (M(_ROTATED, "rotated = torch.stack((x_even * cos + x_odd * sin, -x_even * sin + x_odd * cos), dim=-1)"),),
          hint="other direction"),
    Entry("rope-sign-error", "second component x_2i sin - x_2i+1 cos: not a rotation", ROPE,
          (M("x_even * sin + x_odd * cos", "x_even * sin - x_odd * cos"),), hint="not a rotation"),
    Entry("rope-ignores-positions", "rotates row j by j, whatever positions says", ROPE,
          (M("angles = positions.to(x.dtype)[:, None]",
             "angles = torch.arange(x.shape[-2], dtype=x.dtype)[:, None]"),), hint="the positions argument"),
    Entry("rope-ignores-base", "10000 hard-coded instead of the base argument", ROPE,
          (M("base ** (-exponents)", "10000.0 ** (-exponents)"),), hint="use the base argument"),
    Entry("rope-float32-angles", "frequencies and angles in float32 whatever x's dtype (LLaMA's .float())", ROPE,
          (M(_EXPONENTS, "exponents = torch.arange(0, head_dim, 2).float() / head_dim"),
           M("positions.to(x.dtype)[:, None]", "positions.float()[:, None]")),
          hint="only as accurate as float32"),

    # --- kv_cache: KVCache -------------------------------------------------------------------------------------
    Entry("kv-returns-only-new-entries", "returns the k, v it was given instead of the cache", KV,
          (M(_READ, "return k, v"),), hint="only what this call wrote"),
    Entry("kv-returns-whole-buffer", "returns the whole max_len buffers (zeros beyond the written part)", KV,
          (M(_READ, "return self.k_cache, self.v_cache"),), hint="the whole buffer"),
    Entry("kv-always-writes-at-zero", "writes every call at positions 0 .. t-1", KV,
          (M(_WRITE_K, "self.k_cache[:, :, :k.shape[2]] = k"), M(_WRITE_V, "self.v_cache[:, :, :v.shape[2]] = v")),
          hint="differ from what was written"),
    Entry("kv-off-by-one-offset", "writes at start_pos + 1 .. start_pos + t", KV,
          (M(_WRITE_K, "self.k_cache[:, :, start_pos + 1:end + 1] = k"),
           M(_WRITE_V, "self.v_cache[:, :, start_pos + 1:end + 1] = v")),
          hint="differ from what was written"),
    Entry("kv-k-and-v-swapped", "returns (v_all, k_all)", KV,
          (M(_READ, "return self.v_cache[:, :, :end], self.k_cache[:, :, :end]"),), hint="the other tensor"),
    Entry("kv-persistent-buffers", "buffers registered persistent (saved in the state_dict)", KV,
          (M(_K_BUFFER, _K_BUFFER.replace("persistent=False", "persistent=True")),
           M(_V_BUFFER, _V_BUFFER.replace("persistent=False", "persistent=True"))), hint="persistent=False"),
    Entry("kv-plain-tensor-attributes", "caches kept as plain tensor attributes: .to(float64) leaves them float32",
          KV, (M(_K_BUFFER, "self.k_cache = torch.zeros(shape)"), M(_V_BUFFER, "self.v_cache = torch.zeros(shape)")),
          hint="registered buffer"),
    Entry("kv-appends-with-cat", "a torch.cat cache that ignores start_pos: a write at 0 appends to the old "
          "sequence", KV,
          replace={"kv_cache_class": '''class KVCache(nn.Module):
    def __init__(self, batch_size, max_len, num_heads, head_dim):
        super().__init__()
        self.k_cache = None
        self.v_cache = None

    def forward(self, k, v, start_pos):
        self.k_cache = k if self.k_cache is None else torch.cat([self.k_cache, k], dim=2)
        self.v_cache = v if self.v_cache is None else torch.cat([self.v_cache, v], dim=2)
        return self.k_cache, self.v_cache'''}, hint="starts a new sequence"),

    # --- kv_cache: CausalSelfAttention --------------------------------------------------------------------------
    Entry("attn-rope-positions-not-offset", "every call rotates its tokens as positions 0..t-1", KV,
          (M(_ROPE_QK, "q, k = apply_rope(q, torch.arange(t)), apply_rope(k, torch.arange(t))"),),
          hint="positions 0, 1, ..."),
    Entry("attn-mask-ignores-start-pos", "a t x s lower triangle from key 0, whatever start_pos", KV,
          (M(_ALLOWED, "allowed = torch.ones(t, k.shape[2], dtype=torch.bool, device=x.device).tril()"),),
          hint="ignores start_pos"),
    Entry("attn-no-mask-with-cache", "masks only when use_cache is False", KV,
          (M(_FILL, "if not use_cache:\n            " + _FILL),), hint="no mask in the cached path"),
    Entry("attn-mask-excludes-diagonal", "key j < query i (strict): the first query sees nothing (NaN)", KV,
          (M("key_positions[None, :] <= positions[:, None]", "key_positions[None, :] < positions[:, None]"),),
          hint="NaN"),
    Entry("attn-no-scaling", "scores without 1/sqrt(head_dim)", KV,
          (M(_SCORES, "scores = q @ k.transpose(-2, -1)"),), hint="without the 1/sqrt(head_dim)"),
    Entry("attn-scale-by-d_model", "scores / sqrt(d_model)", KV,
          (M(_SCORES, "scores = q @ k.transpose(-2, -1) / math.sqrt(d_model)"),), hint="1/sqrt(d_model)"),
    Entry("attn-softmax-over-queries", "softmax over dim=-2", KV,
          (M(_SOFTMAX, "heads = torch.softmax(scores, dim=-2) @ v"),), hint="dimension -2"),
    Entry("attn-rope-before-splitting-heads", "RoPE on the d_model vectors, before the heads are split", KV,
          (M(_SPLIT, "q, k, v = self.Wq(x), self.Wk(x), self.Wv(x)\n"
                     "        positions = torch.arange(start_pos, start_pos + t)\n"
                     "        q, k = apply_rope(q, positions), apply_rope(k, positions)\n"
                     "        q, k, v = (z.view(batch, t, self.num_heads, self.head_dim).transpose(1, 2) "
                     "for z in (q, k, v))"),
           M(_POSITIONS + "\n        " + _ROPE_QK, "")), hint="whole d_model vector"),
    Entry("attn-rope-on-values", "rotates v as well", KV,
          (M(_ROPE_QK, _ROPE_QK + "\n        v = apply_rope(v, positions)"),), hint="values too"),
    Entry("attn-rope-on-queries-only", "rotates q but not k", KV,
          (M(_ROPE_QK, "q = apply_rope(q, positions)"),), hint="without RoPE on the keys"),
    Entry("attn-cache-created-once", "the cache is created on the first call only (if self.cache is None)", KV,
          (M(_NEW_CACHE, "if self.cache is None:"),), hint="a cache created only once"),
    Entry("attn-heads-view-without-transpose", "heads split with view(batch, heads, t, head_dim)", KV,
          (M(_SPLIT, "q, k, v = (W(x).view(batch, self.num_heads, t, self.head_dim)\n"
                     "                   for W in (self.Wq, self.Wk, self.Wv))"),), hint="mixes positions and features"),

    Entry("attn-uses-torch-sdpa", "torch's F.scaled_dot_product_attention instead of attention written by hand "
          "(numerically right: only the sandbox's forbidden-operation guard catches it)", KV,
          (M(_SCORES + "\n        " + _FILL + "\n        " + _SOFTMAX,
             "heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)"),),
          hint="is off-limits in this assignment"),

    # --- gpt ---------------------------------------------------------------------------------------------------
    Entry("gpt-untied-head", "the head keeps its own weight (no tying)", GPT, (M(_TIE, ""),), hint="not tied"),
    Entry("gpt-no-final-norm", "ln_f created but never applied", GPT,
          (M(_HEAD, "return self.head(x)"),), hint="without the final LayerNorm"),
    Entry("gpt-post-norm-blocks", "post-norm blocks: ln1(x + attn(x)), ln2(x + ffn(x))", GPT,
          (M(_ATTN_RESIDUAL, "x = self.ln1(x + self.attn(x, start_pos=start_pos, use_cache=use_cache))"),
           M(_FFN_RESIDUAL, "return self.ln2(x + self.ffn(x))")), hint="post-norm"),
    Entry("gpt-relu-ffn", "ReLU instead of GELU in the feed-forward network", GPT,
          (M(_FFN, _FFN.replace("nn.GELU()", "nn.ReLU()")),), hint="ReLU"),
    Entry("gpt-gelu-tanh", "GELU with the tanh approximation", GPT,
          (M(_FFN, _FFN.replace("nn.GELU()", 'nn.GELU(approximate="tanh")')),), hint="tanh approximation"),
    Entry("gpt-no-attention-residual", "x = attn(ln1(x)) without the residual", GPT,
          (M(_ATTN_RESIDUAL, "x = self.attn(self.ln1(x), start_pos=start_pos, use_cache=use_cache)"),),
          hint="residual connection around the attention"),
    Entry("gpt-norms-swapped", "ln2 before the attention, ln1 before the feed-forward network", GPT,
          (M(_ATTN_RESIDUAL, _ATTN_RESIDUAL.replace("self.ln1(x)", "self.ln2(x)")),
           M(_FFN_RESIDUAL, "return x + self.ffn(self.ln1(x))")), hint="ln1 and ln2 swapped"),
    Entry("gpt-block-drops-cache-arguments", "Block calls its attention without start_pos and use_cache", GPT,
          (M(_ATTN_RESIDUAL, "x = x + self.attn(self.ln1(x))"),), hint="do not pass start_pos and use_cache"),
    Entry("gpt-blocks-in-python-list", "blocks kept in a plain Python list (not registered)", GPT,
          (M(_BLOCKS, "self.blocks = [Block(d_model, num_heads, d_ff, max_len) for _ in range(n_layers)]"),),
          hint="nn.ModuleList"),
    Entry("gpt-one-block-repeated", "[Block(...)] * n_layers: one block shared by every layer", GPT,
          (M(_BLOCKS, "self.blocks = nn.ModuleList([Block(d_model, num_heads, d_ff, max_len)] * n_layers)"),),
          hint="missing ['blocks.1."),
    Entry("gpt-learned-position-table", "adds a learned position embedding on top of RoPE", GPT,
          (M(_BLOCKS, "self.pos_emb = nn.Embedding(max_len, d_model)\n        " + _BLOCKS),
           M(_EMBED, _EMBED + " + self.pos_emb(torch.arange(start_pos, start_pos + tokens.shape[1]))")),
          hint="no position embedding table"),
    Entry("gpt-returns-probabilities", "forward returns softmax(logits)", GPT,
          (M(_HEAD, "return torch.softmax(self.head(self.ln_f(x)), dim=-1)"),), hint="softmax of the logits"),

    # --- generate ----------------------------------------------------------------------------------------------
    Entry("gen-argmax-over-positions", "argmax over the sequence dimension", GEN,
          (M(_ARGMAX, "next_token = logits.argmax(dim=1)[:, -1:]"),), hint="most likely next token"),
    Entry("gen-first-position-logits", "takes the logits of position 0 instead of the last", GEN,
          (M(_ARGMAX, "next_token = logits[:, 0, :].argmax(dim=-1, keepdim=True)"),), hint="most likely next token"),
    Entry("gen-samples-instead-of-argmax", "samples from the softmax (unseeded global RNG)", GEN,
          (M(_ARGMAX, "next_token = torch.multinomial(torch.softmax(logits[:, -1, :], dim=-1), 1)"),),
          hint="most likely next token"),
    Entry("gen-drops-the-prompt", "returns the new tokens only", GEN,
          (M(_RETURN_TOKENS, "return tokens[:, prompt.shape[1]:]"),), hint="return the prompt too"),
    Entry("gen-one-token-short", "range(max_new_tokens - 1)", GEN,
          (M(_LOOP, "for _ in range(max_new_tokens - 1):"),), hint="exactly max_new_tokens"),
    Entry("gen-start-pos-one-too-far", "feeds the new token at start_pos = number of tokens (one too far)", GEN,
          (M(_STEP, "logits = model(next_token, start_pos=tokens.shape[1], use_cache=True)"),)),
    Entry("gen-whole-sequence-with-cache", "feeds the whole sequence every step, with the cache at the last "
          "position", GEN, (M(_STEP, "logits = model(tokens, start_pos=tokens.shape[1] - 1, use_cache=True)"),)),
    Entry("gen-prefill-without-cache", "runs the prompt without the cache, then decodes with it", GEN,
          (M(_PREFILL, "logits = model(prompt)"),), hint="start_pos=0"),

    # --- training ----------------------------------------------------------------------------------------------
    Entry("train-no-zero-grad", "never calls optimizer.zero_grad(): gradients accumulate", TRAIN,
          (M(_ZERO_GRAD, ""),), hint="zero_grad"),
    Entry("train-targets-not-shifted", "logits of all tokens scored against the same tokens", TRAIN,
          (M(_LOGITS, "logits = model(tokens)"),
           M(_LOSS, "loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1))")),
          hint="shifted by one"),
    Entry("train-shifted-the-wrong-way", "reads tokens[:, 1:] and predicts tokens[:, :-1]", TRAIN,
          (M(_LOGITS, "logits = model(tokens[:, 1:])"),
           M(_LOSS, "loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, :-1].reshape(-1))")),
          hint="shifted by one"),
    Entry("train-no-optimizer-step", "never calls optimizer.step()", TRAIN, (M(_OPT_STEP, ""),),
          hint="optimizer.step()"),
    Entry("train-default-learning-rate", "Adam's default lr 1e-3 instead of 1e-2", TRAIN,
          (M(_ADAM, "optimizer = torch.optim.Adam(model.parameters())"),), hint="lr=1e-2"),
    Entry("train-no-seed", "never seeds torch", TRAIN, (M(_SEED, ""),), hint="torch.manual_seed(seed)"),
    Entry("train-seed-after-model", "seeds torch after building the model", TRAIN,
          (M(_SEED + _MODEL, _MODEL + _SEED),), hint="first of all"),
    Entry("train-zero-grad-after-backward", "zero_grad between backward and step: every step has no gradient",
          TRAIN, (M(_ZERO_GRAD + "loss.backward()\n        ", "loss.backward()\n        " + _ZERO_GRAD),),
          hint="optimizer.step()"),
    Entry("train-summed-loss", "cross_entropy with reduction='sum': the loss and its gradient 368 times too large",
          TRAIN, (M(_LOSS, _LOSS[:-1] + ', reduction="sum")'),), hint="the recipe"),
    Entry("train-returns-tensors", "appends the loss tensors, not loss.item()", TRAIN,
          (M(_APPEND, "losses.append(loss)"),), hint="loss.item()"),

    # --- the whole submission: structure alone must earn nothing (rubric.toml's `structural` checks) ---------
    Entry("constructors-only", "constructors written (KVCache, CausalSelfAttention, Block, GPT); every forward and "
          "function still raises NotImplementedError as released", EveryPart(GPT),
          replace=_stubs(keep_constructors=True), hint="structure and form alone earn no points"),
    Entry("everything-raises", "every solution region as released: raise NotImplementedError()", EveryPart(ROPE),
          replace=_stubs(), hint="NotImplementedError"),
]
