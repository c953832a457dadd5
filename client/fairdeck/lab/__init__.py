"""fairdeck.lab: the certification kit a gaming lab takes (``fairdeck lab collect`` and ``lab test``).

It owns what a lab asks for and how it is checked, split by what each part owns:

* ``trace``: one hand's derivation layer by layer (raw SHAKE-256 blocks, attempts, the index
  below n!, the swap choices), pure;
* ``formats``: the files the batteries read (binary, NIST's ASCII bits), pure;
* ``collection``: a resumable collection into a directory, with its manifest;
* ``live``: hands from a live dealer, each verified against its commitment and its log
  entries (the only part that imports grpc, through the SDK);
* ``generators``: the known-bad generators every battery must reject;
* ``nist``: NIST SP 800-22's fifteen tests (numpy), checked against the publication's examples;
* ``dieharder``: running Debian's dieharder and reading its output;
* ``battery``: every battery on ours and on the bad generators, the corrections and verdicts;
* ``report``: the HTML page and the JSON.

The command line (``fairdeck.cli.lab_command``, ``fairdeck.cli.lab_run``) draws the progress bars and
prints; this package never imports the command line nor ``fairdeck_server``. docs/certification.md is
the requirement map.
"""

__all__: list[str] = []  # the parts are the modules above; nothing is re-exported here
