"""The application: the ``sensorgym`` command (:mod:`~sensorgym.app.cli`, one module per subcommand in
:mod:`~sensorgym.app.commands`), experiment configs (:mod:`~sensorgym.app.config`), training and
checkpoints (:mod:`~sensorgym.app.training`), ablations and sampler studies
(:mod:`~sensorgym.app.ablation`), ``inspect`` (:mod:`~sensorgym.app.inspection`), the demo, what a reused
output folder may hold (:mod:`~sensorgym.app.outdir`) and the stop signals (:mod:`~sensorgym.app.signals`).
The top of the layers: it may import everything below, nothing imports it.
"""
