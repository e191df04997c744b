"""The FLOP count of ``bench.flops`` (pure arithmetic; the timing parts are not tested)."""

from __future__ import annotations

from collections import Counter

from bench.flops import flops, iteration_products


def test_iteration_products_count_acting_and_every_sgd_step() -> None:
    policy = [(5, 64), (64, 2)]
    value = [(5, 256), (256, 1)]
    # 8 envs x 4 steps; 2 epochs x 2 minibatches: 4 SGD steps on (4 + 1) x 8 / 2 = 20 rows.
    got = iteration_products(policy, value, n_envs=8, rollout_length=4, n_epochs=2, n_minibatches=2)
    want = Counter(
        {
            (8, 5, 64): 4,  # acting: the policy alone, one [8, k] @ [k, n] per step
            (8, 64, 2): 4,
            (20, 5, 64): 4,  # forward
            (5, 20, 64): 4,  # weight gradient
            (20, 64, 2): 4,
            (64, 20, 2): 4,
            (20, 2, 64): 4,  # input gradient of the second layer only
            (20, 5, 256): 4,
            (5, 20, 256): 4,
            (20, 256, 1): 4,
            (256, 20, 1): 4,
            (20, 1, 256): 4,
        }
    )
    assert got == want
    # 2 * rows * k * n each. Multiply-adds per row: policy 320 + 128, value 1,280 + 256
    # (1,984 in all). Acting: 4 steps * 2 * 8 rows * 448 = 28,672. SGD: 4 steps * 2 * 20 rows
    # * (1,984 forward + 1,984 weight gradient + 128 + 256 input gradient) = 696,320.
    assert sum(flops(s) * c for s, c in got.items()) == 28_672 + 696_320
