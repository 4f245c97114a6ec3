"""Part `training` (15 points): `train_toy_model(seed, steps=300)`, the training loop on the toy task.

The recipe (notebook, Part 5): torch.manual_seed(seed); GPT(16, 32, 2, 64, 1, 32); Adam(lr=1e-2); each step a
batch toy_batch(16) of 16 sequences of 24 tokens repeating a random 4-token pattern; cross-entropy of the logits
of tokens[:, :-1] against tokens[:, 1:]; zero_grad, backward, step; one Python float per step.

No reference run is needed: the task has known bounds.  The first three targets of every sequence are random,
so no correctly trained model's loss is below 3 ln 16 / 23 = 0.362 (a model that predicts them uniformly pays
exactly ln 16 there, on fresh data every step); guessing gives ln 16 = 2.77.  Measured with the reference
solution (12 seeds): mean of the first 10 losses 2.7 - 2.9; mean of losses 131-150: 0.70 - 0.74; mean of the
last 20 of 200: 0.61 - 0.73 (0.57 - 0.74 after 300).  Known bugs, same measures:
  * no optimizer.zero_grad(): gradients accumulate, the loss climbs (4.8 - 6.0 at step 150, ~20 at 300);
  * no optimizer.step(): flat at ~3.6;
  * Adam's default lr 1e-3: still ~2.0 at step 150 (it catches up by step 300, ~0.75);
  * targets not shifted: the answer is in the input, the loss drops to ~0.00 within 150 steps;
  * shifted the wrong way (reading tokens[:, 1:], predicting tokens[:, :-1]): the model only has to copy
    the previous token, 0.29 - 0.40 after 200 steps (12 seeds; 0.32 with seed 3), 0.25 - 0.30 after 300;
  * no torch.manual_seed(seed), or seeding after building the model: two runs with the same seed differ.
The checks train for 200 steps, not the notebook's 300: the same bugs are caught a third cheaper.  Mean of
losses 131-150 below 1.2; mean of the last 20 in (0.40, 1.2) and at least 1.0 below the mean of the first 10;
two runs of 6 steps with seed 1 identical, and different from seed 2.

The own-parts check (rubric.toml's `own_parts`; no points of its own) judges the loop on the student's own GPT:
the trusted side runs the recipe's first 4 steps around it (the seed, the model and the batches drawn in the
student's process, in the recipe's order; the loss, its gradient and Adam's steps here, the parameters'
gradients from the student's process), and the student's first 4 losses must be the same.  It fails, instead
of passing vacuously, when on the student's GPT a catalogued loop mistake would give the same losses, or the
loss is not finite (a NaN from the attention, say).  When it passes and Part 1, 2 or 3 lost points, a model bug
that changes the loss curve is carried forward here instead of costing this part's checks again.
"""
from __future__ import annotations

import math

import torch

from autograder.judging import checks as C


FLOOR = 3 * math.log(16) / 23
LOW, HIGH, DROP = 0.40, 1.2, 1.0
STEPS, MIDWAY = 200, 150


def _losses(student, seed, steps):
    out = C.call(student, "train_toy_model", seed, steps=steps)
    what = f"train_toy_model({seed}, steps={steps})"
    if not isinstance(out, (list, tuple)):
        C.fail(f"{what}: expected a list of {steps} losses, got {C.kind_of(out)}")
    if len(out) != steps:
        C.fail(f"{what}: expected {steps} losses (one per step), got {len(out)}")
    for i, loss in enumerate(out):
        if isinstance(loss, torch.Tensor):
            C.fail(f"{what}: loss {i} is {C.kind_of(loss)}, expected a Python float: append loss.item(), which "
                   f"also lets each step's graph be freed")
        if type(loss) is not float:
            C.fail(f"{what}: loss {i} is {C.kind_of(loss)}, expected a Python float (loss.item())")
        if not math.isfinite(loss):
            C.fail(f"{what}: loss {i} is {loss}: the training diverged")
    return list(out)


def test_training_returns_one_float_per_step(student):
    """train_toy_model(seed, steps) returns a list of `steps` finite Python floats."""
    _losses(student, 0, 6)


