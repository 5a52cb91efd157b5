"""The five in-house frameworks as dialects: one module each (``seed000`` … ``seed004``), each exposing a
``DIALECT`` (``evalgate.dialect.Dialect``) that holds everything its seed changes.

Nothing outside this package names a seed: generic packages call ``evalgate.dialect``, whose registry loads
these modules through the same entry-point hook an outside dialect uses.
"""
