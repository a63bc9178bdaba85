#!/bin/sh
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Record real fio outputs for tests/unit/plugins/module_utils/fixtures/fio/ (issue 8, _calibration/fio.py).
# Runs INSIDE a lab guest as root (feed it on stdin):
#   python3 tests/lab/lab.py ssh NAME -- sh -s < tests/lab/fio-record.sh
#   python3 tests/lab/lab.py ssh NAME -- tar -C /var/tmp/fio-rec -cf - . > rec.tar
# Writes to the raw NVMe disk with serial lab-nvme-b (blank lab disk) and to a 256 MiB file in
# /var/tmp. LONG=0 skips the 25 s runs used for the noise/StopRule statistics.
set -u
OUT=/var/tmp/fio-rec
LONG=${LONG:-1}
rm -rf "$OUT" && mkdir -p "$OUT"
export LANG=C LC_ALL=C
DEV=$(lsblk -dn -o NAME,SERIAL | awk '$2 == "lab-nvme-b" {print "/dev/" $1}')
[ -b "$DEV" ] || { echo "no disk with serial lab-nvme-b" >&2; exit 1; }
FILE=/var/tmp/aiinfra-fio.dat
{
  echo "uname: $(uname -r)"; echo "fio: $(fio --version)"; echo "dev: $DEV"
  grep -m1 'model name' /proc/cpuinfo; nproc
  cat /sys/block/"${DEV#/dev/}"/queue/scheduler
} > "$OUT/env.txt"
fio --version > "$OUT/version.stdout" 2> "$OUT/version.stderr"
# Which options exist in this fio.
for o in name filename size direct ioengine thread time_based runtime rw bs iodepth numjobs \
         group_reporting output-format status-interval randrepeat norandommap allow_mounted_write \
         rate_iops percentile_list; do
  if fio --cmdhelp="$o" > /dev/null 2>&1; then echo "$o yes"; else echo "$o NO"; fi
done > "$OUT/options.txt"
fio --cmdhelp=allow_mounted_write > "$OUT/cmdhelp-allow_mounted_write.txt" 2>&1
dd if=/dev/urandom of="$FILE" bs=1M count=256 oflag=direct status=none
sync

# run NAME ARGV... : run ARGV, record its stdout, stderr, rc, argv and wall time as $OUT/NAME.*
run() {
  n=$1; shift
  printf '%s\n' "$@" > "$OUT/$n.argv"
  t0=$(date +%s.%N)
  "$@" > "$OUT/$n.stdout" 2> "$OUT/$n.stderr"
  echo $? > "$OUT/$n.rc"
  t1=$(date +%s.%N)
  echo "$t0 $t1" > "$OUT/$n.wall"
}

one() { # one PREFIX TARGET SIZE SECONDS NUMJOBS NAME RW BS DEPTH
  p=$1; tgt=$2; size=$3; secs=$4; nj=$5; name=$6; rw=$7; bs=$8; depth=$9
  set -- fio --name="aiinfra-$name" --filename="$tgt" --size="$size" --direct=1 \
      --ioengine=libaio --thread --time_based --runtime="$secs" --rw="$rw" --bs="$bs" \
      --iodepth="$depth" --numjobs="$nj" --group_reporting --output-format=json \
      --status-interval=1
  case $rw in rand*) set -- "$@" --randrepeat=0 --norandommap;; esac
  run "$p-$name" "$@"
}

meas() { # meas PREFIX TARGET SIZE SECONDS BIGBS NUMJOBS
  one "$1" "$2" "$3" "$4" "$6" rbps read "$5" 1
  one "$1" "$2" "$3" "$4" "$6" rseqiops read 4096 64
  one "$1" "$2" "$3" "$4" "$6" rrandiops randread 4096 64
  one "$1" "$2" "$3" "$4" "$6" wbps write "$5" 1
  one "$1" "$2" "$3" "$4" "$6" wseqiops write 4096 64
  one "$1" "$2" "$3" "$4" "$6" wrandiops randwrite 4096 64
}

meas file "$FILE" 268435456 6 134217728 1
meas nvme "$DEV" 536870912 6 134217728 1
# numjobs=2 with group_reporting (one job entry expected) and without (two entries)
run nvme-rrandiops-nj2 fio --name=aiinfra-rrandiops --filename="$DEV" --size=536870912 --direct=1 \
    --ioengine=libaio --thread --time_based --runtime=4 --rw=randread --bs=4096 --iodepth=64 \
    --numjobs=2 --group_reporting --output-format=json --status-interval=1 --randrepeat=0 --norandommap
run nvme-rrandiops-nj2-nogroup fio --name=aiinfra-rrandiops --filename="$DEV" --size=536870912 \
    --direct=1 --ioengine=libaio --thread --time_based --runtime=3 --rw=randread --bs=4096 \
    --iodepth=64 --numjobs=2 --output-format=json --status-interval=1 --randrepeat=0 --norandommap
# SIGINT after ~3.5 s of a 30 s run: what does fio print, and its rc
n=nvme-rrandiops-sigint
printf '%s\n' fio ... > "$OUT/$n.argv"
fio --name=aiinfra-rrandiops --filename="$DEV" --size=536870912 --direct=1 --ioengine=libaio \
    --thread --time_based --runtime=30 --rw=randread --bs=4096 --iodepth=64 --numjobs=1 \
    --group_reporting --output-format=json --status-interval=1 --randrepeat=0 --norandommap \
    > "$OUT/$n.stdout" 2> "$OUT/$n.stderr" &
pid=$!; sleep 3.5; kill -INT "$pid"; wait "$pid"; echo $? > "$OUT/$n.rc"
# QoS: rate-limited random read / write, percentiles
for q in read write; do
  run "qos-$q" fio --name="aiinfra-qos-$q" --filename="$DEV" --size=536870912 --direct=1 \
      --ioengine=libaio --thread --time_based --runtime=10 --rw="rand$q" --bs=4096 --iodepth=64 \
      --numjobs=1 --group_reporting --output-format=json --randrepeat=0 --norandommap \
      --rate_iops=3000 --percentile_list=1:5:10:20:30:40:50:60:70:80:90:95:99:99.5:99.9:99.99
done
# Errors: a missing file for a read; an unknown option; a bad iodepth
run err-nofile fio --name=aiinfra-rbps --filename=/nonexistent/dir/x --size=1048576 --direct=1 \
    --ioengine=libaio --rw=read --bs=4096 --runtime=1 --output-format=json --status-interval=1
run err-badopt fio --name=x --filename="$FILE" --size=1048576 --no-such-option=1 --output-format=json
run err-notblock fio --name=aiinfra-rbps --filename=/dev/null-nonexistent --direct=1 --ioengine=libaio \
    --rw=read --bs=4096 --runtime=1 --output-format=json --status-interval=1
if [ "$LONG" = 1 ]; then
  meas long-file "$FILE" 268435456 25 134217728 1
  meas long-nvme "$DEV" 536870912 25 134217728 1
  meas long-nvme1m "$DEV" 536870912 25 1048576 1
fi
rm -f "$FILE"
echo recorded