def test_training_is_reproducible(student):
    """train_toy_model seeds torch first: the same seed gives the same losses twice, another seed other losses."""
    first, again, other = _losses(student, 1, 6), _losses(student, 1, 6), _losses(student, 2, 6)
    if first != again:
        C.fail("train_toy_model(1, steps=6) gave different losses on two calls: call torch.manual_seed(seed) "
               "first of all, before the model is built.")
    if first == other:
        C.fail("train_toy_model(1, steps=6) and train_toy_model(2, steps=6) gave the same losses: seed with the "
               "seed argument, torch.manual_seed(seed).")


def test_training_reaches_the_expected_loss(student):
    """Over 200 steps of the recipe the loss falls: the mean of losses 131-150 is below 1.2, the mean of the
    last 20 lies between 0.40 and 1.2 (no model can beat 3 ln 16 / 23 = 0.36; the reference reaches about 0.7)
    and is at least 1.0 below the mean of the first 10."""
    losses = _losses(student, 3, STEPS)
    first, midway, last = (sum(losses[:10]) / 10, sum(losses[MIDWAY - 20:MIDWAY]) / 20,
                           sum(losses[-20:]) / 20)
    what = (f"train_toy_model(3, steps={STEPS}): mean of the first 10 losses {first:.3f}, of losses "
            f"{MIDWAY - 19}-{MIDWAY} {midway:.3f}, of the last 20 {last:.3f}")
    if last < LOW:
        C.fail(f"{what}. That is below what a model trained on this data can reach ({FLOOR:.2f} at best: the "
               f"first three targets of every sequence are random; the recipe ends near 0.7): the model must be "
               f"seeing the tokens it predicts. The logits of tokens[:, :-1] are scored against tokens[:, 1:], "
               f"the sequence shifted by one.")
    if last > HIGH or midway > HIGH:
        hint = ""
        if last > first + 0.3:
            hint = (" The loss went UP: is optimizer.zero_grad() called at every step? Without it the gradients "
                    "of all earlier steps add up.")
        elif abs(first - last) < 0.3:
            hint = " The loss hardly moved: is optimizer.step() called at every step?"
        C.fail(f"{what}; the loss should be below {HIGH} by step {MIDWAY} and stay there (about 0.7 with the "
               f"recipe).{hint} Follow the recipe: Adam(model.parameters(), lr=1e-2), toy_batch(16), zero_grad, "
               f"backward, step.")
    if first - last < DROP:
        C.fail(f"{what}: the loss should fall by at least {DROP} (from about 2.8 to about 0.7).")


# --- the training loop on the student's own GPT ------------------------------------------------------------

RECIPE_GPT = (16, 32, 2, 64, 1, 32)  # vocab_size, d_model, num_heads, d_ff, n_layers, max_len
BATCH, VOCAB, LR = 16, 16, 1e-2
OWN_SEED, OWN_STEPS = 4, 4  # step 2 is the first whose loss shows a missing zero_grad
# The trusted side repeats the student's own float32 operations: the reference and the correct variants match
# to 5e-7 (a loss near 3; the class dimension second in cross_entropy changes the summation order), so a loss
# may differ by 1e-5 x (1 + |loss|).  A loop mistake is told apart when its loss, on the student's own GPT,
# lies more than APART from the recipe's, over twice that tolerance: measured on the catalogue's GPTs, the
# closest is the sequence shifted the wrong way round on a near-uniform model (2e-4 with an untied head or
# probabilities for logits; 1.4e-2 with the reference).
OWN_RTOL, APART = 1e-5, 1e-4


def _cross_entropy(logits, tokens, what):
    """The recipe's loss of `logits` [batch, t, vocab] against `tokens` [batch, t], and its gradient."""
    logits = C.expect_tensor(logits, what=what, shape=(*tokens.shape, VOCAB), dtype=torch.float32)
    leaf = logits.detach().clone().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(leaf.reshape(-1, VOCAB), tokens.reshape(-1))
    loss.backward()
    return loss.item(), leaf.grad


class Adam:
    """torch.optim.Adam's step as it runs on the CPU by default (one tensor at a time, no weight decay, no
    amsgrad), written out operation for operation: the same values as torch's class, without the 3 s its first
    construction costs a grading process (it imports torch._dynamo).  A parameter without a gradient (None, as
    after zero_grad) is left alone and its state not started, as there."""

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8):
        self.params = {n: p.detach().clone() for n, p in params.items()}
        self.lr, (self.beta1, self.beta2), self.eps = lr, betas, eps
        self.state = {}

    def step(self, grads):
        """One step with these gradients (name -> tensor or None); returns the new parameters."""
        for name, param in self.params.items():
            grad = grads.get(name)
            if grad is None:
                continue
            exp_avg, exp_avg_sq, step = self.state.get(name) or (torch.zeros_like(param), torch.zeros_like(param), 0.0)
            step += 1
            exp_avg.lerp_(grad, 1 - self.beta1)
            exp_avg_sq.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
            step_size = self.lr / (1 - self.beta1 ** step)
            denom = (exp_avg_sq.sqrt() / (1 - self.beta2 ** step) ** 0.5).add_(self.eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)
            self.state[name] = (exp_avg, exp_avg_sq, step)
        return {n: p.clone() for n, p in self.params.items()}


