#!/usr/bin/env bash
# Usage: benches/s3-uploads.sh
#
# The default number of uploads in flight (sized by the run: Little's law on the request times it
# measures) against fixed ones (--uploads 8, 32, 128, 256): the botocore wheel (fetch-corpus.sh)
# extracted into versitygw behind lab/s3-proxy.py at 0, 5 and 20 ms one way, 3 rounds, the
# variants round-robin, each run into a fresh prefix, its file count printed beside its time.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${WHEEL:-$HOME/.cache/fastwrite-bench/botocore-1.44.5-py3-none-any.whl}
[[ -f $W ]] || { echo "s3-uploads: no wheel at $W (benches/fetch-corpus.sh fetches it; WHEEL= names another)" >&2; exit 1; }
echo "wheel $W"
F=$(mktemp); cp target/release/fastwrite "$F"; chmod +x "$F"
root=$(mktemp -d "$HOME/.cache/s3-uploads.XXXX"); mkdir -p $root/data
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
versitygw --access fastwrite --secret fastwrite-secret --port 127.0.0.1:$port --keep-alive posix $root/data >$root/log 2>&1 &
vpid=$!
trap 'kill $vpid $ppid 2>/dev/null || true' EXIT
sleep 1
export AWS_ACCESS_KEY_ID=fastwrite AWS_SECRET_ACCESS_KEY=fastwrite-secret AWS_REGION=us-east-1
AWS_ENDPOINT_URL=http://127.0.0.1:$port aws s3api create-bucket --bucket conc >/dev/null
for d in 0 5 20; do
  python3 lab/s3-proxy.py 0 $port --delay-ms $d > $root/proxy-$d.out 2>&1 &
  ppid=$!
  sleep 1
  pp=$(head -1 $root/proxy-$d.out | awk '{print $3}')
  export AWS_ENDPOINT_URL=http://127.0.0.1:$pp
  variants=(default 8 32 128 256)
  for r in 1 2 3; do
    for i in 0 1 2 3 4; do
      v=${variants[$(( (i + r) % 5 ))]}
      args=(); [[ $v != default ]] && args=(--uploads $v)
      pre="d$d/r$r/$v/"
      s=$EPOCHREALTIME
      $F extract "$W" -o "s3://conc/$pre" "${args[@]}" --json > $root/out.json
      e=$EPOCHREALTIME
      n=$(python3 -c 'import json;print(json.load(open("'$root/out.json'"))["files"])')
      why=$(python3 -c 'import json;print(json.load(open("'$root/out.json'"))["writers"]["why"].split("uploads in flight: ")[1][:60])')
      printf '%s ms %s %-8s %.2f s files %s | %s\n' $d $r $v $(echo "$e - $s" | bc) $n "$why"
      sync
    done
  done
  kill $ppid; wait $ppid 2>/dev/null || true
done
