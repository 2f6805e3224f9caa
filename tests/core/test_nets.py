"""Networks: shapes, orthogonal init, the CNN torso, the dueling head."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlx.core.nets import RELU_GAIN, NatureCNN, QNetwork, mlp


def test_mlp_shapes_and_orthogonal_init():
    net = mlp(4, 2, (64, 32), out_gain=0.01)
    assert net(torch.zeros(5, 4)).shape == (5, 2)
    w = net.layers[1].weight  # 32 x 64: orthonormal rows scaled by the gain
    assert torch.allclose(w @ w.T, RELU_GAIN**2 * torch.eye(32), atol=1e-4)
    assert torch.all(net.layers[0].bias == 0)
    out = net.layers[-1].weight
    assert torch.allclose(out @ out.T, 0.01**2 * torch.eye(2), atol=1e-6)


def test_nature_cnn_on_channels_first_and_last():
    first = NatureCNN((4, 84, 84))
    assert first(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape == (2, 512)
    last = NatureCNN((84, 84, 3))
    assert last.channels_last
    assert last(torch.zeros(2, 84, 84, 3, dtype=torch.uint8)).shape == (2, 512)
    with pytest.raises(ValueError, match="36x36"):
        NatureCNN((4, 20, 20))


def test_q_network_picks_the_cnn_for_images():
    q = QNetwork((4, 84, 84), np.uint8, 6)
    assert q(torch.zeros(3, 4, 84, 84, dtype=torch.uint8)).shape == (3, 6)
    assert any(isinstance(m, NatureCNN) for m in q.modules())


def test_dueling_head_is_value_plus_centred_advantage():
    q = QNetwork((3,), np.float32, 4, (16,), dueling=True)
    x = torch.randn(5, 3)
    out = q(x)
    raw = q.body(x)
    value, adv = raw[:, :1], raw[:, 1:]
    assert torch.allclose(out, value + adv - adv.mean(1, keepdim=True))
    assert torch.allclose(out.mean(1, keepdim=True), value, atol=1e-6)
