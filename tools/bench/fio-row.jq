# SPDX-License-Identifier: MIT
# One fio --output-format=json result (first job, group_reporting) as
#   IOPS|MB/s|p50 clat us|p99 clat us|fio CPU us per I/O
# IOPS and MB/s add reads and writes; the latencies are the reads' when
# there are reads (the 70/30 mix), else the writes'. CPU per I/O is fio's
# own usr+sys over the job's runtime, divided by the I/Os it completed.
def r1: . * 10 | floor / 10;
def r2: . * 100 | floor / 100;
.jobs[0] as $j
| ($j.read.total_ios + $j.write.total_ios) as $ios
| (if $j.read.total_ios > 0 then $j.read else $j.write end) as $l
| [($j.read.iops + $j.write.iops | floor),
   (($j.read.bw_bytes + $j.write.bw_bytes) / 1e6 | r1),
   ($l.clat_ns.percentile["50.000000"] // 0 | . / 1000 | r1),
   ($l.clat_ns.percentile["99.000000"] // 0 | . / 1000 | r1),
   (if $ios > 0 then (($j.usr_cpu + $j.sys_cpu) / 100 * $j.job_runtime * 1000 / $ios | r2) else "-" end)]
| map(tostring) | join("|")
