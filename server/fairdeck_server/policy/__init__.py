"""fairdeck_server.policy: who may call, how much, and in what turn, as policies without grpc.

- ``auth``: API tokens, client certificates, the role table and the failure limiter;
- ``limits``: request rates and open hands per tenant; ``group_counts``: those counts shared by
  the processes of ``serve --processes N``; ``ahead``: reads made ahead of need;
- ``open_work``: the methods open to all, charged to the client address.

Fair turns themselves (``fair``) sit at the top of the package, since storage's writers take
them too. Invariant: imports only the shared top-level modules and ``storage``; no grpc; the
edge adapts these policies to calls (``edge.interceptors``).
"""
