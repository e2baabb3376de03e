"""The application: the ``sensorgym`` command (:mod:`~sensorgym.app.cli`), experiment configs
(:mod:`~sensorgym.app.config`), training and checkpoints (:mod:`~sensorgym.app.training`), ablations and
sampler studies (:mod:`~sensorgym.app.ablation`), ``inspect`` (:mod:`~sensorgym.app.inspection`) and the
demo. The top of the layers: it may import everything below, nothing imports it.
"""
