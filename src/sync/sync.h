/* Internal queries of src/sync, for tests: how many fibers or threads wait. */
#ifndef USCHED_SYNC_H
#define USCHED_SYNC_H

#include "usched.h"

/* Waiters parked on channel c (senders + receivers), -EINVAL for NULL. */
int usched__chan_nwaiters(usched_chan_t *c);

#endif
