"""``StatefulOutput``: what one call of a ``StatefulModule`` returns.

It sits below ``base`` (which defines ``StatefulModule``) and ``types`` (which names both
for the composable networks interface), so that neither has to import the other's home.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax


class StatefulOutput(NamedTuple):
    """What a ``StatefulModule`` call returns.

    Attributes:
        next_state: The module's state after this step (``[B, ...]`` leaves).
        output: The module's output for this step.
        regularization_loss: Scalar added to the training loss (e.g. minus the weighted
            entropy of an action distribution).
        metrics: Scalars or ``[B]`` arrays describing this call, keyed by name.
        rollout_extras: What the module needs to replay this step exactly (e.g. the sampled
            raw action); passed back as ``rollout_extras`` during the loss replay.
    """

    next_state: Any
    output: Any
    regularization_loss: jax.Array
    metrics: dict[str, jax.Array]
    rollout_extras: Any
