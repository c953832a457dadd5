"""fairdeck_server.edge: everything that knows gRPC, and nothing else does (app.py wires it).

- ``dealer_servicer``, ``audit_servicer``: protobuf in, dealer and storage calls, protobuf out;
- ``interceptors``: the layers every call passes (observing, default deadline, authentication,
  limits), each adapting a grpc-free policy (metrics, auth, limits); ``chain`` fuses them;
- ``status``: the one translation of errors into a status, an ErrorInfo and a RetryInfo;
- ``methods``: lenient request parsing, registration, stream draining;
- ``reflection``, ``transport``: server reflection v1 and v1alpha, TLS credentials and transport options.
"""
