#!/bin/bash
# examples/slurm-batch.sh: one task of a Slurm job array runs its share of a
# sage-sandbox batch, each task into a results file of its own.
#
#   sbatch --array=0-3 examples/slurm-batch.sh jobs.jsonl results/
#
# Task K of N takes every job whose ordinal is K modulo N (--shard auto reads
# SLURM_ARRAY_TASK_ID, _MIN, _STEP and _COUNT), so the tasks together run
# every job once, whatever node each lands on. A task that Slurm requeues,
# or that you submit again, resumes: it skips the ids its file already holds.
# Once all tasks ended, merge and check (runs only what is missing, if
# anything is):
#
#   cat results/results-*.jsonl > results.jsonl
#   sage-sandbox batch --resume results.jsonl jobs.jsonl >> results.jsonl
#
# Each node runs rootless podman as the submitting user: the image must be
# in that user's podman storage on every node (podman load -i sage.tar),
# and that storage on a local disk, not on a shared home.
#SBATCH --job-name=sage-sandbox-batch
#SBATCH --cpus-per-task=1
#SBATCH --output=slurm-%A_%a.out
set -euo pipefail

if [ $# -lt 2 ] || [ -z "${SLURM_ARRAY_TASK_ID:-}" ]; then
	echo "usage: sbatch --array=0-N examples/slurm-batch.sh JOBS.jsonl RESULTS-DIR" >&2
	exit 2
fi
jobs=$1
results=$2
sage_sandbox=${SAGE_SANDBOX:-sage-sandbox}
mkdir -p "$results"
out=$results/results-$SLURM_ARRAY_TASK_ID.jsonl
resume=()
[ -s "$out" ] && resume=(--resume "$out")
# As many sandboxes as the task has CPUs; the batch's summary goes to the
# task's output file, its results to its own results file.
"$sage_sandbox" batch --shard auto --jobs "${SLURM_CPUS_PER_TASK:-1}" "${resume[@]}" \
	"$jobs" >>"$out"
