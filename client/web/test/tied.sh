#!/bin/sh
# Runs the browser $FAIRDECK_TIED_BROWSER with these arguments, tied to the harness that starts it
# (drivers.mjs): where util-linux's setpriv is found, the kernel sends the browser SIGKILL when the
# harness ends, however it ends (a SIGKILL too, which skips the drivers' own exit handlers).
if command -v setpriv >/dev/null 2>&1; then
  exec setpriv --pdeathsig KILL -- "$FAIRDECK_TIED_BROWSER" "$@"
fi
exec "$FAIRDECK_TIED_BROWSER" "$@"
