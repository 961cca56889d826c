"""The ``factcheck`` commands, one module per group; ``middleware.cli`` registers them. They
sit above the composition root, which builds what they run; the ``eval-*`` commands live in
``middleware.evaluation.commands``."""