def _toy_batch(student):
    tokens = C.expect_tensor(C.call(student, "toy_batch", BATCH), what="toy_batch(16)", shape=(BATCH, 24),
                             dtype=torch.int64)
    if int(tokens.min()) < 0 or int(tokens.max()) >= VOCAB:
        C.fail(f"toy_batch(16) returned token ids outside 0 .. {VOCAB - 1}")
    return tokens


def _recipe_on_your_model(student, seed, steps):
    """The recipe, run by the trusted side around the student's own GPT: torch.manual_seed(seed) and GPT(16,
    32, 2, 64, 1, 32) in the student's process, then at each step a batch from the student's toy_batch(16), the
    logits of tokens[:, :-1] from the student's model, the cross-entropy against tokens[:, 1:] and its gradient
    here, the gradients of the model's own parameters from the student's process (parameter_vjp), Adam's step
    (lr 1e-2) here, and the new weights loaded back into the student's model.  Returns the losses and what the
    loop mistakes' losses are computed from: the weights and gradients of every step, and the batches."""
    C.rng(student, seed)
    model = C.new(student, "GPT", *RECIPE_GPT)
    theta = [model.named_parameters()]
    optimizer = Adam(theta[0], LR)
    losses, batches, grads = [], [], []
    for step in range(steps):
        tokens = _toy_batch(student)
        inputs = tokens[:, :-1]
        logits = model(inputs)  # the recipe's one forward of this step
        loss, cotangent = _cross_entropy(logits, tokens[:, 1:], f"{model.label} logits")
        if not math.isfinite(loss):  # no step can be judged after it: every loop gives the same
            return [*losses, loss], theta, grads, batches
        after = C.rng(student)
        again, (grad,) = model.parameter_vjp([inputs], {}, [cotangent])
        C.rng(student, after)  # what the test's second forward drew from the RNG is given back
        if not (isinstance(again, torch.Tensor) and again.shape == logits.shape
                and torch.allclose(again, logits, rtol=0, atol=0, equal_nan=True)):
            C.fail(f"{model.label}: two calls on the same tokens gave different logits, so a training loop "
                   f"cannot be judged on it")
        if not (isinstance(grad, dict) and set(grad) <= set(theta[0]) and all(
                g is None or (isinstance(g, torch.Tensor) and g.dtype == theta[0][n].dtype
                              and g.shape == theta[0][n].shape) for n, g in grad.items())):
            C.fail(f"{model.label}: the gradients of its parameters do not match its parameters")
        losses.append(loss)
        batches.append(tokens)
        grads.append(grad)
        theta.append(optimizer.step(grad))
        model.load_weights(theta[-1])
    return losses, theta, grads, batches


