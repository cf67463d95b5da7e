/*
 * The bottom room of the core (self.c): which worker the calling thread
 * is. Every room may call it; it calls none.
 */
#ifndef USCHED_CORE_SELF_H
#define USCHED_CORE_SELF_H

struct usched__wk;

/* Worker of the calling thread (NULL outside workers). Never inlined, so a
 * fiber that migrated between threads re-reads the thread pointer. */
struct usched__wk *usched__self_wk(void);
/* The worker thread w starts (w) or ends (NULL). */
void usched__self_set(struct usched__wk *w);

#endif
