# usage: gilrun.sh dealer|trivial  -> py-spy --gil of the server during loadgen unary c=64, 7 s
cd /work/wt/lean
D=$(mktemp -d)
if [ $1 = dealer ]; then
.venv/bin/python -m fairdeck.cli serve --listen 127.0.0.1:0 --data $D/data --log-level WARNING --rate-limit 0 --max-open-hands 0 --default-deadline 0 > $D/out 2>$D/err &
else
.venv/bin/python -c "
from fairdeck.v1 import dealer_pb2 as pb
r = pb.DealNewHandResponse(cards=list(range(52)))
r.hand.hand_id='0123456789abcdef0123'; r.hand.commitment=bytes(32); r.hand.deck='standard'; r.hand.version='fairdeck-v1'; r.hand.commit_receipt.index=123456; r.hand.create_time.FromMilliseconds(1700000000000)
open('$D/resp.bin','wb').write(r.SerializeToString())"
.venv/bin/python bench/trivial_server.py --listen 127.0.0.1:0 --response $D/resp.bin > $D/out 2>$D/err &
fi
PID=$!
for i in $(seq 50); do grep -q listening $D/out 2>/dev/null && break; sleep 0.2; done
T=$(grep -o "127.0.0.1:[0-9]*" $D/out | head -1)
.venv/bin/py-spy record --pid $PID --rate 200 --nonblocking --gil --format raw -o bench/results/deal-path/gil/$1-c64.txt --duration 8 >/dev/null 2>&1 &
SPY=$!
sleep 0.3
.venv/bin/python bench/loadgen.py unary --target $T --concurrency 64 --warmup 1 --duration 7 --server-pid $PID > bench/results/deal-path/gil/$1-c64.json
wait $SPY || true
kill -TERM $PID; wait $PID
