/*
 * serve.h - `memtop serve`: the Prometheus exporter. Every attachable
 * process (listed again every MT_SERVE_RESCAN_MS), its latest snapshot kept
 * with its age, served on /metrics by httpd.h in the exposition of
 * emit/emit.h's mt_emit_prometheus().
 */
#ifndef MS_MEMTOP_SERVE_H
#define MS_MEMTOP_SERVE_H

#include "memtop/cli.h"

/* How long a round of reads waits for the targets' answers before its
 * answers are made of what memtop has, each figure with its age (ms); the
 * first scrape, before any round, waits as long. */
#define MT_SERVE_WAIT_MS 1000
/* How long a round waits for a target that has figures already: one
 * later than this is served its last figures (with their age), and its
 * answer is kept for the next round. */
#define MT_SERVE_LATE_MS 25
/* A scrape is answered with the answer the last round prepared; one
 * that finds it older than -d asks for the next round, started this long
 * (or four times the last round's length) before the next scrape is due
 * (ms). */
#define MT_SERVE_LEAD_MS 100
/* Scrapers (addresses) whose intervals time the rounds. */
#define MT_SERVE_SCRAPERS 8
/* A target that joins or leaves between rounds has the answers made
 * again this long after (ms), together with others found with it. */
#define MT_SERVE_PREP_MS 10
/* Heap profiles (/debug/pprof/heap) being made at once, and the longest
 * ?seconds= a request may ask for. */
#define MT_SERVE_PROFILES 4
#define MT_SERVE_PROFILE_SECONDS_MAX 600
/* How often the attachable processes are listed again (ms). */
#define MT_SERVE_RESCAN_MS 5000

/* Runs `memtop serve` until SIGINT or SIGTERM. Returns memtop's exit
 * status: 0 after a signal, 1 if it could not start (the reason on
 * stderr: the address in use, the web config), 2 for a --listen that is
 * no address. */
int mt_serve_main(const mt_opts_t *o);

#endif
