/* What the kernel holds open: every file and directory handle the daemon
 * gave out, so that those whose release never came (the kernel drops its
 * queued RELEASE requests at unmount) are freed when the mount ends. */
#ifndef CCLFS_FS_OPENED_H
#define CCLFS_FS_OPENED_H

#include <stdbool.h>

/* Embedded in each handle; release frees the handle it is in. */
struct opened {
	struct opened *prev, *next;
	bool linked;
	void (*release)(struct opened *o);
};

/* The handle is given out (the kernel holds it from now on). */
void opened_add(struct opened *o, void (*release)(struct opened *o));
/* Its release came (or it is freed before being given out): no-op when
 * it was never added or already taken off. */
void opened_remove(struct opened *o);
/* The mount ended: release every handle still held, one at a time. */
void opened_release_all(void);

#endif
