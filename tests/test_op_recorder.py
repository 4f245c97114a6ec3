"""torch's own implementations of graded operations are noticed by every route; hand-written code is not."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.op_recorder import OpRecorder
from autograder.rubric import load_rubric

FORBIDDEN = frozenset(load_rubric("transformer_block").forbidden_ops)
x = torch.randn(2, 5, 8)


class SubclassedLayerNorm(nn.LayerNorm):
    pass


ROUTES = {
    "F.layer_norm": lambda: F.layer_norm(x, (8,)),
    "getattr(F, 'layer' + '_norm')": lambda: getattr(F, "layer" + "_norm")(x, (8,)),
    "torch.layer_norm": lambda: torch.layer_norm(x, [8]),
    "torch.ops.aten.native_layer_norm": lambda: torch.ops.aten.native_layer_norm(x, [8], None, None, 1e-5),
    "nn.LayerNorm subclass": lambda: SubclassedLayerNorm(8)(x),
    "F.group_norm over one group": lambda: F.group_norm(x.transpose(1, 2), 1),
    "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(x, x, x),
    "torch.ops.aten flash kernel": lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        x.unsqueeze(1), x.unsqueeze(1), x.unsqueeze(1)),
    "nn.MultiheadAttention": lambda: nn.MultiheadAttention(8, 2, batch_first=True)(x, x, x),
    "nn.MultiheadAttention fast path": lambda: _no_grad(nn.MultiheadAttention(8, 2, batch_first=True).eval(), x),
    "nn.TransformerEncoderLayer fast path": lambda: _no_grad(
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval(), x),
}


def _no_grad(module, inputs):
    with torch.no_grad():
        return module(inputs, inputs, inputs, need_weights=False) if isinstance(module, nn.MultiheadAttention) \
            else module(inputs)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_to_torchs_implementation_is_noticed(route):
    with OpRecorder(FORBIDDEN) as recorder:
        ROUTES[route]()
    assert recorder.take(), route


def test_hand_written_layer_norm_and_attention_are_not_flagged():
    with OpRecorder(FORBIDDEN) as recorder:
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + 1e-5)
        weights = torch.softmax(y @ y.transpose(-2, -1) / 8 ** 0.5, dim=-1)
        (weights @ nn.Linear(8, 8)(y)).sum().backward()
    assert recorder.take() == set()


def test_recording_stops_outside_the_context():
    recorder = OpRecorder(FORBIDDEN)
    with recorder:
        pass
    F.layer_norm(x, (8,))
    assert recorder.take() == set()
