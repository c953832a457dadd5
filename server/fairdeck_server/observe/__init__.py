"""fairdeck_server.observe: what the dealer tells its operators, without grpc.

- ``metrics``: Prometheus metrics, the gauges read from storage and ``MeteredStorage``;
- ``logging_setup``: log lines (text or JSON), each with its call's request id;
- ``storage_health``: whether storage takes writes, for the health service;
- ``heap``: giving freed memory back to the system, and the garbage collector's tuning.

Invariant: imports only the shared modules at the top of the package (``refusals``,
``principal``, ``addresses``, ``fair``, ``log_causes``) and ``storage``; no grpc.
"""
