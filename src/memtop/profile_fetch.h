/*
 * profile_fetch.h - reading a target's heap profile, blocking (for
 * `memtop profile`). One file, so that it can move onto the target-set
 * component (issue 11, item 5) as one more kind of request.
 */
#ifndef MS_MEMTOP_PROFILE_FETCH_H
#define MS_MEMTOP_PROFILE_FETCH_H

#include <stddef.h>

#include "wire/profile.h"

/* Connects to pid with the client's checks (its socket, SO_PEERCRED, the
 * handshake's PID and start time), asks for its heap profile and reads
 * every frame of the answer, waiting at most timeout_ms for each read.
 * Returns 0 with *out a complete profile (free it with
 * ms__profile_decoded_free()), or a negative MS_E* code with a message
 * for the user (the PID, the cause, a hint) in errbuf. */
int mt_profile_fetch(int pid, int timeout_ms, ms__profile_decoded_t **out,
                     char *errbuf, size_t errlen);

#endif