def _loop_mistakes(student, seed, theta, grads, batches):
    """Where each loop mistake of the catalogue first shows, computed on the student's own GPT: (hint, step,
    that mistake's loss at that step).  The model is built again from the same seed after the recipe's batches
    were drawn (the same weights, those it does not register included); another seed's first loss is the
    recipe's with its first line wrong."""
    C.rng(student, seed + 1)
    model = C.new(student, "GPT", *RECIPE_GPT)
    tokens = _toy_batch(student)
    other_seed = _cross_entropy(model(tokens[:, :-1]), tokens[:, 1:], f"{model.label} logits")[0]
    C.rng(student, seed)
    model = C.new(student, "GPT", *RECIPE_GPT)

    def loss_at(weights, inputs, targets):
        model.load_weights(weights)
        return _cross_entropy(model(inputs), targets, f"{model.label} logits")[0]

    lr_default = Adam(theta[0], 1e-3).step(grads[0])
    optimizer = Adam(theta[0], LR)
    optimizer.step(grads[0])
    summed = {n: g if grads[0].get(n) is None else grads[0][n] if g is None else g + grads[0][n]
              for n, g in grads[1].items()}
    accumulated = optimizer.step(summed)
    first = batches[0]
    return [
        ("optimizer.step() is never called, so the weights never change", 1,
         loss_at(theta[0], batches[1][:, :-1], batches[1][:, 1:])),
        ("Adam keeps its default learning rate 1e-3 instead of lr=1e-2", 1,
         loss_at(lr_default, batches[1][:, :-1], batches[1][:, 1:])),
        ("optimizer.zero_grad() is not called at every step, so the gradients of earlier steps add up", 2,
         loss_at(accumulated, batches[2][:, :-1], batches[2][:, 1:])),
        ("the targets are not shifted: the logits are scored against the tokens the model reads, where the "
         "logits of tokens[:, :-1] are scored against tokens[:, 1:]", 0, loss_at(theta[0], first, first)),
        ("the sequence is shifted the wrong way round: the model reads tokens[:, 1:] to predict tokens[:, :-1]", 0,
         loss_at(theta[0], first[:, 1:], first[:, :-1])),
        ("torch.manual_seed(seed) is not called first of all, before the model is built and the batches drawn",
         0, other_seed),
    ]


_ADVICE = (" A different first loss means another model, other data or another loss: call torch.manual_seed(seed) "
           "first of all, then build GPT(16, 32, 2, 64, 1, 32), draw toy_batch(16) at every step, and take the "
           "mean cross-entropy over all 16 x 23 predictions.",
           " Follow the recipe: Adam(model.parameters(), lr=1e-2); at every step the loss of the logits of "
           "tokens[:, :-1] against tokens[:, 1:], then zero_grad, backward, step.")


def test_training_is_right_on_your_own_model(student):
    """train_toy_model's own loop, judged on the student's own GPT (no points of its own: when it passes and
    Part 1, 2 or 3 lost points, this part's failed checks are carried forward from there).  Its first
    4 losses equal the recipe's as the test runs it around YOUR GPT: torch.manual_seed(seed), GPT(16,
    32, 2, 64, 1, 32) and toy_batch(16) in your process, the loss of tokens[:, :-1] against tokens[:, 1:] and
    Adam's steps (lr 1e-2) on the trusted side, with your model's own gradients.  The check fails, instead of
    passing vacuously, when on your GPT a loop mistake (no step, no zero_grad, the default learning rate, the
    targets not shifted or shifted the wrong way, no seed) would give the same losses (a model whose loss is
    NaN, for one)."""
    what = f"train_toy_model({OWN_SEED}, steps={OWN_STEPS})"
    own = C.OwnParts("train_toy_model")

    def recipe():
        expected, theta, grads, batches = _recipe_on_your_model(student, OWN_SEED, OWN_STEPS)
        finite = math.isfinite(expected[-1])
        return expected, finite, _loop_mistakes(student, OWN_SEED, theta, grads, batches) if finite else []

    composed = own.compose(f"the recipe's first {OWN_STEPS} steps around your GPT", recipe)
    if composed is None:
        own.finish()  # fails: nothing could be judged
    expected, finite, mistakes = composed
    if not finite:
        C.fail(f"{what} cannot be judged on your own parts: with your GPT the recipe's loss at step "
               f"{len(expected) - 1} is {expected[-1]}, and every training loop gives the same from there; fix "
               f"Parts 2 and 3 first.")
    alike = [hint for hint, step, loss in mistakes if not abs(loss - expected[step]) > APART]
    if alike:
        C.fail(f"{what} cannot be judged on your own parts: with your GPT a loop mistake gives the recipe's losses "
               f"too ({alike[0]}); fix Parts 2 and 3 first.")
    losses = _losses(student, OWN_SEED, OWN_STEPS)
    for step, (got, want) in enumerate(zip(losses, expected)):
        if abs(got - want) <= OWN_RTOL * (1 + abs(want)):
            continue
        matched = [hint for hint, at, loss in mistakes if at == step and abs(got - loss) <= OWN_RTOL * (1 + abs(loss))]
        C.fail(f"{what}: loss {step} is {got:.5f}, but the recipe run by the test around your own GPT (seeded, "
               f"built, fed toy_batch(16) and trained with Adam(lr=1e-2) as the notebook says) gives {want:.5f} "
               f"there (the losses before it agree)." + (f" Yours matches the loop in which {matched[0]}." if matched
                                                        else _ADVICE[min(step, 1)]))
