"""What the tests share: test doubles (checkers, embedders, scorers, chat models), fixtures'
building blocks and paths. Test doubles live here and in tests only, never in the product."""
