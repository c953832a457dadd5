"""fairdeck.lab: the certification kit a gaming lab takes (``fairdeck lab collect`` and ``lab test``).

``trace`` (one hand's derivation layer by layer, pure), ``formats`` (the files the batteries read),
``collection`` (a resumable collection with its manifest), ``live`` (hands from a live dealer, checked
against its log; the only part that imports grpc, through the SDK), ``generators`` (the known-bad
generators), ``nist`` (NIST SP 800-22 in numpy), ``dieharder`` (Debian's dieharder, test by test),
``battery`` (every battery on ours and on the bad generators, corrections, verdicts) and ``report``
(HTML and JSON). The command line (``fairdeck.cli.lab_command``, ``lab_run``) draws and prints; this
package imports neither it nor ``fairdeck_server``. docs/certification.md explains the choices.
"""

__all__: list[str] = []  # the parts are the modules above; nothing is re-exported here
