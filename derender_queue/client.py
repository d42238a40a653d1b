"""Public path for Python producers (README): `derender_queue.client.DerenderClient`.

The client lives in the wire layer (`derender_queue.wire.client`); this module keeps the
documented import path working.
"""

from derender_queue.wire.client import DerenderClient, Result

__all__ = ["DerenderClient", "Result"]
