# Device step of one chunk folder (.dev/cN, built by tools/device/bundle.sh): copy its part of the
# payload into /tmp/sd/parts and check it against the manifest. One line: the part, sha256 ok or
# failed, the time taken, how many of the parts the machine holds now. Exit 1 when the part is bad.
set -u
S=/tmp/sd
here=$(cd "$(dirname "$0")" && pwd)
t0=$(date +%s%N)
mkdir -p $S/parts
status=0
for f in "$here"/part-*; do
  [ -e "$f" ] || { echo "$(basename "$here"): no part in this folder"; exit 1; }
  name=$(basename "$f")
  want=$(awk -v n="$name" '$1 == n { print $2 }' "$here/manifest.txt")
  cp "$f" "$S/parts/$name.tmp" && got=$(sha256sum "$S/parts/$name.tmp" | cut -d' ' -f1)
  if [ -n "$want" ] && [ "${got:-}" = "$want" ]; then
    mv "$S/parts/$name.tmp" "$S/parts/$name"; result=ok
  else
    rm -f "$S/parts/$name.tmp"; result=failed; status=1
  fi
  held=$(ls $S/parts | grep -c '^part-[0-9]*$')
  total=$(grep -c '^part-' "$here/manifest.txt")
  echo "$(basename "$here"): $name sha256 $result, $(stat -c %s "$f") bytes, $(( ($(date +%s%N) - t0) / 1000000 )) ms; the machine holds $held of $total parts"
done
exit $status
