"""The vault's pure rules: what a tier, a lease, a batch, a page, a debt and a key mean.

No I/O and no clock: time comes in as an argument (``now_ms``), and the layering test
(``tests/test_layers.py``) refuses any import of a database, a network client, the
environment or a clock here. The service applies these rules; the store runs them in SQL.
"""
