#!/usr/bin/env bash
# Usage: benches/s3-mirror.sh
#
# A fresh mirror into a bucket against s5cmd cp of the same tree: the botocore wheel's tree
# (fetch-corpus.sh), versitygw behind lab/s3-proxy.py at 20 ms one way, 3 rounds alternating,
# each run into a fresh prefix, its key count printed beside its time.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${WHEEL:-$HOME/.cache/fastwrite-bench/botocore-1.44.5-py3-none-any.whl}
F=$(mktemp); cp target/release/fastwrite "$F"; chmod +x "$F"
root=$(mktemp -d "$HOME/.cache/s3-mirror.XXXX"); mkdir -p $root/data $root/tree
unzip -q "$W" -d $root/tree
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
versitygw --access fastwrite --secret fastwrite-secret --port 127.0.0.1:$port --keep-alive posix $root/data >$root/log 2>&1 &
vpid=$!
trap 'kill $vpid $ppid 2>/dev/null || true' EXIT
sleep 1
export AWS_ACCESS_KEY_ID=fastwrite AWS_SECRET_ACCESS_KEY=fastwrite-secret AWS_REGION=us-east-1
AWS_ENDPOINT_URL=http://127.0.0.1:$port aws s3api create-bucket --bucket mir >/dev/null
python3 lab/s3-proxy.py 0 $port --delay-ms 20 > $root/proxy.out 2>&1 &
ppid=$!
sleep 1
pp=$(head -1 $root/proxy.out | awk '{print $3}')
export AWS_ENDPOINT_URL=http://127.0.0.1:$pp
for r in 1 2 3; do
  for tool in fastwrite s5cmd; do
    s=$EPOCHREALTIME
    if [[ $tool == fastwrite ]]; then
      $F mirror $root/tree "s3://mir/r$r/fw/" >/dev/null
    else
      s5cmd --log error --endpoint-url $AWS_ENDPOINT_URL cp "$root/tree/*" "s3://mir/r$r/s5/" >/dev/null
    fi
    e=$EPOCHREALTIME
    n=$(AWS_ENDPOINT_URL=http://127.0.0.1:$port aws s3api list-objects-v2 --bucket mir --prefix r$r/$([[ $tool == fastwrite ]] && echo fw || echo s5)/ --query 'length(Contents)')
    printf '20 ms %s %-10s %.2f s  keys %s\n' $r $tool $(echo "$e - $s" | bc) $n
  done
done
